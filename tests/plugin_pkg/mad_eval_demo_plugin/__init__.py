"""A plug-in package as another project would ship it: a protocol, a backend, a metric family,
a table layout and a tracker, declared in its entry_points.txt and imported only when mad-eval
asks for one of them. tests/test_plugins.py puts it on sys.path as pip would install it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from mad_eval.backends import Backend, BackendType, Generation, Request
from mad_eval.measure.base import Add, Context, Debate, Family
from mad_eval.measure.formula import Formula, percent
from mad_eval.protocols import Protocol
from mad_eval.reporting.layouts import Column, TableLayout
from mad_eval.tracking import Group, Tracker
from mad_eval.tracking.payload import Payload


class Wheel(Protocol):
    name = "wheel"
    description = "agent 0 reads everyone; each other agent reads agent 0 and itself"

    def sees(self, agent: int, n_agents: int) -> list[int]:
        return list(range(n_agents)) if agent == 0 else sorted({0, agent})


class Fixed(Backend):
    """Answers every question with the number after `fixed:`."""

    def __init__(self, spec: str, answer: str):
        self.spec = spec  # the model spec, as the run names it
        self.answer = answer

    async def generate(self, request: Request) -> Generation:
        text = f"It is {self.answer}, so the answer is \\boxed{{{self.answer}}}."
        return Generation(text=text, finish_reason="stop", prompt_tokens=1, completion_tokens=9)


FIXED = BackendType(
    name="fixed",
    usage="or fixed:<number> for agents that always answer that number",
    build=lambda spec, rest, where: Fixed(spec, rest or "0"),
)


def _keys(scoring: object) -> list[str]:
    return ["boxed_replies"]


def _count(debate: Debate, add: Add) -> None:
    for scored in debate.rounds.values():
        add(
            "boxed_replies",
            sum("\\boxed{" in (t.text or "") for t in scored.live),
            len(scored.live),
        )


def _formulas(context: Context) -> dict[str, Formula]:
    return {"boxes.share": percent("boxed_replies")}


BOXES = Family(name="boxes", formulas=_formulas, keys=_keys, count=_count)


def _columns(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    return [("", [Column("Boxed %", "boxes.share"), Column("Maj", "maj", scored=True)])]


BOXED = TableLayout("boxed", _columns, "the share of replies with a \\boxed{} answer, and Maj")


class Notebook(Tracker):
    """A tracker that keeps each run's numbers as a JSON file under `path`."""

    name = "notebook"
    package = "json"
    keys: ClassVar[dict[str, str]] = {"path": "the folder the files go to"}

    def where(self) -> str:
        return self.options.get("path", "notebook")

    def log(self, payload: Payload, files: Path, group: Group | None) -> str:
        folder = Path(self.where())
        folder.mkdir(parents=True, exist_ok=True)
        kept = {
            "name": payload.name,
            "metrics": payload.metrics,
            "files": sorted(str(p.relative_to(files)) for p in files.rglob("*") if p.is_file()),
        }
        (folder / f"{payload.key}.json").write_text(json.dumps(kept))
        return payload.key
