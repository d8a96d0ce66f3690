"""Deadline (SLO) jobs in the simulator (optsched.sim.deadlines): marking, admission control,
due jobs run in time, demotion, metrics, and the CLI flags."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_sim_support import StandInCatalogue, first_fit

from optsched.errors import InputError
from optsched.schedule import Assignment, Schedule
from optsched.sim import cluster, policies
from optsched.sim.config import SimConfig
from optsched.sim.deadlines import SLO_ADMITTED, SLO_NONE, SLO_REJECTED, deadline_metrics, edf_fits, mark_deadlines
from optsched.sim.engine import simulate
from optsched.sim.solving import SolveRoundAllocator
from optsched.sim.traces import Trace
from optsched.sim.workload import build_workload

CAT = StandInCatalogue()


def _workload(rows, nodes, deadlines=None):
    ids, sub, dur, g, model = zip(*rows, strict=True)
    tr = Trace.from_columns("t", {"job_id": ids, "submit_s": sub, "duration_s": dur, "gpus": g, "model": model})
    wl = build_workload(tr, nodes, catalogue=CAT, restart_s=0.0, spread_factor=1.0)
    dl = deadlines or {}
    return replace(wl, jobs=tuple(replace(j, deadline_s=dl.get(j.id)) for j in wl.jobs))


def _cfg(**kw):
    return SimConfig(round_s=100.0, check=True, progress=False, **kw)


def _finish(res):
    return dict(zip(res.jobs["id"], res.jobs["finish_s"].tolist(), strict=True))


def _admitted_all_met(res):
    fin, dl, slo = res.jobs["finish_s"], res.jobs["deadline_s"], res.jobs["slo"]
    adm = slo == SLO_ADMITTED
    return bool(np.all(fin[adm] <= dl[adm] + 1e-6))


@pytest.mark.parametrize("alloc", ["first-fit", "fungible-greedy", "fixed-demand", "cpsat"])
def test_a_due_job_preempts_best_effort_work_and_meets_its_deadline(alloc):
    """Two long best-effort jobs hold both GPUs (FIFO puts them first); the SLO job arriving at
    50 s with deadline 650 s is admitted at 100 s, becomes due at 400 s (it could not wait another
    round) and runs 400-600 s. Without its deadline it waits until 1000 s."""
    nodes = cluster.homogeneous(1, gpus=2, cpus=16, mem_gb=128)
    rows = [("b0", 0, 1000, 1, "flat"), ("b1", 0, 1000, 1, "flat"), ("s", 50, 200, 1, "flat")]
    allocator = first_fit if alloc == "first-fit" else SolveRoundAllocator(alloc, time_limit=2.0)
    res = simulate(_workload(rows, nodes, {"s": 650.0}), nodes, policies.FIFO(), allocator, _cfg())
    assert _finish(res)["s"] == 600.0
    assert res.jobs["slo"].tolist() == [SLO_NONE, SLO_NONE, SLO_ADMITTED]
    s = res.summary()
    assert s["deadline_satisfaction"] == 1.0 and s["admitted_deadline_satisfaction"] == 1.0 and s["slo_jobs"] == 1
    plain = simulate(_workload(rows, nodes), nodes, policies.FIFO(), first_fit, _cfg())
    assert _finish(plain)["s"] == 1200.0 and "deadline_satisfaction" not in plain.summary()


def test_admission_rejects_what_cannot_fit_and_admitted_jobs_meet_their_deadlines():
    """One GPU, four SLO jobs at once (deadlines 150, 250, 260, 2000; 100 s each): the first two
    fit the EDF test (1 + 2 rounds of GPU by 250 s), the third does not (3 rounds by 260 s) and
    runs as best-effort, the fourth fits. A job that cannot make it even alone is rejected."""
    nodes = cluster.homogeneous(1, gpus=1, cpus=16, mem_gb=128)
    rows = [("a", 0, 100, 1, "flat"), ("b", 0, 100, 1, "flat"), ("c", 0, 100, 1, "flat"), ("d", 0, 100, 1, "flat"),
            ("x", 0, 100, 1, "flat"), ("be", 0, 50, 1, "flat")]
    dl = {"a": 150.0, "b": 250.0, "c": 260.0, "d": 2000.0, "x": 80.0}
    res = simulate(_workload(rows, nodes, dl), nodes, policies.FIFO(), first_fit, _cfg())
    slo = dict(zip(res.jobs["id"], res.jobs["slo"].tolist(), strict=True))
    assert slo == {"a": SLO_ADMITTED, "b": SLO_ADMITTED, "c": SLO_REJECTED, "d": SLO_ADMITTED, "x": SLO_REJECTED, "be": SLO_NONE}
    assert _admitted_all_met(res)
    s = res.summary()
    assert s["finished"] == 6 and s["slo_jobs"] == 5 and s["slo_admitted"] == 3 and s["slo_rejected"] == 2
    assert s["admitted_deadline_satisfaction"] == 1.0 and s["deadline_met"] >= 3


def test_an_admitted_job_that_falls_behind_is_demoted_and_counted():
    """An allocator that never runs the SLO job: once it cannot finish even at its best rate it
    is demoted (not dropped: it still finishes, late)."""
    nodes = cluster.homogeneous(1, gpus=1, cpus=16, mem_gb=128)
    rows = [("s", 0, 100, 1, "flat"), ("b", 0, 400, 1, "flat")]

    def starve(inst):
        if any(j.id == "b" for j in inst.jobs):  # b alone while it lasts
            return Schedule(inst.name, {"b": Assignment({"n0": 1}, 4, 32)})
        return first_fit(inst)

    res = simulate(_workload(rows, nodes, {"s": 300.0}), nodes, policies.FIFO(), starve, _cfg())
    s = res.summary()
    assert s["slo_demoted"] == 1 and s["deadline_met"] == 0 and s["admitted_deadline_satisfaction"] == 0.0
    assert s["finished"] == 2


@pytest.mark.parametrize("solver", ["fungible-greedy", "cpsat"])
def test_random_workload_with_slo_share_keeps_admitted_deadlines_of_single_gpu_jobs(solver):
    """Single-GPU flat jobs on one node (no packing or rate effects): every admitted job meets its
    deadline, and the marking is deterministic in the seed."""
    nodes = cluster.homogeneous(1, gpus=4, cpus=32, mem_gb=256)
    rng = np.random.default_rng(3)
    rows = [(f"j{i}", float(i * 30), float(rng.integers(1, 6) * 100), 1, "flat") for i in range(30)]
    cfg = _cfg(slo_share=0.4, slo_slack=2.5, slo_seed=7)
    res = simulate(_workload(rows, nodes), nodes, policies.LAS(), SolveRoundAllocator(solver, time_limit=1.0), cfg)
    s = res.summary()
    assert s["slo_jobs"] == int(np.isfinite(mark_deadlines(_workload(rows, nodes).jobs, 0.4, 2.5, 7)).sum()) > 0
    assert s["slo_admitted"] > 0 and _admitted_all_met(res) and s["finished"] == 30
    again = simulate(_workload(rows, nodes), nodes, policies.LAS(), SolveRoundAllocator(solver, time_limit=1.0), cfg)
    assert np.array_equal(again.jobs["slo"], res.jobs["slo"])


def test_marking_and_helpers():
    nodes = cluster.homogeneous(1, gpus=1)
    jobs = _workload([("a", 0, 100, 1, "flat"), ("b", 10, 100, 1, "flat")], nodes, {"b": 999.0}).jobs
    assert np.isnan(mark_deadlines(jobs, 0.0, 2.0, 0)[0]) and mark_deadlines(jobs, 0.0, 2.0, 0)[1] == 999.0
    assert mark_deadlines(jobs, 1.0, 3.0, 0).tolist() == [300.0, 999.0]
    for bad in (dict(slo_share=1.5), dict(slo_slack=0.0), dict(slo_seed=-1)):
        with pytest.raises(InputError, match=next(iter(bad))):
            SimConfig(**bad)
    assert edf_fits(0.0, np.array([100.0, 200.0]), np.array([100.0, 100.0]), 1.0)
    assert not edf_fits(0.0, np.array([100.0, 150.0]), np.array([100.0, 100.0]), 1.0)
    assert deadline_metrics({"deadline_s": np.array([np.nan]), "slo": np.array([0]), "finish_s": np.array([1.0]),
                             "submit_s": np.array([0.0])}) == {}


def test_cli_slo_flags(tmp_path):
    import json

    from optsched.cli import main

    trace = tmp_path / "t.csv"
    lines = ["job_id,submit_time_s,duration_s,num_gpus,gpu_fraction,cpu_cores,mem_gib,tenant,user,status,gpu_type,censored"]
    lines += [f"j{i},{i * 60},{300 + 100 * (i % 4)},1,1.0,,,vc,,,,0" for i in range(12)]
    trace.write_text("\n".join(lines) + "\n")
    rc = main(["simulate", str(trace), "--cluster", "1x4", "--allocator", "fungible-greedy", "--slo-share", "0.5",
               "--slo-slack", "3", "--no-progress", "-o", str(tmp_path / "out")])
    assert rc == 0
    doc = json.loads(next((tmp_path / "out").glob("*.metrics.json")).read_text())
    assert doc["metrics"]["slo_jobs"] > 0 and 0.0 <= doc["metrics"]["deadline_satisfaction"] <= 1.0
    assert doc["run"]["round_policies"]["slo_share"] == 0.5
    assert main(["simulate", str(trace), "--slo-share", "2", "--no-progress", "-o", str(tmp_path / "o2")]) == 2


def test_due_lift_is_bounded_by_the_due_jobs_gpus_not_the_queue():
    """A due job outweighs any set of jobs it could displace (at most its GPUs of them), and the
    lift does not grow with the queue, so long queues keep the round within the value span."""
    from optsched.sim.deadlines import due_weights

    n = 10_000
    w = np.ones(n)
    w[:5] = [9.0, 8.0, 7.0, 6.0, 5.0]
    due = np.zeros(n, dtype=bool)
    due[-1] = True
    gpus = np.ones(n, dtype=np.int64)
    gpus[-1] = 2
    out = due_weights(w, due, gpus)
    assert out[-1] > 4 * (9.0 + 8.0)  # more than 4x the two heaviest jobs it could displace
    assert out[-1] < 200  # 2 x (4 x 17 + 1), not the 4 x (sum of 10,000 weights) = 80,000+ of a queue-length lift
    assert np.array_equal(out[~due], w[~due])
