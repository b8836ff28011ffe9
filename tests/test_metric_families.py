"""The metric families' registry (mad_eval.measure.families), the Scoring value every counter
reads, metrics.json's schema_version, and `report --single` reading each run's turns once."""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path

import pytest
from factories import compute_metrics, turn

import mad_eval
from mad_eval.measure import families
from mad_eval.measure.base import Count, Family, Share
from mad_eval.measure.formula import percent
from mad_eval.measure.schema import SCHEMA_VERSION, MetricsVersionError
from mad_eval.measure.scoring import Scoring
from mad_eval.registry import RegistryError
from mad_eval.store.files import StoreError
from mad_eval.store.folder import RunStore
from mad_eval.store.manifest import RunManifest

THREE = Scoring(3, 1, (0, 1, 2), kind="math", seed=0)  # three agents, one round of debate
MEASURE = Path(mad_eval.__file__).parent / "measure"
# Per question and round, whether agents 0, 1, 2 were right ("4" is right, "5" wrong).
RIGHT = {
    ("q1", 0): (1, 1, 0),
    ("q1", 1): (1, 1, 1),
    ("q2", 0): (1, 0, 0),
    ("q2", 1): (0, 0, 0),
    ("q3", 0): (0, 0, 1),
    ("q3", 1): (0, 1, 1),
}


def case_turns() -> list:
    return [
        turn(q, r, agent, "4" if right else "5", bool(right))
        for (q, r), agents in RIGHT.items()
        for agent, right in enumerate(agents)
    ]


def toy_count(debate, add) -> None:
    """Whether agent 0 answered round 0 right: one count per debate."""
    mine = [t for t in debate.rounds[0].live if t.agent == 0]
    add("toy", sum(bool(t.correct) for t in mine), len(mine))


TOY = Family(
    name="toy",
    formulas=lambda context: {"toy.first_agent": percent("toy")},
    keys=lambda scoring: ["toy"],
    count=toy_count,
    intervals=lambda context: ["toy.first_agent"],
)


ANSWERED = Family(
    name="answered",
    formulas=lambda context: {},
    sums=(
        Count("answered", lambda t: t.answer is not None),
        Share("answered_pct", "answered", "turns", percent=True),
    ),
    per_run=("answered",),
    by_round=("answered",),
)


def test_a_familys_plain_sums_are_counted_by_run_and_round_without_other_code(registered):
    """Plain counts are declared like every other number: a family's `sums`, written after
    the formulas' numbers, each run's and each round's where it says."""
    plain = compute_metrics(case_turns(), THREE)
    registered(families.FAMILIES, "answered", ANSWERED)
    found = compute_metrics(case_turns(), THREE)
    assert (found["answered"], found["answered_pct"]) == (18, 100.0)
    keys = list(found)
    assert keys[keys.index("prefix_share") + 1 :][:3] == ["answered", "answered_pct", "alerts"]
    assert found["per_run"][0]["answered"] == 18
    assert [row["answered"] for row in found["rounds"]] == [9, 9]
    del found["answered"], found["answered_pct"], found["per_run"][0]["answered"]
    for row in found["rounds"]:
        del row["answered"]
    assert found == plain


def test_a_family_registered_once_is_counted_measured_and_given_an_interval(registered):
    """One Family and one line in the registry: its key is tallied, its formula lands in
    metrics.json where its name says, with its interval; no other code knows of it."""
    plain = compute_metrics(case_turns(), THREE)
    registered(families.FAMILIES, "toy", TOY)
    found = compute_metrics(case_turns(), THREE)
    assert found["toy"]["first_agent"] == pytest.approx(200 / 3)  # right on q1 and q2
    low, high = found["toy"]["first_agent_ci"]
    assert low <= found["toy"]["first_agent"] <= high and low < high
    assert found["per_run"][0]["toy"]["first_agent"] == found["toy"]["first_agent"]
    # Every other number is as it was without the family.
    del found["toy"], found["per_run"][0]["toy"]
    assert found == plain


def test_a_family_that_does_not_apply_is_not_counted(registered):
    """A family's `applies` decides: one for summaries only adds nothing to a voted run."""
    summary_only = Family(**{**TOY.__dict__, "applies": lambda context: not context.scoring.voted})
    registered(families.FAMILIES, "toy", summary_only)
    assert "toy" not in compute_metrics(case_turns(), THREE)


def test_a_family_whose_formula_takes_another_familys_name_is_refused(registered):
    """Before the registry refused it, a family naming a formula `maj` replaced the votes
    family's number in metrics.json: Maj 50.0 became 0.0 and nothing said so."""
    two = [t for t in case_turns() if t.question != "q3"]  # q1 voted right, q2 wrong
    assert compute_metrics(two, THREE)["maj"] == 50.0
    loud = Family(
        name="loud",
        formulas=lambda context: {"maj": percent("loud0")},
        keys=lambda scoring: ["loud0"],
        count=lambda debate, add: add("loud0", 0, 1),
    )
    registered(families.FAMILIES, "loud", loud)
    with pytest.raises(RegistryError) as caught:
        compute_metrics(two, THREE)
    assert str(caught.value) == (
        "the metric family 'loud' (a test) names a formula 'maj', which the metric family "
        "'votes' (mad-eval) already names; one of them must take another name."
    )


def test_a_family_counting_into_another_familys_tally_key_is_refused(registered):
    """Before, reusing the tally key `vote0` crashed with an IndexError in measure/cost.py."""
    thief = Family(
        name="thief",
        formulas=lambda context: {"thief.share": percent("vote0")},
        keys=lambda scoring: ["vote0"],
        count=lambda debate, add: add("vote0", 0, 1),
    )
    registered(families.FAMILIES, "thief", thief)
    with pytest.raises(RegistryError, match=r"'thief' \(a test\) names a tally key 'vote0', "
                       r"which the metric family 'votes' \(mad-eval\) already names"):  # fmt: skip
        compute_metrics(case_turns(), THREE)


def test_a_family_must_be_a_family_of_its_own_name(registered):
    with pytest.raises(
        RegistryError, match=r"must be a mad_eval\.measure\.base\.Family named 'toy2'"
    ):
        registered(families.FAMILIES, "toy2", TOY)


@pytest.mark.parametrize("module", ["counts.py", "compute.py", "schema.py"])
def test_the_counting_and_measuring_name_no_family(module):
    """Counting, Measuring and the formulas reach every family through the registry alone."""
    tree = ast.parse((MEASURE / module).read_text())
    imported = {
        alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    named = set(families.FAMILIES)
    modules = {f"mad_eval.measure.{m}" for m in ("votes", "rouge", "dynamics", "cost")}
    modules |= {f"mad_eval.measure.{m}" for m in ("judge_scores", "matched")}
    assert not {i for i in imported if any(i.startswith(m) for m in modules)}, imported
    assert named >= {"votes", "rouge", "dynamics", "cost", "critique", "matched"}


def test_metrics_json_leads_with_its_schema_version():
    assert next(iter(compute_metrics(case_turns(), THREE))) == "schema_version"
    assert compute_metrics(case_turns(), THREE)["schema_version"] == SCHEMA_VERSION


def test_scoring_needs_its_kind_and_takes_the_kinds_rule():
    with pytest.raises(TypeError):
        Scoring(3, 1, (0, 1, 2), seed=0)  # type: ignore[call-arg]
    assert Scoring(3, 1, [0, 1, 2], kind="summary", seed=0).rule == "consensus"
    assert Scoring(3, 1, [0, 1, 2], kind="math", seed=0).voters == (0, 1, 2)


@pytest.fixture(scope="module")
def paired(tmp_path_factory) -> tuple[Path, Path]:
    """A small debate (N=2, T=1: G=4) and a single run of K=4 of the same model."""
    where = tmp_path_factory.mktemp("paired")
    mad_eval.run(agents=2, rounds=1, limit=6, benchmark="arith", out=where / "deb")
    mad_eval.single(samples=4, limit=6, benchmark="arith", out=where / "sgl")
    return where / "deb", where / "sgl"


def test_scoring_is_read_from_the_manifest_and_a_bad_rule_refused(paired):
    debate, _ = paired
    manifest = RunManifest.read(debate / "manifest.json")
    scoring = Scoring.from_manifest(manifest)
    assert (scoring.agents, scoring.rounds, scoring.voters) == (2, 1, (0, 1))
    assert (scoring.kind, scoring.rule, scoring.hub) == ("math", "plurality", None)
    data = json.loads((debate / "manifest.json").read_text())
    data["protocol"]["score"] = "loudest"
    with pytest.raises(StoreError, match="scoring rule 'loudest'"):
        Scoring.from_manifest(RunManifest.from_dict(data, debate / "manifest.json"))


def test_report_single_reads_each_runs_turns_once(paired, monkeypatch):
    """Pairing counts the single run's pools and the debate's tokens as each is measured."""
    debate, single = paired
    reads: Counter[str] = Counter()

    read = RunStore.debates

    def debates(store, *args, **kwargs):
        reads[store.root.name] += 1
        return read(store, *args, **kwargs)

    monkeypatch.setattr(RunStore, "debates", debates)
    found = mad_eval.report(debate, single=single)
    assert found.metrics["matched"]["generations"] == 4
    assert reads == {"deb": 1, "sgl": 1}
    reads.clear()
    mad_eval.report(debate)  # paired again with the single run metrics.json names
    assert reads == {"deb": 1, "sgl": 1}


def test_a_newer_metrics_json_is_refused_in_one_sentence_and_kept(paired):
    debate, _ = paired
    path = debate / "metrics.json"
    newer = {**json.loads(path.read_text()), "schema_version": SCHEMA_VERSION + 1}
    path.write_text(json.dumps(newer))
    with pytest.raises(MetricsVersionError, match=f"schema_version {SCHEMA_VERSION + 1}"):
        mad_eval.report(debate)
    assert json.loads(path.read_text()) == newer
    path.write_text(json.dumps({**newer, "schema_version": SCHEMA_VERSION}))
    assert mad_eval.report(debate).metrics["schema_version"] == SCHEMA_VERSION
