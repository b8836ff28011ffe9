"""Regenerate cases.jsonl: Math-Verify's regression cases and generated replies, each with the
outcome the pinned references give. Run by hand, never by CI (it needs the references).

What it records (facts: the references' outputs on these inputs; no reference code is kept):

- `regression` cases: every parametrized case of Math-Verify's own grading tests (the
  `compare_strings` tests and test_yujianll.py), read from its test modules as data: gold,
  prediction, the result the test expects, the test's configuration, and `math_verify`, what
  the installed Math-Verify actually returns for it under that configuration (the test's own
  helper, called). `verl` is verl's `math_verify.compute_score(pred, gold)` on the same pair.
- `generated` cases: model-like replies built from this script's own fragments around the
  real golds of MATH500, AIME 2024/2025 and AMC 2023 (--data), plus adversarial replies,
  seeded, so the inputs are the same on every run. `verl` is verl's
  `math_verify.compute_score(reply, gold)` (1.0 or 0.0) as a bool; `final_verl` is the same on
  the reply's final content, for replies with reasoning where a reasoning model's format puts
  it: what follows the first `</think>` of a reply that opens with `<think>`, or of a reply
  holding a `</think>` that no `<think>` opens (the chat template opened the block);
  `extracted` is what Math-Verify's parse finds in the reply (the prediction's extraction
  targets, as strings), to read a difference by.

A case whose reference call ran into one of Math-Verify's own timeouts is left out (its
outcome depends on the machine), and counted in the header.

How to run it (from the repository root; Python 3.11):

    python3 -m venv /tmp/mv-venv && /tmp/mv-venv/bin/pip install math-verify==0.9.0 pytest
    git clone https://github.com/huggingface/Math-Verify /tmp/Math-Verify
    git -C /tmp/Math-Verify checkout 5d148cfaaf99214c2e4ffb4bc497ab042c592a7a
    git clone https://github.com/volcengine/verl /tmp/verl
    git -C /tmp/verl checkout b178a3cd56f58b2d502255daba591e92833930a7
    /tmp/mv-venv/bin/python conformance/math_verify/generate.py \\
        --math-verify-tests /tmp/Math-Verify --verl /tmp/verl --data /path/to/data

--data holds math500.jsonl, aime24.jsonl, aime25.jsonl and amc23.jsonl (mad-eval's local
benchmark files). Another math-verify version, or a checkout at another commit, is refused
(a tree exported without .git is taken to be the pinned commit). The first line of
cases.jsonl is a header naming the versions used. The inputs are seeded: the same
references write the same file, byte for byte.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.util
import json
import logging
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

MATH_VERIFY_VERSION = "0.9.0"
MATH_VERIFY_COMMIT = "5d148cfaaf99214c2e4ffb4bc497ab042c592a7a"
VERL_COMMIT = "b178a3cd56f58b2d502255daba591e92833930a7"
VERL_FILE = "verl/utils/reward_score/math_verify.py"
SEED = 32
# The test modules whose cases grade a prediction against a gold (the others test the API:
# timeouts, errors, string extraction for choices, extraction configs).
REGRESSION_MODULES = (
    "test_all",
    "test_boxed",
    "test_numina_cases",
    "test_open_thoughts",
    "test_strict",
    "test_yujianll",
)
BENCHMARKS = ("math500", "aime24", "aime25", "amc23")


# ---- the references ----------------------------------------------------------------------


class TimeoutSeen(logging.Handler):
    """Math-Verify logs its own timeouts ("Timeout during ...") and carries on."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = False

    def emit(self, record: logging.LogRecord) -> None:
        if "Timeout" in record.getMessage():
            self.seen = True


def load_verl(root: Path) -> Any:
    """verl's math_verify module, loaded from its file alone (it imports only math_verify)."""
    spec = importlib.util.spec_from_file_location("verl_math_verify", root / VERL_FILE)
    assert spec and spec.loader, f"no {VERL_FILE} under {root}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def commit_of(root: Path) -> str | None:
    """The commit of a git checkout (None: not a checkout of its own, e.g. an export)."""
    if not (root / ".git").exists():
        return None
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, check=True
        )
        return out.stdout.decode().strip()
    return None


# ---- Math-Verify's regression cases ------------------------------------------------------


def _keywords(call: ast.Call) -> dict[str, Any]:
    """A test's call as data: constants as values, a parameter's name as ("param", name)."""
    found: dict[str, Any] = {}
    for kw in call.keywords:
        if isinstance(kw.value, ast.Name):
            found[kw.arg] = ("param", kw.value.id)
        else:
            found[kw.arg] = ast.literal_eval(kw.value)
    return found


def _test_calls(source: str) -> dict[str, dict[str, Any] | None]:
    """Per test function: the keywords of its compare_strings call, or None when it calls
    verify(parse(gold), parse(pred)) with Math-Verify's defaults."""
    calls: dict[str, dict[str, Any] | None] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test_"):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                if sub.func.id == "compare_strings":
                    calls[node.name] = _keywords(sub)
                    break
                if sub.func.id == "verify" and node.name not in calls:
                    calls[node.name] = None
    return calls


def regression_cases(checkout: Path) -> Iterator[dict[str, Any]]:
    """Every parametrized grading case of the test modules, with the test's configuration."""
    sys.path.insert(0, str(checkout))
    for name in REGRESSION_MODULES:
        module = importlib.import_module(f"tests.{name}")
        calls = _test_calls((checkout / "tests" / f"{name}.py").read_text())
        for func, call in calls.items():
            marks = [m for m in getattr(getattr(module, func), "pytestmark", [])]
            for mark in marks:
                if mark.name != "parametrize":
                    continue
                argnames = [a.strip() for a in mark.args[0].split(",")]
                for i, values in enumerate(mark.args[1]):
                    values = getattr(values, "values", values)
                    params = dict(zip(argnames, values, strict=True))
                    expected = params.get("expected", params.get("result"))
                    config: dict[str, Any] = {
                        "match_types": ["latex", "expr"],
                        "precision": 6,
                        "strict": True,
                        "allow_set_relation_comp": False,
                        "boxed_priority": 0,
                        "gold_searched": True,
                    }
                    if call is None:  # verify(parse(gold), parse(pred)): parse's defaults
                        config.update(match_types=["latex", "expr"], boxed_priority=50)
                    else:
                        for key, value in call.items():
                            config[key] = params[value[1]] if isinstance(value, tuple) else value
                    yield {
                        "id": f"reg-{name}-{func}-{i}",
                        "source": f"tests/{name}.py::{func}[{i}]",
                        "gold": params["gold"],
                        "reply": params["pred"],
                        "expected": bool(expected),
                        "config": config,
                    }


def run_regression(case: dict[str, Any]) -> bool:
    """Math-Verify's own result for a regression case, by the test's own call."""
    from math_verify import parse, verify
    from tests.test_all import compare_strings

    config = case["config"]
    if config["boxed_priority"] == 50:
        return bool(verify(parse(case["gold"]), parse(case["reply"])))
    return bool(
        compare_strings(
            case["gold"],
            case["reply"],
            match_types=config["match_types"],
            precision=config["precision"],
            strict=config["strict"],
            allow_set_relation_comp=config["allow_set_relation_comp"],
        )
    )


# ---- generated replies -------------------------------------------------------------------

OPENINGS = [
    "Let me work through this step by step.",
    "We need to find the requested quantity.",
    "First, I'll restate what is given.",
    "Okay, let's set this up carefully.",
    "To solve this, consider the structure of the problem.",
]
STEPS = [
    "Expanding gives $x^2 + 5x + 6 = 0$, so $(x+2)(x+3) = 0$.",
    "The sum of the first $n$ terms is $\\frac{n(n+1)}{2}$, which for $n = 10$ is $55$.",
    "By symmetry the two halves contribute equally, so we double $12$ to get $24$.",
    "Checking the boundary case $k = 0$ gives $1$, which is consistent.",
    "Substituting back, $3(4) - 2 = 10$, as required.",
    "Note that $2^{10} = 1024$ and $1024 \\bmod 7 = 2$.",
    "The area of the triangle is $\\frac{1}{2} \\cdot 6 \\cdot 8 = 24$.",
    "So the probability is $\\frac{3}{8}$ for a single trial.",
    "Hence $a + b = 17$ and $ab = 60$.",
    "This leaves $\\sqrt{49} = 7$ as the only positive root.",
    "Wait, I should double-check the arithmetic: $17 \\times 3 = 51$.",
    "Let $y = x - 1$; then the equation becomes $y^2 = 4$.",
]
CLOSINGS = [
    "Therefore, the final answer is $\\boxed{{{a}}}$.",
    "**Final Answer**\n\\[\\boxed{{{a}}}\\]",
    "The final answer is ${a}$. I hope it is correct.",
    "Answer: {a}",
    "**Answer:** ${a}$",
    "So the answer is \\({a}\\).",
    "Thus the answer is $\\boxed{{{a}}}$",
    "The answer is: $$\\boxed{{{a}}}$$",
    "\\boxed{{{a}}}",
    "Final answer: {a}",
    "So we get {a}.",
    "The result is $x = {a}$.",
    "$$\\boxed{{x = {a}}}$$",
    "Putting it together: $\\boxed{{\\boxed{{{a}}}}}$.",
    "The final answer is $\\boxed{{{a}}}$. But wait, could it be ${w}$? No, it is ${a}$.",
    "It is either $\\boxed{{{w}}}$ or $\\boxed{{{a}}}$; the second one holds.",
    "The answer is $\\boxed{{{a}}}$ and not $\\boxed{{{w}}}$.",
    "So the final answer is $\\boxed{{{a}}}$, i.e. {a}.",
]


def integer_variants(gold: str, rng: random.Random) -> list[str]:
    """Ways a model writes an integer gold (or a near miss)."""
    n = int(gold)
    out = [str(n), f"{n}.0", f"{n:,}", f"0{n}" if n >= 0 else str(n), str(n + 1), str(-n)]
    out += [f"{n}\\%", f"{n}^\\circ", f"{n} \\text{{ cm}}", f"\\text{{{n}}}"]
    out += [f"{n:,}".replace(",", " ")]
    out += [f"{n}.", f"\\mathbf{{{n}}}", f"{n} \\text{{ ways}}", f"x={n}", f"{n}/1", f"{2 * n}/2"]
    rng.shuffle(out)
    return out


def latex_variants(gold: str) -> list[str]:
    """Ways a model writes a LaTeX gold (or a near miss)."""
    out = [gold, gold.replace("\\frac", "\\dfrac"), gold.replace(" ", ""), f"{gold}."]
    if m := re.fullmatch(r"(-?)\\d?frac\{(\d+)\}\{(\d+)\}", gold):
        value = int(m.group(2)) / int(m.group(3)) * (-1 if m.group(1) else 1)
        out += [f"{value:.6f}", f"{value:.2f}", f"{m.group(1)}{m.group(2)}/{m.group(3)}"]
        out += [f"{value * 100:g}\\%", f"{m.group(1)}\\frac{{{m.group(3)}}}{{{m.group(2)}}}"]
    out += [gold.replace("\\left", "").replace("\\right", ""), f"\\text{{{gold}}}"]
    out += [gold.replace("\\pi", "\\cdot \\pi"), gold.replace("1", "2"), f"-{gold}"]
    out += [gold.replace("\\sqrt{", "\\sqrt"), f"{gold} \\text{{ units}}", f"({gold})"]
    return out


def reply(
    rng: random.Random, answer: str, wrong: str, opened: bool = False
) -> tuple[str, str | None]:
    """(a reply ending with `answer`, its final content when it opens with reasoning);
    `opened`: a reasoning model's reply whose `<think>` the chat template wrote, so the reply
    holds only the close."""
    steps = rng.sample(STEPS, rng.randint(1, 6))
    if rng.random() < 0.1:  # a long derivation
        steps = [rng.choice(STEPS) for _ in range(rng.randint(40, 120))]
    body = " ".join([rng.choice(OPENINGS), *steps])
    if rng.random() < 0.3:
        body = body.replace(". ", ".\n\n")
    closing = rng.choice(CLOSINGS).format(a=answer, w=wrong)
    style = 0.0 if opened else rng.random()
    if style < 0.25:  # a reasoning model: a think block, then a short final part
        considered = rng.choice([f"Maybe it is \\boxed{{{wrong}}}.", f"I think it's {wrong}.", ""])
        final = f"{rng.choice(steps)}\n\n{closing}"
        return f"{'' if opened else '<think>'}\n{body} {considered}\n</think>\n\n{final}", final
    if style < 0.35:  # cut off before its end
        text = f"{body}\n\n{closing}"
        return text[: rng.randint(len(body) // 2, len(text) - 1)], None
    if style < 0.45:  # markdown
        return f"## Solution\n\n- {body}\n\n---\n\n{closing}\n", None
    return f"{body}\n\n{closing}", None


ADVERSARIAL = [
    "",
    "   \n  ",
    "\\boxed{}",
    "\\boxed{",
    "\\boxed{{{a}",
    "\\boxed{{{a}}}}}}}",
    "{{{{{{{{{{{{{{{{{{{{",
    "$$$$$$$$",
    "$",
    "\\boxed{{\\boxed{{\\boxed{{{a}}}}}}}",
    "The answer is $\\boxed{{{a}}$.",
    "I don't know.",
    "The answer is {a} apples.",
    "<think>The answer is {a}.</think>",
    "<think>\\boxed{{{w}}}</think>\n\nThe answer is $\\boxed{{{a}}}$.",
    "<think>I am sure it is \\boxed{{{a}}}</think>\n\nActually the answer is {w}.",
    "```python\nprint({a})\n```\nThe code prints the answer.",
    "<b>{a}</b>",
    "\\boxed{{{a}}} \\boxed{{{w}}}",
    "\\(\\boxed{{{a}}}\\) \\( \\)",
    "Answer: \\$ {a}",
    "Answer: $\\$ {a}$",
    "{a} or {w}",
    "$ {a} $ and $ {w} $",
    "\\boxed{{\\text{{{a}}}}}",
    "\\boxed{{{a}}}\n\n" + "x" * 3000,
    "y" * 5000 + "\n\nThe answer is $\\boxed{{{a}}}$.",
    "\\boxed{{1/0}}",
    "\\boxed{{\\infty}}",
    "\\boxed{{\\text{{no solution}}}}",
    "\\boxed{{\\frac{{1}}{{0}}}}",
    "\\boxed{{{a} + 0}}",
    "\\boxed{{{a} \\cdot 1}}",
    "\\boxed{{\\frac{{{a}}}{{1}}}}",
    "The final answer is $\\pm {a}$.",
    "\\[ \\boxed{{{a}}} \\]\n\\[ \\boxed{{{w}}} \\]",
    "Final Answer: The final answer is {a}. I hope it is correct.",
    "final answer is {w}, no wait, final answer is {a}",
    "\u00e9\u00e8 \u4e2d\u6587 \\boxed{{{a}}} \u2764",
    "\\boxed{{{a}}}\u200b",
    "answer: " + "(" * 40 + "{a}" + ")" * 40,
    "\\boxed{{ {a} }}",
    "\\fbox{{{a}}}",
    "The value is \\boxed {{{a}}}.",
    "So $\\text{{Answer}} = {a}$.",
    # Only the close of a reasoning block (the chat template wrote its <think>).
    "The answer is $\\boxed{{{a}}}$.</think> Let me present it cleanly.",
    "\\boxed{{{a}}}</think>",
    "Maybe \\boxed{{{w}}}.\n</think>\n\nThe answer is $\\boxed{{{a}}}$.",
    "I think it's {a}.</think>\n\nThe answer is {w}.",
    "</think>\n\nThe answer is $\\boxed{{{a}}}$.",
    "It is \\boxed{{{a}}}</think>\n\nSo \\boxed{{{w}}}</think> stays.",
]


def final_content(text: str) -> str | None:
    """The final content after reasoning where a reasoning model's format puts it (a block
    the reply opens with, or all up to a first `</think>` no `<think>` opens); None: none."""
    head, close, tail = text.partition("</think>")
    if close and (head.startswith("<think>") or "<think>" not in head):
        return tail
    return None


def benchmark_golds(data: Path) -> list[tuple[str, str]]:
    """(question id, gold) of every row of the four benchmarks."""
    golds = []
    for name in BENCHMARKS:
        for line in (data / f"{name}.jsonl").read_text().splitlines():
            row = json.loads(line)
            golds.append((row["id"], str(row["answer"]).strip()))
    return golds


def generated_cases(data: Path) -> Iterator[dict[str, Any]]:
    """Replies around each real gold, then adversarial replies on a few golds."""
    rng = random.Random(SEED)
    golds = benchmark_golds(data)
    for qid, gold in golds:
        is_int = gold.lstrip("-").isdigit()
        variants = integer_variants(gold, rng) if is_int else latex_variants(gold)
        wrong = str(int(gold) + 7) if is_int else "\\frac{7}{3}"
        picks = [gold, *rng.sample(variants, 3)]
        for j, answer in enumerate(picks):
            text, final = reply(rng, answer, wrong)
            yield {"id": f"gen-{qid}-{j}", "gold": gold, "reply": text, "final": final}
    sample = rng.sample(golds, 20)
    for k, template in enumerate(ADVERSARIAL):
        for qid, gold in sample[:4] if k % 2 else sample[4:8]:
            wrong = "17" if gold != "17" else "18"
            text = template.replace("{a}", "\0").replace("{w}", "\1")
            text = text.replace("{{", "{").replace("}}", "}").replace("\0", gold)
            text = text.replace("\1", wrong)
            yield {
                "id": f"adv-{k}-{qid}",
                "gold": gold,
                "reply": text,
                "final": final_content(text),
            }
    # Reasoning models whose chat template opened the block: the reply holds only the close.
    for qid, gold in rng.sample(golds, 60):
        is_int = gold.lstrip("-").isdigit()
        wrong = str(int(gold) + 7) if is_int else "\\frac{7}{3}"
        text, final = reply(rng, gold, wrong, opened=True)
        yield {"id": f"closed-{qid}", "gold": gold, "reply": text, "final": final}


# ---- running them ------------------------------------------------------------------------


def extracted(text: str) -> list[str] | None:
    """The strings of what Math-Verify's parse finds with verl's prediction targets."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse
    from math_verify.errors import TimeoutException
    from math_verify.utils import timeout

    found = parse(text, [ExprExtractionConfig(), LatexExtractionConfig()])
    try:
        return timeout(2)(lambda: [str(x) for x in found])()
    except (Exception, TimeoutException):  # a str() that ran too long: nothing to show
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--math-verify-tests",
        type=Path,
        required=True,
        help="a checkout of huggingface/Math-Verify at " + MATH_VERIFY_COMMIT,
    )
    parser.add_argument(
        "--verl", type=Path, required=True, help="a checkout of volcengine/verl at " + VERL_COMMIT
    )
    parser.add_argument("--data", type=Path, required=True, help="mad-eval's local benchmarks")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "cases.jsonl")
    args = parser.parse_args()

    version = metadata.version("math-verify")
    if version != MATH_VERIFY_VERSION:
        sys.exit(f"math-verify {MATH_VERIFY_VERSION} is the pinned version; this is {version}")
    for root, pinned in ((args.math_verify_tests, MATH_VERIFY_COMMIT), (args.verl, VERL_COMMIT)):
        found = commit_of(root)
        if found not in (None, pinned):
            sys.exit(f"{root} is at commit {found}; check out the pinned {pinned}")
    verl = load_verl(args.verl)
    seen = TimeoutSeen()
    logger = logging.getLogger("math_verify")
    logger.addHandler(seen)
    logger.propagate = False

    cases, dropped = [], 0
    for case in [*regression_cases(args.math_verify_tests), *generated_cases(args.data)]:
        seen.seen = False
        if case["id"].startswith("reg-"):
            case["math_verify"] = run_regression(case)
        case["verl"] = bool(verl.compute_score(case["reply"], case["gold"]) == 1.0)
        if case.get("final") is not None:
            case["final_verl"] = bool(verl.compute_score(case["final"], case["gold"]) == 1.0)
        case.pop("final", None)
        case["extracted"] = extracted(case["reply"])
        if seen.seen:
            dropped += 1
            continue
        cases.append(case)

    header = {
        "header": True,
        "math_verify": version,
        "math_verify_commit": MATH_VERIFY_COMMIT,
        "verl_commit": VERL_COMMIT,
        "verl_file": VERL_FILE,
        "packages": {p: metadata.version(p) for p in ("latex2sympy2_extended", "sympy")},
        "python": sys.version.split()[0],
        "seed": SEED,
        "cases": len(cases),
        "regression": sum(c["id"].startswith("reg-") for c in cases),
        "dropped_for_timeouts": dropped,
    }
    with args.out.open("w") as out:
        for record in (header, *cases):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases written to {args.out} ({dropped} left out for timeouts)")


if __name__ == "__main__":
    main()
