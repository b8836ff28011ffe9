"""Question, Turn and judge Verdict records and their JSON Lines form: the data every other
module shares."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import operator
import reprlib
import sys
import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from mad_eval.foreign import loads
from mad_eval.sanitize import redact

TurnKey = tuple[int, str, int, int]
# A chat prompt: role/content messages, as templates render them and backends send them.
Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Question:
    """One benchmark item: the text an agent is asked and the gold answer it is graded against."""

    id: str
    text: str  # as the agents read it: a choice question lists its lettered options
    gold: str  # a math answer, a number's exact form, an option letter, a reference summary
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    kind: str = "math"  # how answers are read and graded (grading.kinds.KINDS)
    # Where a reply writes its answer (answers.ANSWER_PROTOCOLS); None: the kind's default.
    answer: str | None = None

    @property
    def options(self) -> list[str]:
        """A choice or preference question's options, in letter order (A first)."""
        options: list[str] = self.meta.get("options", [])
        return options

    @property
    def sha256(self) -> str:
        """A hash of what the agents read and are graded against (id, text, gold, options):
        a run folder records it, so a resumed run notices a question edited since."""
        content = json.dumps([self.id, self.text, self.gold, self.options])  # ASCII: escaped
        return hashlib.sha256(content.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """The question as a run folder's questions.jsonl records it (with `sha256`)."""
        return {
            "id": self.id,
            "text": self.text,
            "gold": self.gold,
            "kind": self.kind,
            "answer": self.answer,
            "meta": self.meta,
            "sha256": self.sha256,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Question:
        """A question as to_dict wrote it; a missing or mistyped field is a ValueError."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        fields = {"id": str, "text": str, "gold": str, "kind": str, "meta": dict}
        for name, kind in fields.items():
            if not isinstance(data.get(name), kind):
                raise ValueError(f'"{name}" is missing or not a {kind.__name__}')
        if not isinstance(data.get("answer"), str | None):
            raise ValueError('"answer" is neither a string nor null')
        return cls(
            data["id"], data["text"], data["gold"], data["meta"], data["kind"], data.get("answer")
        )


@functools.cache
def _fields_of(
    cls: type,
) -> tuple[int, Callable[[dict[str, Any]], tuple[Any, ...]], tuple[str, ...]]:
    """How many fields a record class has, what takes their values from a dict in order,
    and their names."""
    names = tuple(f.name for f in dataclasses.fields(cls))
    return len(names), operator.itemgetter(*names), names


@functools.cache
def _dense_of(cls: type) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """What takes the values of a record's fields but its SPARSE ones from a dict, in order
    (a tuple even of one)."""
    sparse = getattr(cls, "SPARSE", ())
    names = [name for name in _fields_of(cls)[2] if name not in sparse]
    get = operator.itemgetter(*names, names[0])  # its last is extra
    return lambda data: get(data)[:-1]


class JsonLine:
    """A record that is one line of a JSON Lines file."""

    __slots__ = ()  # records come by the hundred thousand: no __dict__ per instance
    # Text fields most records share (a model spec, a question id): read as one string each.
    SHARED: ClassVar[tuple[str, ...]] = ()
    # Integer fields that may be negative; every other one is a count or an index.
    SIGNED: ClassVar[tuple[str, ...]] = ()
    # Fields a record keeps under another name than the object it is made from has.
    RENAMED: ClassVar[Mapping[str, str]] = types.MappingProxyType({})
    # Its last fields, written only when they hold a value: a record without one reads and
    # writes as before they existed.
    SPARSE: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> str:
        """The record as its line; a number that is not finite (NaN, Infinity), which JSON
        has none of, is a ValueError: no such line is ever written."""
        # The fields as they are: dataclasses.asdict's deep copy cost more than the dump.
        record: type = type(self)
        names = _fields_of(record)[2]
        fields = {name: getattr(self, name) for name in names}
        for name in self.SPARSE:
            if fields[name] is None:
                del fields[name]
        try:
            return json.dumps(fields, ensure_ascii=False, allow_nan=False)
        except ValueError:
            raise ValueError(
                f"the {type(self).__name__.lower()} record {getattr(self, 'key', '')} holds NaN "
                "or Infinity, which JSON has no number for"
            ) from None

    @classmethod
    def from_json(cls, line: str | bytes) -> Self:
        """The record a line holds; a line that is no JSON object, or a field of the wrong
        type or out of range (a round "zero", a count of -5), is a ValueError naming it."""
        data = loads(line)
        if type(data) is not dict:
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
        for name in cls.SHARED:
            if isinstance(data.get(name), str):
                data[name] = sys.intern(data[name])
        kind: type = cls
        count, values, _ = _fields_of(kind)
        schema = _Schema.of(cls)
        sparse = cls.SPARSE
        try:  # by position: a call with 30 keywords costs 15 times as much
            if len(data) == count:
                fields = values(data)
            elif sparse and len(data) == count - len(sparse):  # none of them written
                fields = _dense_of(kind)(data) + (None,) * len(sparse)
            else:
                fields = None
        except KeyError:
            fields = None
        if fields is None:  # a record from before a field existed, or a malformed one
            record = cls(**data)
            fields = schema.values(record)
        else:
            record = cls(*fields)
        schema.check(fields)
        return record


class _Schema:
    """What each field of a record class may hold, from its type hints: the exact types of
    its value (so true is no integer and "3" no number), of a list's items or a map's
    values, and which integers are counts or indices (never negative)."""

    def __init__(self, cls: type) -> None:
        hints = typing.get_type_hints(cls)
        self.names = _fields_of(cls)[2]
        self.values = operator.attrgetter(*self.names)
        self.types = [_exact(hints[name]) for name in self.names]
        self.items = [
            (i, frozenset(_exact(_item(hints[name]))))
            for i, name in enumerate(self.names)
            if _item(hints[name])
        ]
        signed = getattr(cls, "SIGNED", ())
        self.counted = [
            i
            for i, (name, kinds) in enumerate(zip(self.names, self.types, strict=True))
            if int in kinds and float not in kinds and name not in signed
        ]
        self.counts = _getter(self.counted)
        self.seen: set[tuple[type, ...]] = set()  # field types already found valid

    @classmethod
    def of(cls, record: type) -> _Schema:
        schema = _SCHEMAS.get(record)
        if schema is None:
            schema = _SCHEMAS[record] = cls(record)
        return schema

    def check(self, values: tuple[Any, ...]) -> None:
        """A ValueError naming the first field whose value `values` (in field order) has
        the wrong type or is out of range."""
        if tuple(map(type, values)) not in self.seen:  # records share a few: each checked once
            for name, value, kinds in zip(self.names, values, self.types, strict=True):
                if type(value) not in kinds:
                    raise ValueError(f'"{name}" is {shown(value)}, not {_wanted(kinds)}')
            if len(self.seen) < 4096:
                self.seen.add(tuple(map(type, values)))
        if min(filter(None, self.counts(values)), default=0) < 0:  # None and 0 pass
            i = next(i for i in self.counted if (values[i] or 0) < 0)
            raise ValueError(
                f'"{self.names[i]}" is {shown(values[i], 80)}, not a count (0 or more)'
            )
        for i, allowed in self.items:
            value = values[i]
            if value:  # not None, nor an empty list or map
                items = value.values() if type(value) is dict else value
                if not allowed.issuperset(map(type, items)):
                    bad = next(item for item in items if type(item) not in allowed)
                    raise ValueError(
                        f'"{self.names[i]}" holds {shown(bad)}, not {_wanted(allowed)}'
                    )


_SCHEMAS: dict[type, _Schema] = {}


def _getter(indices: list[int]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """What takes the values at `indices` from a tuple, as a tuple (of one or none too)."""
    if not indices:
        return lambda values: ()
    return operator.itemgetter(*indices, indices[0])  # a tuple even of one: its last is extra


def _exact(hint: Any) -> tuple[type, ...]:
    """The exact types a value of type hint `hint` may have (a float may be written as an
    integer; Any is anything JSON holds)."""
    if hint is Any:
        return (str, int, float, bool, list, dict, type(None))
    if isinstance(hint, types.UnionType):
        return tuple(kind for part in typing.get_args(hint) for kind in _exact(part))
    if hint is float:
        return (float, int)
    return (typing.get_origin(hint) or hint,)


def _item(hint: Any) -> Any:
    """The type of a list's items or a map's values under `hint`, or None where any will do."""
    parts = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    for part in parts:
        origin, args = typing.get_origin(part), typing.get_args(part)
        if origin in (list, dict) and args[-1] is not Any:
            return args[-1]
    return None


_NAMES = {str: "text", int: "an integer", float: "a number", bool: "true or false",
          list: "a list", dict: "an object", type(None): "null"}  # fmt: skip


def _wanted(kinds: Collection[type]) -> str:
    return " or ".join(
        dict.fromkeys(_NAMES[kind] for kind in kinds if kind is not int or float not in kinds)
    )


class _Short(reprlib.Repr):
    """reprlib's bounded repr, a dict's keys in their own order (reprlib sorts them)."""

    def __init__(self) -> None:
        super().__init__()  # (its bounds are keywords only from Python 3.12)
        self.maxlevel, self.maxstring, self.maxother, self.maxlist, self.maxdict = 2, 40, 40, 4, 4

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        shown = [
            f"{self.repr1(key, level - 1)}: {self.repr1(value, level - 1)}"
            for key, value in itertools.islice(x.items(), self.maxdict)
        ]
        return "{" + ", ".join(shown + ["..."] * (len(x) > self.maxdict)) + "}"


_SHOWN = _Short()


def shown(value: Any, width: int = 40) -> str:
    """A value as a message quotes it: its repr in at most `width` characters, nested values
    elided (a record's 1,000-deep list has no repr Python can build). Every value a file,
    a server or a model gave is quoted so: a message stays one short sentence."""
    try:
        text = _SHOWN.repr(value) if width <= 40 else repr(value)
    except (ValueError, RecursionError):  # past 4,300 digits; nested past Python's repr
        return "a number too long to show" if isinstance(value, int) else "a value too deep to show"
    if len(text) <= width:
        return text
    tail = (width - 3) // 3  # a path's or a name's end is often what tells it apart
    return text[: width - 3 - tail] + "..." + text[len(text) - tail :]


@dataclass(slots=True)
class Turn(JsonLine):
    """One agent's answer in one round of one debate; a line of turns.jsonl."""

    SHARED = ("question", "model", "answer", "finish_reason", "endpoint", "served_model")
    SIGNED = ("seed",)

    run: int
    question: str
    round: int
    agent: int
    model: str
    seed: int
    temperature: float
    top_p: float
    max_tokens: int
    messages_hash: str
    sees: list[int]
    text: str | None
    answer: str | None
    correct: bool | None
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency: float
    error: str | None = None
    # Opaque per-agent state a backend carries between rounds (the simulated agents'
    # beliefs); kept in the record so a resumed run continues exactly where it stopped.
    state: dict[str, Any] | None = None
    # Where the request went (the replica that answered), and the prompt as the context
    # budget saw it: its tokens, the tokens cut from quoted responses to fit (0: nothing
    # cut), and the tokens it shares as a prefix with a lower-numbered agent's prompt in the
    # same round (for vLLM's prefix cache).
    endpoint: str | None = None
    context_tokens: int | None = None
    cut_tokens: int = 0
    prefix_tokens: int | None = None
    # Requests sent for this answer (1 plus retries; 0 when never sent or answered from the
    # request cache), and whether the request cache answered.
    attempts: int = 1
    cached: bool = False
    # A summary's ROUGE-1/2/L F1 against the reference (summaries are scored, not voted).
    rouge: dict[str, float] | None = None
    # The model the server said answered (None when it did not say, or no server answered).
    served_model: str | None = None
    # math-verify could not decide within its bound: the answer counts as wrong and, in the
    # vote, matches only answers of the same text (so no later count pays for it again).
    grade_timed_out: bool = False
    # A reasoning model's reasoning, apart from `text` (its final content): from the server's
    # reasoning field, or split from <think> blocks; None when the reply had none. Its tokens
    # when the server counts them.
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    # The reply stopped at the token limit before its reasoning ended: it has no final
    # answer, and is counted apart and left out of the vote like an unparsed one.
    truncated_in_reasoning: bool = False
    # Within one run and question, turns of the same class gave equivalent answers: 0 for
    # right answers, 1, 2, ... for each distinct wrong one, numbered in grading order (which
    # two runs may not share: only which turns share a class means anything); None for no
    # answer, a summary, or a turn recorded before classes were (voting.groups.AnswerClasses).
    answer_class: int | None = None
    # The model declined to answer, in its own words (a chat reply's `refusal`): no answer,
    # so unparsed, counted in every denominator like any reply without one.
    refusal: str | None = None
    # The server's usage counts held something that is no count (-5, "lots"): those counts
    # are recorded unknown (None), as if the server had not given them.
    usage_invalid: bool = False
    # The reply exactly as the model wrote it, where splitting its reasoning off changed it;
    # kept only in runs where an agent quotes replies verbatim (--quote verbatim), else None.
    reply: str | None = None
    # The order the agent was shown a choice question's options in, where its protocol gave
    # it its own (protocols.Protocol.option_order): item i is the index of the option it read as
    # letter i. Its reply names letters of that order; `answer` is mapped back to the
    # question's own letters. Not written when None.
    option_order: list[int] | None = None

    RENAMED = types.MappingProxyType({"truncated": "truncated_in_reasoning"})
    SPARSE = ("option_order",)

    @property
    def key(self) -> tuple[int, str, int, int]:
        return (self.run, self.question, self.round, self.agent)

    @property
    def failed(self) -> bool:
        return self.error is not None

    @classmethod
    def from_generation(
        cls, key: TurnKey, generation: Generated, grade: Grading, **fields: Any
    ) -> Turn:
        """The turn of `key` that a backend's answer (backends.base.Generation) and its
        grade make: every field of the generation a turn has (by name, or as RENAMED says)
        copied, the latency to 0.1 ms; `fields` give the rest (model, sampling, prompt) and
        win over any copied one."""
        names = set(_fields_of(cls)[2])  # type: ignore[arg-type]
        copied = {}
        for field_ in dataclasses.fields(generation):  # type: ignore[arg-type]
            name = cls.RENAMED.get(field_.name, field_.name)
            if name in names:
                copied[name] = getattr(generation, field_.name)
        run, question, round_, agent = key
        return cls(
            run=run,
            question=question,
            round=round_,
            agent=agent,
            **copied
            | {
                "latency": round(generation.latency, 4),
                "answer": grade.answer,
                "correct": grade.correct,
                "rouge": grade.rouge,
                "grade_timed_out": grade.timed_out,
            }
            | fields,
        )


class Generated(typing.Protocol):
    """What a turn is made from: a dataclass such as backends.base.Generation (a layer above
    this one), whose fields are copied by name."""

    @property
    def latency(self) -> float: ...


class Grading(typing.Protocol):
    """A grade (grading.kinds.Grade) as a turn records it."""

    @property
    def answer(self) -> str | None: ...
    @property
    def correct(self) -> bool | None: ...
    @property
    def rouge(self) -> dict[str, float] | None: ...
    @property
    def timed_out(self) -> bool: ...


@dataclass(slots=True)
class Stop(JsonLine):
    """A debate its protocol ended before its last round: a line of stops.jsonl. Its later
    rounds have no turns; every number takes its answers of `round` as its final ones."""

    SHARED = ("question",)

    run: int
    question: str
    round: int  # the last round it spoke in
    why: str  # the protocol's reason, one sentence

    @property
    def key(self) -> TurnKey:
        """Where --retry-failed finds it: its debate's key, agent -1 (no agent's)."""
        return (self.run, self.question, self.round, -1)

    @property
    def debate(self) -> tuple[int, str]:
        return (self.run, self.question)


@dataclass(frozen=True)
class Setting:
    """What decides a verdict besides the prompt: one judge.jsonl holds one setting."""

    judge: str  # the judge's model spec
    reference: bool  # whether the judge is shown the gold answer
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    extra_body: dict[str, Any] | None = None  # request fields merged into the judge's requests

    def describe(self) -> str:
        gold = "with" if self.reference else "without"
        body = json.dumps(redact(self.extra_body)) if self.extra_body else ""
        extra = f", extra body {body}" if body else ""
        return (
            f"{self.judge} ({gold} the gold answer, temperature {self.temperature}, "
            f"top_p {self.top_p}, max_tokens {self.max_tokens}, seed {self.seed}{extra})"
        )


@dataclass(slots=True)
class Verdict(JsonLine):
    """One judged turn: a line of judge.jsonl."""

    run: int
    question: str
    round: int
    agent: int
    setting: dict[str, Any]  # Setting's fields
    prompt_hash: str  # of the judge's first messages: rubric, the agent's context, its reply
    raw: list[str]  # the judge's answers in order (two when it was corrected once)
    scores: dict[str, int] | None
    total: int | None
    failure: str | None = None  # why no answer could be used, after one correction
    error: str | None = None  # the request failed: asked again when judging resumes
    attempts: int = 0  # requests sent, retries included (0 when the cache answered)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency: float = 0.0
    endpoint: str | None = None
    cached: bool = False

    @property
    def key(self) -> TurnKey:
        return (self.run, self.question, self.round, self.agent)


def derive_seed(*parts: object) -> int:
    """A stable 31-bit seed from its parts (base seed, run, question, round, agent, ...), so a
    resumed or repeated run asks exactly the same things in any process."""
    text = "/".join(str(part) for part in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & 0x7FFFFFFF


def messages_hash(messages: Messages) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
