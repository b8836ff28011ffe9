"""Prices: what a model's tokens cost, from a TOML prices file (docs/explanation/diagnostics.md,
Cost), so the cost family can put a run's cost in money too."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mad_eval.errors import UserError
from mad_eval.measure.formula import Formula, Rates
from mad_eval.settings.tomlfile import TomlFileError, read_toml


class PricesError(UserError, ValueError):
    """A prices file that cannot be read, or that prices no run it is given."""


@dataclass(frozen=True)
class Price:
    """Dollars per 1M tokens."""

    input: float
    output: float
    cached_input: float

    def usd_per_1k(self, tag: str, judge: bool = False) -> Formula:
        """Dollars per 1,000 questions: prompt tokens a prefix cache can reuse at the cached
        input price, the rest at the input price, completion tokens at the output price (a
        reasoning model's reasoning is part of them). The judge's prompts are all billed
        at the input price."""
        ptok, ctok = ("judge_ptok", "judge_ctok") if judge else (f"ptok{tag}", f"ctok{tag}")

        def usd(rates: Rates) -> np.ndarray:
            cached = 0.0 if judge else rates[f"cached{tag}"]
            fresh = rates[ptok] - cached
            spent = fresh * self.input + cached * self.cached_input + rates[ctok] * self.output
            return spent / 1_000  # per 1M tokens, for 1,000 questions

        return usd


@dataclass(frozen=True)
class Prices:
    """A prices file: a default price, and prices by model spec."""

    path: Path
    default: Price | None
    models: dict[str, Price]

    def of(self, models: Iterable[str]) -> Price:
        """The price of a run whose agents use `models` (a judge: its one model)."""
        found = {self.models.get(m, self.default) for m in models}
        if None in found:
            missing = next(m for m in models if self.models.get(m, self.default) is None)
            raise PricesError(
                f'{self.path} has no price for {missing}: add [models."{missing}"] or a '
                "default input and output price at the top."
            )
        if len(found) > 1:
            raise PricesError(
                f"{self.path} prices the models of one run differently ({', '.join(models)}); "
                "a run is priced as a whole: give its models one price."
            )
        return found.pop()  # type: ignore[return-value]


def load_prices(path: Path) -> Prices:
    """Read a TOML prices file (docs/explanation/diagnostics.md, Cost); a wrong file is a
    PricesError naming it."""
    try:
        raw = read_toml(path)
    except FileNotFoundError:
        raise PricesError(f"prices file {path} does not exist.") from None
    except TomlFileError as e:  # a FIFO or device, too large, not UTF-8 TOML, nested too deep
        raise PricesError(f"prices file {path} cannot be read: {e}.") from None
    models = raw.pop("models", {})
    default = _price(raw, path, "the top level") if raw else None
    if not isinstance(models, dict):
        raise PricesError(f"{path}: [models] must be a table of model spec -> prices.")
    priced = {m: _price(p, path, f'[models."{m}"]') for m, p in models.items()}
    if default is None and not priced:
        raise PricesError(f"{path} gives no price: set input and output (dollars per 1M tokens).")
    return Prices(path, default, priced)


def read_prices(path: Path | str | Prices | None) -> Prices | None:
    """A prices file, when one is named (or read already)."""
    if path is None or isinstance(path, Prices):
        return path
    return load_prices(Path(path))


def _price(table: object, path: Path, where: str) -> Price:
    if not isinstance(table, dict):
        raise PricesError(f"{path}: {where} must be a table with input and output prices.")
    unknown = set(table) - {"input", "output", "cached_input"}
    if unknown:
        raise PricesError(
            f"{path}: {where} has {', '.join(sorted(unknown))}; accepted: input, "
            "cached_input, output (dollars per 1M tokens)."
        )
    values: dict[str, float] = {}
    for name in ("input", "output", "cached_input"):
        value = table.get(name, table.get("input") if name == "cached_input" else None)
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or not math.isfinite(value)
            or value < 0
        ):
            raise PricesError(
                f"{path}: {where} needs {name} as a number of dollars per 1M tokens, >= 0."
            )
        values[name] = float(value)
    return Price(**values)
