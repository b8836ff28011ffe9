"""The math-verify answer protocol's settings (`math-verify:precision=2,extract=latex`):
Math-Verify's own parameters, read and checked here before any request, applied in the
worker process (mad_eval.grading.verify_worker) and recorded as part of the protocol's name,
so a resume, a report and a reward grade the same way. The defaults are verl's MATH500
scorer's."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from mad_eval.errors import UserError
from mad_eval.records import shown

TARGETS = ("expr", "latex")
GOLDS = ("boxed", "searched")
MAX_PRECISION = 15  # sympy compares with 15 significant digits; rounding finer means nothing
MAX_PRIORITY = 1000


class SettingError(UserError, ValueError):
    """A math-verify setting that does not exist or is out of its range."""


@dataclass(frozen=True)
class MathVerifySettings:
    """How Math-Verify finds and compares answers; each field is one of its parameters."""

    precision: int = 6  # verify's float_rounding: decimal places floats are rounded to
    extract: tuple[str, ...] = ("expr", "latex")  # what the reply is searched for, in order
    box_priority: int = 50  # LatexExtractionConfig's boxed_match_priority (-1: boxes unread)
    gold: str = "boxed"  # boxed: \boxed{gold} read as LaTeX (verl); searched: as a reply is
    strict: bool = True  # verify's strict: variables matter, sets are not tuples
    set_relations: bool = False  # verify's allow_set_relation_comp

    def to_json(self) -> dict[str, Any]:
        """The settings as the worker receives them."""
        data = asdict(self)
        data["extract"] = list(self.extract)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> MathVerifySettings:
        """The settings a request carries (none: the defaults)."""
        if not data:
            return DEFAULT
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "extract" in values:
            values["extract"] = tuple(values["extract"])
        return cls(**values)


DEFAULT = MathVerifySettings()

ACCEPTED = {
    "precision": f"an integer from 0 to {MAX_PRECISION} (decimal places floats are rounded to)",
    "extract": "latex, expr, or both joined by + in the order searched (expr+latex, verl's)",
    "box_priority": f"-1 (boxes not searched) or an integer from 0 to {MAX_PRIORITY} "
    "(lower is searched earlier; 50, Math-Verify's default)",
    "gold": "boxed (the gold in \\boxed{} read as LaTeX, as verl does) or searched (the gold "
    "searched as a reply is, as Math-Verify's own tests compare two texts)",
    "strict": "true or false (false: variables matched by position, sets equal to tuples)",
    "set_relations": "true or false (true: a set may equal a relation such as 1 < x < 2)",
}


def _value(key: str, raw: str) -> Any:
    """One setting's value from its text; None when it is not an accepted value."""
    if key in ("precision", "box_priority"):
        try:
            number = int(raw)
        except ValueError:
            return None
        low, high = (0, MAX_PRECISION) if key == "precision" else (-1, MAX_PRIORITY)
        return number if low <= number <= high else None
    if key == "extract":
        parts = tuple(raw.split("+"))
        ok = parts and all(p in TARGETS for p in parts) and len(set(parts)) == len(parts)
        return parts if ok else None
    if key == "gold":
        return raw if raw in GOLDS else None
    return {"true": True, "false": False}.get(raw.lower())


def parse_settings(given: str, protocol: str = "math-verify") -> MathVerifySettings:
    """`precision=2,extract=latex` as settings; a setting that does not exist, is given
    twice or is out of its range is refused in one sentence saying what is accepted."""
    values: dict[str, Any] = {}
    for item in (part.strip() for part in given.split(",")):
        key, eq, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not eq or key not in ACCEPTED:
            known = ", ".join(f"{k}=" for k in ACCEPTED)
            raise SettingError(
                f"cannot read {protocol} setting {shown(item, 80)}; write key=value with a key "
                f"of: {known}"
            )
        if key in values:
            raise SettingError(f"{protocol} setting {key} is given twice")
        value = _value(key, raw)
        if value is None:
            raise SettingError(
                f"{protocol} setting {key}={raw} is not accepted; {key} takes {ACCEPTED[key]}"
            )
        values[key] = value
    return MathVerifySettings(**values)
