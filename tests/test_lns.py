"""The CP-SAT large-neighbourhood search."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from optsched.errors import InputError
from optsched.heuristics.lns import LargeNeighbourhoodSearch, sub_instance
from optsched.model import Instance, Job, Node, Profile, Round
from optsched.result import Status
from optsched.schedule import Assignment, Schedule
from optsched.solve import solve_round
from optsched.values import schedule_value

sys.path.insert(0, str(Path(__file__).parent))
from strategies import tiny_instances  # noqa: E402

HUNGRY = Profile((1, 2, 4), (10,), ((0.5,), (1.0,), (2.0,)))
FLAT = Profile((1, 2, 4), (10,), ((1.0,), (1.0,), (1.0,)))


def _round(n_nodes=6, n_jobs=30):
    nodes = [Node(f"n{i}", "V100" if i % 2 else "P100", 4, 8, 100) for i in range(n_nodes)]
    jobs = [Job(f"j{k}", 1 + (k % 5 == 0), HUNGRY if k % 2 else FLAT, (2, 10), weight=1 + (k % 7) / 7,
                gpu_speed={"V100": 1.0, "P100": 0.6}, spread_factor=0.9) for k in range(n_jobs)]
    return Instance("lns", tuple(nodes), tuple(jobs), Round())


def test_lns_improves_on_its_start_and_stays_feasible():
    inst = _round()
    res = solve_round(inst, solver="lns", time_limit=2.0, seed=1)  # solve_round runs the checker
    assert res.status is Status.FEASIBLE
    assert res.bound is not None and res.bound >= res.objective  # the LP bound (solve_round checks it too)
    assert res.objective >= res.stats["start_objective"] - 1e-9
    exact = solve_round(inst, solver="cpsat", time_limit=5.0, seed=0, num_workers=2)
    assert res.objective <= exact.bound + 1e-9
    assert exact.objective <= res.bound + 1e-9
    assert solve_round(inst, solver="lns", time_limit=0.5, seed=1, bound=False).bound is None


def test_lns_respects_time_limit_and_is_reproducible_in_steps():
    inst = _round(8, 40)
    t0 = time.perf_counter()
    LargeNeighbourhoodSearch().solve(inst, time_limit=1.0, seed=0)
    assert time.perf_counter() - t0 < 1.5


def test_lns_keeps_a_better_hint():
    """Starting from the optimum, lns returns a schedule worth at least as much."""
    nodes = [Node("n0", "V100", 2, 6, 100)]
    inst = Instance("h", tuple(nodes), (Job("a", 1, HUNGRY, (2, 10)), Job("b", 1, FLAT, (2, 10))), Round())
    hint = Schedule("h", {"a": Assignment({"n0": 1}, 4, 10), "b": Assignment({"n0": 1}, 2, 10)})
    res = solve_round(inst, solver="lns", time_limit=0.5, seed=0, hint=hint)
    assert res.objective == pytest.approx(3.0)


def test_sub_instance_folds_restart_into_weight_and_fixes_outside_jobs():
    nodes = [Node("n0", "V100", 2, 8, 100), Node("n1", "V100", 2, 8, 100)]
    mover = Job("m", 1, FLAT, (1, 10), placement={"n1": 1}, restart_s=60)
    split = Job("s", 2, FLAT, (1, 10))
    inst = Instance("x", tuple(nodes), (mover, split), Round(300.0))
    sched = Schedule("x", {"s": Assignment({"n0": 1, "n1": 1}, 2, 10)})
    sub, ids = sub_instance(inst, sched, ["n0"], ["m"])
    assert ids == ["m"]
    assert sub.nodes[0].gpus == 1 and sub.nodes[0].cpus == 6
    assert sub.jobs[0].weight == pytest.approx(0.8) and sub.jobs[0].placement is None
    assert schedule_value(inst, sched) == pytest.approx(0.9 ** 0 * 1.0 * 1.0)


def test_sub_instance_keeps_the_room_of_a_job_it_cannot_hold():
    """A running job moved onto the freed node whose restart costs a whole round (a forced urgent
    job may be there) stays fixed: the sub-instance does not offer it, and its room is not free."""
    nodes = [Node("n0", "V100", 2, 8, 100), Node("n1", "V100", 2, 8, 100)]
    stuck = Job("m", 1, FLAT, (1, 10), placement={"n1": 1}, restart_s=300)
    other = Job("o", 1, FLAT, (1, 10))
    inst = Instance("x", tuple(nodes), (stuck, other), Round(300.0))
    sched = Schedule("x", {"m": Assignment({"n0": 1}, 3, 10)})
    sub, ids = sub_instance(inst, sched, ["n0"], ["o"])
    assert ids == ["o"]
    assert (sub.nodes[0].gpus, sub.nodes[0].cpus, sub.nodes[0].mem_gb) == (1, 5, 90)


def test_unknown_option_refused():
    with pytest.raises(InputError, match="bogus"):
        LargeNeighbourhoodSearch().solve(_round(2, 2), time_limit=0.5, seed=0, bogus=True)


def test_cpsat_lns_stage_reuses_its_greedy_starts_and_job_data(monkeypatch):
    """cpsat hands its greedy hints and job data to its lns stage, which builds neither again,
    and the stage starts from the best of them."""
    import optsched.heuristics.lns as lns_mod
    from optsched.exact.cpsat import CpSatSolver

    calls = {"greedy": 0, "job_data": 0}
    real_greedy, real_data = lns_mod.greedy_schedule, lns_mod.job_data

    def greedy(*a, **k):
        calls["greedy"] += 1
        return real_greedy(*a, **k)

    def data(*a, **k):
        calls["job_data"] += 1
        return real_data(*a, **k)

    monkeypatch.setattr(lns_mod, "greedy_schedule", greedy)
    monkeypatch.setattr(lns_mod, "job_data", data)
    seen = {}
    real_solve = lns_mod.LargeNeighbourhoodSearch.solve

    def solve(self, instance, **kw):
        res = real_solve(self, instance, **kw)
        seen.update(starts=kw.get("starts"), result=res)
        return res

    monkeypatch.setattr(lns_mod.LargeNeighbourhoodSearch, "solve", solve)
    inst = _round(6, 30)
    res = CpSatSolver().solve(inst, time_limit=1.5, seed=0, lns_share=0.5, bound_worker=False, num_workers=1)
    assert calls == {"greedy": 0, "job_data": 0}
    assert [name for name, _s in seen["starts"]] == ["greedy", "fungible-greedy"]
    warm = seen["result"]
    assert warm.stats["start_objective"] >= schedule_value(inst, seen["starts"][0][1]) - 1e-9
    assert res.objective >= warm.objective - 1e-9
    # lns on its own still builds the job data (and its greedy starts when time allows)
    LargeNeighbourhoodSearch().solve(inst, time_limit=0.3, seed=0, bound=False)
    assert calls["job_data"] == 1


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_instances(max_nodes=4, max_jobs=8))
def test_the_price_guided_start_is_feasible(inst):
    """lns's price-repack start (optsched.learned.repair.price_schedule) passes the independent checker."""
    from optsched.checker import check_schedule
    from optsched.learned.repair import price_schedule

    sched = price_schedule(inst)
    assert sched is None or check_schedule(inst, sched) == []
