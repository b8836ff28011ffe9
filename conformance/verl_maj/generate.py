"""Regenerate conformance/verl_maj/cases.jsonl: seeded sets of K answers per question, each
scored by verl's own `process_validation_metrics` (`verl/trainer/ppo/metric_utils.py`), read
from a verl checkout at a pinned commit. Run by hand, never by CI.

    python conformance/verl_maj/generate.py --verl /path/to/verl --commit b178a3cd56f5...

`--verl` is a verl working tree (at the commit) or a bare clone (read with `git show`). The
module imports torch and verl's own packages for functions these cases never call, so
this script puts empty stand-ins for them in `sys.modules` before running the file as it
is; process_validation_metrics needs only NumPy (any version: its legacy RandomState stream
is frozen), whose version is recorded in meta.json with the commit and the file's sha256.

Each case is one question: K answers (a string, or null for no answer, which verl sees as
"[INVALID]"; the last 400 draw an answer written as "[INVALID]" too) and whether each is
right; verl's maj@K/mean and maj@K/std for it come from a
data source of its own. Each set is one dataset of questions sharing K, verl's number for
the whole data source (the mean over its questions).
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
import numpy as np
from verl_source import reference_source

HERE = Path(__file__).resolve().parent
REFERENCE = "verl/trainer/ppo/metric_utils.py"
INVALID = "[INVALID]"  # what verl's DAPO reward predicts for a reply with no answer


def load_reference(source: str) -> types.ModuleType:
    """The module, run as is, with empty stand-ins for the imports it does not need here."""

    def package(name: str, **attributes: object) -> None:
        stand_in = types.ModuleType(name)
        stand_in.__path__ = []  # type: ignore[attr-defined]
        stand_in.__dict__.update(attributes)
        sys.modules[name] = stand_in

    package("torch")
    package("verl", DataProto=object)
    package("verl.utils")
    package("verl.utils.torch_functional")
    package("verl.utils.import_utils", deprecated=lambda *a, **k: lambda function: function)
    module = types.ModuleType("metric_utils_reference")
    exec(compile(source, REFERENCE, "exec"), module.__dict__)
    return module


def question(rng: random.Random, k: int, literal: bool = False) -> dict[str, list]:
    """K answers to one question: the gold "g", a few wrong ones, no answer (null); with
    `literal`, also an answer written as verl's "[INVALID]" itself."""
    shape = rng.random()
    pool: list[str | None] = ["g", "w1", "w2", "w3", "w4", None]
    if literal:
        pool = ["g", "w1", "w2", None, INVALID]
    if shape < 0.1:  # all the same
        answers = [rng.choice(pool)] * k
    elif shape < 0.25:  # an exact tie between two answers, as far as K allows
        a, b = rng.sample(pool, 2)
        answers = [a, b] * (k // 2) + [rng.choice(pool)] * (k % 2)
        rng.shuffle(answers)
    else:  # skewed towards a few answers
        weights = [rng.random() ** rng.choice([1, 2, 4]) for _ in pool]
        answers = rng.choices(pool, weights=weights, k=k)
    return {"answers": answers, "correct": [a == "g" for a in answers]}


def verl_maj(reference: types.ModuleType, questions: list[dict[str, list]]) -> list[dict]:
    """verl's maj@K/mean and /std of each question (a data source each), as it computes them."""
    sources, uids, acc, pred = [], [], [], []
    for i, q in enumerate(questions):
        for answer, right in zip(q["answers"], q["correct"], strict=True):
            sources.append(f"q{i}")
            uids.append(f"q{i}")
            acc.append(float(right))
            pred.append(INVALID if answer is None else answer)
    found = reference.process_validation_metrics(sources, uids, {"acc": acc, "pred": pred})
    out = []
    for i, q in enumerate(questions):
        metrics = found[f"q{i}"]["acc"]
        k = len(q["answers"])
        out.append(
            {
                "mean": float(metrics[f"maj@{k}/mean"]),
                "std": float(metrics[f"maj@{k}/std"]),
                "mean@k": float(metrics[f"mean@{k}"]),
            }
        )
    return out


def verl_set(reference: types.ModuleType, questions: list[dict[str, list]]) -> float:
    """verl's maj@K/mean of one data source holding all these questions (one uid each)."""
    sources, uids, acc, pred = [], [], [], []
    for i, q in enumerate(questions):
        for answer, right in zip(q["answers"], q["correct"], strict=True):
            sources.append("set")
            uids.append(f"q{i}")
            acc.append(float(right))
            pred.append(INVALID if answer is None else answer)
    found = reference.process_validation_metrics(sources, uids, {"acc": acc, "pred": pred})
    return float(found["set"]["acc"][f"maj@{len(questions[0]['answers'])}/mean"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verl", type=Path, required=True, help="a verl checkout or bare clone")
    parser.add_argument("--commit", required=True, help="the verl commit to read it at")
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    source = reference_source(args.verl, args.commit, REFERENCE)
    reference = load_reference(source)
    rng = random.Random(args.seed)
    ks = [2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 20, 32, 33, 64]
    questions = [question(rng, rng.choice(ks)) for _ in range(2400)]
    scored = verl_maj(reference, questions)
    sets = []
    for number in range(24):  # datasets of 30 questions (an AIME) sharing one K
        k = ks[number % len(ks)]
        members = [question(rng, k) for _ in range(30)]
        sets.append({"id": f"set-{number:02d}", "k": k, "questions": members})
        sets[-1]["verl"] = {"mean": verl_set(reference, members)}
    # Answers that write "[INVALID]" themselves, among unparsed ones: verl counts the two as
    # one answer (drawn after the others, so their inputs stay as they were).
    literal = [{"answers": [None, INVALID, "g"], "correct": [False, False, True]}]
    literal += [question(rng, rng.choice(ks), literal=True) for _ in range(399)]
    questions += literal
    scored += verl_maj(reference, literal)
    for number in range(24, 26):
        k = ks[number % len(ks)]
        members = [question(rng, k, literal=True) for _ in range(30)]
        sets.append({"id": f"set-{number:02d}", "k": k, "questions": members})
        sets[-1]["verl"] = {"mean": verl_set(reference, members)}
    with open(args.out / "cases.jsonl", "w", encoding="utf-8") as out:
        for i, (q, verl) in enumerate(zip(questions, scored, strict=True)):
            case = {"id": f"maj-{i:05d}", "k": len(q["answers"]), **q, "verl": verl}
            out.write(json.dumps(case) + "\n")
        for case in sets:
            out.write(json.dumps(case) + "\n")
    meta = {
        "reference": "verl",
        "file": REFERENCE,
        "function": "process_validation_metrics(data_sources, sample_uids, infos_dict), seed 42",
        "commit": args.commit,
        "sha256": hashlib.sha256(source.encode()).hexdigest(),
        "numpy": np.__version__,
        "seed": args.seed,
        "cases": len(questions),
        "sets": len(sets),
    }
    (args.out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{len(questions)} questions and {len(sets)} sets in {args.out}")


if __name__ == "__main__":
    main()
