"""Prompt templates: the messages an agent is sent, as data (TOML, with Jinja2 for the text).

A template has the messages of round 0 (`[[round0]]`) and of a debate round (`[[debate]]`),
each a `{role, content}` table. With `history = true` an agent's prompt is its whole
conversation: round 0's messages, then each debate round's messages in turn, so its own
earlier answers can be assistant turns; an agent that speaks after others in round 0 (a
protocol that speaks one by one) reads their replies there too, as round 0's `responses`. A
message with `repeat = "said"` (or another list variable) is sent once for each item, the item
as `item`: ChatEval's layout, every earlier message as an assistant turn of its own. The
built-in prompt styles are template files in
templates/; `--prompt-template FILE` takes a user's own. Quoted responses are data: the
template places them, the fitter cuts them, and nothing downstream parses prompt text.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any, NoReturn

import jinja2
from jinja2 import nodes

from mad_eval.errors import UserError
from mad_eval.grading.reasoning import tag_pattern
from mad_eval.records import Messages, shown
from mad_eval.settings import sandbox
from mad_eval.settings.config import project_folder, spec_files
from mad_eval.settings.tomlfile import TomlFileError, read_text

ROLES = ("system", "user", "assistant")
KEYS = ("base", "description", "history", "quote_tags", "values", "round0", "debate")
MESSAGE_KEYS = ("role", "content", "optional", "repeat")
# What every message's text can use; a debate round adds the quoted responses.
VARIABLES = {
    "question": "the question as the agents read it",
    "answer_format": "the answer protocol's instruction (how to write the final answer)",
    "round": "the round being answered (0 for the first answers)",
    "agent": "the agent's index, 0-based",
    "agents": "the number of agents",
    "persona": "the agent's persona from the roster ('' when it has none)",
    "role": "'hub' for the protocol's hub agent, else ''",
    "hub": "the protocol's hub agent (its index), or none when it has no hub",
    "values": "the template's own [values] table",
    "responses": "every previous-round response the agent reads, in the protocol's order (in "
    "round 0, under history = true: the replies of agents who spoke before it in round 0), "
    "each with .agent, .label, .text (as --quote shows it), .final, .reasoning, .own and "
    ".verbatim (the reply as written; a template using it needs --quote verbatim)",
    "peers": "the same responses without the agent's own",
    "own": "the agent's own previous response (.agent, .label, .text, .final, .reasoning), or none",
    "said": "every earlier reply of the debate by the agents it reads and by itself, in the "
    "order they were said (earlier rounds too), each as in responses",
    "item": 'in a message with repeat = "LIST": the item of LIST the message is sent for',
}
DEBATE_ONLY = ("own", "said")
REPEATABLE = ("responses", "peers", "said")  # the lists a message can be repeated over
MAX_SOURCE = 1_000_000  # characters of a template's text


class TemplateError(UserError, ValueError):
    """A template file cannot be used; the message names the file, the key and the fix."""


@dataclass(frozen=True)
class Quote:
    """One quoted response as a template sees it: `text` is what the reader is shown (the
    final content, after the quoted reasoning in a think block when --quote shows any);
    `final` and `reasoning` are its two parts, for templates that lay them out their own way
    (under --quote verbatim, `text`, `final` and `verbatim` are the reply as written)."""

    agent: int
    label: str  # "agent 2"
    text: str
    own: bool
    final: str = ""
    reasoning: str = ""  # "" when the reader is shown none
    verbatim: str = ""  # the reply as written, under --quote verbatim ("" otherwise)


@dataclass(frozen=True)
class Step:
    """What one debate round of a prompt quotes: the responses read, in order, and the
    agent's own previous response (also among `responses` when the protocol shows it)."""

    round: int
    responses: tuple[Quote, ...]
    own: Quote | None
    said: tuple[Quote, ...] = ()  # every earlier reply it reads or wrote, in order (`said`)


@dataclass(frozen=True)
class _Message:
    role: str
    content: jinja2.Template
    optional: bool
    where: str  # "debate[1].content", for errors
    verbatim: bool = False  # it reads a response's .verbatim
    ours: bool = False  # the text of a shipped template: rendered as plain Jinja
    repeat: str | None = None  # sent once for each item of this list variable
    said: bool = False  # it reads `said`


@dataclass(frozen=True)
class Template:
    """A loaded template: its source (recorded in the manifest), and its compiled messages."""

    name: str
    path: Path
    source: str  # the file's text (with its base's, when it has one)
    data: dict[str, Any]  # the template's table as read (base merged)
    description: str
    history: bool
    quote_tags: tuple[str, ...]
    values: dict[str, Any]
    round0: tuple[_Message, ...]
    debate: tuple[_Message, ...]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    @property
    def verbatim(self) -> bool:
        """Whether it quotes replies as written (a response's .verbatim), which only
        --quote verbatim fills."""
        return any(m.verbatim for m in self.debate)

    @cached_property
    def transcript(self) -> bool:
        """Whether it reads `said` (every earlier reply), which the engine then gathers."""
        return any(m.said for m in self.debate)

    @cached_property
    def _tags(self) -> re.Pattern[str] | None:
        return tag_pattern(*self.quote_tags) if self.quote_tags else None

    def quotable(self, text: str) -> str:
        """`text` safe to quote: any of the template's quoting tags in it is escaped, so a
        reply cannot close its own quote and open another agent's."""
        return self._tags.sub("&lt;", text) if self._tags else text

    def render(
        self, common: dict[str, Any], steps: list[Step], opening: Step | None = None
    ) -> Messages:
        """The messages of a prompt: round 0's alone when `steps` is empty; else the last
        debate round's (or, with history, round 0's followed by every step's). `opening`:
        the replies round 0's messages read (of agents who spoke before, under history)."""
        return [message for message, _ in self.sources(common, steps, opening)]

    def sources(
        self, common: dict[str, Any], steps: list[Step], opening: Step | None = None
    ) -> list[tuple[dict[str, str], _Message]]:
        """The messages of `render`, each with the template message it came from."""
        read = [self._quoted(q) for q in opening.responses] if opening else []
        first = {**common, "round": 0, "responses": read, "peers": read}
        if not steps:
            return self._rendered(self.round0, first)
        rounds = steps if self.history else steps[-1:]
        messages = self._rendered(self.round0, first) if self.history else []
        for step in rounds:
            responses = [self._quoted(q) for q in step.responses]
            own = self._quoted(step.own) if step.own else None
            data = {
                **common,
                "round": step.round,
                "responses": responses,
                "peers": [q for q in responses if not q.own],
                "own": own,
                "said": [self._quoted(q) for q in step.said],
            }
            messages += self._rendered(self.debate, data)
        return messages

    def _quoted(self, quote: Quote) -> Quote:
        safe = self.quotable
        return Quote(
            quote.agent,
            quote.label,
            safe(quote.text),
            quote.own,
            safe(quote.final),
            safe(quote.reasoning),
            safe(quote.verbatim),
        )

    def _rendered(
        self, messages: tuple[_Message, ...], data: dict[str, Any]
    ) -> list[tuple[dict[str, str], _Message]]:
        """Each message sent, with the template message it came from."""
        out = []
        for message in messages:
            items = data.get(message.repeat, []) if message.repeat else [None]
            for item in items:
                try:
                    given = {**data, "values": self.values, "item": item}
                    text = (
                        message.content.render(given)
                        if message.ours
                        else sandbox.render(message.content, given)
                    )
                except Exception as exc:  # whatever a template does wrong is the file's
                    raise TemplateError(
                        f"{self.path}: {message.where}.content: {_sentence(exc)}."
                    ) from None
                if message.optional and not text.strip():
                    continue
                out.append(({"role": message.role, "content": text}, message))
        return out


def _sentence(exc: BaseException) -> str:
    """A render or compile error as one short line: Jinja's own message, else the error's
    kind and text (a template's mistake, or a bound in mad_eval.settings.sandbox it went past)."""
    known = (jinja2.TemplateError, sandbox.BoundError)
    text = str(exc) if isinstance(exc, known) else f"{type(exc).__name__}: {exc}"
    text = " ".join(text.split()).rstrip(".")
    return text if len(text) <= 300 else text[:300] + "..."


def builtin_templates() -> dict[str, Path]:
    """Template files by name: the project's, then ./templates for new names only (a user's
    file of a built-in name is used only when named by its path)."""
    return spec_files("templates")


def load_template(ref: str) -> Template:
    """A template by built-in name (debate, conversation, ...) or by file path."""
    known = builtin_templates()
    if ref in known:
        return _load(known[ref], ref)
    path = Path(ref)
    if path.suffix == ".toml" or "/" in ref:
        if not path.is_file():
            raise TemplateError(f"prompt template file '{ref}' does not exist.")
        return _load(path.resolve(), path.stem)
    raise TemplateError(
        f"unknown prompt template '{ref}'; built in: {', '.join(known)} (or a path to a "
        ".toml template file)."
    )


@cache
def _load(path: Path, name: str) -> Template:
    raw, source = _raw(path)
    return parse_template(raw, source, path, name)


def _raw(path: Path, depth: int = 0) -> tuple[dict[str, Any], str]:
    """A template file's TOML and source; with `base = "other"`, the other template's TOML
    under this file's keys ([values] merged), and both sources, so the recorded text and
    its hash change when either file does."""
    try:
        source = read_text(path, 4 * MAX_SOURCE)  # a FIFO or a device: refused, not waited on
        raw = tomllib.loads(source)
    except TomlFileError as exc:
        raise TemplateError(f"cannot read prompt template {path}: {exc}.") from None
    except (OSError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise TemplateError(f"cannot read prompt template {path}: {_sentence(exc)}.") from None
    if "base" not in raw:
        return raw, source
    base = builtin_templates().get(str(raw["base"]))
    if base is None or base.resolve() == path.resolve() or depth > 4:
        raise TemplateError(
            f"{path}: base {shown(raw['base'], 80)} is no other template; built in: "
            f"{', '.join(builtin_templates())}."
        )
    under, under_source = _raw(base, depth + 1)
    merged = {**under, **raw, "values": {**under.get("values", {}), **raw.get("values", {})}}
    merged.pop("base")
    return merged, f"{under_source}\n# ---- {path.name}, based on the above ----\n{source}"


def recorded_template(ref: str, file: str, sha256: str, text: str, data: Any) -> Template:
    """A template as a run folder's manifest.json records it (the text read, its hash and
    the table read from it), compiled in the sandbox like any file. A text that does not
    match its hash, or a table that is not its text's, is refused, never rendered."""
    check_recorded(ref, sha256, text)
    try:
        same = data == _table_of(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        same = False
    if not same:
        raise TemplateError(
            f"manifest.json's prompt template {shown(ref, 80)} holds a table that is not the one "
            "its text gives, so its prompts are not rebuilt from it; restore manifest.json "
            "from a copy."
        )
    path = Path(str(file))
    return parse_template(data, text, path, path.stem)


def check_recorded(ref: str, sha256: Any, text: Any) -> None:
    """Refuse a recorded template whose text is not the one its hash was taken of."""
    try:
        intact = hashlib.sha256(text.encode()).hexdigest() == sha256
    except (AttributeError, UnicodeError):
        intact = False
    if not intact or len(text) > MAX_SOURCE:
        raise TemplateError(
            f"manifest.json's prompt template {shown(ref, 80)} does not match its recorded hash, "
            "so its prompts are not rebuilt from it (the file was edited after the run wrote "
            "it); restore manifest.json from a copy."
        )


# How _raw joins a template's text to its base's.
_BASED = re.compile(r"\n# ---- [^\n]*, based on the above ----\n")


def _table_of(text: str) -> dict[str, Any]:
    """The table _raw reads from a recorded text: the file's own, or its base's with the
    file's keys over it."""
    parts = _BASED.split(text)
    table = tomllib.loads(parts[0])
    for part in parts[1:]:
        raw = tomllib.loads(part)
        table = {**table, **raw, "values": {**table.get("values", {}), **raw.get("values", {})}}
        table.pop("base", None)
    return table


def parse_template(raw: dict[str, Any], source: str, path: Path, name: str) -> Template:
    """Check a template's TOML and compile it; every problem is one sentence naming the file
    and the key, found before any request."""

    def need(ok: bool, problem: str) -> None:
        if not ok:
            raise TemplateError(f"{path}: {problem}.")

    need(isinstance(raw, dict), "the template must be a table of keys")
    need(len(source) <= MAX_SOURCE, f"it holds over {MAX_SOURCE:,} characters; no template does")
    for key in raw:
        need(key in KEYS, f"unknown key '{key}'; a template has: {', '.join(KEYS)}")
    need(isinstance(raw.get("description", ""), str), "'description' must be text")
    need(isinstance(raw.get("history", False), bool), "'history' must be true or false")
    tags = raw.get("quote_tags", [])
    need(
        isinstance(tags, list) and all(isinstance(t, str) and t.isidentifier() for t in tags),
        "'quote_tags' must be a list of tag names, e.g. [\"response\"]",
    )
    values = raw.get("values", {})
    need(isinstance(values, dict), "'values' must be a table ([values])")
    sections = {}
    for section in ("round0", "debate"):
        need(section in raw, f"'{section}' is missing; add [[{section}]] messages")
        items = raw[section]
        need(
            isinstance(items, list) and len(items) > 0 and all(isinstance(m, dict) for m in items),
            f"'{section}' must be a list of messages ([[{section}]] tables)",
        )
        sections[section] = tuple(
            _message(m, f"{section}[{i}]", path, _ours(source)) for i, m in enumerate(items)
        )
    template = Template(
        name=name,
        path=path,
        source=source,
        data=raw,
        description=raw.get("description", ""),
        history=raw.get("history", False),
        quote_tags=tuple(tags),
        values=values,
        round0=sections["round0"],
        debate=sections["debate"],
    )
    check_template(template, [[0, 1, 2], [0, 1, 2], [0, 1, 2]])
    return template


def _ours(source: str) -> bool:
    """Whether `source` is the text of a template the project ships (a file, or a file with
    its base's text): its code is ours, so it renders as plain Jinja, at no sandbox's cost
    on every turn; any other text renders in the sandbox."""
    return hashlib.sha256(source.encode()).hexdigest() in _shipped()


@cache
def _shipped() -> frozenset[str]:
    folder = project_folder("templates")
    return frozenset(
        hashlib.sha256(_raw(path)[1].encode()).hexdigest() for path in folder.glob("*.toml")
    )


def _message(item: dict[str, Any], where: str, path: Path, ours: bool = False) -> _Message:
    def fail(problem: str) -> NoReturn:
        raise TemplateError(f"{path}: {where}: {problem}.")

    def need(ok: bool, problem: str) -> None:
        if not ok:
            fail(problem)

    for key in item:
        need(key in MESSAGE_KEYS, f"unknown key '{key}'; a message has: role, content, optional")
    role, content = item.get("role"), item.get("content")
    if not isinstance(role, str) or role not in ROLES:
        fail(f"role {shown(role, 80)} is not one of: {', '.join(ROLES)}")
    if not isinstance(content, str):
        fail("'content' must be text")
    need(isinstance(item.get("optional", False), bool), "'optional' must be true or false")
    repeat = item.get("repeat")
    round0 = where.startswith("round0")
    need(
        repeat is None or (repeat in REPEATABLE and not round0),
        f"'repeat' must name one of {', '.join(REPEATABLE)}, in a [[debate]] message",
    )
    try:
        parsed, used = sandbox.SANDBOX.read(content)
    except jinja2.TemplateSyntaxError as exc:
        problem = _sentence(jinja2.TemplateError(exc.message))
        raise TemplateError(f"{path}: {where}.content: {problem} (line {exc.lineno}).") from None
    except RecursionError:
        raise TemplateError(f"{path}: {where}.content: it nests too deeply.") from None
    except Exception as exc:  # a bound, or a constant part Jinja works out fails: {[1]: 2}
        raise TemplateError(f"{path}: {where}.content: {_sentence(exc)}.") from None
    allowed = set(VARIABLES) - (set(DEBATE_ONLY) if round0 else set()) - {"item"}
    if repeat:
        allowed.add("item")
    unknown = sorted(used - allowed)
    need(
        not unknown,
        f"content uses unknown variable '{unknown[0] if unknown else ''}'; it can use: "
        f"{', '.join(sorted(allowed))}",
    )
    try:
        compiled = (
            sandbox.PLAIN.from_string(parsed) if ours else sandbox.SANDBOX.compile_checked(parsed)
        )
    except Exception as exc:  # a bound (a recursive loop), or Jinja refusing the source
        raise TemplateError(f"{path}: {where}.content: {_sentence(exc)}.") from None
    optional = item.get("optional", False)
    said = "said" in used or repeat == "said"
    return _Message(role, compiled, optional, where, _reads_verbatim(parsed), ours, repeat, said)


def _reads_verbatim(tree: nodes.Template) -> bool:
    """Whether a message's text reads an attribute named verbatim (r.verbatim, r['verbatim'])."""
    return any(n.attr == "verbatim" for n in tree.find_all(nodes.Getattr)) or any(
        isinstance(n.arg, nodes.Const) and n.arg.value == "verbatim"
        for n in tree.find_all(nodes.Getitem)
    )


def check_template(template: Template, sees: list[list[int]]) -> None:
    """Render rounds 0 to 2 of a debate on sample data, each agent reading `sees[agent]`
    (the protocol's choice): a render error, a message that renders empty, two messages of
    one role in a row, or a prompt not ending with the user is refused, before any request."""
    with sandbox.sharing():  # the sample prompts together take no longer than one may
        _check_samples(template, sees)


def _check_samples(template: Template, sees: list[list[int]]) -> None:
    agents = len(sees)
    for agent in range(agents):
        common = sample_common(agent, agents)
        # Under history, round 0 reads the agents before it (as when they speak one by one).
        earlier = [j for j in sees[agent] if j < agent] if template.history else []
        opening = sample_step(0, agent, earlier, False)
        for rounds in range(3):
            steps = [
                sample_step(r, agent, sees[agent], template.history) for r in range(1, rounds + 1)
            ]
            section = "round0" if not steps else "debate"
            try:
                messages = template.sources(common, steps, opening)
            except TemplateError as exc:
                raise TemplateError(
                    f"{str(exc).rstrip('.')} (agent {agent} of {agents}, round {rounds})."
                ) from None
            _check_messages(template, section, messages)


def _check_messages(
    template: Template, section: str, sources: list[tuple[dict[str, str], _Message]]
) -> None:
    messages = [message for message, _ in sources]
    if not messages:
        raise TemplateError(f"{template.path}: '{section}' renders no message.")
    for i, message in enumerate(messages):
        if not message["content"].strip():
            raise TemplateError(
                f"{template.path}: a {message['role']} message of '{section}' renders empty; "
                "give it text, or mark it optional = true to leave it out."
            )
        # A repeated message's turns may follow each other: the template asks for them so.
        repeated = i and sources[i][1] is sources[i - 1][1] and sources[i][1].repeat
        if i and messages[i - 1]["role"] == message["role"] and not repeated:
            raise TemplateError(
                f"{template.path}: '{section}' puts two {message['role']} messages in a row, "
                "which chat APIs refuse; merge them into one."
            )
    if messages[-1]["role"] != "user":
        raise TemplateError(
            f"{template.path}: '{section}' must end with a user message (the model answers "
            f"it), not a {messages[-1]['role']} message."
        )


def common_data(
    question: str,
    answer_format: str,
    agent: int,
    agents: int,
    persona: str | None,
    hub: bool,
    hub_agent: int | None = None,
) -> dict[str, Any]:
    """The variables every message of an agent's prompt can use (besides `values`)."""
    return {
        "question": question,
        "answer_format": answer_format,
        "agent": agent,
        "agents": agents,
        "persona": persona or "",
        "role": "hub" if hub else "",
        "hub": hub_agent,
    }


def sample_prompt(template: Template, agent: int, round_: int) -> Messages:
    """The messages of agent `agent` in round `round_` of a sample 3-agent debate in which
    everyone reads everyone: what `mad-eval templates NAME` shows."""
    steps = [sample_step(r, agent, [0, 1, 2], template.history) for r in range(1, round_ + 1)]
    return template.render(sample_common(agent, 3), steps)


def sample_common(agent: int, agents: int) -> dict[str, Any]:
    answer = "Give your final answer in \\boxed{}."
    return common_data("What is 6 times 7?", answer, agent, agents, None, agent == 0)


def sample_step(round_: int, agent: int, sees: list[int], history: bool) -> Step:
    def quote(j: int, said: int = max(round_ - 1, 0)) -> Quote:
        text = f"Sample response {j} of round {said}."
        return Quote(j, f"agent {j}", text, j == agent, final=text, verbatim=text)

    own = quote(agent) if history or agent in sees else None
    said = tuple(quote(j, r) for r in range(round_) for j in sorted({*sees, agent}))
    return Step(round_, tuple(quote(j) for j in sees), own, said)
