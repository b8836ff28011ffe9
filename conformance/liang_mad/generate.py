"""Make cases.jsonl and meta.json: Liang et al.'s judge-led debate (Skytliang/Multi-Agents-Debate,
interactive.Debate) run on scripted replies, with every request it sends recorded.

Run by hand, never by CI, with any Python 3.11 that has no extra packages (the reference's
openai, backoff and tiktoken imports are stubbed here: no model is called):

    git clone https://github.com/Skytliang/Multi-Agents-Debate /tmp/mad   # or a bare mirror
    python3 -m venv /tmp/mad-venv
    /tmp/mad-venv/bin/python conformance/liang_mad/generate.py \
        --repo /tmp/mad --commit 022a7a8eecda85844d336e9064cc556edb0445b3

It extracts interactive.py and code/ at the commit into a temporary folder, replaces
`Agent.ask` by a function that returns the case's scripted reply for the asking player and
records the message list it would send, and runs `Debate(...).run()` for each generated debate
(seed 45). Each debate runs twice: with the reference's config4all.json, and with a copy whose
sentences are placeholders (each line of fixed text around the ##x## marks, without the
spacing at its ends, becomes `⟨key.n⟩`; punctuation alone stays as it is). The two runs must
send the same messages once the placeholders are put back; the second run's messages are
stored, so the reference's sentences never enter the repository (meta.json keeps each one's
SHA-256, and each prompt's skeleton: its placeholders, marks and line breaks).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import importlib
import io
import json
import platform
import random
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SEED = 45
DEBATES = 160
FILES = (
    "interactive.py",
    "code/__init__.py",
    "code/utils/__init__.py",
    "code/utils/agent.py",
    "code/utils/openai_utils.py",
    "code/utils/config4all.json",
)
# The prompts interactive.Debate reads, and the marks each holds.
PROMPTS = (
    "player_meta_prompt",
    "moderator_meta_prompt",
    "affirmative_prompt",
    "negative_prompt",
    "moderator_prompt",
    "debate_prompt",
    "judge_prompt_last1",
    "judge_prompt_last2",
)
MARK = re.compile(r"##[a-z_]+##")
NAMES = {"Affirmative side": "affirmative", "Negative side": "negative", "Moderator": "moderator",
         "Judge": "judge"}  # fmt: skip


def extract(repo: str, commit: str, into: Path) -> None:
    """The files the debate needs, at the commit (a bare mirror or a clone)."""
    for name in FILES:
        text = subprocess.run(
            ["git", "-C", repo, "show", f"{commit}:{name}"],
            check=True, capture_output=True,
        ).stdout  # fmt: skip
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        (into / name).write_bytes(text)


def stub_imports() -> None:
    """The modules agent.py imports but a scripted debate never calls."""

    def module(name: str, **attrs: Any) -> types.ModuleType:
        made = types.ModuleType(name)
        made.__dict__.update(attrs)
        sys.modules[name] = made
        return made

    class Failure(Exception):
        pass

    errors = {n: Failure for n in ("RateLimitError", "APIError", "ServiceUnavailableError",
                                   "APIConnectionError")}  # fmt: skip
    module("openai", error=module("openai.error", **errors))
    module("backoff", on_exception=lambda *a, **k: lambda f: f, expo=None)
    module("tiktoken")


def skeleton(config: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Each prompt with its sentences as placeholders (marks, line breaks and the spacing at
    each line's ends kept), and the sentences by placeholder. A sentence met again under
    another key keeps its first placeholder."""
    sentences: dict[str, str] = {}  # sentence -> placeholder
    skeletons = {}
    for key in PROMPTS:
        short = key.removesuffix("_prompt")
        parts = []
        for piece in re.split(f"({MARK.pattern})", config[key]):
            if MARK.fullmatch(piece):
                parts.append(piece)
                continue
            lines = []
            for line in piece.split("\n"):
                text = line.strip()
                if re.search(r"[A-Za-z]", text):  # a quotation mark alone is no sentence
                    if text not in sentences:
                        count = sum(p.startswith(f"\u27e8{short}.") for p in sentences.values())
                        sentences[text] = f"\u27e8{short}.{count + 1}\u27e9"
                    line = line.replace(text, sentences[text], 1)
                lines.append(line)
            parts.append("\n".join(lines))
        skeletons[key] = "".join(parts)
    return skeletons, {placeholder: text for text, placeholder in sentences.items()}


# ---- the debates ---------------------------------------------------------------------------

TOPICS = [
    "What is {a} times {b}?",
    "A shop sells pens at {a} cents each. How many cents do {b} pens cost?",
    "If a train travels {a} km in {b} hours, what is its speed in km per hour?",
    "How many positive divisors does {a} have?",
    "What is the remainder when {a} is divided by {b}?",
    "Alice has {a} apples and gives {b} away. How many are left?",
    "Is {a} a prime number? Answer with the smallest prime factor of {a}.",
    "A rectangle is {a} by {b}. What is its area?",
    "What is the sum of the integers from 1 to {a}?",
    "Compute ({a} + {b}) * 2 - {b}.",
    "The price rose from {a} to {b}. What was the increase?",
    "Two dice are rolled. In how many of the 36 outcomes is the sum {c}?",
]
ODD_TOPICS = [
    'A "quoted" question: what is {a} + {b}?',
    "Line one of the question.\nLine two: what is {a} - {b}?",
    "Ünïcödé ✓ question — what is {a} × {b}?",
    "  A question with spaces at both ends: {a} + {b}?  ",
    "What is {{{a}}} + {b}, braces and all?",
    "A question that names ##round## and ##aff_ans## marks: {a} + {b}?",
]
OPENERS = [
    "I think the answer is {x}.",
    "Let me work through it step by step.",
    "My answer: {x}",
    "First, restate the problem.",
    "The key is to compute carefully.",
    "",
]
STEPS = [
    "{a} + {b} = {s}.",
    "Multiplying gives {p}.",
    "So we get {x}.",
    "- step one: {a}\n- step two: {b}",
    "The other side claims {y}, which ignores a condition.",
    "I disagree: the result is {x}, not {y}.",
    "I agree with your perspective that it is {x}.",
    "$$ {a} \\times {b} = {p} $$",
    "```\nprint({a} * {b})\n```",
    "Therefore, the final answer is {x}.",
    '{{"not": "a verdict"}}',
    "«quoted» text, tabs\tand trailing spaces   ",
]
ODD_REPLIES = [
    "A reply that names ##neg_ans## inside it.",
    "A reply that names ##round## inside it.",
    "A reply that names ##oppo_ans## and ##debate_topic## inside it.",
    "",
    "   \n",
]


def debater_reply(rng: random.Random, n: dict[str, int]) -> str:
    if rng.random() < 0.04:
        return rng.choice(ODD_REPLIES)
    values = {**n, "x": rng.randint(1, 999), "y": rng.randint(1, 999)}
    lines = [rng.choice(OPENERS), *rng.sample(STEPS, rng.randint(1, 4))]
    text = rng.choice(["\n\n", "\n", " "]).join(line for line in lines if line)
    text = text.format(**values)
    return rng.choice(["", " ", "\n"]) + text + rng.choice(["", "", "\n", "  "])


def quoted(rng: random.Random, value: str, double: bool) -> str:
    if double:
        return json.dumps(value, ensure_ascii=rng.random() < 0.5)
    return repr(value)


def verdict(rng: random.Random, answer: Any, preference: str | None = None) -> str:
    """A moderator's reply in its format: a Python-evaluable dict literal, written in one of
    many ways (JSON-like or Python quoting, key order, spacing, extra keys)."""
    double = rng.random() < 0.8
    items = [
        ("Whether there is a preference", preference or ("Yes" if answer != "" else "No")),
        ("Supported Side", rng.choice(["Affirmative", "Negative", ""])),
        ("Reason", rng.choice(["", "Both sides argued well.", "The negative side's step "
                                   "is wrong: 2 + 2 \u2260 5.", "It's \"clear\"."])),
    ]  # fmt: skip
    if rng.random() < 0.2:
        rng.shuffle(items)
    if rng.random() < 0.1:
        items.append(("Confidence", "high"))
    value = quoted(rng, answer, double) if isinstance(answer, str) else repr(answer)
    pairs = [f"{quoted(rng, k, double)}: {quoted(rng, v, double)}" for k, v in items]
    pairs.insert(rng.randint(0, len(pairs)), f"{quoted(rng, 'debate_answer', double)}: {value}")
    if rng.random() < 0.3:
        body = "{\n    " + ",\n    ".join(pairs) + "\n}"
    else:
        body = "{" + ", ".join(pairs) + "}"
    return rng.choice(["", " ", "\n"]) + body + rng.choice(["", "\n", " "])


# Replies its eval() cannot read: the debate crashes there (each a deliberate difference).
CRASHES = [
    lambda a: f'```json\n{{"Whether there is a preference": "Yes", "debate_answer": "{a}"}}\n```',
    lambda a: f'{{"Whether there is a preference": null, "debate_answer": "{a}"}}',
    lambda a: f'Here is my evaluation: {{"debate_answer": "{a}"}}',
    lambda a: '{"Whether there is a preference": "No", "Reason": "undecided"}',
    lambda a: f'{{"Whether there is a preference": true, "debate_answer": "{a}"}}',
]
UNREAD = ["Both answers are wrong", "the negative side", "N/A", "unknown"]


def scripted(rng: random.Random, index: int) -> dict[str, Any]:
    """One debate's inputs: its topic, max_round, and every reply each player gives."""
    n = {"a": rng.randint(2, 500), "b": rng.randint(2, 60), "c": rng.randint(2, 12)}
    n |= {"s": n["a"] + n["b"], "p": n["a"] * n["b"]}
    pattern = rng.choice(ODD_TOPICS) if rng.random() < 0.12 else rng.choice(TOPICS)
    topic = pattern.format(**n)
    max_round = rng.choice([1, 2, 2, 3, 3, 3, 3])
    end = rng.choice([*range(1, max_round + 1), None])  # the round the moderator ends at
    crash = rng.random() < 0.06
    moderator = []
    for r in range(1, max_round + 1):
        answer: Any = ""
        if r == end:
            answer = rng.choice([str(n["p"]), str(n["s"]), n["s"], f"{n['a']}.5", " 12 ", "0"])
            if rng.random() < 0.06:
                answer = rng.choice(UNREAD)
        preference = "Yes" if answer == "" and rng.random() < 0.15 else None
        if answer != "" and rng.random() < 0.1:
            preference = "No"
        moderator.append(verdict(rng, answer, preference))
        if crash and (r == end or (end is None and r == max_round)):
            moderator[-1] = rng.choice(CRASHES)(n["s"])
        if r == end:
            break
    final = rng.choice([str(n["p"]), str(n["s"]), ""])
    return {
        "id": f"debate-{index:03d}",
        "question": topic,
        "max_round": max_round,
        "replies": {
            "affirmative": [debater_reply(rng, n) for _ in range(max_round)],
            "negative": [debater_reply(rng, n) for _ in range(max_round)],
            "moderator": moderator,
            "judge": [f"Candidates: {n['p']}, {n['s']}", verdict(rng, final)],
        },
    }


# ---- running the reference -----------------------------------------------------------------


def run(
    interactive: Any, agent: Any, config: dict[str, str], case: dict[str, Any]
) -> dict[str, Any]:
    """The reference's debate on the case's replies: every request (player and messages),
    the round the moderator ended it at, the final answer, and the error it stopped on."""
    sent: list[dict[str, Any]] = []
    given = {name: list(replies) for name, replies in case["replies"].items()}

    def ask(self: Any, temperature: float | None = None) -> str:
        who = NAMES[self.name]
        sent.append({"agent": who, "messages": copy.deepcopy(self.memory_lst)})
        return given[who].pop(0)

    agent.ask = ask
    config = {**config, "debate_topic": case["question"]}
    error = None
    debate = None
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            debate = interactive.Debate(
                num_players=3, openai_api_key="none", config=config, temperature=0,
                sleep_time=0, max_round=case["max_round"],
            )  # fmt: skip
            debate.run()
        except Exception as exc:  # eval() of a reply it cannot read: the run stops there
            error = type(exc).__name__
    moderator = sum(1 for s in sent if s["agent"] == "moderator")
    judged = any(s["agent"] == "judge" for s in sent)
    answer = None if error or debate is None else debate.config["debate_answer"]
    return {
        "requests": sent,
        "ended": moderator if error is None and not judged else None,
        "final_judge": judged,
        "answer": None if answer is None else str(answer),
        "error": error,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", required=True, help="a clone or bare mirror of the reference")
    parser.add_argument("--commit", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        extract(args.repo, args.commit, Path(folder))
        stub_imports()
        sys.path.insert(0, folder)
        for name in [m for m in sys.modules if m == "code" or m.startswith("code.")]:
            del sys.modules[name]  # the reference's package, not the standard library's
        interactive = importlib.import_module("interactive")
        agent = importlib.import_module("code.utils.agent").Agent
        real = json.loads((Path(folder) / "code/utils/config4all.json").read_text())
    skeletons, sentences = skeleton(real)
    hidden = {**real, **skeletons}
    rng = random.Random(SEED)
    lines = []
    for index in range(DEBATES):
        case = scripted(rng, index)
        theirs = run(interactive, agent, real, case)
        shown = run(interactive, agent, hidden, case)
        assert reveal(shown["requests"], sentences) == theirs["requests"], case["id"]
        assert {k: v for k, v in shown.items() if k != "requests"} == {
            k: v for k, v in theirs.items() if k != "requests"
        }, case["id"]
        lines.append(json.dumps({**case, **shown}, ensure_ascii=False))
    (HERE / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    meta = {
        "reference": "github.com/Skytliang/Multi-Agents-Debate",
        "commit": args.commit,
        "seed": SEED,
        "python": platform.python_version(),
        "debates": DEBATES,
        "skeletons": skeletons,
        "sentences": {p: hashlib.sha256(t.encode()).hexdigest() for p, t in sentences.items()},
    }
    (HERE / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")


def reveal(requests: list[dict[str, Any]], sentences: dict[str, str]) -> list[dict[str, Any]]:
    """Requests with each placeholder put back as its sentence."""
    out = copy.deepcopy(requests)
    for request in out:
        for message in request["messages"]:
            for placeholder, text in sentences.items():
                message["content"] = message["content"].replace(placeholder, text)
    return out


if __name__ == "__main__":
    main()
