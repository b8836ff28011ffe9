"""Regenerate cases.jsonl and meta.json: the SDRL authors' own trainer code on seeded inputs.

Run by hand, never by CI. The reference is the authors' verl fork, github.com/DawnLIU35/SDRL
at commit a4e03375c7ee264ea1666ad743209b72de48f6a5: `recipe/self-debate/dapo_ray_trainer.py`
(`RayDAPOTrainer`) and `verl/utils/reward_score/math_dapo.py` (`compute_score`). Its verl
needs transformers 4.x (it imports `AutoModelForVision2Seq`), so the script runs with the
training environment's Python (torch, ray, omegaconf, numpy) and a scratch folder of older
packages put first on sys.path, outside this repository:

    git clone https://github.com/DawnLIU35/SDRL /tmp/sdrl-conf/fork    # or any clone, mirror
    git -C /tmp/sdrl-conf/fork checkout a4e03375c7ee264ea1666ad743209b72de48f6a5
    .venv-train/bin/python -m pip install --no-deps --target /tmp/sdrl-conf/scratch \\
        transformers==4.56.1 tokenizers==0.22.2 huggingface-hub==0.36.0 datasets==4.0.0
    .venv-train/bin/python conformance/sdrl/generate.py \\
        --fork /tmp/sdrl-conf/fork --scratch /tmp/sdrl-conf/scratch \\
        --commit a4e03375c7ee264ea1666ad743209b72de48f6a5

`--fork` is a checkout at `--commit` (checked). Nothing of the fork is copied here: the script
imports its modules and records what its functions return. Every decision stored is the
fork's own code running:
- pairing: `RayDAPOTrainer._construct_second_turn_inputs`, called unbound on a minimal `self`
  (an OmegaConf config and a tokenizer of one id per character, whose `apply_chat_template`
  records the messages it is given) with a real fork `DataProto`, `np.random.seed(seed)`
  just before the call;
- prompt: the messages that same call builds for one pair, with the fork's fixed sentences
  replaced by placeholders (found by probing the builder with marks; see README.md);
- filter, first turn: `RayDAPOTrainer.fit` itself, on a fake worker group and reward function,
  stopped (by an exception) where it hands the filtered batch to the debate step;
- filter, debate turn: `RayDAPOTrainer._generate_training_second_turn_batch`, on a fake worker
  group and a reward function that gives each debate row a chosen reward.
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import importlib
import json
import random
import re
import subprocess
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = Path("/work/shared/data")
SEED = 42
TRAINER = "recipe/self-debate/dapo_ray_trainer.py"
REWARD = "verl/utils/reward_score/math_dapo.py"


# ---- loading the reference ----------------------------------------------------------------


def load_reference(fork: Path, scratch: Path | None) -> tuple[types.ModuleType, ...]:
    if scratch is not None:
        sys.path.insert(0, str(scratch))
    sys.path[:0] = [str(fork), str(fork / "recipe" / "self-debate")]
    trainer = importlib.import_module("dapo_ray_trainer")
    math_dapo = importlib.import_module("verl.utils.reward_score.math_dapo")
    protocol = importlib.import_module("verl.protocol")
    for module in (trainer, math_dapo, protocol):
        assert Path(module.__file__).resolve().is_relative_to(fork.resolve()), module.__file__
    return trainer, math_dapo, protocol


# ---- the fakes: a tokenizer of one id per character, worker group, reward function ---------

PAD, EOS, OFFSET = 0, 1, 2


class CharTokenizer:
    """One token id per character (ord + 2); 0 pads, 1 ends. `apply_chat_template` returns the
    messages as JSON and records them, so the chat is captured byte for byte."""

    pad_token_id = PAD
    eos_token_id = EOS

    def __init__(self) -> None:
        self.padding_side = "right"
        self.chats: list[list[dict]] = []

    @staticmethod
    def ids(text: str) -> list[int]:
        return [ord(c) + OFFSET for c in text]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        values = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        assert skip_special_tokens, "the fork decodes with skip_special_tokens=True"
        return "".join(chr(i - OFFSET) for i in values if i >= OFFSET)

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True):
        assert add_generation_prompt and not tokenize
        self.chats.append(copy.deepcopy(messages))
        return json.dumps(messages, ensure_ascii=False)

    def __call__(self, texts, return_tensors="pt", padding=True, truncation=False, max_length=None):
        import torch

        rows = [self.ids(t) for t in texts]
        if truncation and max_length is not None:
            assert all(len(r) <= max_length for r in rows), "a prompt would be cut"
        width = max(len(r) for r in rows)
        left = self.padding_side == "left"
        ids = [
            ([PAD] * (width - len(r)) + r) if left else (r + [PAD] * (width - len(r))) for r in rows
        ]
        mask = [
            ([0] * (width - len(r)) + [1] * len(r))
            if left
            else ([1] * len(r) + [0] * (width - len(r)))
            for r in rows
        ]
        return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}


def pad_rows(rows: list[list[int]], width: int, left: bool = False):
    import torch

    return torch.tensor(
        [([PAD] * (width - len(r)) + r) if left else (r + [PAD] * (width - len(r))) for r in rows]
    )


def config(**over):
    from omegaconf import OmegaConf

    base = {
        "trainer": {
            "project_name": "conformance",
            "experiment_name": "sdrl",
            "logger": [],
            "total_epochs": 1,
            "val_before_train": False,
            "balance_batch": False,
        },
        "global_profiler": {"steps": None, "profile_continuous_steps": False},
        "actor_rollout_ref": {
            "rollout": {"n": 8, "do_sample": True, "val_kwargs": {"n": 1, "do_sample": False}}
        },
        "algorithm": {
            "adv_estimator": "grpo",
            "use_kl_in_reward": False,
            "filter_groups": {"enable": True, "metric": "acc", "max_num_gen_batches": 0},
        },
        "data": {"train_batch_size": 1, "max_response_length": 1_000_000},
        "self_debate": {
            "enable_debate_training": True,
            "partner_mode": "random",
            "debate_n": 1,
            "num_debate_prompt": 0,
            "train_debate_max_initial_response_length": None,
        },
    }
    for path, value in over.items():
        node = base
        *heads, last = path.split(".")
        for head in heads:
            node = node[head]
        node[last] = value
    return OmegaConf.create(base)


def base_batch(protocol, groups: list[dict], with_rows: bool = False):
    """A fork DataProto holding `groups` in order, one uid each: prompts, responses (the reply's
    characters, right-padded), response_mask (the first `length` positions: the token count the
    fork reads, set apart from the text), token_level_scores (the score on the last position),
    and the reward extra info as non-tensors."""
    import numpy as np
    import torch

    replies = [r for g in groups for r in g["replies"]]
    lengths = [n for g in groups for n in g["lengths"]]
    width = max(max(len(r) for r in replies), max(lengths), 1)
    responses = pad_rows([CharTokenizer.ids(r) for r in replies], width)
    mask = torch.tensor([[1] * n + [0] * (width - n) for n in lengths])
    scores = torch.zeros(len(replies), width, dtype=torch.float32)
    flat = [s for g in groups for s in g["score"]]
    for row, (n, s) in enumerate(zip(lengths, flat, strict=True)):
        scores[row, max(n, 1) - 1] = s
    prompts = pad_rows([CharTokenizer.ids("q")] * len(replies), 1)
    uid = [f"uid-{gi}" for gi, g in enumerate(groups) for _ in g["replies"]]
    extra = [
        {"raw_problem": g["question"], "index": gi}
        for gi, g in enumerate(groups)
        for _ in g["replies"]
    ]
    tensors = {
        "prompts": prompts,
        "responses": responses,
        "response_mask": mask,
        "token_level_scores": scores,
    }
    if with_rows:
        attention = torch.cat([torch.ones_like(prompts), mask], dim=-1)
        tensors |= {
            "input_ids": torch.cat([prompts, responses], dim=-1),
            "attention_mask": attention,
            "position_ids": torch.cumsum(attention, dim=-1) - 1,
            "token_level_rewards": scores.clone(),
        }
    non_tensors = {
        "uid": np.array(uid, dtype=object),
        "extra_info": np.array(extra, dtype=object),
        "data_source": np.array([g["source"] for g in groups for _ in g["replies"]], dtype=object),
        "acc": np.array([a for g in groups for a in g["acc"]], dtype=bool),
        "pred": np.array([p for g in groups for p in g["pred"]], dtype=object),
        "score": np.array(flat, dtype=np.float64),
    }
    return protocol.DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


# ---- replies, in our own words -------------------------------------------------------------

STEPS = [
    "Let x be the unknown; then 2x + {a} = {b}.",
    "Counting the cases gives {a} + {b} = {c}.",
    "We check n = {a} first.",
    "So the product is {a} * {b}.",
    "Hence the remainder is {a} mod {b}.",
    "The sum telescopes to {c}.",
    'The problem says "at least {a}", so we keep {b}.',
    "By symmetry the two halves are equal: {a} and {a}.",
    "$x^2 - {a}x + {b} = 0$ has roots summing to {a}.",
    "\\frac{{{a}}}{{{b}}} simplifies no further.",
    "Wait, recheck: {a} not {b}.",
    "Using {{a, b}} = {{{a}, {b}}} as the set.",
    "Area = \\sqrt{{{c}}} after squaring.",
    "C:\\path\\{a} is not relevant here.",
]


def step(rng: random.Random) -> str:
    a, b = rng.randint(1, 99), rng.randint(1, 99)
    return rng.choice(STEPS).format(a=a, b=b, c=a + b)


def answer_forms(rng: random.Random, gold: str) -> list[str]:
    """Ways of writing `gold` that a model might use (some equal after DAPO's rewrites, some
    not)."""
    forms = [gold, f"${gold}$", f"\\boxed{{{gold}}}", f"{gold}."]
    if re.fullmatch(r"\d+", gold):
        value = int(gold)
        forms += [f"{value}.0", f"{value:,}", f"+{value}", str(value), f"0{value}"]
    frac = re.fullmatch(r"\\frac\{(\d+)\}\{(\d+)\}", gold)
    if frac:
        a, b = frac.groups()
        forms += [f"{a}/{b}", f"\\dfrac{{{a}}}{{{b}}}", repr(int(a) / int(b))]
        if len(a) == 1 and len(b) == 1:
            forms.append(f"\\frac{a}{b}")
    return forms


HALF = ["0.5", "1/2", "\\frac12", "\\frac{1}{2}", ".5", "\\tfrac{1}{2}"]


def wrong(rng: random.Random, gold: str, pool: list[str]) -> str:
    if re.fullmatch(r"\d+", gold) and rng.random() < 0.7:
        return str(max(0, int(gold) + rng.choice([-3, -2, -1, 1, 2, 5, 10, 100])))
    return rng.choice(pool)


def reply(rng: random.Random, answer: str | None) -> str:
    """A short worked reply ending in `Answer: X` (DAPO's format), or with no answer line
    (`answer` None); now and then odd spacing, quotes and a longer working."""
    lines = [step(rng) for _ in range(rng.choice([1, 1, 1, 2, 2, 3]))]
    if rng.random() < 0.015:
        lines += [step(rng) for _ in range(rng.randint(10, 40))]  # a longer working
    if answer is None:
        lines.append(
            rng.choice(["I could not finish.", "So the result is unclear.", "The answer is 12."])
        )
    else:
        line = rng.choice(
            ["Answer: {}", "Answer: {}", "Answer: {}", "Answer:{}", "answer: {}", "Answer:  {} "]
        )
        lines.append(line.format(answer))
        if rng.random() < 0.05:  # an earlier answer line, overridden by the last one
            lines.insert(0, f"Answer: {rng.randint(0, 99)}")
    text = "\n".join(lines)
    shape = rng.random()
    if shape < 0.08:
        text = rng.choice([" ", "  ", "\n", "\t", "\n\n "]) + text
    elif shape < 0.16:
        text = text + rng.choice([" ", "\n", "\n\n", " \t\n"])
    elif shape < 0.2:
        text = f'"{text}"'
    return text


def load_golds() -> list[tuple[str, str, str]]:
    """(source, question, gold) of the real AMC23, AIME24, AIME25 and MATH500 problems."""
    found = []
    for name in ("amc23", "aime24", "aime25", "math500"):
        for line in (DATA / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            found.append((name, row["problem"], row["answer"]))
    return found


def group(rng: random.Random, golds, score_fn, size: int) -> dict:
    """One question's replies: answers drawn to make ties, majorities, all-same, unparsed and
    equivalent-but-different texts; each scored by the fork's math_dapo."""
    source, question, gold = rng.choice(golds)
    pool = [g for _, _, g in golds]
    kind = rng.choices(
        ["tie", "spread", "same", "invalid", "equivalent", "half", "two"],
        [25, 25, 8, 10, 12, 8, 12],
    )[0]
    if kind == "same":
        options = [rng.choice([gold, wrong(rng, gold, pool)])]
    elif kind == "invalid":
        options = [None] * rng.randint(1, 2) + [gold, wrong(rng, gold, pool)][: rng.randint(0, 2)]
    elif kind == "equivalent":
        forms = answer_forms(rng, gold)
        options = rng.sample(forms, min(len(forms), rng.randint(2, 4)))
    elif kind == "half":
        options = rng.sample(HALF, rng.randint(2, 4))
    elif kind == "two":
        options = [gold, wrong(rng, gold, pool)]
    else:
        options = [gold] + [wrong(rng, gold, pool) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.3:
            options.append(None)
    if kind in ("tie", "two", "half", "equivalent") and rng.random() < 0.7:
        answers = [options[i % len(options)] for i in range(size)]  # equal counts, or nearly
    else:
        answers = [rng.choice(options) for _ in range(size)]
    rng.shuffle(answers)
    replies: list[str] = []
    for answer in answers:
        text = reply(rng, answer)
        while text.strip() in {r.strip() for r in replies}:  # stripped texts differ in a group
            text = reply(rng, answer)
        replies.append(text)
    scored = [score_fn(text, gold) for text in replies]
    return {
        "source": source,
        "question": question,
        "gold": gold,
        "replies": replies,
        "pred": [s["pred"] for s in scored],
        "acc": [bool(s["acc"]) for s in scored],
        "score": [float(s["score"]) for s in scored],
    }


def lengths_for(rng: random.Random, count: int, limit: int | None) -> list[int]:
    """Token counts (the response mask), around the limit when there is one."""
    out = []
    for _ in range(count):
        if limit is not None and rng.random() < 0.5:
            out.append(max(1, limit + rng.randint(-2, 2)))
        else:
            top = 2 * limit if limit is not None else 4096
            out.append(rng.randint(1, top))
    return out


# ---- pairing -------------------------------------------------------------------------------


def construct(trainer, protocol, groups, mode, validate, seed, max_length, tokenizer):
    """One call of the fork's `_construct_second_turn_inputs` on a batch of `groups`, as its
    trainer calls it (training: no reward result, the batch's own acc and pred; validation: a
    reward result); returns the pairs, as (group, own, partner) indices, and the chats."""
    import numpy as np

    batch = base_batch(protocol, groups)
    fake = types.SimpleNamespace(
        config=config(**{"self_debate.partner_mode": mode}), tokenizer=tokenizer
    )
    meta = {"validate": validate, "eos_token_id": EOS, "pad_token_id": PAD}
    reward_result = None
    if validate:
        reward_result = {
            "reward_tensor": batch.batch["token_level_scores"],
            "reward_extra_info": {
                key: [v for g in groups for v in g[key]] for key in ("score", "acc", "pred")
            },
        }
    tokenizer.chats.clear()
    np.random.seed(seed)
    _, non_tensor, selected, aux = trainer.RayDAPOTrainer._construct_second_turn_inputs(
        fake,
        batch,
        include_extra_metadata=validate,
        tokenizer_kwargs=None,
        meta_info=meta,
        reward_result=reward_result,
        max_initial_response_length=max_length,
    )
    if selected is None:
        return [], []
    starts, rows = [], []
    for gi, g in enumerate(groups):
        starts.append(len(rows))
        rows += [(gi, k) for k in range(len(g["replies"]))]
    pairs = []
    for n, row in enumerate(selected):
        gi, own = rows[row]
        replies = groups[gi]["replies"]
        assert aux["initial_responses"][n] == replies[own].strip()
        partner = [k for k, r in enumerate(replies) if r.strip() == aux["partner_responses"][n]]
        assert len(partner) == 1 and partner[0] != own, (partner, own)
        if validate:
            assert non_tensor["debate_partner_response"][n] == replies[partner[0]].strip()
        assert tokenizer.chats[n][1]["content"] == replies[own].strip().replace('"', '\\"')
        pairs.append([gi, own, partner[0]])
    assert len(tokenizer.chats) == len(pairs)
    return pairs, list(tokenizer.chats)


def pairing_cases(trainer, protocol, score_fn, rng, golds, count) -> list[dict]:
    tokenizer, cases = CharTokenizer(), []
    for i in range(count):
        mode = "frequency" if i % 2 == 0 else "random"
        validate = rng.random() < 0.3
        max_length = rng.choices([None, 2048, rng.randint(20, 400)], [30, 40, 30])[0]
        seed = rng.randrange(2**31)
        groups = []
        for _ in range(rng.choices([1, 2, 3, 4], [25, 30, 25, 20])[0]):
            size = rng.choices([8, 2, 3, 4, 5, 6, 7, 12, 16], [60, 5, 5, 6, 4, 4, 4, 6, 6])[0]
            g = group(rng, golds, score_fn, size)
            g["lengths"] = lengths_for(rng, size, max_length)
            groups.append(g)
        pairs, _ = construct(trainer, protocol, groups, mode, validate, seed, max_length, tokenizer)
        cases.append(
            {
                "set": "pairing",
                "id": f"p{i + 1:04d}",
                "mode": mode,
                "validate": validate,
                "seed": seed,
                "max_length": max_length,
                "groups": [
                    {k: g[k] for k in ("gold", "replies", "lengths", "pred", "acc", "score")}
                    for g in groups
                ],
                "pairs": pairs,
            }
        )
    return cases


# ---- prompts -------------------------------------------------------------------------------

MARK = "\x00{}\x00"
# The fork's fixed text, line by line, in the order it writes it. First user message: `task`
# (the line before the question), `reminder` (the line after it). Debate user message:
# `intro` (the line before the quoted reply), `start` and `end` (the lines around it),
# `request` (the line that opens the numbered steps), `step1` to `step4` (the text of steps
# 1 to 4, after their `N) `), `answer_line` (the text of the last step, 5). The assistant
# message is the agent's own reply alone.
ROLES = (
    "task",
    "reminder",
    "intro",
    "start",
    "end",
    "request",
    "step1",
    "step2",
    "step3",
    "step4",
    "answer_line",
)
NUMBERED = re.compile(r"^(\d+\) )(.*)$")


def placeholder(role: str) -> str:
    return f"\u27e8{role}\u27e9"  # ⟨role⟩


def fixed_lines(text: str) -> list[str]:
    """The fixed text of a probed message: each line between the marks, without its spacing
    at the ends, and without the `N) ` of a numbered line (layout, kept)."""
    found = []
    for fragment in re.split(r"\x00[^\x00]*\x00", text):
        for piece in re.split(r"\s*\n\s*", fragment):
            piece = piece.strip()
            if piece:
                numbered = NUMBERED.match(piece)
                found.append(numbered.group(2) if numbered else piece)
    return found


def probe_sentences(trainer, protocol) -> dict[str, str]:
    tokenizer = CharTokenizer()
    g = {
        "source": "probe",
        "question": MARK.format("q"),
        "replies": [MARK.format("a"), MARK.format("b")],
        "lengths": [1, 1],
        "pred": ["1", "2"],
        "acc": [True, False],
        "score": [1.0, -1.0],
    }
    _, chats = construct(trainer, protocol, [g], "random", False, 0, None, tokenizer)
    (chat,) = chats
    assert [m["role"] for m in chat] == ["user", "assistant", "user"], chat
    first, own, debate = (fixed_lines(m["content"]) for m in chat)
    assert own == [] and len(first) == 2 and len(debate) == 9, (first, own, debate)
    numbers = [NUMBERED.match(line.strip()) for line in chat[2]["content"].splitlines()]
    assert [m.group(1) for m in numbers if m] == [f"{n}) " for n in range(1, 6)]
    found = dict(zip(ROLES, first + debate, strict=True))
    assert len(set(found.values())) == len(found)
    return found


def hide(text: str, found: dict[str, str]) -> str:
    for role, sentence in sorted(found.items(), key=lambda item: -len(item[1])):
        text = text.replace(sentence, placeholder(role))
    return text


ODD_QUESTIONS = [
    'Find "the" value of x if x + 1 = 3.',
    "Let $f(x) = \\frac{1}{x}$. Compute $f(\\{2\\})$ where {braces} stay.",
    "  A question with spaces at both ends.  ",
    "Line one.\nLine two.\n\nLine four after a blank line.",
    "Back\\slashes \\\\ and \\n written out, and a tab\there.",
    "{partner_response} is not a field here; {0} {} neither.",
    "$$\\sum_{k=1}^{n} k$$ in dollars: $5 and $$.",
    "\n\nA question that opens with line breaks",
    "",
    " ",
    "Unicode: ∑ é — “curly quotes” and ⟨angles⟩.",
]
ODD_REPLIES = [
    '  He said "three", so "3" it is.\nAnswer: 3  ',
    "\n\n\tIndented working.\nAnswer: \\frac{1}{2}\n\n",
    "   ",
    "",
    "\n",
    "Braces {x} and {{y}} and {partner_response} and {}.\nAnswer: {5}",
    'Backslash \\ and \\" already escaped and \\\\ double.\nAnswer: 7',
    "$$x = 2$$ and $y$ costs $3.\nAnswer: $2$",
    '"""triple""" quotes\nAnswer: "4"',
    "No answer line at all.",
    "Answer: 12\n\nAnswer: 13",
    "Unicode ∑ and ⟨angles⟩ and “quotes”.\nAnswer: ½",
]


def prompt_cases(trainer, protocol, score_fn, rng, golds, found, count) -> list[dict]:
    tokenizer, cases = CharTokenizer(), []
    for i in range(count):
        source, question, gold = rng.choice(golds)
        if rng.random() < 0.3:
            question = rng.choice(ODD_QUESTIONS)
        texts = []
        for _ in range(2):
            if rng.random() < 0.4:
                text = rng.choice(ODD_REPLIES)
            else:
                text = reply(rng, rng.choice([gold, wrong(rng, gold, [gold]), None]))
            if rng.random() < 0.05:  # a long reply, a few thousand characters
                text = (
                    "\n".join(step(rng) for _ in range(rng.randint(60, 120))) + f"\nAnswer: {gold}"
                )
            texts.append(text)
        if texts[0].strip() == texts[1].strip():
            texts[1] = texts[1] + "\nOne more line."
        for text in [question, *texts]:
            assert not any(s in text for s in found.values()), "an input holds a sentence"
            assert "\x00" not in text
        scored = [score_fn(t, gold) for t in texts]
        g = {
            "source": source,
            "question": question,
            "replies": texts,
            "lengths": [max(1, len(t)) for t in texts],
            "pred": [s["pred"] for s in scored],
            "acc": [bool(s["acc"]) for s in scored],
            "score": [float(s["score"]) for s in scored],
        }
        pairs, chats = construct(
            trainer, protocol, [g], "random", False, rng.randrange(2**31), None, tokenizer
        )
        ((_, own, partner),) = pairs
        messages = [{"role": m["role"], "content": hide(m["content"], found)} for m in chats[0]]
        cases.append(
            {
                "set": "prompt",
                "id": f"m{i + 1:04d}",
                "question": question,
                "own": texts[own],
                "partner": texts[partner],
                "messages": messages,
            }
        )
    return cases


# ---- filters -------------------------------------------------------------------------------


class Captured(Exception):
    def __init__(self, batch):
        self.batch = batch


def first_turn_kept(trainer, protocol, values: list[list[bool]]) -> list[bool]:
    """Run the fork's `fit()` on one generation batch whose groups get `values` as their `acc`
    (all groups of one size, the rollout's n), then a second batch of groups it always keeps
    (mixed acc, to reach the prompt batch size); it stops at the debate step, and the groups
    of the first batch that reached it are the kept ones."""
    import numpy as np
    import torch

    n, count = len(values[0]), len(values)
    assert all(len(v) == n for v in values)
    filler = [[i % 2 == 0 for i in range(n)] for _ in range(count)] if n > 1 else [[True]] * count

    def batch_dict(first_index: int, groups: int):
        ids = pad_rows(
            [CharTokenizer.ids(f"question {first_index + k}") for k in range(groups)], 16, left=True
        )
        mask = (ids != PAD).long()
        return {
            "input_ids": ids,
            "attention_mask": mask,
            "position_ids": torch.clamp(torch.cumsum(mask, dim=-1) - 1, min=0),
            # an object array of lists (the None keeps numpy from making it 2-D)
            "raw_prompt_ids": np.array([list(r) for r in ids.tolist()] + [None], dtype=object)[:-1],
            "index": np.array([first_index + k for k in range(groups)], dtype=object),
        }

    class WorkerGroup:
        world_size = 1

        def generate_sequences(self, data):
            rows = len(data)
            responses = pad_rows([CharTokenizer.ids("Answer: 1")] * rows, 12)
            out = protocol.DataProto.from_dict(
                tensors={
                    "responses": responses,
                    "response_mask": (responses != PAD).long(),
                    "prompts": data.batch["input_ids"],
                }
            )
            out.meta_info["timing"] = {}
            return out

    table = {gi: v for gi, v in enumerate(values)} | {count + gi: v for gi, v in enumerate(filler)}

    def reward_fn(data, return_dict=False):
        assert return_dict
        seen: dict[int, int] = {}
        acc = []
        for index in data.non_tensor_batch["index"]:
            k = seen.get(index, 0)
            seen[index] = k + 1
            acc.append(bool(table[index][k]))
        tensor = torch.zeros(len(data), 12)
        tensor[:, -1] = torch.tensor([1.0 if a else -1.0 for a in acc])
        return {"reward_tensor": tensor, "reward_extra_info": {"acc": acc}}

    def stop(batch, metrics, timing_raw):
        raise Captured(batch)

    fake = types.SimpleNamespace(
        config=config(**{"actor_rollout_ref.rollout.n": n, "data.train_batch_size": count}),
        _load_checkpoint=lambda: None,
        _start_profiling=lambda *a, **k: None,
        _stop_profiling=lambda *a, **k: None,
        val_reward_fn=None,
        total_training_steps=1,
        train_dataloader=[batch_dict(0, count), batch_dict(count, count)],
        actor_rollout_wg=WorkerGroup(),
        reward_fn=reward_fn,
        use_rm=False,
        async_rollout_mode=False,
        _generate_training_second_turn_batch=stop,
    )
    try:
        trainer.RayDAPOTrainer.fit(fake)
    except Captured as done:
        reached = {int(i) for i in done.batch.non_tensor_batch["index"]}
        counts = {i: list(done.batch.non_tensor_batch["index"]).count(i) for i in reached}
        assert all(c == n for c in counts.values()), counts
        return [gi in reached for gi in range(count)]
    raise AssertionError("fit() never reached the debate step")


def debate_turn_kept(trainer, protocol, values: list[list[float]]) -> list[bool]:
    """Run the fork's `_generate_training_second_turn_batch` on groups of two first-turn replies
    (random partner, so each group makes one pair), repeated debate_n = len(values[g]) times;
    the debate rows of group g get the rewards values[g]. A group is kept when its debate rows
    are in the batch it returns."""
    import numpy as np
    import torch

    n = len(values[0])
    assert all(len(v) == n for v in values)
    groups = []
    for gi in range(len(values)):
        groups.append(
            {
                "source": "filter",
                "question": f"question {gi}",
                "replies": [f"first reply {gi}\nAnswer: 1", f"second reply {gi}\nAnswer: 2"],
                "lengths": [20, 20],
                "pred": ["1", "2"],
                "acc": [True, False],
                "score": [1.0, -1.0],
            }
        )
    batch = base_batch(protocol, groups, with_rows=True)
    batch.non_tensor_batch["__num_turns__"] = np.ones(len(batch), dtype=np.int32)
    width = batch.batch["responses"].shape[-1]

    class WorkerGroup:
        world_size = 1

        def generate_sequences(self, data):
            rows = len(data)
            responses = pad_rows([CharTokenizer.ids("Answer: 1")] * rows, width)
            mask = (responses != PAD).long()
            attention = torch.cat([data.batch["attention_mask"], mask], dim=-1)
            return protocol.DataProto.from_dict(
                tensors={
                    "prompts": data.batch["input_ids"],
                    "responses": responses,
                    "response_mask": mask,
                    "input_ids": torch.cat([data.batch["input_ids"], responses], dim=-1),
                    "attention_mask": attention,
                    "position_ids": torch.clamp(torch.cumsum(attention, dim=-1) - 1, min=0),
                }
            )

    def reward_fn(data, return_dict=False):
        assert return_dict
        seen: dict[str, int] = {}
        tensor = torch.zeros(len(data), width, dtype=torch.float32)
        for row, uid in enumerate(data.non_tensor_batch["uid"]):
            k = seen.get(uid, 0)
            seen[uid] = k + 1
            tensor[row, -1] = values[int(uid.split("-")[1])][k]
        return {"reward_tensor": tensor, "reward_extra_info": {}}

    fake = types.SimpleNamespace(
        config=config(**{"self_debate.debate_n": n}),
        tokenizer=CharTokenizer(),
        actor_rollout_wg=WorkerGroup(),
        async_rollout_mode=False,
        use_rm=False,
        reward_fn=reward_fn,
        global_steps=1,
    )
    fake._construct_second_turn_inputs = functools.partial(
        trainer.RayDAPOTrainer._construct_second_turn_inputs, fake
    )
    out = trainer.RayDAPOTrainer._generate_training_second_turn_batch(fake, batch, {}, {})
    debate_rows = out.non_tensor_batch["uid"][len(batch) :]
    reached = {str(u) for u in debate_rows}
    for uid in reached:
        assert list(debate_rows).count(uid) == n
    return [f"uid-{gi}" in reached for gi in range(len(values))]


def f32(value: float) -> float:
    """`value` as a float32 holds it: the fork sums a float32 reward tensor, so values stored
    are ones it represents exactly."""
    import numpy as np

    return float(np.float32(value))


def debate_values(rng: random.Random, n: int) -> list[float]:
    kind = rng.choices(["same", "near", "mixed", "far", "one-off"], [20, 25, 25, 15, 15])[0]
    base = rng.choice([1.0, -1.0, 0.0, 0.5, 1e-9, 100.0])
    if kind == "same":
        vals = [base] * n
    elif kind == "near":  # within np.isclose's default tolerances of the first, or just past
        step_ = rng.choice([1e-6, 5e-6, 1e-5, 2e-5, 1e-4, 1e-9])
        vals = [base + rng.choice([0, 1, -1]) * step_ for _ in range(n)]
    elif kind == "mixed":
        vals = [rng.choice([1.0, -1.0]) for _ in range(n)]
    elif kind == "far":
        vals = [rng.uniform(-1, 1) for _ in range(n)]
    else:
        vals = [base] * n
        vals[rng.randrange(n)] = base + rng.choice([1e-7, 1e-3, 2.0, -2.0])
    return [f32(v) for v in vals]


def first_values(rng: random.Random, n: int) -> list[bool]:
    kind = rng.choices(["all", "none", "mixed", "one"], [25, 25, 35, 15])[0]
    if kind == "all":
        return [True] * n
    if kind == "none":
        return [False] * n
    if kind == "one":
        vals = [rng.random() < 0.5] * n
        vals[rng.randrange(n)] = not vals[0]
        return vals
    return [rng.random() < 0.5 for _ in range(n)]


def filter_cases(trainer, protocol, rng, calls: int) -> list[dict]:
    cases = []
    for turn in ("first", "debate"):
        for _ in range(calls):
            n = rng.choice([1, 1, 2, 3, 4, 8, 8, 8, 16])
            count = rng.randint(1, 8)
            if turn == "first":
                values = [first_values(rng, n) for _ in range(count)]
                kept = first_turn_kept(trainer, protocol, values)
            else:
                values = [debate_values(rng, n) for _ in range(count)]
                kept = debate_turn_kept(trainer, protocol, values)
            cases.append(
                {
                    "set": "filter",
                    "id": f"f{len(cases) + 1:04d}",
                    "turn": turn,
                    "values": values,
                    "kept": kept,
                }
            )
    return cases


# ---- main ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fork", type=Path, required=True)
    parser.add_argument("--scratch", type=Path, default=None)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--pairings", type=int, default=880)
    parser.add_argument("--prompts", type=int, default=240)
    parser.add_argument("--filter-calls", type=int, default=60)
    args = parser.parse_args()
    head = subprocess.run(
        ["git", "-C", str(args.fork), "rev-parse", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert head == args.commit, f"{args.fork} is at {head}, not {args.commit}"
    dirty = subprocess.run(
        ["git", "-C", str(args.fork), "status", "--porcelain", "--untracked-files=no"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert not dirty, "the fork checkout has local changes"
    trainer, math_dapo, protocol = load_reference(args.fork, args.scratch)
    score_fn = math_dapo.compute_score

    rng = random.Random(SEED)
    golds = load_golds()
    found = probe_sentences(trainer, protocol)
    cases = pairing_cases(trainer, protocol, score_fn, rng, golds, args.pairings)
    cases += prompt_cases(trainer, protocol, score_fn, rng, golds, found, args.prompts)
    cases += filter_cases(trainer, protocol, rng, args.filter_calls)
    with open(HERE / "cases.jsonl", "w", encoding="utf-8") as out:
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False, sort_keys=True) + "\n")

    import numpy
    import torch
    import transformers

    def sha(path: str) -> str:
        return hashlib.sha256((args.fork / path).read_bytes()).hexdigest()

    pairing = [c for c in cases if c["set"] == "pairing"]
    filters = [c for c in cases if c["set"] == "filter"]
    counts = {
        "pairing_cases": len(pairing),
        "pairing_groups": sum(len(c["groups"]) for c in pairing),
        "pairing_replies": sum(len(g["replies"]) for c in pairing for g in c["groups"]),
        "pairs": sum(len(c["pairs"]) for c in pairing),
        "prompt": sum(c["set"] == "prompt" for c in cases),
        "filter_first_groups": sum(len(c["values"]) for c in filters if c["turn"] == "first"),
        "filter_debate_groups": sum(len(c["values"]) for c in filters if c["turn"] == "debate"),
    }
    meta = {
        "reference": "github.com/DawnLIU35/SDRL (the SDRL authors' verl fork)",
        "commit": args.commit,
        "files": {
            TRAINER: {
                "sha256": sha(TRAINER),
                "run": [
                    "RayDAPOTrainer._construct_second_turn_inputs",
                    "RayDAPOTrainer.fit (to its first-turn group filter)",
                    "RayDAPOTrainer._generate_training_second_turn_batch",
                ],
            },
            REWARD: {"sha256": sha(REWARD), "run": ["compute_score (its defaults)"]},
        },
        "environment": {
            "python": sys.version.split()[0],
            "numpy": numpy.__version__,
            "torch": torch.__version__,
            "transformers": transformers.__version__ + " (scratch folder, first on sys.path)",
        },
        "seed": SEED,
        "fake_tokenizer": "one id per character (ord + 2; 0 pads, 1 ends); apply_chat_template "
        "returns json.dumps(messages)",
        "cases": counts,
        # Each placeholder's sentence is not stored, only its hash, so a user who writes the
        # authors' sentences into a template can check them.
        "sentences": {
            placeholder(role): hashlib.sha256(found[role].encode()).hexdigest() for role in ROLES
        },
    }
    (HERE / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
