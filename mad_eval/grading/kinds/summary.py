"""The summary kind (CNN/DailyMail): a few sentences, scored with ROUGE against the reference
and agreed on by consensus, never voted right or wrong."""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from mad_eval.grading.kinds import Grade, Kind, stable_int
from mad_eval.records import Question

MAX_SUMMARY_CHARS = 4000
ROUGE = ("rouge1", "rouge2", "rougeL")


class _Tokens:
    """rouge-score's tokenizer (lower case, Porter stems), remembering each text's tokens:
    the consensus rule scores every summary against every other."""

    def __init__(self) -> None:
        from rouge_score.tokenizers import DefaultTokenizer

        self._tokenizer = DefaultTokenizer(use_stemmer=True)
        self.tokenize = functools.lru_cache(maxsize=65536)(self._tokenizer.tokenize)


@functools.cache
def _scorer(*types: str):  # type: ignore[no-untyped-def]
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer(list(types), tokenizer=_Tokens())


def rouge(summary: str, reference: str) -> dict[str, float]:
    """ROUGE-1, ROUGE-2 and ROUGE-L F1 of a summary against a reference, in [0, 1]."""
    scores = _scorer(*ROUGE).score(reference, summary)
    return {name: round(scores[name].fmeasure, 6) for name in ROUGE}


def consensus(summaries: Sequence[str]) -> int:
    """Which summary the agents agree on: the one with the highest mean ROUGE-L F1 to the
    others (the first on ties). It reads the summaries only, never the reference: picking
    the summary closest to the reference would be an oracle, not the system's output."""
    if len(summaries) < 2:
        return 0
    scorer = _scorer("rougeL")
    totals = [0.0] * len(summaries)
    for i in range(len(summaries)):
        for j in range(i + 1, len(summaries)):
            same = summaries[i] == summaries[j]
            f1 = 1.0 if same else scorer.score(summaries[i], summaries[j])["rougeL"].fmeasure
            totals[i] += f1
            totals[j] += f1
    return max(range(len(summaries)), key=lambda i: (totals[i], -i))


@functools.lru_cache(maxsize=4096)
def summaries(question_id: str, text: str, k: int) -> tuple[str, ...]:
    """The article's first three sentences (the classic lead baseline), then k-1 other
    three-sentence extracts drawn from the id. The article is the text's longest paragraph,
    so an instruction put before it is never quoted."""
    article = max(text.split("\n\n"), key=len)
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", article.strip()) if s]
    rng = random.Random(stable_int(question_id))
    found = [" ".join(sentences[:3])]
    for _ in range(20 * k):  # short articles may not have k distinct extracts
        if len(found) == k:
            break
        picked = sorted(rng.sample(range(len(sentences)), min(3, len(sentences))))
        chosen = " ".join(sentences[i] for i in picked)
        if chosen not in found:
            found.append(chosen)
    while len(found) < k:
        found.append(found[-1])
    return tuple(found)


@dataclass(frozen=True)
class SummaryKind(Kind):
    """A summary as written, up to MAX_SUMMARY_CHARS; scored against the reference."""

    def read(self, found: str | None, text: str | None, options: Sequence[str]) -> str | None:
        return found if found and len(found) <= MAX_SUMMARY_CHARS else None

    def grade(self, answer: str | None, gold: str) -> Grade:
        return Grade(answer, None, rouge(answer, gold) if answer is not None else None)

    def candidates(self, question: Question, k: int) -> tuple[str, ...]:
        return summaries(question.id, question.text, k)


SUMMARY = SummaryKind(
    "summary",
    "your summary of the article in three or four sentences",
    default_answer="summary-line",
    answers=("summary-line",),
    voted=False,
    rule="consensus",
)
