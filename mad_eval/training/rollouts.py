"""Rollouts to build self-debate data from: a `mad-eval single` run (each round-0 turn is one
rollout) or a JSON Lines file of (prompt id, question, gold, response), graded here with the
evaluation's own grader and an answer protocol (a run's own, unless another is asked for)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mad_eval.data.benchmarks import read_jsonl
from mad_eval.debate.replay import run_questions
from mad_eval.grading.grader import KINDS, check_answer_protocol, get_kind, grade
from mad_eval.store.files import StoreError
from mad_eval.store.folder import RunStore

# The generic file's fields, with the names also accepted for each.
FIELDS = {
    "prompt_id": ("prompt_id", "id", "question_id"),
    "question": ("question", "problem", "prompt"),
    "gold": ("gold", "answer", "ground_truth"),
    "response": ("response", "completion", "text"),
}


@dataclass(frozen=True)
class Rollout:
    prompt_id: str
    question: str
    gold: str
    response: str
    answer: str | None  # the extracted final answer, None when there is none
    correct: bool
    source: str  # where it came from: a run's turn key, or a file's line
    options: tuple[str, ...] = ()  # a choice or preference question's options, A first
    grade_timed_out: bool = False  # math-verify could not decide: wrong, matched by text only


@dataclass(frozen=True)
class Rollouts:
    items: list[Rollout]
    benchmark: str  # the data source recorded with each pair
    kind: str  # the benchmark's kind: verl's `ability`
    answer: str = "boxed"  # the answer protocol the rollouts were graded with


def read_rollouts(path: Path, data_dir: Path | None = None, answer: str | None = None) -> Rollouts:
    """A run folder (its round-0 turns, grades as recorded unless `answer` names another
    protocol than the run's; `data_dir` only for a folder recorded before questions.jsonl)
    or a JSON Lines file (graded with `answer`, else the default)."""
    path = Path(path)
    if path.is_dir():
        return _from_run(path, data_dir, answer)
    if not path.is_file():
        raise StoreError(f"{path} is neither a run folder nor a JSON Lines file of rollouts.")
    return _from_jsonl(path, answer)


def answer_protocol(kind: str, answer: str | None) -> str:
    """The protocol's name (None: the kind's default); one the kind cannot use is refused."""
    try:
        return check_answer_protocol(kind, answer)
    except ValueError as exc:
        raise ValueError(f"--answer-protocol: {exc}") from None


def _from_run(root: Path, data_dir: Path | None, answer: str | None) -> Rollouts:
    store = RunStore(root)
    manifest = store.manifest()
    benchmark, kind = manifest.benchmark.name, manifest.benchmark.kind
    if kind not in KINDS or not get_kind(kind).voted:
        raise StoreError(
            f"{root} ran {benchmark}, a {kind} benchmark: its answers are scored, not right or "
            "wrong, so there are no disagreeing rollouts to pair."
        )
    ran = check_answer_protocol(kind, manifest.benchmark.answer)  # None: the kind's default
    protocol = answer_protocol(kind, answer or ran)
    questions = run_questions(store.root, manifest, data_dir)
    items = []
    for t in sorted(store.turns(), key=lambda t: t.key):
        if t.round != 0 or t.failed:  # a failed request is no rollout
            continue
        q = questions[t.question]
        # A turn's text is its final content, the reasoning split off already.
        again = protocol != ran
        graded = grade(t.text, q.gold, kind, q.options, protocol, split=False) if again else None
        items.append(
            Rollout(
                prompt_id=t.question,
                question=q.text,
                gold=q.gold,
                response=t.text or "",
                answer=graded.answer if graded else t.answer,
                correct=bool(graded.correct if graded else t.correct),
                source=f"{root.name}:run{t.run}/{t.question}/round0/agent{t.agent}",
                options=tuple(q.options),
                grade_timed_out=graded.timed_out if graded else t.grade_timed_out,
            )
        )
    if not items:
        raise StoreError(f"{store.turns_path} holds no answered round-0 turns to pair.")
    return Rollouts(items, benchmark, kind, protocol)


def _from_jsonl(path: Path, answer: str | None) -> Rollouts:
    protocol = answer_protocol("math", answer)
    items = []
    for where, row in read_jsonl(path, path.name):
        values = {}
        for name, accepted in FIELDS.items():
            found = next((row[k] for k in accepted if k in row), None)
            if found is None:
                raise StoreError(f"{where} has no {name} (give one of: {', '.join(accepted)}).")
            values[name] = str(found)
        graded = grade(values["response"], values["gold"], "math", answer=protocol)
        items.append(
            Rollout(
                values["prompt_id"],
                values["question"],
                values["gold"],
                values["response"],
                answer=graded.answer,
                correct=bool(graded.correct),  # a math grade is never unscored (None)
                source=where,
                grade_timed_out=graded.timed_out,
            )
        )
    if not items:
        raise StoreError(f"{path} holds no rollouts.")
    return Rollouts(items, path.stem, "math", protocol)
