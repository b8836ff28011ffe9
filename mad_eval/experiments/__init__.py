"""Experiment files: a paper's whole evaluation in one TOML file (cells.py: what an
experiment is; parse.py: reading a file; run.py: its cells on one engine; tables.py: its
tables, figures and summary)."""

from mad_eval.experiments.cells import Cell, Experiment, ExperimentError, View
from mad_eval.experiments.parse import load_experiment

__all__ = ["Cell", "Experiment", "ExperimentError", "View", "load_experiment"]
