"""Elastic gangs in the simulator (``SimConfig.elastic_share``, ``optsched simulate --elastic-share``):
the rate at the size a job got, remaining work across a size change (a restart), the GPU-seconds
it held, seeded marking, and the CLI end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optsched import catalogue as cat
from optsched.elastic import elastic_spec, mark_elastic
from optsched.errors import InputError
from optsched.model import Elastic, Node
from optsched.schedule import Assignment, Schedule
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate
from optsched.sim.policies import FIFO
from optsched.sim.solving import SolveRoundAllocator
from optsched.sim.workload import SimJob

NODES = (Node("n0", "V100", 4, 64, 512),)
PROF = cat.profile("resnet50", 1)
DEMAND = (3, 62)


def _job(i, submit=0.0, gpus=1, duration=3600.0, elastic=None):
    return SimJob(id=f"j{i}", submit_s=submit, gpus=gpus, duration_s=duration, model="resnet50", profile=PROF, demand=DEMAND,
                  gpu_speed=None, spread_factor=0.9, restart_s=60.0, elastic=elastic)


def test_an_elastic_job_alone_runs_at_its_largest_size_and_its_factor():
    jobs = [_job(0)]
    rigid = simulate(jobs, NODES, FIFO(), SolveRoundAllocator("fixed-demand", time_limit=1), SimConfig(progress=False, check=True))
    el = simulate(jobs, NODES, FIFO(), SolveRoundAllocator("fungible-greedy", time_limit=1),
                  SimConfig(progress=False, check=True, elastic_share=1.0))
    factor = 4 / (1 + 0.02 * 3)  # resnet50 at 4 GPUs (Amdahl, serial fraction 0.02) over 1 GPU
    fg = simulate(jobs, NODES, FIFO(), SolveRoundAllocator("fungible-greedy", time_limit=1), SimConfig(progress=False, check=True))
    assert rigid.jct_s[0] == pytest.approx(3600.0)
    assert el.jct_s[0] == pytest.approx(fg.jct_s[0] / factor)  # same grid point, scaled throughput
    assert el.jobs["gpu_s"][0] == pytest.approx(4 * el.jct_s[0]) and el.jobs["elastic"][0] == 1
    assert rigid.jobs["gpu_s"][0] == pytest.approx(3600.0) and rigid.jobs["elastic"][0] == 0
    assert el.info["round_policies"]["elastic_share"] == 1.0


def test_a_size_change_is_a_restart_and_remaining_work_carries_over():
    el = Elastic((1, 2, 4), (1.0, 1.9, 3.6))
    jobs = [_job(0, elastic=el), _job(1, submit=200.0, gpus=2)]

    def allocator(inst):  # round 0: j0 on all 4 GPUs; from t=300: j0 shrinks to 2 beside j1
        point = {"cpus_per_gpu": 3, "mem_per_gpu_gb": 62}
        ids = {j.id for j in inst.jobs}
        if ids == {"j0"}:
            return Schedule(inst.name, {"j0": Assignment({"n0": 4}, **point)})
        return Schedule(inst.name, {j: Assignment({"n0": 2}, **point) for j in ids})

    res = simulate(jobs, NODES, FIFO(), allocator, SimConfig(progress=False, check=True, round_s=300))
    # j0: 300 s at 3.6, then a 60 s restart, then 1.9 until its 3600 s of demand-rate work is done
    left = 3600.0 - 300 * 3.6
    assert res.jobs["finish_s"][0] == pytest.approx(300 + 60 + left / 1.9)
    assert res.jobs["moves"][0] == 1 and res.jobs["preemptions"][0] == 0
    assert res.jobs["gpu_s"][0] == pytest.approx(300 * 4 + 2 * (res.jobs["finish_s"][0] - 300))
    assert res.jobs["finish_s"][1] == pytest.approx(300 + 3600.0)


def test_marking_is_seeded_and_keeps_given_specs():
    pairs = [("resnet50", 1), ("bert", 2)] * 20
    a = mark_elastic(pairs, 0.5, 3, 16)
    assert a == mark_elastic(pairs, 0.5, 3, 16) and a != mark_elastic(pairs, 0.5, 4, 16)
    assert 0 < sum(x is not None for x in a) < len(pairs)
    assert all(x is None or x == elastic_spec(m, g, 16) for (m, g), x in zip(pairs, a, strict=True))
    assert mark_elastic(pairs, 0.0, 0, 16) == [None] * len(pairs)
    for bad in ({"elastic_share": 1.5}, {"elastic_share": -0.1}, {"elastic_seed": -1}):
        with pytest.raises(InputError) as e:
            SimConfig(**bad)
        assert e.value.field == next(iter(bad))
    own = Elastic((1, 2), (1.0, 1.5))
    jobs = [_job(0, elastic=own)]
    res = simulate(jobs, NODES, FIFO(), SolveRoundAllocator("fungible-greedy", time_limit=1),
                   SimConfig(progress=False, check=True, elastic_share=1.0))
    assert res.jobs["gpu_s"][0] == pytest.approx(2 * res.jct_s[0])  # its own sizes, not the marked ones


@pytest.mark.parametrize("allocator", ["fixed-demand", "fungible-greedy", "cpsat"])
def test_every_allocator_runs_an_elastic_workload_to_the_end(allocator):
    rng = np.random.default_rng(1)
    n = 10
    jobs = [_job(i, submit=float(s), gpus=int(g), duration=float(d))
            for i, (s, g, d) in enumerate(zip(np.sort(rng.uniform(0, 1200, n)), rng.choice([1, 2, 4], n), rng.uniform(300, 1500, n),
                                              strict=True))]
    nodes = (Node("n0", "V100", 4, 48, 512), Node("n1", "V100", 4, 48, 512))
    res = simulate(jobs, nodes, FIFO(), SolveRoundAllocator(allocator, time_limit=1, **({"num_workers": 1} if allocator == "cpsat" else {})),
                   SimConfig(progress=False, check=True, elastic_share=0.5, round_s=300))
    assert res.finished.all()
    el = res.jobs["elastic"].astype(bool)
    assert el.any() and not el.all()
    rigid_gpus = res.jobs["gpu_s"][~el] / res.jobs["run_s"][~el]
    np.testing.assert_allclose(rigid_gpus, res.jobs["gpus"][~el])  # rigid jobs always hold their gang


def test_cli_simulate_with_elastic_jobs(tmp_path, capsys):
    from optsched.cli import main

    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus,gpu_fraction,cpu_cores,mem_gib,tenant,user,status,gpu_type,censored\n"
                     "a,0,600,1,1.0,,,vc,,,,0\nb,10,1200,2,1.0,,,vc,,,,0\nc,20,300,4,1.0,,,vc,,,,0\nd,700,200,1,1.0,,,vc,,,,0\n")
    out = tmp_path / "out"
    rc = main(["simulate", str(trace), "--cluster", "1x8", "--policy", "fifo", "--allocator", "fungible-greedy", "--time-limit", "1",
               "-o", str(out), "--check", "--no-progress", "--elastic-share", "1"])
    assert rc == 0
    doc = json.loads(next(out.glob("fifo-fungible-greedy-s0-*.metrics.json")).read_text())  # -<run id>
    assert doc["metrics"]["finished"] == 4 and doc["run"]["round_policies"]["elastic_share"] == 1.0
    assert main(["simulate", str(trace), "--elastic-share", "2", "-o", str(out), "--no-progress"]) == 2
