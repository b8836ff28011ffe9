"""Regenerate cases.jsonl and meta.json: Debate-or-Vote's own outputs on seeded inputs.

Run by hand, never by CI, with a Python that has numpy (the reference's only dependency these
calls use; its heavy imports are stubbed here, in this script only):

    python3 -m venv /tmp/dov-venv && /tmp/dov-venv/bin/pip install numpy
    /tmp/dov-venv/bin/python conformance/debate_or_vote/generate.py \\
        --repo PATH/TO/debate-or-vote.git --commit 82c929ea773d534cfb3fb0ddc4b7d14d245ab549

`--repo` is a git clone (bare or not) of github.com/deeplearning-wisc/debate-or-vote, the
paper's repository; its `src/` at `--commit` is extracted to a temporary folder and imported
from there. Nothing of the reference is copied into this repository: the script calls its
functions and records what they return. conformance/debate_or_vote_fork/generate.py runs the
same inputs through a later fork's reader.

Three sets of cases, one JSON object a line:
- reader: a reply and a gold -> the value its math reader (`evaluate_arithmetics`) reads
  (rounded to one decimal; null for its empty answer) and whether it scores the reply right;
- vote: five replies and a gold -> every system answer its vote picks, over 64 seeds of
  Python's `random` (one answer unless there is a tie), and whether each is right;
- prompt: a question, the round-0 replies of N agents (some with <think> blocks) and a
  topology -> the round-0 prompt and each agent's round-1 prompt (`get_new_message`), as the
  raw text it sends; every fixed sentence of the reference is replaced by a placeholder
  (see README.md), so its sentences are not stored here.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import types
from io import BytesIO
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = Path("/work/shared/data")
SEED = 32


# ---- loading the reference ----------------------------------------------------------------


def load_reference(repo: Path, commit: str, into: Path) -> tuple[types.ModuleType, ...]:
    """The reference's evaluator and main modules, from `src/` at `commit`, with the modules
    these calls never use stubbed (torch, wandb, rouge_score, pandas, datasets, ...)."""
    archive = subprocess.run(
        [
            "git",
            f"--git-dir={repo / '.git' if (repo / '.git').is_dir() else repo}",
            "archive",
            commit,
            "src",
        ],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    for name in (
        "torch",
        "wandb",
        "pandas",
        "datasets",
        "tqdm",
        "matplotlib",
        "matplotlib.pyplot",
        "rouge_score",
        "rouge_score.rouge_scorer",
    ):
        stub = types.ModuleType(name)
        stub.__dict__.update(
            RougeScorer=lambda *a, **k: None,
            tqdm=lambda x, **k: x,
            Dataset=object,
            concatenate_datasets=None,
            load_dataset=None,
            manual_seed=lambda s: None,
        )
        sys.modules[name] = stub
    sys.modules["rouge_score"].rouge_scorer = sys.modules["rouge_score.rouge_scorer"]
    sys.path.insert(0, str(into / "src"))
    return importlib.import_module("evaluator"), importlib.import_module("main")


# ---- replies, in our own words ------------------------------------------------------------

OPENINGS = [
    "Let me work through this carefully.",
    "We need to find the requested quantity.",
    "First, let's restate what is given.",
    "I'll solve this step by step.",
    "Looking at the other agents' answers, I want to double-check the arithmetic.",
    "",
]
STEPS = [
    "Multiplying {a} by {b} gives {ab}.",
    "Adding {a} and {b} we get {apb}.",
    "So the total is {apb} after combining the two parts.",
    "Dividing {ab} by {b} brings us back to {a}, which checks out.",
    "Subtracting, {apb} - {b} = {a}.",
    "Hence the intermediate value is {ab}.",
    "$${a} \\times {b} = {ab}$$",
    "\\[ {a} + {b} = {apb} \\]",
    "- Step: {a} * {b} = {ab}\n- Step: {ab} + {a} = {abpa}",
    "**Check:** {apb} is consistent with the constraints.",
    "One agent said {b}, but that ignores the second condition.",
]


def number_forms(rng: random.Random, value: float) -> str:
    """`value` written as a model might write it."""
    whole = int(value) if value == int(value) else None
    forms = [repr(value), f"{value:.2f}", f"{value:.1f}", f"{value:.3f}"]
    if whole is not None:
        forms += [str(whole)] * 4
        forms += [f"{whole:,}", f"+{whole}", f"{whole}.0", f"{whole}.", f"0{whole}"]
    forms += [f"{value:.4f}", f"{value:g}", f"{value:e}", str(value).replace(".", ",")]
    return rng.choice(forms)


def final_line(rng: random.Random, value: float) -> str:
    """One way of writing the final answer, well formed or not."""
    n = number_forms(rng, value)
    key = rng.choice(
        [
            "final answer",
            "final answer",
            "Final Answer",
            "FINAL ANSWER",
            "final_answer",
            "'final answer'",
            '"final_answer"',
            "final  answer",
            "finalanswer",
            "final answers",
            "ſinal answer",
        ]
    )
    space = rng.choice(["", " ", "  ", "\n", "\t", "\u00a0"])
    forms = [
        f"{{{key}:{space}{n}}}",
        f"{{{key}: {n}}}",
        f"{{ {key} : {n} }}",
        f"\\{{{key}: {n}\\}}",
        f"{{{{{key}: {n}}}}}",
        f"{{{key}: ${n}$}}",
        f"{{{key}: {n} dollars}}",
        f"{{{key}: \\$ {n}}}",
        f"\\boxed{{{n}}}",
        f"\\boxed {{ {n} }}",
        f"$\\boxed{{{n}}}$",
        f"\\\\boxed{{{n}}}",
        f"\\boxed{{\\text{{{n}}}}}",
        f"\\boxed{{{n}\\%}}",
        f"\\boxed{{\\frac{{{n}}}{{2}}}}",
        f"\\boxed{{final answer: {n}}}",
        f"{{{key}: {{{n}}}}}",
        f"{{{key}:\n{n}}}",
        f"\\boxed{{{key}: {n}}}",
        f"\\boxed{{{n}",
        f"The answer is {n}.",
        f"**Final answer:** {n}",
        f"#### {n}",
        f"Answer: {n}",
    ]
    weights = [30, 12, 6, 4, 3, 2, 2, 2, 16, 3, 4, 2, 2, 2, 2, 2, 2, 2, 1, 2, 4, 3, 1, 2]
    return rng.choices(forms, weights)[0]


def body(rng: random.Random) -> str:
    a, b = rng.randint(1, 60), rng.randint(1, 40)
    values = {"a": a, "b": b, "ab": a * b, "apb": a + b, "abpa": a * b + a}
    lines = [rng.choice(OPENINGS)] + [
        rng.choice(STEPS).format(**values) for _ in range(rng.randint(0, 6))
    ]
    return "\n\n".join(line for line in lines if line)


def reply(rng: random.Random, value: float, other: float) -> str:
    """A model reply whose intended answer is `value` (`other`: a value it may also mention)."""
    parts = [body(rng)]
    shape = rng.choices(
        [
            "plain",
            "two",
            "think",
            "think-only",
            "unclosed",
            "close-only",
            "truncated",
            "markdown",
            "none",
            "adversarial",
            "trailing",
            "aside",
        ],
        [40, 10, 10, 4, 3, 2, 5, 6, 4, 10, 6, 12],
    )[0]
    answer = final_line(rng, value)
    if shape == "plain":
        parts.append(answer)
    elif shape == "two":
        first = final_line(rng, other)
        parts += [first, body(rng), answer] if rng.random() < 0.5 else [answer, body(rng), first]
    elif shape == "think":
        thought = f"<think>\n{body(rng)}\nMaybe {final_line(rng, other)}\n</think>\n\n"
        return thought + "\n\n".join([body(rng), answer])
    elif shape == "think-only":
        return f"<think>\n{body(rng)}\n{answer}\n</think>\n\n{body(rng)}"
    elif shape == "unclosed":
        return f"<think>\n{body(rng)}\n{final_line(rng, other)}\n{body(rng)}"
    elif shape == "close-only":
        return f"{body(rng)}\n{final_line(rng, other)}</think>\n\n{answer}"
    elif shape == "truncated":
        text = "\n\n".join([body(rng), answer, body(rng)])
        return text[: rng.randint(1, len(text))]
    elif shape == "markdown":
        parts.append(f"### Final Answer\n\n{answer}\n\n---")
    elif shape == "none":
        parts.append(f"So I think it is {number_forms(rng, value)} in the end.")
    elif shape == "adversarial":
        parts.append(adversarial(rng, value))
    elif shape == "trailing":
        parts += [answer, rng.choice(["I hope it is correct.", "Let me know!", "}", "{", "\\"])]
    elif shape == "aside":
        parts.append(answer + aside(rng, other))
    return "\n\n".join(parts)


def aside(rng: random.Random, value: float) -> str:
    """Words after the answer with braces of their own, on its line or a later one: the
    `{final answer: 8} (since 2^{3} = 8)` family, where the last group is not the answer."""
    a, b = rng.randint(2, 9), rng.randint(1, 4)
    n = number_forms(rng, value)
    return rng.choice([" ", " ", " ", "\n", "\n\n", ". "]) + rng.choice(
        [
            f"(since {a}^{{{b}}} = {a**b})",
            f"(since {a}^{{{b}}} = {a**b}",
            f"(check: $\\frac{{{a * b}}}{{{b}}} = {a}$)",
            f"where $x^{{{b}}}$ is the term we needed",
            f"and not \\boxed{{{n}}}",
            f"{{{n}}}",
            "{}",
            "{ }",
            f"(as $\\sqrt{{{a * a}}} = {a}$ shows)",
            f"{{note: {a} + {b} = {a + b}}}",
            f"\\text{{{n} apples}}",
            f"(the other agent wrote {{final answer: {n}}})",
            f"{{final answer: {n}",
            "{\n}",
        ]
    )


def adversarial(rng: random.Random, value: float) -> str:
    n = number_forms(rng, value)
    digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(50, 3000)))
    return rng.choice(
        [
            f"{{final answer: {digits}}}",
            f"{{final answer: {digits}",
            f"{{final answer: {digits}.}}",
            "{" * rng.randint(1, 500) + f"final answer: {n}" + "}" * rng.randint(0, 3),
            f"\\boxed{{{' ' * rng.randint(100, 3000)}{n}{' ' * rng.randint(0, 3000)}}}",
            "\\boxed{" * rng.randint(2, 300) + n,
            "\\boxed{" * rng.randint(2, 50) + n + "}" * rng.randint(1, 60),
            "\\" * rng.randint(1, 2000) + f"boxed{{{n}}}",
            "\\" * rng.randint(1, 2000) + f"boxed {n}",
            f"{{final answer: {n}}}" * rng.randint(2, 40),
            f"{{final answer: {n.replace('1', '١').replace('2', '２')}}}",
            f"{{final answer: 1.2.3}} then \\boxed{{{n}}}",
            "\\boxed{inf}",
            "\\boxed{nan}",
            "\\boxed{-Infinity}",
            "\\boxed{1_000}",
            f"\\boxed{{1e{rng.randint(300, 330)}}}",
            f"{{final answer: {n}e5}}",
            f"\\boxed{{\\boxed{{{n}}}}}",
            "\\boxed{ }{final answer:}",
            f"{{final answer: -{n}}}",
            f"{{final answer: +.{rng.randint(0, 99)}}}",
            f"\\boxed{{FINAL ANSWER: {n}}}",
            f"\\boxed{{final answer:{n}}}",
            f"{{final\nanswer: {n}}}",
            f"{{final_answer:\n\n{n}\n}}",
        ]
    )


def golds(rng: random.Random) -> list[float]:
    """Gold answers: the real AIME/AMC integers, and values as Debate-or-Vote's arithmetic
    questions have (a + b*c + d - e/f with integers below 30)."""
    found = []
    for name in ("aime24", "aime25", "amc23"):
        path = DATA / f"{name}.jsonl"
        if path.is_file():
            for line in path.read_text().splitlines():
                answer = json.loads(line)["answer"]
                if re.fullmatch(r"-?\d+(\.\d+)?", answer):
                    found.append(float(answer) if "." in answer else int(answer))
    for _ in range(100):
        a, b, c, d, e, f = (rng.randint(0, 29) for _ in range(6))
        found.append(a + b * c + d - e / (f or 1))
    return found


def nearby(rng: random.Random, gold: float) -> float:
    """A wrong value a model might give, or the gold itself, or a value that rounds to it."""
    return rng.choice(
        [
            gold,
            gold,
            gold,
            round(gold, 1),
            round(gold, 2),
            gold + 0.04,
            gold - 0.05,
            gold + rng.randint(1, 9),
            gold * 2,
            -gold,
            float(rng.randint(0, 999)),
        ]
    )


# ---- the cases ----------------------------------------------------------------------------


def reader_cases(evaluator: types.ModuleType, rng: random.Random, count: int) -> list[dict]:
    pool, cases = golds(rng), []
    for i in range(count):
        gold = rng.choice(pool)
        text = reply(rng, nearby(rng, gold), nearby(rng, gold))
        values, _, correct = evaluator.evaluate_arithmetics({"agent": text}, gold)
        cases.append(
            {
                "id": f"reader-{i:04d}",
                "set": "reader",
                "reply": text,
                "gold": gold,
                "value": _value(values[0]),
                "correct": bool(correct),
            }
        )
    return cases


def vote_cases(evaluator: types.ModuleType, rng: random.Random, count: int) -> list[dict]:
    pool, cases = golds(rng), []
    for i in range(count):
        gold = rng.choice(pool)
        intended = [nearby(rng, gold) for _ in range(rng.choice([1, 2, 3]))]
        replies = [reply(rng, rng.choice(intended), nearby(rng, gold)) for _ in range(5)]
        responses = {f"agent{j}": text for j, text in enumerate(replies)}
        picked = {}
        for seed in range(64):
            random.seed(seed)
            values, answer, correct = evaluator.evaluate_arithmetics(responses, gold)
            picked[_value(answer)] = bool(correct)
        cases.append(
            {
                "id": f"vote-{i:04d}",
                "set": "vote",
                "replies": replies,
                "gold": gold,
                "values": [_value(v) for v in values],
                "winners": sorted(([k, v] for k, v in picked.items()), key=str),
            }
        )
    return cases


# ---- prompts -------------------------------------------------------------------------------

# Inputs stand in for the texts while the reference's fixed sentences are found.
PROBE = "\x00{}\x00"
# The reference's fixed sentences, by the role each plays, in the order its builder writes them:
# decentralized (and sparse, and the hub): opinions, then peer before each peer's reply, own,
# request; another agent of a centralized debate: hub, own, request. suffix: the instruction
# its GSM8K and arithmetic questions end with.
ROLES = ("opinions", "peer", "own", "request", "hub", "suffix")


def placeholder(role: str) -> str:
    return f"\u27e8{role}\u27e9"  # ⟨role⟩


def sentences(text: str) -> list[str]:
    """The fixed sentences of a probed prompt: each line's text between the probe marks, its
    spacing at both ends left out (the spacing and line breaks are the layout, kept)."""
    found = []
    for fragment in re.split(r"\x00[^\x00]*\x00", text):
        found += [piece.strip() for piece in re.split(r"\s*\n\s*", fragment) if piece.strip()]
    return found


def prompt_sentences(dov_main: types.ModuleType, suffix: str) -> dict[str, str]:
    """Each role's sentence, found by running the builder on probe inputs."""

    def built(centralized: bool, agents: int) -> list[str]:
        args = types.SimpleNamespace(centralized=centralized, sparse=False)
        responses = {f"a{i}": PROBE.format(f"r{i}") for i in range(agents)}
        made = dov_main.get_new_message(
            args, PROBE.format("q"), responses, suffix=PROBE.format("s")
        )
        return [sentences(m["content"]) for m in made.values()]

    spread = built(False, 3)[0]  # opinions, peer, peer, own, request
    spoke = built(True, 3)[1]  # hub, own, request
    assert len(spread) == 5 and spread[1] == spread[2] and len(spoke) == 3, (spread, spoke)
    assert spread[3:] == spoke[1:], "the own and request sentences differ between topologies"
    (tail,) = sentences(suffix)
    return dict(
        zip(ROLES, [spread[0], spread[1], spread[3], spread[4], spoke[0], tail], strict=True)
    )


def hide(text: str, found: dict[str, str]) -> str:
    """`text` with every fixed sentence replaced by its role's placeholder."""
    for role, sentence in sorted(found.items(), key=lambda item: -len(item[1])):
        text = text.replace(sentence, placeholder(role))
    return text


def questions(rng: random.Random) -> list[str]:
    """Real benchmark problems and arithmetic questions of our own wording."""
    found = []
    for name in ("amc23", "aime24"):
        path = DATA / f"{name}.jsonl"
        if path.is_file():
            found += [json.loads(line)["problem"] for line in path.read_text().splitlines()]
    for _ in range(20):
        a, b, c, d = (rng.randint(0, 29) for _ in range(4))
        found.append(f"Compute {a}+{b}*{c}-{d}.")
    return found


def think(rng: random.Random, text: str) -> str:
    """`text` as a reasoning model writes it: after a <think> block, unless it has one."""
    return (
        text if text.lstrip().startswith("<think>") else f"<think>\n{body(rng)}\n</think>\n\n{text}"
    )


def prompt_cases(
    evaluator: types.ModuleType, dov_main: types.ModuleType, rng: random.Random
) -> tuple[list[dict], list[tuple[str, str]]]:
    """Round 0 and round 1 of debates of each topology, the replies of round 0 given."""
    suffix = evaluator.get_instruction_suffix(
        types.SimpleNamespace(data="gsm8k", bae=False, cot=False)
    )
    found = prompt_sentences(dov_main, suffix)
    pool, cases = questions(rng), []
    topologies = (
        [("decentralized", n) for n in (2, 3, 4, 5)]
        + [("sparse", n) for n in (3, 4, 5, 6)]
        + [("centralized", n) for n in (2, 3, 4, 5)]
    )
    for topology, agents in topologies:
        for k in range(10):
            question = rng.choice(pool)
            gold = float(rng.randint(0, 999))
            replies = [reply(rng, nearby(rng, gold), nearby(rng, gold)) for _ in range(agents)]
            if k % 2 == 0:  # half the debates: every reply a reasoning model's
                replies = [think(rng, text) for text in replies]
            for text in [question, *replies]:
                assert not any(s in text for s in found.values()), "an input holds a sentence"
            args = types.SimpleNamespace(
                centralized=topology == "centralized", sparse=topology == "sparse"
            )
            names = [f"gsm8k_300__qwen2.5-7b__None__Agent{i + 1}" for i in range(agents)]
            made = dov_main.get_new_message(
                args, question, dict(zip(names, replies, strict=True)), suffix=suffix
            )
            # The engine sends a message's text as it is (no chat template): the prompt.
            round1 = [made[name]["content"] for name in names]
            cases.append(
                {
                    "id": f"prompt-{topology}-{agents}-{k}",
                    "set": "prompt",
                    "topology": topology,
                    "agents": agents,
                    "question": question,
                    "replies": replies,
                    "round0": hide(question + suffix, found),
                    "round1": [hide(text, found) for text in round1],
                }
            )
    return cases, [(placeholder(role), found[role]) for role in ROLES]


def _value(found: object) -> str | None:
    """A value the reference read, as text: repr of the float (nan and inf included), None
    for its empty answer."""
    return None if isinstance(found, str) and found == "" else repr(float(found))


REFERENCE = "github.com/deeplearning-wisc/debate-or-vote"


def generate(repo: Path, commit: str, readers: int, votes: int) -> tuple[list[dict], list]:
    """Every case of the reference at `commit`, and its sentences (placeholder, text)."""
    with tempfile.TemporaryDirectory() as scratch:
        evaluator, dov_main = load_reference(repo, commit, Path(scratch))
        rng = random.Random(SEED)
        cases = reader_cases(evaluator, rng, readers) + vote_cases(evaluator, rng, votes)
        prompts, sentences = prompt_cases(evaluator, dov_main, rng)
    return cases + prompts, sentences


def write(folder: Path, cases: list[dict], commit: str, reference: str, **extra: object) -> None:
    """cases.jsonl and meta.json (the reference, its commit, the count of each set, and
    `extra`) into `folder`."""
    with open(folder / "cases.jsonl", "w", encoding="utf-8") as out:
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    counts: dict[str, int] = {}
    for case in cases:
        counts[case["set"]] = counts.get(case["set"], 0) + 1
    meta = {
        "reference": reference,
        "commit": commit,
        "seed": SEED,
        "python": sys.version.split()[0],
        "numpy": importlib.import_module("numpy").__version__,
        "cases": counts,
        **extra,
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(counts))


def arguments(description: str) -> argparse.Namespace:
    """The command line of this script and of the fork's (conformance/debate_or_vote_fork)."""
    parser = argparse.ArgumentParser(description=description.split("\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--readers", type=int, default=2400)
    parser.add_argument("--votes", type=int, default=400)
    return parser.parse_args()


def main() -> None:
    args = arguments(__doc__)
    cases, sentences = generate(args.repo, args.commit, args.readers, args.votes)
    # Each placeholder's sentence is not stored, only its hash, so a user who writes the
    # published sentences into a template can check them.
    hashes = {name: hashlib.sha256(text.encode()).hexdigest() for name, text in sentences}
    write(HERE, cases, args.commit, REFERENCE, sentences=hashes)


if __name__ == "__main__":
    main()
