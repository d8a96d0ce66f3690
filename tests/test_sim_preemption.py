"""Pinned jobs (job ``preemptible: false``) and the simulator's preemption setting."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from bruteforce import best_with_rules, search_size
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import tiny_instances

from optsched import check_schedule, solve_round
from optsched.errors import InputError
from optsched.heuristics.fungible_greedy import fungible_greedy_schedule
from optsched.model import Elastic, Instance, Job, Node, Profile, Round
from optsched.schedule import Assignment, Schedule
from optsched.sim import cluster, policies, policy_base
from optsched.sim.config import SimConfig, pins_running_jobs
from optsched.sim.engine import simulate
from optsched.sim.literature import SRTF
from optsched.sim.solving import SolveRoundAllocator
from optsched.sim.traces import Trace
from optsched.sim.workload import build_workload

PINNING = ("cpsat", "lns", "fungible-greedy", "fixed-demand")
PROF = Profile((2, 4, 8), (16, 32), ((0.6, 0.7), (0.8, 1.0), (1.2, 1.5)))


def _node(i, gpus=8, cpus=32, mem=256):
    return Node(f"n{i}", "V100", gpus, cpus, mem)


def _round(jobs, nodes=None, **kw):
    return Instance(name="pin", nodes=tuple(nodes or (_node(0), _node(1))), jobs=tuple(jobs), round=Round(**kw))


def _old_and_young():
    """An old 8-GPU job pinned on n0 and eight young 1-GPU jobs that together outweigh it; one
    node only, so running them all means preempting the old one."""
    old = Job("old", 8, PROF, (4, 32), weight=1.0, placement={"n0": 8}, preemptible=False)
    young = [Job(f"y{i}", 1, PROF, (4, 32), weight=0.5) for i in range(8)]
    return _round([old, *young], nodes=[_node(0)])


@pytest.mark.parametrize("method", PINNING)
def test_every_pinning_method_keeps_the_pinned_job_where_it_runs(method):
    inst = _old_and_young()
    res = solve_round(inst, solver=method, time_limit=2.0, seed=0)
    assert res.schedule.jobs["old"].nodes == {"n0": 8}
    assert check_schedule(inst, res.schedule).feasible
    # without the pin the round is worth more by preempting it (the exact method finds that)
    if method == "cpsat":
        free = replace(inst, jobs=tuple(replace(j, preemptible=True) for j in inst.jobs))
        assert "old" not in solve_round(free, solver="cpsat", time_limit=2.0).schedule.jobs


@pytest.mark.parametrize("method", ["scip", "cbc", "pulp", "maifs"])
def test_methods_without_pinned_jobs_refuse_the_round_by_name(method):
    with pytest.raises(InputError, match="preemption"):
        solve_round(_old_and_young(), solver=method, time_limit=1.0)


def test_checker_rule_8_names_a_pinned_job_left_out_or_moved():
    inst = _round([Job("p", 4, PROF, (2, 16), placement={"n0": 4}, preemptible=False), Job("q", 4, PROF, (2, 16))])
    out = check_schedule(inst, Schedule("pin", {"q": Assignment({"n0": 4}, 2, 16)}))
    assert [v.rule for v in out] == [8] and "left out" in str(out[0])
    moved = check_schedule(inst, Schedule("pin", {"p": Assignment({"n1": 4}, 2, 16)}))
    assert [v.rule for v in moved] == [8] and "moved" in str(moved[0])
    # its grid point may change
    assert check_schedule(inst, Schedule("pin", {"p": Assignment({"n0": 4}, 8, 32)})).feasible


def test_pinned_jobs_in_json_and_their_refusals():
    inst = _round([Job("p", 4, PROF, (2, 16), placement={"n0": 4}, preemptible=False)])
    d = inst.to_dict()
    assert d["jobs"][0]["preemptible"] is False and d["version"] >= 2
    assert Instance.from_dict(d) == inst
    with pytest.raises(InputError, match="preemptible"):
        Job("p", 4, PROF, (2, 16), preemptible="no")
    with pytest.raises(InputError, match="elastic"):
        Job("e", 4, PROF, (2, 16), elastic=Elastic((2, 4), (0.6, 1.0)), preemptible=False)
    with pytest.raises(InputError, match="tenants"):
        _round([Job("p", 4, PROF, (2, 16), placement={"n0": 4}, preemptible=False, tenant="a")], tenants={"a": 4})
    # pinned jobs that cannot fit where they run even at their cheapest points: no schedule keeps them
    two = [Job(f"p{i}", 8, PROF, (2, 16), placement={"n0": 8}, preemptible=False) for i in range(2)]
    with pytest.raises(InputError, match="n0"):
        _round(two)


@st.composite
def _pinned_rounds(draw):
    inst = draw(tiny_instances(max_nodes=3, max_jobs=4))
    jobs = list(inst.jobs)
    for i, j in enumerate(jobs):
        if j.placement is not None and draw(st.booleans()):
            trial = [*jobs[:i], replace(j, preemptible=False), *jobs[i + 1:]]
            try:
                replace(inst, jobs=tuple(trial))
            except InputError:
                continue
            jobs = trial
    return replace(inst, jobs=tuple(jobs))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(_pinned_rounds())
def test_pinned_rounds_are_kept_by_every_method_and_cpsat_is_exact(inst):
    assume(any(j.pinned for j in inst.jobs))
    assume(search_size(inst) <= 20_000)
    best = best_with_rules(inst)
    for method in PINNING:
        res = solve_round(inst, solver=method, time_limit=0.5, seed=0)  # solve_round checks every rule
        assert res.objective <= best + 1e-6 * max(1.0, best)
        if method == "cpsat" and res.status.value == "optimal":
            assert res.objective == pytest.approx(best, rel=1e-6, abs=1e-6)


def test_preemption_setting_resolves_against_the_policy():
    assert pins_running_jobs(SimConfig(), policies.FIFO())
    assert not pins_running_jobs(SimConfig(), policies.LAS())
    assert not pins_running_jobs(SimConfig(), SRTF())
    assert pins_running_jobs(SimConfig(preemption="none"), policies.LAS())
    assert not pins_running_jobs(SimConfig(preemption="allowed"), policies.FIFO())
    # round policies that work by preempting
    assert not pins_running_jobs(SimConfig(slo_share=0.5), policies.FIFO())
    assert not pins_running_jobs(SimConfig(fairness="drf"), policies.FIFO())
    assert not pins_running_jobs(SimConfig(), policies.FIFO(), deadlines=True)
    with pytest.raises(InputError, match="preemption"):
        SimConfig(preemption="never")
    with pytest.raises(InputError, match="tenant_quotas"):
        SimConfig(preemption="none", tenant_quotas={"a": 8})


def _workload(name, ids, submit, duration, gpus, model, n_nodes):
    """The trace's jobs (one model for all) on ``n_nodes`` nodes of 8 GPUs, 64 cores and 512 GB,
    restarts free and no spread penalty."""
    tr = Trace.from_columns(name, {"job_id": ids, "submit_s": submit, "duration_s": duration, "gpus": gpus,
                                   "model": [model] * len(ids)})
    nodes = cluster.homogeneous(n_nodes, gpus=8, cpus=64, mem_gb=512)
    return build_workload(tr, nodes, restart_s=0.0, spread_factor=1.0), nodes


def _stream():
    """An old 8-GPU job, then eight 1-GPU jobs that together outweigh it under FIFO's weights."""
    ids = ["old", *(f"y{i}" for i in range(8))]
    sub = [0.0, *(10.0 + i for i in range(8))]
    dur = [3000.0, *([600.0] * 8)]
    g = [8, *([1] * 8)]
    return _workload("pin", ids, sub, dur, g, "resnet18", 1)


@pytest.mark.parametrize("solver", ["cpsat", "fungible-greedy"])
def test_fifo_never_preempts_an_older_running_job_unless_told_to(solver):
    wl, nodes = _stream()
    cfg = SimConfig(round_s=300.0, progress=False, check=True)
    fifo = simulate(wl, nodes, policies.FIFO(), SolveRoundAllocator(solver, time_limit=2.0), cfg)
    assert fifo.jobs["preemptions"].sum() == 0 and fifo.info["config"]["pinned"]
    assert fifo.jobs["start_s"][0] == 0.0 and fifo.jobs["finish_s"][0] <= 3000.0 + 1e-6
    if solver == "cpsat":  # the exact round trades the old job for the eight young ones when it may
        free = simulate(wl, nodes, policies.FIFO(), SolveRoundAllocator(solver, time_limit=2.0), replace(cfg, preemption="allowed"))
        assert free.jobs["preemptions"][0] >= 1


def _head_gang_stream():
    """A 16-GPU gang at the head of the queue and eight younger 2-GPU jobs that together
    outweigh it under FIFO's weights and take the same 16 GPUs."""
    ids = ["gang", *(f"y{i}" for i in range(8))]
    sub = [0.0] * 9  # all at once; FIFO ranks ties in trace order
    dur = [600.0] * 9
    g = [16, *([2] * 8)]
    return _workload("head", ids, sub, dur, g, "gnmt", 2)


@pytest.mark.parametrize("solver", ["cpsat", "fungible-greedy", "fixed-demand"])
def test_a_queue_that_does_not_preempt_starts_its_head_first_when_it_fits(solver):
    wl, nodes = _head_gang_stream()
    cfg = SimConfig(round_s=300.0, progress=False, check=True)
    fifo = simulate(wl, nodes, policies.FIFO(), SolveRoundAllocator(solver, time_limit=2.0), cfg)
    start = dict(zip(fifo.jobs["id"], fifo.jobs["start_s"], strict=True))
    assert start["gang"] == 0.0 and all(start[f"y{i}"] >= 300.0 for i in range(8))
    if solver == "cpsat":  # with preemption allowed the weights alone rule: the exact round runs the eight first
        free = simulate(wl, nodes, policies.FIFO(), SolveRoundAllocator(solver, time_limit=2.0), replace(cfg, preemption="allowed"))
        assert dict(zip(free.jobs["id"], free.jobs["start_s"], strict=True))["gang"] > 0.0


def test_the_head_lift_is_bounded_by_the_heads_size_not_the_queue():
    """Lifting the head above all 300 other waiting jobs at once would span FIFO's weights past
    the value range every method accepts; it needs to beat only the g jobs that could take its
    g GPUs."""
    from optsched.sim.queue import head_first

    w = policy_base.rank_weights(np.arange(301), 100.0)
    wait = np.arange(301)
    one = head_first(w, wait, 0, 1)
    assert one[0] == pytest.approx(4.0 * w[1] + 1.0) and np.array_equal(one[1:], w[1:])
    eight = head_first(w, wait, 0, 8)
    assert eight[0] == pytest.approx(4.0 * w[1:9].sum() + 1.0)


def test_a_long_fifo_queue_stays_within_the_value_range():
    """300 one-GPU jobs queue at once behind a running one on a single node: every round stays
    solvable (solve_round checks the value span of each)."""
    n = 301
    tr = Trace.from_columns("long", {"job_id": [f"j{i}" for i in range(n)], "submit_s": [0.0] * n, "duration_s": [200.0] * n,
                                     "gpus": [1] * n, "model": ["resnet18"] * n})
    nodes = cluster.homogeneous(1, gpus=8, cpus=64, mem_gb=512)
    wl = build_workload(tr, nodes, restart_s=0.0, spread_factor=1.0)
    res = simulate(wl, nodes, policies.FIFO(), SolveRoundAllocator("fungible-greedy"), SimConfig(round_s=300.0, progress=False, horizon_s=3000.0, queue_window=None))
    assert res.info["config"]["pinned"] and res.summary()["finished"] >= 70


def test_the_reservation_holds_back_only_what_would_delay_the_head():
    """EASY backfilling's rule: the head (16 GPUs, 4 free now) is reserved at 3,000 s, when two
    8-GPU jobs have ended, with 4 GPUs to spare then; a job that ends before, or fits in those 4
    (in queue order), or cannot use the type may start; a long 2-GPU job after the spare is used
    may not."""
    from optsched.sim.queue import reservation

    gpus = np.array([16, 8, 4, 2, 8])
    allowed = np.array([[True], [True], [True], [True], [False]])
    run_s = np.array([0.0, 500.0, 9000.0, 9000.0, 9000.0])
    releases = [(3000.0, 0, 8), (1000.0, 0, 8), (8000.0, 0, 8)]
    others = np.array([1, 2, 3, 4])
    ok = reservation(0, others, gpus, allowed, np.array([4]), releases, run_s)
    assert ok.tolist() == [True, True, False, True]
    # the head fits now, or never: nothing is held back
    assert reservation(0, others, gpus, allowed, np.array([16]), releases, run_s).all()
    assert reservation(0, others, np.array([64, 8, 4, 2, 8]), allowed, np.array([4]), releases, run_s).all()


def _reservation_stream():
    """An 8-GPU job runs on one of two 8-GPU nodes for 3,000 s; a 16-GPU gang queues behind it;
    then a long 8-GPU job and a short 1-GPU one arrive, both younger than the gang."""
    ids = ["first", "gang", "long", "short"]
    sub = [0.0, 10.0, 20.0, 30.0]
    dur = [3000.0, 600.0, 20000.0, 900.0]
    g = [8, 16, 8, 1]
    return _workload("easy", ids, sub, dur, g, "gnmt", 2)


@pytest.mark.parametrize("solver", ["cpsat", "fungible-greedy"])
def test_easy_backfilling_never_lets_a_younger_job_delay_the_heads_start(solver):
    wl, nodes = _reservation_stream()
    cfg = SimConfig(round_s=300.0, progress=False, check=True)
    starts = {}
    for backfill in ("any", "easy"):
        res = simulate(wl, nodes, policies.FIFO(), SolveRoundAllocator(solver, time_limit=2.0), replace(cfg, backfill=backfill))
        starts[backfill] = dict(zip(res.jobs["id"], res.jobs["start_s"], strict=True))
    # any: the long job takes the free node and the gang waits for it to end
    assert starts["any"]["long"] < 3000.0 and starts["any"]["gang"] >= 20000.0
    # easy: the gang starts once the first job ends; the short job backfills before; the long one waits
    assert starts["easy"]["gang"] <= 3300.0 and starts["easy"]["long"] >= starts["easy"]["gang"]
    assert starts["easy"]["short"] < 3000.0


def test_a_non_preemptive_queue_backfills_easy_by_default():
    """The default keeps the head's reservation: the younger long job does not take the GPUs
    the gang waits for (it would under ``backfill="any"``)."""
    assert SimConfig().backfill == "easy"
    wl, nodes = _reservation_stream()
    res = simulate(wl, nodes, policies.FIFO(), SolveRoundAllocator("fungible-greedy"), SimConfig(round_s=300.0, progress=False))
    starts = dict(zip(res.jobs["id"], res.jobs["start_s"], strict=True))
    assert starts["gang"] <= 3300.0 and starts["long"] >= starts["gang"]


def test_the_backfill_setting_is_checked():
    with pytest.raises(InputError, match="backfill"):
        SimConfig(backfill="conservative")


def test_the_greedy_keeps_a_pinned_job_on_its_nodes_when_its_lean_point_needs_more_cores_there():
    """p's leanest point (4 cores per GPU) does not fit its 16-core node; the greedy used to
    place it there on the other node, and the repair that put p back left q out of the round."""
    prof = Profile((1, 2, 4), (32,), ((0.5,), (0.6,), (1.0,)))
    nodes = [Node("n0", "V100", 8, 16, 512), Node("n1", "V100", 8, 64, 512)]
    p = Job("p", 8, prof, (2, 32), weight=1.0, placement={"n0": 8}, preemptible=False)
    q = Job("q", 8, prof, (2, 32), weight=0.5)
    inst = _round([p, q], nodes=nodes)
    s = fungible_greedy_schedule(inst)  # the fungible pass alone (fungible-greedy also tries fixed demands)
    assert s.jobs["p"].nodes == {"n0": 8} and s.jobs["p"].cpus_per_gpu == 2
    assert s.jobs["q"].nodes == {"n1": 8}
    assert check_schedule(inst, s).feasible
    assert solve_round(inst, solver="fungible-greedy", time_limit=1.0).schedule.jobs.keys() == {"p", "q"}
