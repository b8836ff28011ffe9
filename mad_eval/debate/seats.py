"""One agent's seat at the debate table: what the planner builds and the engine runs."""

from __future__ import annotations

from dataclasses import dataclass

from mad_eval.backends import Backend
from mad_eval.debate.context import Fitter
from mad_eval.debate.prompts import Speaker
from mad_eval.settings.roster import Agent


@dataclass(frozen=True)
class Seat:
    """One agent at the table: who it is, where its requests go, how its prompts are fitted."""

    agent: Agent
    backend: Backend
    fitter: Fitter
    budget: int | None  # prompt tokens allowed: max model length minus max tokens
    speaker: Speaker  # its prompt template, and what the template may say of it
