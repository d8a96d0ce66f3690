"""Reduced-cost fixing from the configuration LP (optsched.exact.fixing) loses no schedule at least
as good as the incumbent it is relative to.

Checked against brute-force enumeration (tests/bruteforce.py, written from the contract alone) on
random tiny rounds: every schedule whose worth reaches the incumbent's keeps its forced jobs and
uses only kept pieces, and CP-SAT on the fixed model finds the brute-force optimum.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from optsched.exact import core
from optsched.exact.fixing import config_fixing
from optsched.exact.hint import greedy_schedule
from optsched.exact.model import build_model, make_scale
from optsched.exact.options import _check_options
from optsched.exact.prep import dominating_point, job_data
from optsched.mip.pricing import supported
from optsched.solve import solve_round
from optsched.values import schedule_value

sys.path.insert(0, str(Path(__file__).parent))
from bruteforce import brute_force, feasible_schedules, search_size  # noqa: E402
from strategies import tiny_instances, wide_gang_round  # noqa: E402


def _kept(inst, data, fix, sched) -> bool:
    """Whether brute-force schedule ``sched`` ({job: (nodes, c, m)}) keeps the fixing's rules, its
    points moved to the Pareto points that dominate them (worth no less, no more resources)."""
    on = {inst.jobs[d.index].id: d for d in data}
    for jid in (inst.jobs[j].id for j in fix.forced):
        if jid not in sched:
            return False
    for jid, (nodes, c, m) in sched.items():
        d = on[jid]
        p = dominating_point(d.points, c, m, d.job.profile.at(c, m))
        assert p is not None
        for nid, g in nodes.items():
            n = inst.node_idx(nid)
            if len(nodes) == 1:
                if not fix.allows_whole(d.index, n, p):
                    return False
            else:
                sizes = fix.split_sizes(d.index, n, p)
                if sizes is not None and g not in sizes:
                    return False
    return True


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_instances(), relative_to=st.sampled_from(["optimum", "greedy"]))
def test_fixing_keeps_every_schedule_at_least_as_good_as_the_incumbent(inst, relative_to):
    assume(supported(inst) and search_size(inst) <= 4000)
    data = job_data(inst)
    best, _ = brute_force(inst)
    z = best if relative_to == "optimum" else schedule_value(inst, greedy_schedule(inst, data))
    fix = config_fixing(inst, data, z, time_limit=10.0)
    assert fix is not None
    assert fix.bound >= best - 1e-7 * max(1.0, best)
    for total, sched, _load in feasible_schedules(inst):
        if total >= z - 1e-9 * max(1.0, z):
            assert _kept(inst, data, fix, sched), (total, z, sched, fix)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_instances(), relative_to=st.sampled_from(["optimum", "greedy"]))
def test_fixed_model_optimum_equals_brute_force(inst, relative_to):
    assume(supported(inst) and search_size(inst) <= 4000)
    data = job_data(inst)
    best, _ = brute_force(inst)
    hint = greedy_schedule(inst, data)
    z = best if relative_to == "optimum" else schedule_value(inst, hint)
    fix = config_fixing(inst, data, z, time_limit=10.0)
    scale = make_scale(inst, data)
    m = build_model(inst, data, scale, _check_options({"num_workers": 1}), float("inf"), None, None, fix)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 10.0
    code = solver.solve(m.model)
    assert code == cp_model.OPTIMAL
    found = schedule_value(inst, m.read_schedule(solver))
    assert abs(found - best) <= 1e-6 * max(1.0, best), (found, best)


def test_cpsat_fixing_stage_proves_the_brute_force_optimum(monkeypatch):
    """The solver's second stage (fixing after an unproven first stage; the first stage's answer is
    replaced by UNKNOWN here) returns the brute-force optimum, proven, with the fixing's figures."""
    from optsched.model import Instance

    inst = Instance.from_dict({
        "version": 1, "name": "fix", "round": {"duration_s": 300, "fair": False},
        "nodes": [{"id": f"n{i}", "gpu_type": "A", "gpus": 4, "cpus": 12, "mem_gb": 64} for i in range(2)],
        "jobs": [{"id": f"j{i}", "gpus": g, "weight": w, "spread_factor": 0.9,
                  "profile": {"cpus_per_gpu": [1, 3, 6], "mem_per_gpu_gb": [8, 16],
                              "throughput": [[1.0, 1.3], [1.8, 2.2], [2.5, 3.1]]},
                  "demand": {"cpus_per_gpu": 3, "mem_per_gpu_gb": 8}}
                 for i, (g, w) in enumerate([(1, 1.0), (2, 0.7), (3, 0.5), (1, 2.0)])],
    })
    best, _ = brute_force(inst)
    real = core.solve_lexicographic
    calls = []

    def first_unproven(solver, model, stats, callback=None):
        code = real(solver, model, stats, callback)
        calls.append(code)
        return cp_model.UNKNOWN if len(calls) == 1 else code

    monkeypatch.setattr(core, "solve_lexicographic", first_unproven)
    res = solve_round(inst, solver="cpsat", time_limit=6.0, seed=0, num_workers=2)
    assert len(calls) == 2
    assert res.stats["fixing"]["pieces_kept"] < res.stats["fixing"]["pieces"]
    assert res.status.value == "optimal"
    assert abs(res.objective - best) <= 1e-6 * max(1.0, best)
    assert res.bound >= best - 1e-6 * max(1.0, best)


def test_deterministic_runs_skip_the_wall_clock_fixing_stage():
    # the stage starts after FIXING_AFTER_S of wall time and its LP is wall-limited: a run with
    # deterministic_time (same seed and limit, same schedule) must not depend on either
    from optsched.gen import SIZE_CLASSES, generate

    inst = generate(8, 24, seed=0, **SIZE_CLASSES["small"].options)  # bench_core's small base 8x24 s0: unproven in 2 s
    res = solve_round(inst, solver="cpsat", time_limit=8, deterministic_time=4.0, num_workers=1)
    assert res.status.value != "optimal" or res.stats["deterministic_s"] < 1.5  # the round is hard enough to test this
    assert "fixing" not in res.stats and "stage1_deterministic_s" not in res.stats


def test_fixing_keeps_a_gang_that_needs_more_than_tail_nodes():
    """The fixing relative to the optimum of a round whose gang needs five nodes keeps the optimum
    (its bound was below it, every job was forced, and CP-SAT's fixed model was infeasible)."""
    inst = wide_gang_round()
    data = job_data(inst)
    best, _ = brute_force(inst)
    fix = config_fixing(inst, data, best, time_limit=10.0)
    assert fix is not None and fix.bound >= best - 1e-7 * max(1.0, best)
    for total, sched, _load in feasible_schedules(inst):
        if total >= best - 1e-9 * max(1.0, best):
            assert _kept(inst, data, fix, sched), (total, sched, fix)
