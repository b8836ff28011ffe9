"""verl's own validation metrics (its installed process_validation_metrics) on mad-eval's
compute_score, for the same samples a `mad-eval single` run recorded: acc/mean@K and
acc/maj@K/mean equal the run's mean@K and bootstrap maj@K (metrics.json, in percent)."""

from __future__ import annotations

import json

import pytest
from cli_helpers import turns_of

import mad_eval as api
from mad_eval.training import compute_score

pytestmark = pytest.mark.train
metric_utils = pytest.importorskip("verl.trainer.ppo.metric_utils")

K = 4


@pytest.mark.parametrize("benchmark", ["math500", "aime24_dapo"])
def test_verls_validation_metrics_on_mad_eval_rewards_are_the_single_runs_numbers(
    tmp_path, shared_data, benchmark
):
    out = tmp_path / "single"
    api.single(samples=K, benchmark=benchmark, data_dir=shared_data, limit=60, out=out)
    metrics = json.loads((out / "metrics.json").read_text())
    rows = api.train_prompts(benchmark, tmp_path / "rows.jsonl", data_dir=shared_data, limit=60)
    by_id = {row["extra_info"]["question_id"]: row for row in rows}

    sources, uids, infos = [], [], {"score": [], "acc": [], "pred": []}
    for turn in turns_of(out):
        row = by_id[turn["question"]]
        gold = row["reward_model"]["ground_truth"]
        scored = compute_score(row["data_source"], turn["text"], gold, row["extra_info"],
                               reward_router_address="ignored")  # fmt: skip
        assert scored["acc"] == float(turn["correct"])  # the run's own grade
        sources.append(row["data_source"])
        uids.append(turn["question"])
        for key in infos:
            infos[key].append(scored[key])
    assert len(uids) == K * len(rows) and 0 < metrics["mean_at_k"] < 100

    verl = metric_utils.process_validation_metrics(sources, uids, infos)
    acc = verl[rows[0]["data_source"]]["acc"]
    assert acc[f"mean@{K}"] * 100 == pytest.approx(metrics["mean_at_k"], abs=1e-9)
    assert acc[f"maj@{K}/mean"] * 100 == pytest.approx(metrics["maj_at_k_bootstrap"], abs=1e-9)
