"""Regenerate conformance/dapo/cases.jsonl: seeded replies and golds, each scored by verl's
own DAPO reward (`verl/utils/reward_score/math_dapo.py`, `compute_score`), loaded from a verl
checkout at a pinned commit. Run by hand, never by CI; the test reads the stored facts.

    python conformance/dapo/generate.py --verl /path/to/verl --commit b178a3cd56f5... \\
        --data ../shared/data

`--verl` is a verl working tree or a bare clone (its file is then read with `git show
COMMIT:path`); the commit is required and checked, and it is recorded in meta.json with the
file's sha256. math_dapo.py imports only the standard library, so no environment is needed
beyond Python itself. The replies are our own, made from fragments here and the real golds
of AMC23, AIME24, AIME25 and MATH500 (the `--data` folder), with `--seed` (default 32).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # conformance/
from verl_source import reference_source

HERE = Path(__file__).resolve().parent
REFERENCE = "verl/utils/reward_score/math_dapo.py"

# ---- the reference, loaded --------------------------------------------------------------------


def load_reference(source: str) -> types.ModuleType:
    module = types.ModuleType("math_dapo_reference")
    exec(compile(source, REFERENCE, "exec"), module.__dict__)  # the reference, run as is
    return module


# ---- the inputs ------------------------------------------------------------------------------

FILLER = [
    "Let me set up the problem carefully.",
    "First, we note that the expression is symmetric in $x$ and $y$.",
    "Substituting $t = x + y$ gives $t^2 - 2t - 8 = 0$, so $t = 4$ or $t = -2$.",
    "By the AM-GM inequality, $\\frac{a+b}{2} \\ge \\sqrt{ab}$ with equality at $a = b$.",
    "We count the cases: there are $\\binom{6}{2} = 15$ ways to choose the pair.",
    "Hence the area is $\\frac{1}{2} \\cdot 8 \\cdot 6 = 24$ square units.",
    "Checking small cases: $n = 1, 2, 3$ give $1, 3, 6$, the triangular numbers.",
    "So the remainder when divided by $1000$ is what we need.",
    "The answer must be an integer between $0$ and $999$.",
    "**Step 2.** Now compute the sum modulo $8$.",
    "Wait, I made an arithmetic error above; let me redo it.",
    "$$\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}$$",
    "- Case 1: $x > 0$\n- Case 2: $x < 0$",
    "Therefore the probability is $\\frac{m}{n}$ with $m$ and $n$ coprime.",
    "The angle is $60^\\circ$, so the triangle is equilateral.",
    "This gives $12 \\text{ cm}$ for the shorter side.",
    "Hmm, the answer: not yet clear, we need one more step.",
]
CLOSINGS = ["", "\n", "\n\n", " ", "\nI hope it is correct.", "\n\n---", "\n\\end{document}"]
UNITS = [
    " degrees",
    " dollars",
    " cm",
    " \\text{ cm}",
    " \\mbox{ cm}^2",
    " square units",
    " ways",
    " points",
    " students",
    " km",
    "^\\circ",
    "^{\\circ}",
    " \\text{ inches}",
    " mph",
    " minutes",
]


def spaced_thousands(n: int, sep: str) -> str:
    text = f"{n:,}"
    return text.replace(",", sep)


def answer_forms(gold: str, rng: random.Random) -> list[tuple[str, str]]:
    """(tag, the text after `Answer:`) written for a gold: the ways a model writes it."""
    forms = [
        ("plain", f" {gold}"),
        ("nospace", gold),
        ("dollars", f" ${gold}$"),
        ("dollars-period", f" ${gold}$."),
        ("period", f" {gold}."),
        ("boxed", f" \\boxed{{{gold}}}"),
        ("dollar-boxed", f" $\\boxed{{{gold}}}$"),
        ("escaped-dollar", f" \\${gold}"),
        ("paren", f" \\({gold}\\)"),
        ("bold", f" **{gold}**"),
        ("equation", f" x = {gold}"),
        ("hope", f" ${gold}$. I hope it is correct."),
        ("text", f" \\text{{{gold}}}"),
        ("unit", f" {gold}{rng.choice(UNITS)}"),
        ("newline", f"\n{gold}"),
        ("newline-dollars", f"\n\n${gold}$"),
        ("tab", f"\t{gold}"),
        ("trailing", f" {gold} (after checking both cases)"),
    ]
    if gold.lstrip("-").isdigit():
        n = int(gold)
        forms += [
            ("int-wrong", f" {n + rng.choice([-3, -1, 1, 2, 10])}"),
            ("int-padded", f" {n:03d}" if n >= 0 else f" {n}"),
            ("int-unpadded", f" {n}"),
            ("int-float", f" {n}.0"),
            ("int-thousands", f" {n * 1000 + rng.randrange(1000):,}"),
            ("int-space-thousands", f" {spaced_thousands(n * 1000 + rng.randrange(1000), ' ')}"),
            ("int-thin-thousands", " " + spaced_thousands(n * 1000 + 7, "\\,")),
            ("int-plus", f" +{n}"),
            ("int-frac", f" \\frac{{{2 * n}}}{{2}}"),
            ("int-expr", f" {n - 1} + 1"),
        ]
    else:
        forms += [
            ("latex-dfrac", " " + gold.replace("\\frac", "\\dfrac")),
            ("latex-spaced", " " + " ".join(gold)),
            ("latex-nobrace", " " + gold.replace("{", "").replace("}", "")),
            ("latex-left-right", " " + gold.replace("\\left", "").replace("\\right", "")),
        ]
    return forms


def reasoning(rng: random.Random, lines: int) -> str:
    return "\n\n".join(rng.choice(FILLER) for _ in range(lines))


def reply_for(gold: str, rng: random.Random) -> tuple[str, str]:
    """(tags, reply): a real-looking reply to a question with this gold."""
    tag, form = rng.choice(answer_forms(gold, rng))
    cue = rng.choice(
        [
            "Answer:",
            "Answer:",
            "Answer:",
            "**Answer:**",
            "**Answer**:",
            "ANSWER:",
            "answer :",
            "Final Answer:",
            "Answer :",
            "Answer\n:",
        ]
    )
    body = reasoning(rng, rng.randint(0, 12))
    shape = rng.random()
    tags = [tag, f"cue={cue.strip()!r}"]
    if shape < 0.12:  # a think block first
        thought = reasoning(rng, rng.randint(1, 8))
        if rng.random() < 0.5:
            thought += f"\nAnswer: {rng.choice([gold, '7', '12'])}"
        reply = f"<think>\n{thought}\n</think>\n\n{body}\n\n{cue}{form}"
        tags.append("think")
    elif shape < 0.2:  # an earlier answer line, then the final one
        early = rng.choice([gold, "3", "\\frac12", "0"])
        reply = f"{body}\nAnswer: {early}\n\nWait, let me re-check.\n{cue}{form}"
        tags.append("two-answers")
    elif shape < 0.27:  # cut off by the token limit
        full = f"{body}\n\n{cue}{form}"
        reply = full[: rng.randint(max(1, len(full) // 2), len(full))]
        tags.append("truncated")
    elif shape < 0.33:  # the answer line, then a long afterword past the window
        after = reasoning(rng, rng.randint(1, 6))
        reply = f"{body}\n\n{cue}{form}\n\n{after}"
        tags.append("afterword")
    elif shape < 0.38:  # the answer first, in a markdown heading or list
        reply = f"## Solution\n\n{body}\n\n- {cue}{form}"
        tags.append("markdown")
    elif shape < 0.42:  # Minerva's sentence
        reply = f"{body}\n\nFinal Answer: The final answer is ${gold}$. I hope it is correct."
        tags.append("minerva")
    else:
        reply = f"{body}\n\n{cue}{form}{rng.choice(CLOSINGS)}"
    return ",".join(tags), reply


ADVERSARIAL = [
    "",
    "   ",
    "Answer:",
    "Answer: ",
    "Answer:   \n",
    "Answer:\n\n",
    "Answer: $$",
    "Answer: \\boxed{",
    "Answer: \\boxed{}",
    "Answer: \\boxed{\\boxed{5}}",
    "Answer: \\frac12",
    "Answer: \\frac1{2}",
    "Answer: \\frac{1}2",
    "Answer: frac",
    "Answer: \\sqrt2",
    "Answer: 2\\sqrt3",
    "Answer: sqrt",
    "Answer: a = b = 5",
    "Answer: ==5",
    "Answer: 5=",
    "Answer: 1 \\text{and} 2",
    "Answer: 1,\\text{and} 2",
    "Answer: 1, 2, \\ldots",
    "Answer: \\text{an apple}",
    "Answer: a 5",
    "Answer: issue 5",
    "Answer: 5 \\text{m}",
    "Answer: 5\\;000",
    "Answer: 5{,}000",
    "Answer: 5,\\!000",
    'Answer: "5"',
    "Answer: \\overline{5}",
    "Answer: \\textbf{5}",
    "Answer: \\text{\\frac{1}{2}}",
    "Answer: $1$ and $2$",
    "Answer: $1$, $2$, $3$",
    "Answer: $\\$5$",
    "Answer: 5\\%",
    "Answer: 5%",
    "Answer: ① ② ③",
    "Answer: ²",
    "Answer: ٣",
    "Answer:\u00a05",
    "Answer\u2003:\u20035",
    "ANſWER: 5",
    "answer:answer: 5",
    "Answer: 5 Answer: 6",
    "The answer is 5.",
    "\\boxed{5}",
    "Answer: [INVALID]",
    "Answer: \r\n5",
    "Answer: 5\r",
    "Answer: \\text{\n}5",
    "Answer: 5^\\circ C",
    "Answer: 1 000",
    "Answer: 1\\,000",
    "Answer: 1\\ 000",
    "Answer: \\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
    "Answer: \\begin{pmatrix}1\\\\2\\end{pmatrix}",
    "Answer: (1, 2)",
    "Answer: \\left( 3, \\frac{\\pi}{2} \\right)",
    "Answer: [0, 1)",
    "Answer: \\infty",
    "Answer: -\\infty",
    "Answer: x^2+1",
    "Answer: x^2 + 1",
    "Answer: \\{1, 2\\}",
    "Answer: 0.5",
    "Answer: .5",
    "Answer: 1/2",
    "Answer: \\frac{1}{2}",
    "Answer: \\tfrac{1}{2}",
    "Answer: 50\\%",
    "Answer: \\pi",
    "Answer: $\\pi$. I hope it is correct.",
    "Answer: 2\\pi",
    "Answer: \\text{(C)}",
    "Answer: (C)",
    "Answer: C",
]
ADVERSARIAL_GOLDS = ["5", "1", "2", "1000", "\\frac{1}{2}", "\\pi", "(C)", "C", "0.5", "25"]


def cases(data: Path, seed: int) -> list[dict[str, str]]:
    """The inputs: every case's id, tags, reply and gold, in a fixed order."""
    rng = random.Random(seed)
    golds: dict[str, list[str]] = {}
    for name in ("amc23", "aime24", "aime25", "math500"):
        with open(data / f"{name}.jsonl", encoding="utf-8") as rows:
            golds[name] = [json.loads(line)["answer"] for line in rows if line.strip()]
    made: list[dict[str, str]] = []

    def add(source: str, tags: str, reply: str, gold: str) -> None:
        made.append(
            {
                "id": f"dapo-{len(made):05d}",
                "source": source,
                "tags": tags,
                "reply": reply,
                "gold": gold,
            }
        )

    for name, weight in (("amc23", 500), ("aime24", 500), ("aime25", 500), ("math500", 600)):
        for _ in range(weight):
            gold = rng.choice(golds[name])
            tags, reply = reply_for(gold, rng)
            add(name, tags, reply, gold)
    # Each AIME/AMC gold once in every way of writing it, so every gold is seen exactly.
    for name in ("amc23", "aime24", "aime25"):
        for gold in golds[name]:
            for tag, form in answer_forms(gold, rng):
                add(name, f"form:{tag}", f"{reasoning(rng, 2)}\n\nAnswer:{form}", gold)
    for text in ADVERSARIAL:
        for gold in ADVERSARIAL_GOLDS:
            add("adversarial", "adversarial", text, gold)
    # The window's edge: an answer line starting just inside, at, and just outside it.
    for shift in range(-12, 13):
        line = "Answer: 204"
        pad = "x" * (300 - len(line) + shift)
        add("window", f"window{shift:+d}", f"{line}\n{pad}"[-400:], "204")
    # Reasoning inside the window: an answer line only in a think block before a short
    # final content, read by verl's window and never by a protocol that drops reasoning.
    for name in ("amc23", "aime24", "aime25"):
        for gold in golds[name][:15]:
            thought = f"{reasoning(rng, 3)}\nAnswer: {gold}"
            final = rng.choice(["The result is above.", f"So it is {gold}.", "Done."])
            add(name, "think-window", f"<think>\n{thought}\n</think>\n\n{final}", gold)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verl", type=Path, required=True, help="a verl checkout or bare clone")
    parser.add_argument("--commit", required=True, help="the verl commit to read it at")
    parser.add_argument("--data", type=Path, required=True, help="the benchmark JSONL folder")
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    source = reference_source(args.verl, args.commit, REFERENCE)
    reference = load_reference(source)
    inputs = cases(args.data, args.seed)
    with open(args.out / "cases.jsonl", "w", encoding="utf-8") as out:
        for case in inputs:
            scored = reference.compute_score(case["reply"], case["gold"])
            case["verl"] = {
                "score": scored["score"],
                "acc": bool(scored["acc"]),
                "pred": scored["pred"],
            }
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    meta = {
        "reference": "verl",
        "file": REFERENCE,
        "function": "compute_score(solution_str, ground_truth) with its defaults",
        "commit": args.commit,
        "sha256": hashlib.sha256(source.encode()).hexdigest(),
        "seed": args.seed,
        "cases": len(inputs),
        "right": sum(1 for c in inputs if c["verl"]["acc"]),
    }
    (args.out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{len(inputs)} cases, {meta['right']} right under verl, in {args.out}")


if __name__ == "__main__":
    main()
