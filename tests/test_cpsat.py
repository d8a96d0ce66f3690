"""The exact CP-SAT round model on hand-built instances with known optima."""

from __future__ import annotations

import math
import os
from dataclasses import replace

import pytest

from optsched.errors import InputError
from optsched.exact.cpsat import CpSatSolver
from optsched.exact.prep import pareto_points
from optsched.exact.scaling import ValueScale
from optsched.model import Instance, Job, Node, Profile, Round
from optsched.result import Status
from optsched.schedule import Assignment, Schedule
from optsched.solve import solve_round

# a CPU-hungry job: 1.0 at its demand (2 cores), 2.0 at 4 cores, memory irrelevant
HUNGRY = Profile((1, 2, 4), (10,), ((0.5,), (1.0,), (2.0,)))
FLAT = Profile((1, 2, 4), (10,), ((1.0,), (1.0,), (1.0,)))


def _inst(nodes, jobs, fair=False, name="t", spread_from="fewest"):
    return Instance(name, tuple(nodes), tuple(jobs), Round(300.0, fair, spread_from=spread_from))


def _solve(inst, **kw):
    kw.setdefault("num_workers", 1)
    return solve_round(inst, solver="cpsat", time_limit=kw.pop("time_limit", 10.0), seed=0, **kw)


def test_fungible_beats_fixed_demand():
    """One node with 6 cores: the hungry job takes 4 cores (2.0), the flat one 1 core (1.0); at
    fixed demand (2 + 2 cores) the total would be 2.0."""
    inst = _inst([Node("n0", "V100", 2, 6, 100)],
                 [Job("a", 1, HUNGRY, (2, 10)), Job("b", 1, FLAT, (2, 10))])
    res = _solve(inst)
    assert res.status is Status.OPTIMAL
    assert res.objective == pytest.approx(3.0)
    assert res.schedule.jobs["a"].cpus_per_gpu == 4
    assert res.bound >= res.objective


def test_fair_round_forbids_points_below_demand():
    """With fair=True the hungry job may not drop to 1 core, so only one job fits 3 cores."""
    nodes = [Node("n0", "V100", 2, 3, 100)]
    jobs = [Job("a", 1, HUNGRY, (2, 10), weight=1.0), Job("b", 1, HUNGRY, (2, 10), weight=1.0)]
    assert _solve(_inst(nodes, jobs)).objective == pytest.approx(1.5)  # 2 cores + 1 core
    assert _solve(_inst(nodes, jobs, fair=True)).objective == pytest.approx(1.0)


@pytest.mark.parametrize(("spread_from", "worth"), [("one", 0.8), ("fewest", 1.0)])
def test_split_with_spread(spread_from, worth):
    """A 4-GPU job on two 2-GPU nodes must split; counted from one node its value is multiplied by
    spread_factor once, counted from the fewest nodes that hold it (two) not at all."""
    nodes = [Node("n0", "V100", 2, 8, 100), Node("n1", "V100", 2, 8, 100)]
    inst = _inst(nodes, [Job("a", 4, FLAT, (1, 10), spread_factor=0.8)], spread_from=spread_from)
    res = _solve(inst)
    assert res.status is Status.OPTIMAL
    assert res.objective == pytest.approx(worth)
    assert dict(res.schedule.jobs["a"].nodes) == {"n0": 2, "n1": 2}


@pytest.mark.parametrize(("spread_from", "worth"), [("one", 0.81), ("fewest", 1.0)])
def test_split_over_three_nodes(spread_from, worth):
    """Three nodes used: spread_factor squared counted from one node, nothing from the fewest (three)."""
    nodes = [Node(f"n{i}", "V100", 2, 8, 100) for i in range(3)]
    res = _solve(_inst(nodes, [Job("a", 6, FLAT, (1, 10), spread_factor=0.9)], spread_from=spread_from))
    assert res.objective == pytest.approx(worth)


@pytest.mark.parametrize(("spread_from", "worth"), [("one", 0.81 + 2.0), ("fewest", 0.9 + 2.0)])
def test_a_gang_pays_spread_beyond_its_fewest_nodes(spread_from, worth):
    """A 4-GPU job whose fewest nodes are two: with n0 and n1 half taken by pinned jobs it runs
    1 + 1 + 2 over three nodes, one beyond its fewest (0.9; from one node 0.81)."""
    nodes = [Node(f"n{i}", "V100", 2, 8, 100) for i in range(3)]
    pinned = [Job(f"p{k}", 1, FLAT, (1, 10), placement={f"n{k}": 1}, restart_s=300) for k in range(2)]
    res = _solve(_inst(nodes, [Job("a", 4, FLAT, (1, 10), spread_factor=0.9), *pinned], spread_from=spread_from))
    assert res.status is Status.OPTIMAL
    assert res.objective == pytest.approx(worth)
    assert len(res.schedule.jobs["a"].nodes) == 3


def test_restart_cost_keeps_running_job_home():
    """Moving the running job would cost half its value; the solver keeps it on n0."""
    nodes = [Node("n0", "V100", 1, 4, 100), Node("n1", "P100", 1, 4, 100)]
    job = Job("a", 1, FLAT, (1, 10), gpu_speed={"V100": 1.0, "P100": 1.0}, placement={"n0": 1}, restart_s=150)
    res = _solve(_inst(nodes, [job]))
    assert dict(res.schedule.jobs["a"].nodes) == {"n0": 1}
    assert res.objective == pytest.approx(1.0)


def test_restart_cost_paid_when_moving_pays():
    """A weight-3 newcomer only fits n0 (V100 only); the running job moves to n1 for 1 - 60/300."""
    nodes = [Node("n0", "V100", 1, 4, 100), Node("n1", "P100", 1, 4, 100)]
    run = Job("a", 1, FLAT, (1, 10), placement={"n0": 1}, restart_s=60)
    new = Job("b", 1, FLAT, (1, 10), weight=3.0, gpu_speed={"V100": 1.0})
    res = _solve(_inst(nodes, [run, new]))
    assert res.objective == pytest.approx(3.0 + 0.8)


def test_cpu_change_in_place_is_free():
    """Changing only the point of a job that stays costs nothing."""
    nodes = [Node("n0", "V100", 1, 4, 100)]
    job = Job("a", 1, HUNGRY, (2, 10), placement={"n0": 1}, restart_s=300)
    res = _solve(_inst(nodes, [job]))
    assert res.objective == pytest.approx(2.0)


def test_gpu_types_and_speed():
    """The job takes the faster type when both fit; a disallowed type is never used."""
    nodes = [Node("p", "P100", 1, 4, 100), Node("v", "V100", 1, 4, 100)]
    fast = Job("a", 1, FLAT, (1, 10), gpu_speed={"V100": 1.0, "P100": 0.5})
    only_p = Job("b", 1, FLAT, (1, 10), gpu_speed={"P100": 0.6})
    res = _solve(_inst(nodes, [fast, only_p]))
    assert dict(res.schedule.jobs["a"].nodes) == {"v": 1}
    assert dict(res.schedule.jobs["b"].nodes) == {"p": 1}
    assert res.objective == pytest.approx(1.6)


def test_pareto_reduction_drops_dominated_points():
    prof = Profile((1, 2), (10, 20), ((1.0, 1.0), (2.0, 2.0)))
    pts = pareto_points(Job("a", 1, prof, (1, 10)), fair=False)
    assert [(p.cpus, p.mem) for p in pts] == [(1, 10), (2, 10)]
    assert len(pareto_points(Job("b", 1, FLAT, (2, 10)), fair=False)) == 1


def test_deterministic_with_seed_and_deterministic_time():
    nodes = [Node(f"n{i}", "V100", 4, 10, 100) for i in range(3)]
    jobs = [Job(f"j{k}", 1 + k % 3, HUNGRY if k % 2 else FLAT, (2, 10), weight=1 + k / 7) for k in range(12)]
    inst = _inst(nodes, jobs)
    a = CpSatSolver().solve(inst, time_limit=10, seed=3, num_workers=2, deterministic_time=0.5)
    b = CpSatSolver().solve(inst, time_limit=10, seed=3, num_workers=2, deterministic_time=0.5)
    assert a.schedule.to_dict() == b.schedule.to_dict()


def test_deterministic_above_the_lns_size_with_lns_share_zero():
    # the documented way to a reproducible run on a round that would get an lns stage (wall-clock slices)
    from optsched.exact.cpsat import LNS_FROM_CELLS
    from optsched.gen import generate

    inst = generate(24, 60, seed=3, running_fraction=0.3)
    assert len(inst.jobs) * len(inst.nodes) > LNS_FROM_CELLS
    a, b = (CpSatSolver().solve(inst, time_limit=20, seed=3, num_workers=2, deterministic_time=0.5, lns_share=0) for _ in range(2))
    assert a.stats["lns_share"] == 0 and a.schedule.to_dict() == b.schedule.to_dict()


def test_time_limit_respected_with_status():
    """A round too big to build in 0.3 s returns the greedy schedule, in time, marked TIME_LIMIT."""
    nodes = [Node(f"n{i}", "V100", 8, 48, 500) for i in range(128)]
    jobs = [Job(f"j{k}", 1, HUNGRY if k % 2 else FLAT, (2, 10), weight=1 + (k % 13) / 13) for k in range(1500)]
    inst = _inst(nodes, jobs)
    res = solve_round(inst, solver="cpsat", time_limit=0.3, seed=0, num_workers=1)
    assert res.time_s < 0.3 + 0.5
    assert res.status is Status.TIME_LIMIT
    assert res.objective > 0


def test_a_short_time_limit_still_searches():
    """The read-back reserve takes at most half the limit and the time kept for the LP bound at
    most a third of what is left: at 0.3 s CP-SAT proves a round its greedy hints do not solve
    (it got 0.01 s there, and none at limits up to 0.1 s)."""
    from optsched.exact.core import _deadline

    nodes = [Node(f"n{i}", "V100", 4, 10, 100) for i in range(3)]
    jobs = [Job(f"j{k}", 1 + k % 3, HUNGRY if k % 2 else FLAT, (2, 10), weight=1 + k / 7) for k in range(12)]
    inst = _inst(nodes, jobs)
    assert _deadline(inst, 0.0, 0.08) == pytest.approx(0.04)
    assert _deadline(inst, 0.0, 10.0) == pytest.approx(10.0 - 0.1 - 12e-4)
    res = solve_round(inst, solver="cpsat", time_limit=0.3, seed=0, num_workers=1)
    assert res.status is Status.OPTIMAL
    assert res.objective > res.stats["hint_objective"] * (1 + 1e-6)


def test_hint_is_used():
    """The caller's hint is the starting incumbent (reported as hint_objective)."""
    nodes = [Node("n0", "V100", 2, 6, 100)]
    inst = _inst(nodes, [Job("a", 1, HUNGRY, (2, 10)), Job("b", 1, FLAT, (2, 10))])
    hint = Schedule("t", {"a": Assignment({"n0": 1}, 4, 10), "b": Assignment({"n0": 1}, 2, 10)})
    res = solve_round(inst, solver="cpsat", time_limit=5, seed=0, hint=hint, num_workers=1, greedy_hint=False)
    assert res.stats["hint_objective"] == pytest.approx(3.0)
    assert res.objective == pytest.approx(3.0)


def test_greedy_starts_built_by_the_caller_give_the_same_answer(monkeypatch):
    """``greedy_starts`` (the round's :func:`~optsched.exact.core.greedy_starts`, built by the
    caller) replaces cpsat's own build, and the answer is the same; anything else is refused."""
    import optsched.exact.core as core
    from optsched.gen import generate

    inst = generate(nodes=6, jobs=40, seed=3, running_fraction=0.4)
    hint = solve_round(inst, solver="fungible-greedy", time_limit=1).schedule
    opts = {"num_workers": 1, "deterministic_time": 0.2, "bound_worker": False, "lns_share": 0.5}
    own = solve_round(inst, solver="cpsat", time_limit=30, seed=0, hint=hint, **opts)
    starts = core.greedy_starts(inst)
    assert [n for n, _ in starts] == ["greedy", "greedy-dense", "fungible-greedy"]
    monkeypatch.setattr(core, "greedy_starts", None)  # building them again would fail
    given = solve_round(inst, solver="cpsat", time_limit=30, seed=0, hint=hint, greedy_starts=starts, **opts)
    assert given.schedule.jobs == own.schedule.jobs
    assert (given.objective, given.bound, given.status) == (own.objective, own.bound, own.status)
    with pytest.raises(InputError, match="greedy_starts"):
        solve_round(inst, solver="cpsat", time_limit=1, greedy_starts=[("greedy", hint.to_dict())])


def test_unknown_option_refused():
    inst = _inst([Node("n0", "V100", 1, 4, 10)], [Job("a", 1, FLAT, (1, 10))])
    with pytest.raises(InputError, match="bogus"):
        solve_round(inst, solver="cpsat", time_limit=1, bogus=1)


def test_scaling_bound_is_proven_and_overflow_refused():
    sc = ValueScale.for_values([0.5, 2.0], max_total=10.0, max_terms=4)
    assert sc.bound(sc.to_int(0.5) + sc.to_int(2.0)) >= 2.5
    assert math.log2(sc.scale).is_integer()
    with pytest.raises(InputError):
        ValueScale.for_values([1e-12, 1e9], max_total=1e12, max_terms=2)


def test_empty_and_trivial_rounds():
    inst = _inst([Node("n0", "V100", 0, 0, 0)], [Job("a", 1, FLAT, (1, 10))])
    res = _solve(inst)
    assert res.objective == 0 and len(res.schedule) == 0


@pytest.mark.parametrize(("spread_from", "worth"), [("one", 0.9), ("fewest", 1.0)])
def test_running_split_job_stays_and_keeps_full_value(spread_from, worth):
    """A 4-GPU job running 2+2 on n0/n1 stays there (worth 0.9 counted from one node, 1.0 from its
    fewest two; no restart cost); moving it to n2+n3 would cost half. A 1-GPU newcomer takes n2."""
    nodes = [Node(f"n{i}", "V100", 2, 8, 100) for i in range(4)]
    run = Job("a", 4, FLAT, (1, 10), spread_factor=0.9, placement={"n0": 2, "n1": 2}, restart_s=150)
    new = Job("b", 1, FLAT, (1, 10))
    res = _solve(_inst(nodes, [run, new], spread_from=spread_from))
    assert res.status is Status.OPTIMAL
    assert dict(res.schedule.jobs["a"].nodes) == {"n0": 2, "n1": 2}
    assert res.objective == pytest.approx(worth + 1.0)


@pytest.mark.parametrize(("spread_from", "spread"), [("one", 0.9), ("fewest", 1.0)])
def test_split_job_moving_pays_restart(spread_from, spread):
    """The running split job's nodes are taken by two heavier whole jobs; it moves (x 0.5)."""
    nodes = [Node(f"n{i}", "V100", 2, 8, 100) for i in range(4)]
    run = Job("a", 4, FLAT, (1, 10), spread_factor=0.9, placement={"n0": 2, "n1": 2}, restart_s=150,
              gpu_speed={"V100": 1.0})
    heavy = [Job(f"h{k}", 2, FLAT, (1, 10), weight=5.0) for k in range(2)]
    pinned = [replace(h, placement={f"n{k}": 2}, restart_s=300) for k, h in enumerate(heavy)]
    res = _solve(_inst(nodes, [run, *pinned], spread_from=spread_from))
    assert res.objective == pytest.approx(5.0 + 5.0 + spread * 0.5)


_REPEAT = """
import json, sys
from optsched.gen import generate
from optsched.solve import solve_round
inst = generate(24, 60, seed=3, running_fraction=0.3)
res = solve_round(inst, solver=sys.argv[1], time_limit=60, seed=3, deterministic_time=0.6, **json.loads(sys.argv[2]))
key = "lns_deterministic_s" if sys.argv[1] == "cpsat" else "deterministic_s"
print(json.dumps({"schedule": res.schedule.to_dict(), "lns_dt": res.stats.get(key)}))
"""


@pytest.mark.parametrize(("solver", "opts"), [("cpsat", {"num_workers": 2, "bound_worker": False}), ("lns", {"bound": "lp"})])
def test_deterministic_with_the_lns_stage_across_processes(solver, opts):
    """cpsat's lns stage (and lns alone) spend CP-SAT deterministic seconds, not wall-clock slices, under
    ``deterministic_time``: two processes (different string-hash seeds, so set orders differ) return the
    same schedule on a round with an lns stage."""
    import json
    import subprocess
    import sys

    out = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        r = subprocess.run([sys.executable, "-c", _REPEAT, solver, json.dumps(opts)], capture_output=True, text=True,
                           env=env, timeout=120, check=True)
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert out[0]["lns_dt"] and out[0]["lns_dt"] > 0  # the lns stage ran and spent deterministic time
    assert out[0]["schedule"] == out[1]["schedule"]


@pytest.mark.parametrize(("time_limit", "workers"), [(0.3, 1), (5.0, 2)])
def test_an_interleaved_search_its_wall_limit_may_cut_runs_on_one_worker(monkeypatch, time_limit, workers):
    """OR-Tools 9.15 can abort the process when a wall limit cuts an interleaved search over
    several workers: where the wall limit is under 1 s + 4 s per deterministic second, one worker."""
    from ortools.sat.python import cp_model

    seen = []
    real = cp_model.CpSolver.solve

    def spy(self, model, callback=None):
        prm = self.parameters
        seen.append((prm.num_workers, prm.interleave_search))
        return real(self, model, callback)

    monkeypatch.setattr(cp_model.CpSolver, "solve", spy)
    inst = _inst([Node("n0", "V100", 2, 6, 100), Node("n1", "V100", 2, 6, 100)],
                 [Job(f"j{k}", 1 + k % 2, HUNGRY if k % 2 else FLAT, (2, 10)) for k in range(5)])
    res = solve_round(inst, solver="cpsat", time_limit=time_limit, seed=0, num_workers=2, deterministic_time=0.5)
    assert seen == [(workers, True)] and res.stats["cpsat_workers"] == workers and res.objective > 0
