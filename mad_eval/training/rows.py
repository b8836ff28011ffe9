"""A row's question and template, read back from its `extra_info`, so an on-policy trainer
builds a debate-turn prompt from a first-turn row alone; and how long the rows' prompts are."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mad_eval.debate import prompts
from mad_eval.debate.context import CHARS_PER_TOKEN, TokenCounter, load_counter
from mad_eval.errors import UserError
from mad_eval.records import Question
from mad_eval.settings.templates import Template, builtin_templates, load_template, parse_template
from mad_eval.training.errors import TrainingError
from mad_eval.training.rewards import gold_answer

# verl's data.max_prompt_length default: its agent loop cuts a longer prompt from the left.
VERL_DEFAULT_PROMPT_LENGTH = 512


def template_info(template: Template) -> dict[str, Any]:
    """How a row names its template: a built-in one by name; a file's by its checked table
    (as JSON text, so Parquet keeps one column type) and hash, since the file may not travel."""
    info: dict[str, Any] = {"template": template.name, "template_sha256": template.sha256}
    if builtin_templates().get(template.name) != template.path:
        info["template_table"] = json.dumps(template.data, ensure_ascii=False, default=str)
    return info


def check_rows(rows: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
    """Every (where, row) can rebuild its question and, once per template, build its
    debate-turn prompt: refused before any step, in one sentence naming the row. Both
    trainers' checks; returns the rows read."""
    built: set[tuple[str, ...]] = set()
    count = 0
    for where, row in rows:
        count += 1
        try:
            question = row_question(row)
            info = row["extra_info"]
            template = (info.get(k) for k in ("template", "template_sha256", "template_table"))
            key = (*map(str, template), question.kind, question.answer or "")
            if key not in built:
                row_pair_prompt(row, "", "")
                built.add(key)
        except UserError as exc:
            raise TrainingError(f"{where}: {exc}") from None
    return count


def row_question(row: Mapping[str, Any]) -> Question:
    """The question a row asks, as the evaluation's prompt builder reads it."""
    info = _info(row)
    options = info.get("options")
    meta = {"options": [str(o) for o in options]} if options is not None and len(options) else {}
    reward = row.get("reward_model")
    gold = reward.get("ground_truth") if isinstance(reward, Mapping) else None
    gold = gold_answer(gold, "the row's reward_model.ground_truth")
    text = str(info["question"])
    if not text.strip():
        raise TrainingError("the row's extra_info.question is empty: there is no question to ask.")
    qid = str(info.get("question_id", ""))
    return Question(qid, text, gold, meta, str(info["kind"]), str(info["answer_protocol"]))


def row_template(row: Mapping[str, Any]) -> Template:
    """The row's template, checked again as any template file is (a table is untrusted)."""
    info = _info(row)
    name = str(info["template"])
    if info.get("template_table") is None:
        return load_template(name)
    try:
        table = json.loads(str(info["template_table"]))
    except ValueError:
        raise TrainingError(f"row template '{name}': template_table is not JSON.") from None
    source = str(info["template_table"])
    return parse_template(table, source, Path(f"{name}.toml"), name)


def row_pair_prompt(row: Mapping[str, Any], own: str, peer: str) -> list[dict[str, str]]:
    """The debate-turn prompt of a first-turn (or pair) row: agent 0's round-1 prompt in a
    two-agent debate whose own round-0 answer is `own` and whose partner's is `peer`."""
    return prompts.pair_prompt(row_question(row), own, peer, row_template(row))


def _info(row: Mapping[str, Any]) -> Mapping[str, Any]:
    info = row.get("extra_info")
    missing = [
        k for k in ("question", "kind", "answer_protocol", "template") if k not in (info or {})
    ]
    if missing:
        raise TrainingError(
            f"the row's extra_info lacks {', '.join(missing)}: a row written before mad-eval "
            "recorded its question cannot rebuild a prompt; export it again with `mad-eval train`."
        )
    return info  # type: ignore[return-value]


def counter(tokenizer: str | None) -> TokenCounter:
    """The model's tokenizer when given, else the project's estimate (CHARS_PER_TOKEN)."""
    return load_counter(tokenizer, None)[0]


def prompt_length(messages: Sequence[Mapping[str, str]], count: TokenCounter) -> int:
    """A prompt's tokens as the counter counts it (the estimate rounds up, plus a margin)."""
    return count.count(count.encode_messages([dict(m) for m in messages]))


ESTIMATE_NOTE = f"estimated at {CHARS_PER_TOKEN} characters per token; --tokenizer counts exactly"


class Lengths:
    """The rows' prompt lengths in tokens: the longest prompt (what `max_prompt_length` must
    reach); for first-turn rows also the longest debate-turn prompt with empty replies
    (`pair_base`: an on-policy debate turn needs pair_base + 2 x the response length)."""

    def __init__(self, longest: int, exact: bool, pair_base: int | None = None) -> None:
        self.longest, self.exact, self.pair_base = longest, exact, pair_base

    def debate_turn(self, response_length: int) -> int | None:
        """The max_prompt_length an on-policy debate turn needs for replies that long."""
        return None if self.pair_base is None else self.pair_base + 2 * response_length

    def __repr__(self) -> str:
        return f"Lengths(longest={self.longest}, exact={self.exact}, pair_base={self.pair_base})"


def measure(rows: Sequence[Mapping[str, Any]], tokenizer: str | None, first_turn: bool) -> Lengths:
    """Count every row's prompt (and, for first-turn rows, its debate turn with no replies)."""
    count = counter(tokenizer)
    longest = max(prompt_length(r["prompt"], count) for r in rows)
    base = (
        max(prompt_length(row_pair_prompt(r, "", ""), count) for r in rows) if first_turn else None
    )
    return Lengths(longest, count.exact, base)


class Rows(list[dict[str, Any]]):
    """The rows written, and their prompt `lengths`."""

    def __init__(self, rows: Sequence[dict[str, Any]], lengths: Lengths) -> None:
        super().__init__(rows)
        self.lengths = lengths
