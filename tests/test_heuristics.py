"""The fast heuristics ``fixed-demand`` and ``fungible-greedy`` on hand-built and random rounds."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import gen
from optsched.checker import check_schedule
from optsched.heuristics.fixed_demand import FixedDemand, fixed_demand_schedule
from optsched.heuristics.fungible_greedy import FungibleGreedy, fungible_greedy_schedule
from optsched.model import Instance, Job, Node, Profile, Round
from optsched.values import schedule_value

HUNGRY = Profile((1, 2, 4), (10,), ((0.5,), (1.0,), (2.0,)))
FLAT = Profile((1, 2, 4), (10,), ((1.0,), (1.0,), (1.0,)))
SOLVERS = [FixedDemand, FungibleGreedy]


def _inst(nodes, jobs, fair=False, name="t"):
    return Instance(name, tuple(nodes), tuple(jobs), Round(300.0, fair))


def _run(cls, inst):
    res = cls().solve(inst, time_limit=5.0, seed=0)
    rep = check_schedule(inst, res.schedule)
    assert list(rep) == [], rep
    assert res.objective == pytest.approx(rep.objective)
    return res


def test_fungible_beats_fixed_when_hungry_and_flat_share_a_node():
    inst = _inst([Node("n0", "V100", 2, 6, 100)], [Job("a", 1, HUNGRY, (2, 10)), Job("b", 1, FLAT, (2, 10))])
    assert _run(FixedDemand, inst).objective == pytest.approx(2.0)
    res = _run(FungibleGreedy, inst)
    assert res.objective == pytest.approx(3.0)
    assert res.schedule.jobs["a"].cpus_per_gpu == 4


def test_fair_round_never_goes_below_demand():
    inst = _inst([Node("n0", "V100", 2, 6, 100)], [Job("a", 1, HUNGRY, (2, 10)), Job("b", 1, HUNGRY, (2, 10))],
                 fair=True)
    res = _run(FungibleGreedy, inst)
    for a in res.schedule.jobs.values():
        assert a.cpus_per_gpu >= 2


def test_multi_node_split_only_when_needed():
    nodes = [Node("n0", "V100", 4, 40, 400), Node("n1", "V100", 4, 40, 400), Node("n2", "V100", 2, 40, 400)]
    inst = _inst(nodes, [Job("big", 6, FLAT, (2, 10)), Job("small", 2, FLAT, (2, 10), weight=0.5)])
    for cls in SOLVERS:
        s = _run(cls, inst).schedule
        assert len(s.jobs["big"].nodes) == 2
        assert s.jobs["big"].nodes == {"n0": 4, "n2": 2}  # the last chunk is a best fit
        assert s.jobs["small"].nodes == {"n1": 2}


def test_running_job_kept_in_place():
    nodes = [Node("n0", "V100", 4, 40, 400), Node("n1", "V100", 4, 40, 400)]
    job = Job("r", 2, FLAT, (2, 10), placement={"n1": 2}, restart_s=60)
    for cls in SOLVERS:
        assert _run(cls, _inst(nodes, [job])).schedule.jobs["r"].nodes == {"n1": 2}


@pytest.mark.parametrize("max_moves", [None, 0])
def test_a_younger_job_takes_free_room_before_a_running_jobs_nodes(max_moves):
    """The round starts from an empty cluster and places jobs by priority: a heavier newcomer that
    fits in free room goes there, so the lighter running job neither moves nor (with moves
    forbidden) is preempted."""
    nodes = [Node("n0", "V100", 4, 40, 400), Node("n1", "V100", 4, 40, 400), Node("n2", "V100", 4, 40, 400)]
    jobs = [Job("r", 4, FLAT, (2, 10), placement={"n0": 4}, restart_s=60), Job("new", 4, FLAT, (2, 10), weight=5.0),
            Job("r2", 2, FLAT, (2, 10), placement={"n1": 2}, restart_s=60), Job("new2", 2, FLAT, (2, 10), weight=4.0)]
    inst = Instance("t", tuple(nodes), tuple(jobs), Round(300.0, False, max_moves=max_moves))
    for cls in SOLVERS:
        s = _run(cls, inst).schedule
        assert s.jobs["r"].nodes == {"n0": 4} and s.jobs["r2"].nodes == {"n1": 2}, (cls.__name__, s.jobs)
        assert s.jobs["new"].nodes == {"n2": 4} and s.jobs["new2"].nodes == {"n1": 2}


def test_gpu_type_restrictions_and_fastest_type_preferred():
    nodes = [Node("k", "K80", 8, 80, 800), Node("v", "V100", 8, 80, 800), Node("p", "P100", 8, 80, 800)]
    jobs = [Job("fast", 2, FLAT, (2, 10), gpu_speed={"V100": 1.0, "K80": 0.3}),
            Job("ponly", 2, FLAT, (2, 10), gpu_speed={"P100": 0.6})]
    for cls in SOLVERS:
        s = _run(cls, _inst(nodes, jobs)).schedule
        assert s.jobs["fast"].nodes == {"v": 2}
        assert s.jobs["ponly"].nodes == {"p": 2}


def test_empty_cluster_and_job_larger_than_cluster():
    for cls in SOLVERS:
        assert _run(cls, _inst([], [Job("a", 1, FLAT, (2, 10))])).schedule.jobs == {}
        inst = _inst([Node("n0", "V100", 4, 40, 400)], [Job("huge", 8, FLAT, (2, 10)), Job("ok", 4, FLAT, (2, 10))])
        assert set(_run(cls, inst).schedule.jobs) == {"ok"}


def test_plain_functions_and_determinism():
    inst = gen.generate(8, 30, seed=3)
    assert fixed_demand_schedule(inst) == fixed_demand_schedule(inst)
    assert fungible_greedy_schedule(inst) == fungible_greedy_schedule(inst)
    assert check_schedule(inst, fungible_greedy_schedule(inst)).objective == pytest.approx(
        schedule_value(inst, fungible_greedy_schedule(inst)))


def test_fungible_greedy_solver_is_at_least_fixed_demand_by_construction():
    """FungibleGreedy.solve returns the better of its schedule and fixed-demand's (documented)."""
    for seed in range(3):
        inst = gen.generate(8, 30, seed=seed)
        assert _run(FungibleGreedy, inst).objective >= _run(FixedDemand, inst).objective - 1e-9


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.integers(1, 6), st.integers(1, 20), st.booleans(), st.floats(0, 0.8))
def test_random_instances_are_feasible(seed, n, j, fair, running):
    inst = gen.generate(n, j, seed=seed, fair=fair, running_fraction=running)
    for cls in SOLVERS:
        _run(cls, inst)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_fungible_greedy_completes_a_partial_schedule(data):
    """``fixed=``: the partial schedule's jobs keep their nodes, the rest is placed around them,
    and the result is feasible and worth at least the partial schedule."""
    from optsched.gen import generate
    from optsched.schedule import Schedule

    inst = generate(data.draw(st.integers(1, 6)), data.draw(st.integers(1, 20)), seed=data.draw(st.integers(0, 10_000)),
                    running_fraction=data.draw(st.floats(0, 0.8)))
    full = fixed_demand_schedule(inst)  # placed at demand: unlike what fungible-greedy picks itself
    keep = data.draw(st.lists(st.sampled_from(sorted(full.jobs)), unique=True)) if full.jobs else []
    partial = Schedule(inst.name, {j: full.jobs[j] for j in keep})
    done = fungible_greedy_schedule(inst, fixed=partial)
    assert check_schedule(inst, done).feasible
    assert all(done.jobs[j].nodes == partial.jobs[j].nodes for j in keep)
    assert all(done.jobs[j].cpus_per_gpu >= partial.jobs[j].cpus_per_gpu or done.jobs[j].mem_per_gpu_gb >= partial.jobs[j].mem_per_gpu_gb
               for j in keep)
    assert schedule_value(inst, done) >= schedule_value(inst, partial) - 1e-9


def test_fungible_greedy_places_a_gang_that_fits_only_below_its_lean_point():
    """An 8-GPU job whose lean point (32 GB per GPU) no empty cluster of 2 x (4 GPUs, 64 GB)
    can hold: the greedy falls back to the leanest point that fits (16 GB), as the exact round
    does, instead of never starting it."""
    from optsched import solve_round

    prof = Profile((2, 4), (16, 32, 64), ((0.1, 0.8, 0.85), (0.12, 1.0, 1.05)))
    nodes = tuple(Node(f"n{i}", "V100", 4, 32, 64) for i in range(2))
    inst = Instance("lean", nodes, (Job("g", 8, prof, (4, 32)),), Round())
    res = solve_round(inst, solver="fungible-greedy", time_limit=5.0)
    a = res.schedule.jobs["g"]
    assert a.mem_per_gpu_gb == 16 and not check_schedule(inst, res.schedule)
    assert res.objective == pytest.approx(solve_round(inst, solver="cpsat", time_limit=5.0).objective)


@pytest.mark.parametrize("max_moves", [None, 0])
def test_a_gang_takes_a_running_jobs_node_rather_than_spread_over_more_nodes(max_moves):
    """Unclaimed room first, but not at the price of a wider gang: an 8-GPU newcomer that would
    span two nodes of unclaimed room takes the one node a lighter running job holds, and that job
    moves (or, with moves forbidden, waits): its restart costs less than the gang's spread."""
    nodes = [Node("n0", "V100", 8, 80, 800), Node("n1", "V100", 8, 80, 800), Node("n2", "V100", 8, 80, 800)]
    jobs = [Job("gang", 8, FLAT, (2, 10), weight=5.0),
            Job("r", 2, FLAT, (2, 10), placement={"n0": 2}, restart_s=60),
            Job("b1", 4, FLAT, (2, 10), placement={"n1": 4}, weight=9.0),
            Job("b2", 4, FLAT, (2, 10), placement={"n2": 4}, weight=9.0)]
    inst = Instance("t", tuple(nodes), tuple(jobs), Round(300.0, False, max_moves=max_moves))
    for cls in SOLVERS:
        s = _run(cls, inst).schedule
        assert s.jobs["gang"].nodes == {"n0": 8}, (cls.__name__, s.jobs)
        assert s.jobs["b1"].nodes == {"n1": 4} and s.jobs["b2"].nodes == {"n2": 4}
        if max_moves == 0:
            assert "r" not in s.jobs
        else:
            assert len(s.jobs["r"].nodes) == 1 and "n0" not in s.jobs["r"].nodes
