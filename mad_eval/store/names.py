"""The name of every file a run folder (and an experiment folder) holds, spelled here once:
everything else asks the store (folder.RunStore) for them or imports these."""

from __future__ import annotations

MANIFEST_FILE = "manifest.json"  # what the run was (manifest.py)
QUESTIONS_FILE = "questions.jsonl"  # every question as the run asked it (questions.py)
TURNS_FILE = "turns.jsonl"  # the records, appended to: the source of truth
STOPS_FILE = "stops.jsonl"  # the debates their protocol ended early, appended to
JUDGE_FILE = "judge.jsonl"  # the judge's verdicts, appended to
METRICS_FILE = "metrics.json"  # the last report's numbers (a view of the records)
LOCK_FILE = ".lock"  # marks the one process writing to the folder
SUPERSEDED = "superseded"  # the folder of records --retry-failed replaced
EXPERIMENT_FILE = "experiment.json"  # an experiment folder's copy of its file
TRACKED_FILE = "tracked.json"  # what was sent to which tracker (tracked.py)

# Any of these in a folder makes it a run folder; with the rest, no output may replace them.
RUN_RECORDS = (MANIFEST_FILE, TURNS_FILE, QUESTIONS_FILE, JUDGE_FILE, METRICS_FILE, STOPS_FILE)
RECORDS = (*RUN_RECORDS, LOCK_FILE, EXPERIMENT_FILE, TRACKED_FILE)
