"""The simulator driving the registered solvers through ``solve_round``."""

from __future__ import annotations

import numpy as np
import pytest
from test_sim_support import StandInCatalogue

from optsched.sim import cluster, policies
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate
from optsched.sim.solving import SolveRoundAllocator
from optsched.sim.traces import Trace
from optsched.sim.workload import build_workload


def _workload(seed: int = 0, n: int = 14):
    nodes = cluster.homogeneous(2, gpus=4, cpus=24, mem_gb=192)
    rng = np.random.default_rng(seed)
    tr = Trace.from_columns("t", {"job_id": [f"j{i}" for i in range(n)], "submit_s": np.sort(rng.uniform(0, 900, n)).round(),
                                  "duration_s": rng.uniform(100, 900, n).round(), "gpus": rng.choice([1, 1, 2, 4], n)})
    return build_workload(tr, nodes, catalogue=StandInCatalogue(), seed=seed), nodes


@pytest.mark.parametrize("solver", ["fixed-demand", "fungible-greedy", "lns", "cpsat"])
def test_every_allocator_runs_every_round_feasibly(solver):
    wl, nodes = _workload()
    opts = {"num_workers": 1} if solver in ("cpsat", "lns") else {}
    # lns searches until its time limit: keep it short here
    alloc = SolveRoundAllocator(solver, time_limit=0.2 if solver == "lns" else 2.0, seed=0, **opts)
    res = simulate(wl, nodes, policies.LAS(), alloc, SimConfig(round_s=100, check=True, progress=False))
    s = res.summary()
    assert s["finished"] == len(wl) and res.info["checked_rounds"] == s["solver_calls"] > 0
    assert s["solve_s_max"] < 10


@pytest.mark.parametrize("solver", ["fixed-demand", "fungible-greedy"])
def test_unvalidated_allocator_gives_the_validated_run(solver):
    """``validate=False`` skips solve_round's check, nothing else: the same run, job for job."""
    wl, nodes = _workload(2, n=20)
    runs = [simulate(wl, nodes, policies.LAS(), SolveRoundAllocator(solver, time_limit=2.0, validate=v),
                     SimConfig(round_s=100, check=not v, progress=False)) for v in (True, False)]
    for col in ("start_s", "finish_s", "preemptions", "moves"):
        np.testing.assert_array_equal(runs[0].jobs[col], runs[1].jobs[col])
    assert runs[1].info["checked_rounds"] == runs[1].summary()["solver_calls"] > 0


def test_unvalidated_needs_a_named_solver():
    from optsched.errors import InputError

    with pytest.raises(InputError, match="validate"):
        SolveRoundAllocator(None, method="heuristic", validate=False)


def test_fixed_demand_replays_trace_durations():
    """With fixed demands on speed-1.0 GPUs, a job that never moves runs exactly its duration
    (spread jobs pay their spread factor, moved or resumed ones their restarts)."""
    wl, nodes = _workload(3)
    res = simulate(wl, nodes, policies.FIFO(), SolveRoundAllocator("fixed-demand", time_limit=2.0),
                   SimConfig(round_s=100, check=True, progress=False))
    calm = (res.jobs["moves"] == 0) & (res.jobs["preemptions"] == 0)
    assert calm.any()
    ratio = res.jobs["run_s"][calm] / res.jobs["duration_s"][calm]
    assert np.all(np.isclose(ratio, 1.0) | np.isclose(ratio, 1 / 0.9))  # one node, or two (spread 0.9)


def test_integrated_allocator_is_not_worse_per_round_than_fixed_demand():
    """Each round, CP-SAT's objective is at least fixed-demand's on the same instance."""
    from optsched.solve import solve_round

    wl, nodes = _workload(5)
    seen = []

    def both(inst):
        exact = solve_round(inst, solver="cpsat", time_limit=5.0, num_workers=1)
        base = solve_round(inst, solver="fixed-demand", time_limit=5.0)
        seen.append((exact.objective, base.objective, exact.status.value))
        return exact

    simulate(wl, nodes, policies.LAS(), both, SimConfig(round_s=100, check=True, progress=False))
    for e, b, status in seen:
        if status == "optimal":
            assert e >= b - 1e-6
