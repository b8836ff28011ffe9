"""Question and Turn records and their JSON Lines form: the data every other module shares."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Question:
    """One benchmark item: the text an agent is asked and the gold answer it is graded against."""

    id: str
    text: str
    gold: str
    meta: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass
class Turn:
    """One agent's answer in one round of one debate; a line of turns.jsonl."""

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

    @property
    def key(self) -> tuple[int, str, int, int]:
        return (self.run, self.question, self.round, self.agent)

    @property
    def failed(self) -> bool:
        return self.error is not None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> Turn:
        return cls(**json.loads(line))


def derive_seed(*parts: object) -> int:
    """A stable 31-bit seed from its parts (base seed, run, question, round, agent, ...), so a
    resumed or repeated run asks exactly the same things in any process."""
    text = "/".join(str(part) for part in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & 0x7FFFFFFF


def messages_hash(messages: list[dict[str, str]]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
