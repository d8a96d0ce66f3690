"""Gandiva packing (contract v2 ``round.packing = "consolidate"``): the fields and their version, the
checker's packing report, which methods honour it, CP-SAT's lexicographic optimum (worth within the
tolerance, then whole free GPUs, then worth) against brute force on random tiny rounds, the
heuristics' guarantee against their own plain schedules, the consolidation pass, the simulator and
the command line."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from bruteforce import feasible_schedules, search_size
from conftest import base_round
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import tiny_instance_dicts

from optsched import check_schedule, solve_round
from optsched.errors import InputError
from optsched.model import Instance
from optsched.round_policies import consolidate, policy_feasible, whole_free_gpus
from optsched.schedule import Assignment, Schedule
from optsched.values import schedule_value

REPO = Path(__file__).parents[1]
METHODS = ("cpsat", "fixed-demand", "fungible-greedy", "lns")
#: one GPU at 1 core, 1.5 at 2 cores, 1.6 at 4 cores: a job alone on a node gets more
PROF = {"cpus_per_gpu": [1, 2, 4], "mem_per_gpu_gb": [8], "throughput": [[1.0], [1.5], [1.6]]}


def _job(i, g=1, **kw):
    return {"id": f"j{i}", "gpus": g, "profile": copy.deepcopy(PROF), "demand": {"cpus_per_gpu": 1, "mem_per_gpu_gb": 8}, **kw}


def _nodes(n, gpus=4, cpus=8):
    return [{"id": f"n{i}", "gpu_type": "V100", "gpus": gpus, "cpus": cpus, "mem_gb": 100} for i in range(n)]


def _round(jobs, nodes, **rnd):
    return Instance.from_dict({"version": 2, "name": "pack", "round": {"duration_s": 300, "packing": "consolidate", **rnd},
                               "nodes": nodes, "jobs": jobs})


# --- fields and versions ---------------------------------------------------------------------------


def test_packing_fields_round_trip_and_a_v1_file_with_them_is_refused_naming_version():
    d = base_round()
    d["version"] = 2
    d["round"].update(packing="consolidate", packing_tolerance=0.05)
    inst = Instance.from_dict(d)
    assert inst.version == 2 and inst.round.packing == "consolidate" and inst.round.packing_tolerance == 0.05
    assert Instance.from_dict(inst.to_dict()).to_dict() == inst.to_dict()
    d["version"] = 1
    with pytest.raises(InputError) as e:
        Instance.from_dict(d)
    assert e.value.field == "version" and "round.packing" in str(e.value)
    assert "packing" not in Instance.from_dict(base_round()).to_dict()["round"]


@pytest.mark.parametrize(("rnd", "field"), [
    ({"packing": "spread"}, "round.packing"),
    ({"packing": True}, "round.packing"),
    ({"packing_tolerance": 0.1}, "round.packing_tolerance"),  # a tolerance without packing
    ({"packing": "consolidate", "packing_tolerance": 1.0}, "round.packing_tolerance"),
    ({"packing": "consolidate", "packing_tolerance": -0.1}, "round.packing_tolerance"),
    ({"packing": "consolidate", "packing_tolerance": "5%"}, "round.packing_tolerance"),
])
def test_bad_packing_fields_are_refused_by_name(rnd, field):
    d = base_round()
    d["version"] = 2
    d["round"].update(rnd)
    with pytest.raises(InputError) as e:
        Instance.from_dict(d)
    assert e.value.field == field


# --- the checker's report ------------------------------------------------------------------------------


def test_the_checker_reports_whole_free_gpus_and_fragmentation():
    inst = _round([_job(0, 2), _job(1, 1)], _nodes(3))
    sched = Schedule("pack", {"j0": Assignment({"n0": 2}, 1, 8), "j1": Assignment({"n1": 1}, 1, 8)})
    rep = check_schedule(inst, sched)
    assert not rep
    assert rep.packing == {"whole_free_gpus": 4, "free_nodes": 1, "free_gpus": 9, "fragmentation": pytest.approx(5 / 9)}
    assert rep.to_dict()["packing"]["free_nodes"] == 1
    assert check_schedule(inst, Schedule("pack", {})).packing["fragmentation"] == 0.0
    plain = Instance.from_dict({**inst.to_dict(), "version": 1, "round": {"duration_s": 300}})
    assert check_schedule(plain, sched).packing is None and "packing" not in check_schedule(plain, sched).to_dict()


# --- methods ---------------------------------------------------------------------------------------------


def _spread_round(tolerance=None):
    """5 one-GPU jobs, 3 nodes of 4 GPUs and 8 cores: the worth optimum spreads them (4 cores each
    on 3 nodes: 5 x 1.6 = 8.0); two nodes hold them at 7.6-7.8 and free a whole node."""
    rnd = {} if tolerance is None else {"packing_tolerance": tolerance}
    return _round([_job(i) for i in range(5)], _nodes(3), **rnd)


@pytest.mark.parametrize("method", METHODS)
def test_every_supporting_method_returns_checked_schedules_with_the_metric_in_stats(method):
    for tol in (None, 0.1):
        inst = _spread_round(tol)
        res = solve_round(inst, solver=method, time_limit=2, seed=0, **({"num_workers": 1} if method == "cpsat" else {}))
        rep = check_schedule(inst, res.schedule)
        assert not rep and res.stats["whole_free_gpus"] == rep.packing["whole_free_gpus"]
        if tol is None and method == "cpsat":  # the worth optimum is kept exactly
            assert res.objective == pytest.approx(8.0)
        if tol == 0.1:  # a whole node free; the exact method within 10 % of the best worth (8.0)
            assert rep.packing["whole_free_gpus"] == 4, method
            assert res.objective >= 0.9 * 8.0 - 1e-9 or method != "cpsat"
    best = solve_round(_spread_round(0.1), solver="cpsat", time_limit=2, num_workers=1)
    # two nodes: three jobs at 4 + 2 + 2 cores on one, two at 4 + 4 on the other (the best of 7.6-7.8)
    assert best.status.value == "optimal" and best.objective == pytest.approx(7.8)
    assert best.stats["packing_proven"] is True and best.bound >= 8.0 - 1e-6  # the bound is the worth stage's


def test_methods_without_packing_are_refused_and_auto_picks_one_that_has_it():
    inst = _spread_round()
    for m in ("cbc", "maifs"):
        with pytest.raises(InputError) as e:
            solve_round(inst, solver=m, time_limit=1)
        assert e.value.field == "solver" and "packing" in str(e.value) and "fungible-greedy" in str(e.value), m
    assert solve_round(inst, time_limit=2).solver == "cpsat"


def test_a_running_job_is_migrated_only_when_the_tolerance_pays_for_its_restart():
    # j0 runs alone on n1 (restart 60 s of a 300 s round: moving costs 20 % of its value); the new
    # 4-GPU j1 fits only on n0, which has room for j0 too. Without a tolerance j0 stays; with 25 %
    # it joins j1 (Gandiva's migration) and n1 is wholly free.
    jobs = [_job(0, placement={"n1": 1}, restart_s=60), _job(1, 4)]
    nodes = [{"id": "n0", "gpu_type": "V100", "gpus": 8, "cpus": 24, "mem_gb": 100},
             {"id": "n1", "gpu_type": "V100", "gpus": 4, "cpus": 24, "mem_gb": 100}]
    for method in ("cpsat", "fungible-greedy", "fixed-demand"):
        opts = {"num_workers": 1} if method == "cpsat" else {}
        tight = solve_round(_round(jobs, nodes), solver=method, time_limit=2, **opts)
        assert tight.schedule.jobs["j0"].nodes == {"n1": 1}, method
        inst = _round(jobs, nodes, packing_tolerance=0.25)
        loose = solve_round(inst, solver=method, time_limit=2, **opts)
        assert loose.schedule.jobs["j0"].nodes == {"n0": 1} and whole_free_gpus(inst, loose.schedule.jobs) == 4, method
        assert loose.objective >= 0.75 * tight.objective - 1e-9, method


def test_a_pinned_running_job_is_never_migrated_whatever_the_tolerance():
    # as above, but j0 may not be preempted or moved (preemptible false, as the simulator's FIFO
    # rounds pin running jobs): every method keeps it on n1, and consolidation leaves n1 alone
    jobs = [_job(0, placement={"n1": 1}, restart_s=60, preemptible=False), _job(1, 4)]
    nodes = [{"id": "n0", "gpu_type": "V100", "gpus": 8, "cpus": 24, "mem_gb": 100},
             {"id": "n1", "gpu_type": "V100", "gpus": 4, "cpus": 24, "mem_gb": 100}]
    inst = _round(jobs, nodes, packing_tolerance=0.25)
    for method in ("cpsat", "fungible-greedy", "fixed-demand"):
        res = solve_round(inst, solver=method, time_limit=2, **({"num_workers": 1} if method == "cpsat" else {}))
        assert res.schedule.jobs["j0"].nodes == {"n1": 1} and not check_schedule(inst, res.schedule), method
    plain = Schedule(inst.name, {"j0": Assignment({"n1": 1}, 4, 8), "j1": Assignment({"n0": 4}, 1, 8)})
    assert consolidate(inst, plain, budget=10.0).jobs == plain.jobs


def test_the_tolerance_never_buys_idle_nodes_by_leaving_jobs_out():
    # j1 is worth 1 % of j0 and cannot share j0's node: dropping it would idle n1 within a 5 %
    # tolerance, but consolidation only moves jobs; j1 keeps running
    inst = _round([_job(0, 4), _job(1, 1, weight=0.01)], _nodes(2, cpus=16), packing_tolerance=0.05)
    for method in METHODS:
        res = solve_round(inst, solver=method, time_limit=2, **({"num_workers": 1} if method == "cpsat" else {}))
        assert sorted(res.schedule.jobs) == ["j0", "j1"] and res.stats["whole_free_gpus"] == 0, method


# --- random rounds: CP-SAT against brute force ----------------------------------------------------------


@st.composite
def packing_rounds(draw):
    d = draw(tiny_instance_dicts(max_nodes=3, max_jobs=4))
    d["version"] = 2
    d["round"]["packing"] = "consolidate"
    tol = draw(st.sampled_from([None, None, 0.1, 0.3]))
    if tol is not None:
        d["round"]["packing_tolerance"] = tol
    return Instance.from_dict(d)


def _schedules(inst):
    """(worth, whole free GPUs, GPUs in use) of every feasible schedule, by enumeration from the contract."""
    for total, _sched, load in feasible_schedules(inst):
        yield total, sum(n.gpus for n in inst.nodes if n.gpus > 0 and load[n.id][0] == 0), sum(v[0] for v in load.values())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(packing_rounds())
def test_cpsat_keeps_the_most_whole_free_gpus_among_near_best_schedules(inst):
    assume(search_size(inst) <= 3000)
    every = list(_schedules(inst))
    best = max(w for w, _, _ in every)
    tol = inst.round.packing_tolerance or 0.0
    floor = (1.0 - tol) * best
    eps = 1e-7 * max(1.0, best)
    assume(not any(abs(w - floor) < eps for w, _, _ in every if tol > 0))  # nothing on the tolerance's edge
    near = [(w, f, u) for w, f, u in every if w >= floor - (eps if tol == 0 else 0.0)]
    # the packing stage keeps at least the GPUs the worth stage's schedule runs: some worth-optimal
    # schedule's count, between the smallest and the largest of them
    opt_use = [u for w, _, u in every if w >= best - eps]
    lo, hi = min(opt_use), max(opt_use)
    res = solve_round(inst, solver="cpsat", time_limit=2, num_workers=1)
    rep = check_schedule(inst, res.schedule)
    used = sum(a.gpus for a in res.schedule.jobs.values())
    assert not rep and rep.packing["whole_free_gpus"] == res.stats["whole_free_gpus"]
    if res.status.value == "optimal":
        free = rep.packing["whole_free_gpus"]
        assert used >= lo and res.objective >= floor - 1e-6 * max(1.0, best)
        assert max(f for _, f, u in near if u >= hi) <= free <= max(f for _, f, u in near if u >= lo)
        if lo == hi:  # then the lexicographic optimum is unique in (free, worth)
            assert res.objective == pytest.approx(max(w for w, f, u in near if u >= lo and f == free), rel=1e-6, abs=1e-6)
        assert res.bound >= best - 1e-6 * max(1.0, best)


# --- heuristics: never fewer whole free GPUs than without packing, never below the tolerance -----------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(packing_rounds())
def test_heuristics_pack_at_least_as_well_as_their_plain_schedules(inst):
    plain_inst = Instance.from_dict({**inst.to_dict(), "version": 1, "round": {"duration_s": 300, "fair": inst.round.fair}})
    tol = inst.round.packing_tolerance or 0.0
    for method in ("fixed-demand", "fungible-greedy"):
        plain = solve_round(plain_inst, solver=method, time_limit=1)
        packed = solve_round(inst, solver=method, time_limit=1)
        assert not check_schedule(inst, packed.schedule)
        assert whole_free_gpus(inst, packed.schedule.jobs) >= whole_free_gpus(inst, plain.schedule.jobs), method
        assert sum(a.gpus for a in packed.schedule.jobs.values()) >= sum(a.gpus for a in plain.schedule.jobs.values()), method
        assert packed.objective >= (1.0 - tol) * plain.objective - 1e-9 * max(1.0, plain.objective), method


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(packing_rounds(), st.sampled_from([0.0, 0.2, 5.0]), st.sampled_from([None, 0, 1]))
def test_consolidation_keeps_feasibility_the_rules_and_the_budget(inst, budget, max_moves):
    if max_moves is not None:
        inst = Instance.from_dict({**inst.to_dict(), "round": {**inst.to_dict()["round"], "max_moves": max_moves}})
    base = solve_round(Instance.from_dict({**inst.to_dict(), "round": {"duration_s": 300, "fair": inst.round.fair}, "version": 1}),
                       solver="fungible-greedy", time_limit=1).schedule
    base = Schedule(inst.name, {j: a for j, a in base.jobs.items()})
    assume(policy_feasible(inst, base))
    out = consolidate(inst, base, budget)
    assert not check_schedule(inst, out)
    assert set(out.jobs) == set(base.jobs) and policy_feasible(inst, out)
    assert whole_free_gpus(inst, out.jobs) >= whole_free_gpus(inst, base.jobs)
    assert schedule_value(inst, out) >= schedule_value(inst, base) - budget - 1e-9


# --- simulator and command line ------------------------------------------------------------------------


def test_simulator_packing_config_is_checked_by_name_and_runs_with_every_method():
    from test_sim_support import StandInCatalogue

    from optsched.sim import cluster
    from optsched.sim.config import SimConfig
    from optsched.sim.engine import simulate
    from optsched.sim.policies import get_policy
    from optsched.sim.solving import SolveRoundAllocator
    from optsched.sim.traces import Trace
    from optsched.sim.workload import build_workload

    with pytest.raises(InputError) as e:
        SimConfig(packing_tolerance=0.1)
    assert e.value.field == "packing_tolerance"
    with pytest.raises(InputError) as e:
        SimConfig(packing="tight")
    assert e.value.field == "packing"
    nodes = cluster.homogeneous(3, gpus=4, cpus=16, mem_gb=128)
    rows = [(f"s{i}", 10.0 * i, 400.0 + 50 * i, 1, "cpu") for i in range(6)] + [("big", 250.0, 300.0, 8, "flat")]
    ids, sub, dur, g, model = zip(*rows, strict=True)
    tr = Trace.from_columns("t", {"job_id": ids, "submit_s": sub, "duration_s": dur, "gpus": g, "model": model})
    wl = build_workload(tr, nodes, catalogue=StandInCatalogue(), restart_s=30.0, spread_factor=0.8)
    for solver in ("fungible-greedy", "cpsat"):
        opts = {"num_workers": 1} if solver == "cpsat" else {}
        res = simulate(wl, nodes, get_policy("fifo"), SolveRoundAllocator(solver, time_limit=1.0, **opts),
                       SimConfig(round_s=100.0, check=True, progress=False, packing="consolidate", packing_tolerance=0.05))
        assert res.summary()["finished"] == 7 and res.info["round_policies"]["packing"] == "consolidate", solver


def test_cli_solves_and_checks_a_packing_round(tmp_path):
    d = json.loads((REPO / "instances" / "small" / "s-4n-12j-01.json").read_text())
    d["version"] = 2
    d["round"]["packing"] = "consolidate"
    d["round"]["packing_tolerance"] = 0.02
    inst = tmp_path / "pack.json"
    inst.write_text(json.dumps(d))
    for solver in ("fungible-greedy", "cpsat"):
        out = tmp_path / f"{solver}.json"
        proc = subprocess.run([sys.executable, "-m", "optsched", "solve", str(inst), "--solver", solver, "--time-limit", "2", "-o", str(out)],
                              capture_output=True, text=True, cwd=REPO, timeout=120)
        assert proc.returncode == 0, proc.stderr
        chk = subprocess.run([sys.executable, "-m", "optsched", "check", str(inst), str(out), "--json"], capture_output=True, text=True,
                             cwd=REPO, timeout=120)
        assert chk.returncode == 0, chk.stderr
        report = json.loads(chk.stdout)
        assert report["feasible"] and report["packing"]["whole_free_gpus"] == json.loads(out.read_text())["stats"]["whole_free_gpus"]
    d["version"] = 1
    inst.write_text(json.dumps(d))
    proc = subprocess.run([sys.executable, "-m", "optsched", "solve", str(inst)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2 and "version" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [["--packing-tolerance", "0.1"], ["--packing", "--packing-tolerance", "1.5"]])
def test_cli_simulate_refuses_a_bad_packing_tolerance_by_name(args):
    proc = subprocess.run([sys.executable, "-m", "optsched", "simulate", "no-such-trace.csv", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert proc.returncode == 2 and "--packing-tolerance" in proc.stderr and "Traceback" not in proc.stderr
