"""DRF in the simulator (``SimConfig.fairness = "drf"``, ``optsched simulate --fairness drf``): the
rounds carry every job's trace tenant and ``round.fairness``, a late tenant gets its max-min share
at the next boundary instead of waiting behind an earlier tenant's jobs, and the run records it."""

from __future__ import annotations

import json

import pytest
from test_policies_sim import _cfg, _tenant_workload

from optsched.errors import InputError
from optsched.sim import cluster, policies
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate
from optsched.sim.solving import SolveRoundAllocator


class _Seen:
    """Wraps an allocator and keeps each round's (fairness, {job: tenant})."""

    def __init__(self, inner):
        self.inner, self.name, self.rounds = inner, inner.name, []

    def __call__(self, inst):
        self.rounds.append((inst.round.fairness, {j.id: j.tenant for j in inst.jobs}))
        return self.inner(inst)


def _run(solver, fairness):
    """One node of 4 GPUs. Tenant a's four long 1-GPU jobs arrive first and weigh more (FIFO);
    tenant b's two short ones arrive mid-round; job x has no tenant and arrives last."""
    nodes = cluster.homogeneous(1, gpus=4, cpus=32, mem_gb=256)
    rows = [*[(f"a{i}", 0.0, 2000.0, 1, "flat", "a") for i in range(4)], *[(f"b{i}", 150.0, 300.0, 1, "flat", "b") for i in range(2)],
            ("x", 160.0, 100.0, 1, "flat", "")]
    opts = {"num_workers": 1} if solver == "cpsat" else {}
    alloc = _Seen(SolveRoundAllocator(solver, time_limit=2.0, **opts))
    res = simulate(_tenant_workload(rows, nodes), nodes, policies.FIFO(), alloc, _cfg(fairness=fairness))
    return res, alloc


@pytest.mark.parametrize("solver", ["fungible-greedy", "fixed-demand", "cpsat"])
def test_a_late_tenant_gets_its_max_min_share_at_the_next_boundary(solver):
    res, seen = _run(solver, "drf")
    start = dict(zip(res.jobs["id"], res.jobs["start_s"].tolist(), strict=True))
    # at t=200: tenants a, b and the no-tenant group "" share 4 GPUs; max-min gives b and x one GPU
    # each at least (b's second job too when a holds 2): b0 and x start at once
    assert start["x"] == 200.0 and min(start["b0"], start["b1"]) == 200.0
    assert res.summary()["preemptions"] >= 1 and res.summary()["finished"] == 7
    assert res.info["round_policies"]["fairness"] == "drf"
    fair, tenants = seen.rounds[-1]
    assert fair == "drf"
    assert {tenants[j] for j in tenants} <= {"a", "b", None}
    assert any(t.get("x", "missing") is None and t.get("b0") == "b" for _f, t in seen.rounds)
    plain, seen = _run(solver, None)
    start = dict(zip(plain.jobs["id"], plain.jobs["start_s"].tolist(), strict=True))
    assert min(start["b0"], start["b1"], start["x"]) >= 2000.0  # FIFO without DRF: b and x wait for a
    assert all(f is None and set(t.values()) == {None} for f, t in seen.rounds)
    assert plain.info["round_policies"]["fairness"] is None


def test_fairness_is_checked_by_name():
    with pytest.raises(InputError) as e:
        SimConfig(fairness="max-min")
    assert e.value.field == "fairness" and "max-min" in str(e.value)


@pytest.mark.parametrize("fairness", ["drf", "hug"])
def test_cli_simulate_with_fairness(tmp_path, fairness):
    from optsched.cli import main

    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus,gpu_fraction,cpu_cores,mem_gib,tenant,user,status,gpu_type,censored\n"
                     "a,0,2000,4,1.0,,,vc1,,,,0\nb,0,2000,4,1.0,,,vc1,,,,0\nc,100,300,4,1.0,,,vc2,,,,0\n")
    out = tmp_path / "out"
    rc = main(["simulate", str(trace), "--cluster", "1x8", "--policy", "fifo", "--allocator", "fungible-greedy", "--time-limit", "1",
               "-o", str(out), "--check", "--no-progress", "--fairness", fairness, "--restart", "0"])
    assert rc == 0
    doc = json.loads(next(out.glob("fifo-fungible-greedy-s0-*.metrics.json")).read_text())  # -<run id>
    assert doc["run"]["round_policies"]["fairness"] == fairness and doc["metrics"]["finished"] == 3
    assert doc["metrics"]["preemptions"] == 1  # vc2's job takes one of vc1's two 4-GPU slots at the next boundary
    assert main(["simulate", str(trace), "--fairness", "max-min", "-o", str(out), "--no-progress"]) == 2
