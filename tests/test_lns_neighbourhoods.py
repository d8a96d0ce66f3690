"""How lns chooses the nodes it frees (optsched.heuristics.neighbourhoods), and lns with each choice."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.checker import check_schedule
from optsched.errors import InputError
from optsched.exact.prep import job_data
from optsched.heuristics.lns import LargeNeighbourhoodSearch
from optsched.heuristics.neighbourhoods import (
    NodeState,
    linked_nodes,
    node_losses,
    node_state,
    priced_nodes,
    random_nodes,
    targeted_nodes,
)
from optsched.mip.colgen import Prices, config_bound
from optsched.model import Instance, Job, Node, Profile, Round
from optsched.schedule import Assignment, Schedule
from optsched.values import schedule_value

HUNGRY = Profile((1, 2, 4), (10, 20), ((0.5, 0.5), (1.0, 1.0), (2.0, 2.5)))


def _state(n: int, pairs: bool) -> tuple[list[str], NodeState]:
    """``n`` nodes; with ``pairs``, nodes 2i and 2i+1 share a split job."""
    ids = [f"n{i}" for i in range(n)]
    partners = {}
    if pairs:
        for i in range(0, n - 1, 2):
            partners[ids[i]] = frozenset({ids[i + 1]})
            partners[ids[i + 1]] = frozenset({ids[i]})
    return ids, NodeState(dict.fromkeys(ids, 0.0), dict.fromkeys(ids, 0.0), partners)


@given(n=st.integers(1, 12), size=st.integers(1, 14), seed=st.integers(0, 10**6), pairs=st.booleans(),
       kind=st.sampled_from(["random", "linked", "targeted", "priced"]))
def test_choices_are_distinct_nodes_of_the_pool(n, size, seed, pairs, kind):
    ids, state = _state(n, pairs)
    pool = ids[: max(1, n - 1)]  # the pool may leave partners out: they must not be chosen
    rng = random.Random(seed)
    if kind == "priced":
        got = priced_nodes(state, {m: float(i % 3) for i, m in enumerate(ids)}, pool, size, rng)
    else:
        got = random_nodes(pool, size, rng) if kind == "random" else \
            (linked_nodes if kind == "linked" else targeted_nodes)(state, pool, size, rng)
    assert len(got) == len(set(got)) == min(size, len(pool))
    assert set(got) <= set(pool)


@given(n=st.integers(1, 8), seed=st.integers(0, 10**6), kind=st.sampled_from(["linked", "targeted", "priced"]))
def test_a_split_jobs_nodes_are_freed_together(n, seed, kind):
    ids, state = _state(2 * n, pairs=True)
    if kind == "priced":
        got = priced_nodes(state, dict.fromkeys(ids, 1.0), ids, 2, random.Random(seed))
    else:
        got = (linked_nodes if kind == "linked" else targeted_nodes)(state, ids, 2, random.Random(seed))
    assert state.partners[got[0]] == {got[1]}


def test_targeted_starts_at_lost_worth_and_adds_idle_nodes():
    ids, _ = _state(10, pairs=False)
    deficit = dict.fromkeys(ids, 0.0) | {"n3": 1e6}
    slack = dict.fromkeys(ids, 0.0) | {"n7": 1e6}
    state = NodeState(deficit, slack, {})
    for seed in range(20):
        assert targeted_nodes(state, ids, 2, random.Random(seed)) == ["n3", "n7"]


def test_priced_starts_and_grows_where_the_schedule_loses_most():
    ids, state = _state(10, pairs=False)
    loss = dict.fromkeys(ids, 0.0) | {"n3": 1e6, "n8": 1e3}
    for seed in range(20):
        assert priced_nodes(state, loss, ids, 2, random.Random(seed)) == ["n3", "n8"]


def test_node_losses_split_the_gap_of_a_schedule_to_the_bound():
    """bound - worth = the prices of the jobs left out + the nodes' losses, each loss the node's
    price less what its jobs earn above their prices there (a 2-GPU job split over both nodes:
    half of it on each)."""
    nodes = (Node("a", "V100", 2, 16, 100), Node("b", "V100", 2, 16, 100))
    jobs = (Job("one", 1, HUNGRY, (1, 10)), Job("split", 2, HUNGRY, (1, 10), spread_factor=0.8), Job("out", 1, HUNGRY, (1, 10)))
    inst = Instance("s", nodes, jobs, Round())
    sched = Schedule("s", {"one": Assignment({"a": 1}, 4, 20), "split": Assignment({"a": 1, "b": 1}, 2, 10)})
    prices = Prices({"one": 1.0, "split": 0.5, "out": 0.25}, {"a": 2.0, "b": 1.5})
    # worth relative to the demand point's throughput (0.5); the split pays one spread factor
    worth_one, worth_split = 2.5 / 0.5, 1.0 / 0.5 * 0.8
    assert schedule_value(inst, sched) == pytest.approx(worth_one + worth_split)
    loss = node_losses(inst, sched, prices)
    assert loss["a"] == pytest.approx(max(0.0, 2.0 - (worth_one - 1.0) - (worth_split - 0.5) / 2))
    assert loss["b"] == pytest.approx(1.5 - (worth_split - 0.5) / 2)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6))
def test_a_converged_bounds_prices_add_up_to_it_and_no_node_beats_its_price(seed):
    """The prices of a configuration-LP bound sum to it (jobs and nodes), and on a round of
    single-GPU jobs (no split rows, whose duals node_losses leaves out) no node of a feasible
    schedule earns more above its jobs' prices than the node's price: every loss is >= 0 before
    the clip, so the losses and the left-out jobs' prices add up to bound - worth."""
    rng = random.Random(seed)
    nodes = tuple(Node(f"n{i}", "V100" if i % 2 else "P100", 4, 12, 60) for i in range(4))
    jobs = tuple(Job(f"j{k}", 1, HUNGRY, (1, 10), weight=rng.uniform(0.5, 2.0),
                     gpu_speed={"V100": 1.0, "P100": rng.uniform(0.4, 0.9)}) for k in range(rng.randint(6, 24)))
    inst = Instance(f"r{seed}", nodes, jobs, Round())
    sched = LargeNeighbourhoodSearch().solve(inst, time_limit=0.3, seed=seed, bound=False).schedule
    res = config_bound(inst, time_limit=10.0, schedules=[sched])
    p = res.prices
    assert res.converged and p is not None
    assert sum(p.job.values()) + sum(p.node.values()) == pytest.approx(res.bound, rel=1e-6)
    loss = node_losses(inst, sched, p)
    left_out = sum(v for j, v in p.job.items() if j not in sched.jobs)
    assert left_out + sum(loss.values()) == pytest.approx(res.bound - schedule_value(inst, sched), rel=1e-6, abs=1e-6)


def test_lns_refuses_prices_of_the_wrong_type():
    with pytest.raises(InputError, match="prices"):
        LargeNeighbourhoodSearch().solve(_round(2, 2, 0), time_limit=0.5, seed=0, prices={"j0": 1.0})


def test_node_state_reads_deficit_slack_and_partners():
    nodes = (Node("a", "V100", 4, 16, 100), Node("b", "V100", 4, 16, 100))
    jobs = (Job("low", 1, HUNGRY, (1, 10)), Job("split", 2, HUNGRY, (1, 10)))
    inst = Instance("s", nodes, jobs, Round())
    sched = Schedule("s", {"low": Assignment({"a": 1}, 2, 10),  # throughput 1.0 of a best 2.5
                           "split": Assignment({"a": 1, "b": 1}, 4, 20)})  # at its best point
    top = {d.job.id: max(p.throughput for p in d.points) for d in job_data(inst)}
    state = node_state(inst, sched, top)
    assert state.deficit == pytest.approx({"a": 1.5, "b": 0.0})
    # a: 2 of 4 GPUs, 6 of 16 cores, 30 of 100 GB in use; b: 1, 4, 20
    assert state.slack["a"] == pytest.approx(0.5 + 10 / 16 + 0.7)
    assert state.slack["b"] == pytest.approx(0.75 + 12 / 16 + 0.8)
    assert state.partners == {"a": {"b"}, "b": {"a"}}


def _round(n_nodes: int, n_jobs: int, seed: int) -> Instance:
    rng = random.Random(seed)
    nodes = tuple(Node(f"n{i}", "V100" if i % 2 else "P100", 4, 12, 60) for i in range(n_nodes))
    jobs = tuple(Job(f"j{k}", rng.choice([1, 1, 2, 4, 6]), HUNGRY, (1, 10), weight=rng.uniform(0.5, 2.0),
                     gpu_speed={"V100": 1.0, "P100": rng.uniform(0.4, 0.9)}, spread_factor=rng.uniform(0.7, 1.0))
                 for k in range(n_jobs))
    return Instance(f"r{seed}", nodes, jobs, Round())


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), shares=st.sampled_from([(1.0, 0.0), (0.0, 1.0), (0.0, 0.0), (0.5, 0.5)]),
       priced=st.booleans())
def test_lns_with_each_choice_returns_checked_schedules_no_worse_than_its_start(seed, shares, priced):
    inst = _round(6, 24, seed)
    prices = config_bound(inst, time_limit=2.0).prices if priced else None
    res = LargeNeighbourhoodSearch().solve(inst, time_limit=0.6, seed=seed, bound=False,
                                           targeted=shares[0], linked=shares[1], nodes=2, prices=prices)
    assert check_schedule(inst, res.schedule) == []
    assert res.objective == pytest.approx(schedule_value(inst, res.schedule), rel=1e-9)
    assert res.objective >= res.stats["start_objective"] - 1e-9
    assert res.stats["steps"] >= 1


@pytest.mark.parametrize("value", [-0.1, 1.5, True, "half"])
def test_shares_are_checked(value):
    with pytest.raises(InputError, match="targeted"):
        LargeNeighbourhoodSearch().solve(_round(2, 2, 0), time_limit=0.5, seed=0, targeted=value)


def test_a_moved_running_job_links_its_node_to_its_home():
    nodes = tuple(Node(n, "V100", 2, 16, 100) for n in ("home", "away", "other"))
    jobs = (Job("mover", 1, HUNGRY, (1, 10), placement={"home": 1}, restart_s=30.0),
            Job("stayer", 1, HUNGRY, (1, 10), placement={"other": 1}, restart_s=30.0))
    inst = Instance("m", nodes, jobs, Round())
    sched = Schedule("m", {"mover": Assignment({"away": 1}, 2, 10), "stayer": Assignment({"other": 1}, 4, 20)})
    top = {d.job.id: max(p.throughput for p in d.points) for d in job_data(inst)}
    state = node_state(inst, sched, top)
    assert state.partners == {"home": {"away"}, "away": {"home"}}
    for seed in range(10):
        got = linked_nodes(state, ["home", "away", "other"], 2, random.Random(seed))
        assert set(got) == {"home", "away"} or got[0] == "other"
