"""metrics.json's `alerts`: one sentence for each reason a run's numbers are suspect, counted
from its final round's answers (those Debate, or maj@K, is the vote of). A run whose replies
mostly went unread prints Maj 0.0 like a model that is always wrong: this says which it is.

Thresholds: when more than half of those answers have none that counts (unparsed, cut off,
failed or refused), each of those causes behind a tenth of them or more is said; otherwise a
cause is said when it alone is behind more than a quarter. A judged run's verdicts are held
to the same thresholds: judge failures (no scores read) and judge requests that failed. Each
sentence names the option that changes it as the command line spells it (errors.for_keywords
words it for a caller of the library)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mad_eval.grading.answers import get_answer_protocol, protocol_name
from mad_eval.grading.grader import check_answer_protocol
from mad_eval.grading.kinds import get_kind
from mad_eval.records import Turn, Verdict

MOST = 1 / 2  # more than this share of the answers lost: every sizeable cause is said
SIZEABLE = 1 / 10  # ... that is, behind at least this share of them
ALONE = 1 / 4  # otherwise a cause behind more than this share on its own
# Unparsed replies each other answer protocol is tried on, to name the one the model writes;
# Math-Verify's search runs in worker processes, too dear for a report to try.
SAMPLES = 20
UNTRIED = ("math-verify",)


# A folder without questions.jsonl (recorded before the file existed) holds no golds to hold
# its verdicts to (store/grades.py): said, so they are never counted unchecked in silence.
UNCHECKED = (
    "Its answers were counted right or wrong as recorded, unchecked: the folder has no "
    "questions.jsonl holding the golds; run the run's command again to record it."
)


@dataclass
class Outcomes:
    """How one round's answers ended: all of them, and those with no answer by cause."""

    answers: int = 0
    unparsed: int = 0  # a reply whose answer protocol found nothing
    cut_off: int = 0  # stopped at the token limit before an answer was written
    refused: int = 0  # the model declined (a chat reply's refusal)
    failed: int = 0  # no reply: the request failed
    unsent: int = 0  # of those, never sent (the prompt did not fit the context)
    limits: set[int] = field(default_factory=set)  # the token limits the cut-off ones had
    samples: list[str] = field(default_factory=list)  # the first unparsed replies' texts

    def add(self, turn: Turn) -> None:
        self.answers += 1
        if turn.failed:
            self.failed += 1
            self.unsent += turn.attempts == 0
        elif turn.answer is not None:
            return
        elif turn.truncated_in_reasoning or turn.finish_reason == "length":
            self.cut_off += 1
            self.limits.add(turn.max_tokens)
        elif turn.refusal:
            self.refused += 1
        else:
            self.unparsed += 1
            if turn.text and len(self.samples) < SAMPLES:
                self.samples.append(turn.text)


def alerts(outcomes: Outcomes, kind: str, answer: str | None, rounds: int) -> list[str]:
    """The sentences for a run's last-round `outcomes` (empty when nothing is suspect); `kind`
    and `answer` (its answer protocol, None: the kind's) say what replies had to write."""
    total = outcomes.answers
    causes = {
        "unparsed": outcomes.unparsed,
        "cut_off": outcomes.cut_off,
        "failed": outcomes.failed,
        "refused": outcomes.refused,
    }
    if not total:
        return []
    said = _said(causes, total)
    what = "final answers" if rounds else "answers"
    sentences = {
        "unparsed": lambda n: _unparsed(n, total, what, kind, answer, outcomes.samples),
        "cut_off": lambda n: _cut_off(n, total, what, outcomes.limits),
        "failed": lambda n: _failed(n, total, what, outcomes.unsent),
        "refused": lambda n: (
            f"{n} of {total} {what} {_were(n)} refusals: the model declined to answer (its words "
            "are in turns.jsonl's refusal field)."
        ),
    }
    return [sentences[c](causes[c]) for c in said]


def judge_alerts(verdicts: list[Verdict]) -> list[str]:
    """The sentences for a judged run's verdicts (empty when nothing is suspect): judge
    failures (the judge's answers held no scores, even after one correction) and requests
    to the judge that failed (asked again when judging resumes)."""
    total = len(verdicts)
    causes = {
        "failures": sum(1 for v in verdicts if v.error is None and v.scores is None),
        "failed": sum(1 for v in verdicts if v.error is not None),
    }
    if not total:
        return []
    sentences = {
        "failures": lambda n: (
            f"{n} of {total} verdicts {_were(n)} judge failures: the judge's answers held no "
            "scores it could read, even after one correction (judge.jsonl's failure field says "
            "why), so the critique scores stand on the rest; use a judge that follows the "
            "rubric's format, or give it more room (--max-tokens)."
        ),
        "failed": lambda n: (
            f"{n} of {total} requests to the judge failed (each error is in judge.jsonl); "
            "once the judge's server answers, run the same judge command again to ask them."
        ),
    }
    return [sentences[c](causes[c]) for c in _said(causes, total)]


def _said(causes: dict[str, int], total: int) -> list[str]:
    """The causes worth a sentence, the largest first (see the thresholds above)."""
    if sum(causes.values()) > MOST * total:
        said = [c for c, n in causes.items() if n and n >= SIZEABLE * total]
    else:
        said = [c for c, n in causes.items() if n > ALONE * total]
    return sorted(said, key=lambda c: -causes[c])  # stable for equal counts


def _unparsed(
    n: int, total: int, what: str, kind: str, answer: str | None, samples: list[str]
) -> str:
    used = check_answer_protocol(kind, answer)
    name = protocol_name(used)
    others = [a for a in get_kind(kind).answers if a != name]
    head = (
        f"{n} of {total} {what} {_were(n)} unparsed: the replies do not write their answer as the "
        f"{name} answer protocol reads it ({_form(name)})"
    )
    found = _written(others, samples)
    if found:
        return f"{head} but as {found} reads it ({_form(found)}); pass --answer-protocol {found}."
    if others:
        return (
            f"{head}; pass --answer-protocol with the one the model writes ({', '.join(others)})."
        )
    return f"{head}; ask for it in the prompt template (--prompt-template)."


def _were(n: int) -> str:
    return "was" if n == 1 else "were"  # 1 of 4 final answers was unparsed


def _form(protocol: str) -> str:
    return get_answer_protocol(protocol).write("X")


def _written(protocols: list[str], replies: list[str]) -> str | None:
    """The protocol that finds an answer in most of the replies (their final content),
    preferring the one whose form the replies write as it is (a lenient one finds a number
    after any "answer:"), then the first in the kind's order; None if none does."""
    best, score = None, (0, 0)
    for name in protocols:
        if name in UNTRIED:
            continue
        protocol = get_answer_protocol(name)
        found = [(text, protocol.find(text, split=False).answer) for text in replies]
        read = [(text, a) for text, a in found if a is not None]
        exact = sum(protocol.write(a) in text for text, a in read)
        if 2 * len(read) > len(replies) and (exact, len(read)) > score:
            best, score = name, (exact, len(read))
    return best


def _cut_off(n: int, total: int, what: str, limits: set[int]) -> str:
    limit = f" ({next(iter(limits))} tokens)" if len(limits) == 1 else ""
    return (
        f"{n} of {total} {what} {_were(n)} cut off at the token limit{limit} before they gave an "
        "answer; raise --max-tokens."
    )


def _failed(n: int, total: int, what: str, unsent: int) -> str:
    if 2 * unsent > n:
        return (
            f"{n} of {total} {what} failed: their prompts did not fit the model's context; "
            "lower --max-tokens or serve a longer context (--max-model-len)."
        )
    return (
        f"{n} of {total} {what} failed (each error is in turns.jsonl); once the server "
        "answers, ask them again with --retry-failed."
    )
