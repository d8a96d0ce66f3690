"""How a round that pins running jobs values a waiting job's spread (``SimConfig.start_spread_horizon_s``):
a start there keeps its nodes until the job ends, so its spread is charged as over the horizon."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from optsched import check_schedule, solve_round
from optsched.errors import InputError
from optsched.model import Instance, Job, Node, Profile, Round
from optsched.schedule import Assignment, Schedule
from optsched.sim import cluster, policies
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate_steps
from optsched.sim.rounds import MIN_START_SPREAD, assignment_rate, start_job
from optsched.sim.traces import Trace
from optsched.sim.workload import build_workload

PROF = Profile((2, 4), (16, 32), ((0.8, 0.9), (1.0, 1.1)))


def _gang_and_small():
    """A 16-GPU gang (0.9 per node beyond two) first in the queue, and eight 1-GPU jobs. The
    round offers them on three 8-GPU nodes with 4 GPUs held on each of n0 and n1 by pinned
    jobs: the gang fits only on three nodes, or the small jobs take the free GPUs."""
    nodes = tuple(Node(f"n{i}", "V100", 8, 64, 512) for i in range(3))
    held = [Job(f"p{i}", 4, PROF, (2, 16), placement={f"n{i}": 4}, preemptible=False) for i in range(2)]
    gang = Job("gang", 16, PROF, (2, 16), weight=6.0, spread_factor=0.9)
    small = [Job(f"s{i}", 1, PROF, (2, 16), weight=0.6, spread_factor=0.9) for i in range(8)]
    return Instance("start", nodes, (*held, gang, *small), Round())


def test_a_start_pays_its_spread_over_the_horizon_and_a_waiting_gang_lets_small_jobs_in():
    inst = _gang_and_small()
    one_round = solve_round(inst, solver="cpsat", time_limit=5.0, seed=0)
    assert one_round.status.name == "OPTIMAL" and len(one_round.schedule.jobs["gang"].nodes) == 3  # 0.9 x 6 beats 8 x 0.6
    charged = replace(inst, jobs=tuple(start_job(j, 24.0) if j.placement is None else j for j in inst.jobs))
    assert charged.job("gang").spread_factor == pytest.approx(0.9 ** 24)
    res = solve_round(charged, solver="cpsat", time_limit=5.0, seed=0)
    assert res.status.name == "OPTIMAL" and "gang" not in res.schedule.jobs
    assert all(f"s{i}" in res.schedule.jobs for i in range(8))
    assert check_schedule(charged, res.schedule).feasible


def test_start_job_changes_only_the_spread_factor_and_keeps_it_positive():
    j = Job("g", 16, PROF, (2, 16), weight=2.5, spread_factor=0.7)
    s = start_job(j, 24.0)
    assert s.spread_factor == pytest.approx(0.7 ** 24) and j.spread_factor == 0.7
    assert replace(s, spread_factor=0.7) == j
    assert start_job(j, 1e6).spread_factor == MIN_START_SPREAD


def _steps(policy, cfg, gpus=(16, 1), nodes=3):
    tr = Trace.from_columns("t", {"job_id": [f"j{i}" for i in range(len(gpus))], "submit_s": [0.0] * len(gpus),
                                  "duration_s": [3600.0] * len(gpus), "gpus": list(gpus), "model": ["resnet18"] * len(gpus)})
    ns = cluster.homogeneous(nodes, gpus=8, cpus=64, mem_gb=512)
    wl = build_workload(tr, ns, restart_s=0.0, spread_factor=0.9)
    return simulate_steps(wl, ns, policy, cfg), wl, ns


def test_fifo_rounds_charge_waiting_jobs_and_not_running_ones():
    steps, wl, ns = _steps(policies.FIFO(), SimConfig(round_s=300.0, progress=False, reuse_unchanged=False))
    first = next(steps)
    assert {j.id: j.spread_factor for j in first.jobs} == pytest.approx({"j0": 0.9 ** 24, "j1": 0.9 ** 24})
    # start the gang on three nodes: running, it keeps the factor it runs at
    c, m = wl.jobs[0].demand
    spread = Assignment({"n0": 6, "n1": 5, "n2": 5}, c, m)
    second = steps.send(Schedule(first.name, {"j0": spread}))
    by_id = {j.id: j for j in second.jobs}
    assert by_id["j0"].pinned and by_id["j0"].spread_factor == 0.9
    assert by_id["j1"].spread_factor == pytest.approx(0.9 ** 24)
    # the simulated speed pays the real factor once per node beyond the fewest
    rate = assignment_rate(wl.jobs[0], spread, Instance("c", ns, (), Round()))
    assert rate == pytest.approx(wl.jobs[0].profile.at(c, m) * 0.9)
    steps.close()


@pytest.mark.parametrize("cfg, policy", [
    (SimConfig(progress=False), policies.LAS()),  # LAS preempts: a start is not for good
    (SimConfig(progress=False, start_spread_horizon_s=None), policies.FIFO()),  # one round, as asked
    (SimConfig(progress=False, start_spread_horizon_s=60.0), policies.FIFO()),  # shorter than a round: one round
])
def test_rounds_that_do_not_pin_or_a_short_horizon_keep_the_jobs_factor(cfg, policy):
    steps, _, _ = _steps(policy, cfg)
    assert all(j.spread_factor == 0.9 for j in next(steps).jobs)
    steps.close()


def test_the_horizon_scales_with_the_round_length():
    steps, _, _ = _steps(policies.FIFO(), SimConfig(round_s=600.0, progress=False, start_spread_horizon_s=3600.0))
    assert all(j.spread_factor == pytest.approx(0.9 ** 6) for j in next(steps).jobs)
    steps.close()


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_the_horizon_is_checked(bad):
    with pytest.raises(InputError, match="start_spread_horizon_s"):
        SimConfig(start_spread_horizon_s=bad)


def test_a_lifted_head_over_a_slow_young_job_stays_within_the_value_span():
    """FIFO's head lift (hundreds) over a young job (weight 0.01) at its slowest type and grid
    point would span more than the solvers accept: the engine lifts the lightest weights instead."""
    from optsched.limits import check_value_span
    from optsched.sim.rounds import VALUE_SPAN, within_value_span

    prof = Profile((1, 4), (16, 64), ((0.01, 0.05), (0.1, 1.0)))  # the slowest point at 1 % of the best
    nodes = (Node("v", "V100", 8, 64, 512), Node("k", "K80", 8, 64, 512))
    speeds = {"V100": 1.0, "K80": 0.15}
    w = np.array([300.0, 0.5, 0.01])
    jobs = tuple(Job(f"j{i}", 1, prof, (4, 64), weight=float(x), gpu_speed=speeds) for i, x in enumerate(w))
    inst = Instance("span", nodes, jobs, Round())
    with pytest.raises(InputError, match="span"):
        check_value_span(inst)
    cluster = Instance("c", nodes, (), Round())
    per = np.full((3, 2), np.nan)
    fitted = within_value_span(cluster, inst, np.arange(3), w, per)
    assert fitted is not None and fitted[0] == 300.0 and fitted[1] == 0.5 and fitted[2] > 0.01
    check_value_span(replace(inst, jobs=tuple(replace(j, weight=float(x)) for j, x in zip(jobs, fitted, strict=True))))
    assert 300.0 * 1.0 / (fitted[2] * 0.15 * 0.01) == pytest.approx(VALUE_SPAN)
    # a round within the span is left alone
    assert within_value_span(cluster, inst, np.arange(2), w[:2], per) is None


def test_a_fifo_replay_whose_head_lift_would_span_too_far_runs_through():
    """Twelve jobs at once on a V100 and a K80 node under FIFO: the 8-GPU head is lifted over
    the eleven others, the youngest weighs 1/100 and its slowest point is 0.5 % of its best on a
    K80 at 0.15: the raw round spans more than the solvers accept."""
    from optsched.sim.engine import simulate
    from optsched.sim.solving import SolveRoundAllocator
    from optsched.sim.workload import SimJob

    prof = Profile((1, 4), (16, 64), ((0.005, 0.05), (0.1, 1.0)))
    speeds = {"V100": 1.0, "K80": 0.15}
    nodes = (Node("v", "V100", 8, 64, 512), Node("k", "K80", 8, 64, 512))
    jobs = [SimJob(f"j{i}", 0.0, g, 3600.0, "m", prof, (4, 64), speeds, 0.9, 0.0) for i, g in enumerate((8, *([1] * 11)))]
    res = simulate(jobs, nodes, policies.FIFO(), SolveRoundAllocator("cpsat", time_limit=1.0),
                   SimConfig(progress=False, check=True))
    assert (res.jobs["finish_s"] > 0).all()


def test_the_command_line_reads_a_horizon_or_none():
    from optsched.sim.config import parse_start_spread_horizon

    assert parse_start_spread_horizon("2h") == 7200.0 and parse_start_spread_horizon(" None ") is None
    for bad in ("0", "abc", "-1h"):
        with pytest.raises(InputError, match="--start-spread-horizon"):
            parse_start_spread_horizon(bad)
