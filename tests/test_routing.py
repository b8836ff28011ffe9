"""Replicas chosen by question, for their prefix caches: a question's requests stay on one
replica until it is busier than the least busy by the margin, or rests after a failure."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import pytest
from cli_helpers import mad_eval, turns_of
from stub_server import StubServer

from mad_eval.backends import Backend, Guarded, Replica
from mad_eval.backends.base import _stable_hash


class Idle(Backend):
    spec = "idle"

    async def generate(self, request):  # never asked: these tests only pick replicas
        raise AssertionError("not sent")


def replicas(n: int) -> list[Replica]:
    return [Replica(Idle(), asyncio.Semaphore(8), f"r{i}") for i in range(n)]


def home(question: str, n: int) -> int:
    return _stable_hash(question) % n


def test_a_question_always_goes_to_its_own_replica_and_questions_spread():
    guard = Guarded(replicas(3), margin=4)
    picked = {q: guard._pick(set(), q).endpoint for q in (f"q{i}" for i in range(60))}
    assert picked == {q: guard._pick(set(), q).endpoint for q in picked}  # stable
    assert all(picked[q] == f"r{home(q, 3)}" for q in picked)
    # Spread: each replica is home to a fair share of 60 questions.
    shares = defaultdict(int)
    for endpoint in picked.values():
        shares[endpoint] += 1
    assert len(shares) == 3 and min(shares.values()) >= 10


def test_a_busy_resting_or_failed_home_is_passed_over_for_the_least_busy():
    pool = replicas(3)
    guard = Guarded(pool, margin=4)
    mine = pool[home("q1", 3)]
    others = [r for r in pool if r is not mine]
    mine.outstanding = 4  # within the margin of the idle ones: still home
    assert guard._pick(set(), "q1") is mine
    mine.outstanding = 5  # past it: the least busy other replica
    others[0].outstanding = 2
    assert guard._pick(set(), "q1") is others[1]
    mine.outstanding = 0
    mine.resting_until = time.monotonic() + 60  # resting after a failure
    assert guard._pick(set(), "q1") is others[1]
    mine.resting_until = 0.0
    assert guard._pick({id(mine)}, "q1") is others[1]  # a retry tries another first
    # Without a margin, routing is least busy alone.
    others[1].outstanding = 3
    assert Guarded(pool)._pick(set(), "q1") is mine


@pytest.mark.slow
def test_a_served_run_keeps_each_question_on_one_replica_and_its_prefixes_warm(tmp_path):
    with StubServer() as a, StubServer() as b, StubServer() as c:
        servers = [a, b, c]
        urls = [arg for s in servers for arg in ("--base-url", s.base_url)]
        result = mad_eval(
            "run", "--model", "openai:stub-model", *urls, "--agents", "3", "--rounds", "2",
            "--limit", "8", "--out", "r", cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        turns = turns_of(tmp_path / "r")
        by_question = defaultdict(set)
        for t in turns:
            by_question[t["question"]].add(t["endpoint"])
        assert all(len(endpoints) == 1 for endpoints in by_question.values())
        assert len({e for endpoints in by_question.values() for e in endpoints}) > 1
        # Every agent of a round-0 question reads the same prompt: all but one reuse it.
        assert sum(s.reused_chars for s in servers) > 0.5 * sum(s.prompt_chars for s in servers)
