"""Packing served models over a pool of GPUs: the pool read from --gpus, the environment or
the driver; the start order against brute-forced optima; and run_pool driven by fake
servers that finish when the test says (a fake clock, no sleeps, no processes)."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import Counter

import pytest

from mad_eval.errors import UserError
from mad_eval.serving import pool as pool_module
from mad_eval.serving.pool import (
    PoolError,
    PoolFailed,
    Work,
    describe,
    gpu_pool,
    makespan,
    parse_smi,
    plan,
    refusal,
    run_pool,
    simulate,
    take,
)


def lpt(works: list[Work]) -> list[Work]:
    return sorted(works, key=lambda work: (-work.duration, work.label))


def optimum_one_gpu(durations: list[float], machines: int) -> float:
    """P||Cmax by brute force over every assignment of models to GPUs."""
    best = float("inf")
    for assignment in itertools.product(range(machines), repeat=len(durations)):
        loads = [0.0] * machines
        for duration, machine in zip(durations, assignment, strict=True):
            loads[machine] += duration
        best = min(best, max(loads))
    return best


def optimum_two_slots(works: list[Work]) -> float:
    """On two GPUs a model holding both runs alone, so the optimum is those models one after
    the other plus the best split of the one-GPU models."""
    wide = sum(work.duration for work in works if work.width == 2)
    return wide + optimum_one_gpu([work.duration for work in works if work.width == 1], 2)


def best_order(works: list[Work], pool: list[int]) -> float:
    return min(makespan(order, works, pool) for order in itertools.permutations(works))


# --- the order against the optimum -------------------------------------------------------

# LPT's worst case on two machines (3,3,2,2,2: LPT ends at 7, the optimum at 6), and a mix of
# a two-replica model and a tensor-parallel one with one-GPU models
DONE_WHEN = {
    "lpt worst case": [
        Work(f"m{i}", 1, 1, turns) for i, turns in enumerate([300, 300, 200, 200, 200])
    ],
    "mixed shapes": [
        Work("base", 1, 1, 420),
        Work("dapo", 1, 2, 700),
        Work("sdrl", 2, 1, 150),
        Work("small", 1, 1, 90),
        Work("tiny", 1, 1, 260),
    ],
}


@pytest.mark.parametrize("name", DONE_WHEN)
def test_five_models_on_two_slots_end_within_ten_percent_of_the_optimum(name):
    works = DONE_WHEN[name]
    order = plan(works, [0, 1])
    assert sorted(work.label for work in order) == sorted(work.label for work in works)
    assert makespan(order, works, [0, 1]) <= 1.10 * optimum_two_slots(works)


def test_the_plan_beats_plain_longest_first_on_its_worst_case():
    works = DONE_WHEN["lpt worst case"]
    assert makespan(lpt(works), works, [0, 1]) == 700  # 7/6 of the optimum: LPT alone fails
    assert makespan(plan(works, [0, 1]), works, [0, 1]) == optimum_two_slots(works) == 600


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_one_gpu_models_end_within_the_lpt_bound_of_the_optimum(seed):
    rng = random.Random(seed)
    machines = rng.choice([2, 3, 4])
    count = rng.randint(4, 6 if machines == 4 else 7)
    works = [Work(f"m{i}", 1, 1, rng.randint(1, 60)) for i in range(count)]
    pool = list(range(machines))
    bound = (4 / 3 - 1 / (3 * machines)) * optimum_one_gpu([w.duration for w in works], machines)
    assert makespan(lpt(works), works, pool) <= bound + 1e-9  # the simulation is list scheduling
    assert makespan(plan(works, pool), works, pool) <= min(bound, makespan(lpt(works), works, pool))


@pytest.mark.parametrize("seed", range(3))
def test_many_models_are_searched_and_stay_within_the_lpt_bound(seed):
    """Past the size plan tries every order for, its moves still never lose to LPT."""
    rng = random.Random(100 + seed)
    works = [Work(f"m{i}", 1, 1, rng.randint(5, 80)) for i in range(10)]
    order = plan(works, [0, 1])
    optimum = optimum_one_gpu([work.duration for work in works], 2)
    assert makespan(order, works, [0, 1]) <= min(
        (4 / 3 - 1 / 6) * optimum, makespan(lpt(works), works, [0, 1])
    )


@pytest.mark.parametrize("seed", range(6))
def test_mixed_shapes_get_the_best_start_order(seed):
    rng = random.Random(200 + seed)
    pool = list(range(rng.choice([2, 4])))
    works = [
        Work(f"m{i}", rng.choice([1, 2]), rng.choice([1, 2]), rng.randint(1, 90)) for i in range(5)
    ]
    works = [work for work in works if work.width <= len(pool)] or [Work("one", 1, 1, 5)]
    assert makespan(plan(works, pool), works, pool) == best_order(works, pool)


def test_models_with_no_turns_left_go_last_and_are_not_simulated():
    works = [Work("done", 1, 1, 0), Work("left", 1, 1, 5)]
    assert [work.label for work in plan(works, [0])] == ["left", "done"]
    assert [slot.work.label for slot in simulate(works, works, [0])] == ["left"]


def test_a_model_larger_than_the_pool_is_refused_in_one_sentence():
    works = [Work("small", 1, 1, 5), Work("big", 2, 2, 5)]
    with pytest.raises(PoolError) as raised:
        plan(works, [0, 1, 2])
    message = str(raised.value)
    assert "'big'" in message and "4 GPUs" in message and "holds 3 (GPUs 0,1,2)" in message
    assert isinstance(raised.value, UserError) and message.count(". ") == 0
    assert refusal(works[0], [0, 1, 2]) is None


@pytest.mark.parametrize(
    ("works", "pool", "words"),
    [
        ([Work("a", 1, 1, 1)], [], "empty"),
        ([Work("a", 1, 1, 1)], [0, 0], "twice"),
        ([Work("a", 1, 1, 1), Work("a", 1, 1, 2)], [0], "'a' is given twice"),
    ],
)
def test_plan_refuses_an_unusable_pool_or_list(works, pool, words):
    with pytest.raises(PoolError, match=words):
        plan(works, pool)


@pytest.mark.parametrize(("gpus", "replicas", "turns"), [(0, 1, 1), (1, 0, 1), (1, 1, -1)])
def test_a_work_with_no_gpus_or_replicas_is_refused(gpus, replicas, turns):
    with pytest.raises(PoolError, match="at least"):
        Work("a", gpus, replicas, turns)


# --- GPUs for each replica ---------------------------------------------------------------


def test_each_replica_gets_a_block_of_consecutive_gpus_where_one_is_free():
    pool = list(range(8))
    free = [0, 2, 3, 5, 6, 7]
    assert take(free, Work("tp2", 2, 2, 1), pool) == [2, 3, 6, 7]  # the shortest runs, aligned
    assert free == [0, 5]
    scattered = [0, 2, 4, 6]
    assert take(scattered, Work("tp2", 2, 1, 1), pool) == [0, 2]  # no pair is free: any two
    assert take([0, 1, 2, 3], Work("tp2", 2, 1, 1), [0, 1, 2, 3]) == [0, 1]


def test_the_simulated_schedule_never_holds_a_gpu_twice():
    rng = random.Random(7)
    pool = [0, 1, 2, 3]
    works = [
        Work(f"m{i}", rng.choice([1, 2]), rng.choice([1, 2]), rng.randint(1, 50)) for i in range(7)
    ]
    slots = simulate(plan(works, pool), works, pool)
    assert sorted(slot.work.label for slot in slots) == sorted(work.label for work in works)
    for one, other in itertools.combinations(slots, 2):
        if one.start < other.end and other.start < one.end:
            assert not set(one.gpus) & set(other.gpus)
    for slot in slots:
        blocks = [
            slot.gpus[i : i + slot.work.gpus] for i in range(0, len(slot.gpus), slot.work.gpus)
        ]
        assert len(blocks) == slot.work.replicas and set(slot.gpus) <= set(pool)


def test_the_dry_run_lines_say_which_model_where_and_when():
    works = [
        Work("long", 1, 1, 30),
        Work("pair", 2, 1, 10),
        Work("short", 1, 1, 20),
        Work("old", 1, 1, 0),
    ]
    lines = describe(plan(works, [0, 1]), [0, 1])
    assert lines == [
        "serving plan on GPUs 0,1: 3 servers to start, estimated end at 40 turn units",
        "  1. long   GPUs 0         1 replica x 1 GPU    30 turns  t=0..30",
        "  2. short  GPUs 1         1 replica x 1 GPU    20 turns  t=0..20",
        "  3. pair   GPUs 0,1       1 replica x 2 GPUs   10 turns  t=30..40",
        "  -  old    no turns left: not served",
    ]


# --- the pool ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "gpus"),
    [
        ("0,1,2,3", [0, 1, 2, 3]),
        ("0-3", [0, 1, 2, 3]),
        ("0-1, 4,6-7", [0, 1, 4, 6, 7]),
        (" 2 ", [2]),
    ],
)
def test_gpus_option_takes_indices_and_ranges(text, gpus):
    assert gpu_pool(text, env={"CUDA_VISIBLE_DEVICES": "5"}) == gpus


@pytest.mark.parametrize("text", ["", "a", "3-1", "0,0", "0-2,1", "-1", "1.5", "0,,1", "0-"])
def test_bad_gpus_text_is_one_sentence_naming_the_option(text):
    with pytest.raises(PoolError) as raised:
        gpu_pool(text, env={})
    message = str(raised.value)
    assert message.startswith(f"--gpus {text!r} ")
    assert "such as 0,1,2,3 or 0-3" in message or "twice: name each GPU once" in message


def test_the_pool_falls_back_to_cuda_visible_devices_then_the_driver(monkeypatch):
    monkeypatch.setattr(pool_module, "_driver_gpus", lambda env: [0, 1, 2])
    assert gpu_pool(None, env={"CUDA_VISIBLE_DEVICES": "2,3"}) == [2, 3]
    assert gpu_pool(None, env={}) == [0, 1, 2]
    with pytest.raises(PoolError, match=r"^CUDA_VISIBLE_DEVICES 'GPU-8f2a' "):
        gpu_pool(None, env={"CUDA_VISIBLE_DEVICES": "GPU-8f2a"})


@pytest.mark.parametrize(
    ("env", "words"),
    [({"CUDA_VISIBLE_DEVICES": ""}, "hides every GPU"), ({"PATH": ""}, "no GPU was found")],
)
def test_no_gpu_is_one_cpu_slot_with_a_note(monkeypatch, env, words):
    monkeypatch.setattr(pool_module, "program", lambda name, path=None: None)
    notes = []
    assert gpu_pool(None, env=env, note=notes.append) == []  # one CPU slot
    assert pool_module.slots([]) == [0] and pool_module.slots([2, 3]) == [2, 3]
    assert len(notes) == 1 and words in notes[0] and "one CPU slot" in notes[0]


def test_the_driver_listing_is_read_for_gpus_not_mig_devices():
    listing = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-8f2a)\n"
        "  MIG 3g.40gb     Device  0: (UUID: MIG-1a)\n"
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-9b3c)\n"
    )
    assert parse_smi(listing) == [0, 1]
    assert parse_smi("No devices were found\n") == []


# --- running: fake servers on a fake clock -----------------------------------------------


class FakeNode:
    """serve() holds its GPUs until the test opens its gate; the test opens the gate of the
    server that ends first on a fake clock (turns / replicas after its start)."""

    def __init__(self, pool: list[int], fail: tuple[str, ...] = ()):
        self.pool, self.fail = pool, set(fail)
        self.held: set[int] = set()
        self.peak, self.clock, self.calls = 0, 0.0, Counter()
        self.gates: dict[str, asyncio.Event] = {}
        self.ends: dict[str, float] = {}
        self.starts: list[tuple[str, tuple[int, ...], float]] = []
        self.events: list[tuple[str, str]] = []
        self.finished: asyncio.Queue[str] = asyncio.Queue()

    def progress(self, event: str, work: Work, gpus) -> None:
        self.events.append((event, work.label))
        if event == "starting":
            self.starts.append((work.label, tuple(gpus), self.clock))
            self.ends[work.label] = self.clock + work.duration
            self.gates[work.label] = asyncio.Event()
        elif event in ("finished", "failed"):
            self.finished.put_nowait(work.label)

    async def serve(self, work: Work, gpus: list[int]) -> None:
        assert len(gpus) == work.width and set(gpus) <= set(self.pool)
        assert not self.held & set(gpus), f"{work.label} got GPUs in use: {gpus}"
        self.held |= set(gpus)
        self.peak = max(self.peak, len(self.held))
        self.calls[work.label] += 1
        try:
            await self.gates[work.label].wait()
            if work.label in self.fail:
                raise UserError(f"the server of {work.label} exited during start-up")
        finally:
            self.held -= set(gpus)

    async def run(self, works: list[Work]) -> BaseException | None:
        task = asyncio.create_task(run_pool(works, self.pool, self.serve, progress=self.progress))
        while not task.done():
            waiting = [label for label in self.ends if not self.gates[label].is_set()]
            if not waiting:
                await asyncio.sleep(0)  # the pool finishing its last step
                continue
            label = min(waiting, key=lambda label: self.ends[label])
            self.clock = self.ends[label]
            self.gates[label].set()
            await self.finished.get()
        return task.exception()


def test_run_pool_starts_servers_as_the_plan_simulated_and_never_past_the_pool():
    works = DONE_WHEN["mixed shapes"]
    node = FakeNode([0, 1])
    assert asyncio.run(node.run(works)) is None
    assert node.peak <= 2 and node.calls == Counter({work.label: 1 for work in works})
    simulated = [
        (s.work.label, s.gpus, s.start) for s in simulate(plan(works, [0, 1]), works, [0, 1])
    ]
    assert node.starts == simulated
    assert max(node.ends.values()) <= 1.10 * optimum_two_slots(works)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_run_pool_serves_every_model_once_within_the_pool(seed):
    rng = random.Random(300 + seed)
    pool = rng.choice([[0, 1], [0, 1, 2, 3], [4, 5, 6]])
    works = [
        Work(f"m{i}", rng.choice([1, 2]), rng.choice([1, 1, 2]), rng.randint(0, 40))
        for i in range(rng.randint(3, 9))
    ]
    works = [work for work in works if work.width <= len(pool)]
    node = FakeNode(pool)
    assert asyncio.run(node.run(works)) is None
    assert node.peak <= len(pool)
    assert node.calls == Counter({work.label: 1 for work in works if work.turns})
    assert {label for event, label in node.events if event == "skipped"} == {
        work.label for work in works if not work.turns
    }


def test_a_failed_server_frees_its_gpus_and_the_others_finish():
    works = [Work("crash", 1, 1, 10), Work("ok", 1, 1, 20), Work("whole", 2, 1, 5)]
    node = FakeNode([0, 1], fail=("crash",))
    error = asyncio.run(node.run(works))
    assert isinstance(error, PoolFailed) and isinstance(error, UserError)
    assert list(error.failures) == ["crash"] and "'crash'" in str(error)
    assert "exited during start-up" in str(error) and "'ok'" not in str(error)
    assert ("failed", "crash") in node.events and ("finished", "whole") in node.events
    assert node.calls == Counter(crash=1, ok=1, whole=1)  # "whole" got both GPUs after the crash


def test_cancelling_the_pool_cancels_every_server_and_waits_for_each_to_stop():
    async def scenario():
        stopping: asyncio.Queue[str] = asyncio.Queue()
        allow_stop = asyncio.Event()
        started, stopped = [], []

        async def serve(work: Work, gpus: list[int]) -> None:
            started.append(work.label)
            try:
                await asyncio.Event().wait()  # serves until cancelled
            except asyncio.CancelledError:
                stopping.put_nowait(work.label)
                await allow_stop.wait()  # the server takes a while to stop
                stopped.append(work.label)
                raise

        works = [Work("a", 1, 1, 30), Work("b", 1, 1, 20), Work("queued", 1, 1, 10)]
        task = asyncio.create_task(run_pool(works, [0, 1], serve))
        while len(started) < 2:
            await asyncio.sleep(0)
        task.cancel()
        first = await stopping.get()
        task.cancel()  # a second Ctrl-C while the servers stop
        second = await stopping.get()
        assert {first, second} == {"a", "b"}
        assert not task.done()  # still waiting for both servers to stop
        allow_stop.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        return started, stopped

    started, stopped = asyncio.run(scenario())
    assert sorted(started) == sorted(stopped) == ["a", "b"]  # "queued" never started
