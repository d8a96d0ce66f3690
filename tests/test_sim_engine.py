"""The simulator engine: exact JCTs on hand-computed traces, restarts, conservation, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sim_support import StandInCatalogue, first_fit, fungible_first_fit

from optsched.checker import check_schedule
from optsched.errors import InputError
from optsched.model import Instance, Job
from optsched.schedule import Assignment, Schedule
from optsched.sim import cluster, policies
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate
from optsched.sim.solving import SimulationError
from optsched.sim.traces import Trace
from optsched.sim.workload import build_workload

CAT = StandInCatalogue()


def _workload(rows, nodes, restart_s=30.0, spread_factor=1.0):
    ids, sub, dur, g, model = zip(*rows, strict=True)
    tr = Trace.from_columns("t", {"job_id": ids, "submit_s": sub, "duration_s": dur, "gpus": g, "model": model})
    return build_workload(tr, nodes, catalogue=CAT, restart_s=restart_s, spread_factor=spread_factor)


def _cfg(**kw):
    kw.setdefault("round_s", 100.0)
    kw.setdefault("check", True)
    kw.setdefault("progress", False)
    # the stand-in allocators (first fit) know nothing of pinned jobs: preemption is tested with
    # them as such; test_sim_preemption.py covers the pinned rounds
    kw.setdefault("preemption", "allowed")
    return SimConfig(**kw)


def _jct(res):
    return dict(zip(res.jobs["id"], res.jct_s.tolist(), strict=True))


def test_hand_computed_fifo_trace():
    """a, b start at 0; c (4 GPUs) arrives at 50 and waits until a's GPUs come back at the
    boundary after a finishes (250 -> 300), then runs 100 s."""
    nodes = cluster.homogeneous(1, gpus=4, cpus=16, mem_gb=128)
    wl = _workload([("a", 0, 250, 2, "flat"), ("b", 0, 100, 2, "flat"), ("c", 50, 100, 4, "flat")], nodes)
    res = simulate(wl, nodes, policies.FIFO(), first_fit, _cfg())
    assert _jct(res) == {"a": 250.0, "b": 100.0, "c": 350.0}
    s = res.summary()
    assert s["makespan_s"] == 400.0
    assert s["avg_queueing_delay_s"] == pytest.approx((0 + 0 + 250) / 3)
    assert s["gpu_util"] == pytest.approx(0.75)  # 1, .5, .5 (a idle-holding after 250), 1
    assert s["preemptions"] == 0 and s["moves"] == 0
    # nothing changes at 200 (a still runs, c still cannot fit): one block of two rounds
    assert res.rounds["t_s"].tolist() == [0.0, 100.0, 300.0]
    assert res.rounds["span_s"].tolist() == [100.0, 200.0, 100.0]
    assert s["rounds"] == 4 and s["steps"] == 3
    step = simulate(wl, nodes, policies.FIFO(), first_fit, _cfg(reuse_unchanged=False))
    assert step.rounds["t_s"].tolist() == [0.0, 100.0, 200.0, 300.0]
    assert step.summary()["gpu_util"] == pytest.approx(0.75)


def test_fungible_allocation_speeds_up_cpu_bound_job():
    """Alone on an 8-GPU, 64-core node, a 2-GPU cpu job gets 8 cores/GPU: 1.5x its demand rate."""
    nodes = cluster.homogeneous(1, gpus=8, cpus=64, mem_gb=512)
    wl = _workload([("x", 0, 300, 2, "cpu"), ("y", 0, 300, 2, "flat")], nodes)
    fixed = simulate(wl, nodes, policies.FIFO(), first_fit, _cfg())
    fung = simulate(wl, nodes, policies.FIFO(), fungible_first_fit, _cfg())
    assert _jct(fixed) == {"x": 300.0, "y": 300.0}
    assert _jct(fung)["x"] == pytest.approx(200.0)


def test_slow_gpu_and_spread_factor_set_the_rate():
    """A job on a speed-0.5 GPU type takes twice its duration; a 4-GPU job on 2-GPU nodes runs at
    full rate on two nodes (the fewest that hold it) and pays spread_factor once on three."""
    nodes = cluster.homogeneous(1, gpus=4, cpus=32, mem_gb=256, gpu_type="SLOW")
    wl = _workload([("s", 0, 150, 1, "flat")], nodes)
    res = simulate(wl, nodes, policies.FIFO(), first_fit, _cfg())
    assert _jct(res)["s"] == pytest.approx(300.0)

    three = cluster.homogeneous(3, gpus=2, cpus=16, mem_gb=128)
    wl = _workload([("w", 0, 160, 4, "flat")], three, spread_factor=0.8)

    def split(nodes: dict[str, int]):
        return lambda inst: Schedule(inst.name, {"w": Assignment(nodes, 4, 32)})

    res = simulate(wl, three, policies.FIFO(), split({"n0": 2, "n1": 2}), _cfg())
    assert _jct(res)["w"] == pytest.approx(160.0)
    res = simulate(wl, three, policies.FIFO(), split({"n0": 2, "n1": 1, "n2": 1}), _cfg())
    assert _jct(res)["w"] == pytest.approx(200.0)


def test_a_gang_on_its_fewest_nodes_runs_at_full_rate():
    """A 16-GPU job with spread factor 0.9 on 8-GPU nodes (default config, a real solver) spans two
    nodes, the fewest that hold it, and finishes in its trace duration; the round's worth agrees."""
    from optsched.sim.solving import SolveRoundAllocator

    nodes = cluster.homogeneous(3, gpus=8, cpus=64, mem_gb=512)
    wl = _workload([("big", 0, 1000, 16, "flat")], nodes, spread_factor=0.9)
    res = simulate(wl, nodes, policies.FIFO(), SolveRoundAllocator("fungible-greedy", time_limit=5.0),
                   SimConfig(progress=False, check=True))
    assert _jct(res)["big"] == pytest.approx(1000.0)


class Scripted:
    """Plays a fixed schedule per round (by round index); the empty schedule after the script."""

    def __init__(self, script):
        self.script = script
        self.k = 0

    def __call__(self, inst: Instance) -> Schedule:
        jobs = self.script[self.k] if self.k < len(self.script) else {}
        self.k += 1
        present = {j.id for j in inst.jobs}
        return Schedule(inst.name, {j: Assignment(nodes, 4, 32) for j, nodes in jobs.items() if j in present})


def test_preemption_then_resume_pays_restart():
    """x runs 100 s, is preempted for a round, resumes at 200 with a 30 s reload: 200 + 30 + 200."""
    nodes = cluster.homogeneous(2, gpus=1, cpus=8, mem_gb=64)
    wl = _workload([("x", 0, 300, 1, "flat")], nodes, restart_s=30)
    script = [{"x": {"n0": 1}}, {}] + [{"x": {"n0": 1}}] * 10
    res = simulate(wl, nodes, policies.FIFO(), Scripted(script), _cfg(reuse_unchanged=False))
    assert _jct(res)["x"] == pytest.approx(430.0)
    assert res.jobs["preemptions"].tolist() == [1]
    assert res.jobs["moves"].tolist() == [0]
    assert res.jobs["run_s"].tolist() == [pytest.approx(330.0)]


def test_move_pays_restart_and_staying_does_not():
    """x moves n0 -> n1 at 100: 30 s lost; it stays afterwards (including a CPU/memory change)."""
    nodes = cluster.homogeneous(2, gpus=1, cpus=8, mem_gb=64)
    wl = _workload([("x", 0, 300, 1, "flat")], nodes, restart_s=30)
    script = [{"x": {"n0": 1}}] + [{"x": {"n1": 1}}] * 10
    res = simulate(wl, nodes, policies.FIFO(), Scripted(script), _cfg(reuse_unchanged=False))
    assert _jct(res)["x"] == pytest.approx(330.0)
    assert res.jobs["moves"].tolist() == [1]
    assert res.jobs["preemptions"].tolist() == [0]


def test_restart_longer_than_a_round_carries_over():
    nodes = cluster.homogeneous(2, gpus=1, cpus=8, mem_gb=64)
    wl = _workload([("x", 0, 300, 1, "flat")], nodes, restart_s=150)
    script = [{"x": {"n0": 1}}] + [{"x": {"n1": 1}}] * 10
    res = simulate(wl, nodes, policies.FIFO(), Scripted(script), _cfg(reuse_unchanged=False))
    assert _jct(res)["x"] == pytest.approx(100 + 150 + 200)


def test_idle_gap_jumps_to_the_next_arrival_boundary():
    nodes = cluster.homogeneous(1, gpus=1, cpus=8, mem_gb=64)
    wl = _workload([("a", 0, 50, 1, "flat"), ("b", 10_050, 50, 1, "flat")], nodes)
    res = simulate(wl, nodes, policies.FIFO(), first_fit, _cfg())
    assert _jct(res) == {"a": 50.0, "b": 100.0}  # b waits for the boundary at 10,100
    assert res.rounds["t_s"].tolist() == [0.0, 10_100.0]


def test_infeasible_allocator_is_caught():
    nodes = cluster.homogeneous(1, gpus=1, cpus=8, mem_gb=64)
    wl = _workload([("a", 0, 50, 1, "flat"), ("b", 0, 50, 1, "flat")], nodes)

    def greedy(inst: Instance) -> Schedule:
        return Schedule(inst.name, {j.id: Assignment({"n0": 1}, 4, 32) for j in inst.jobs})

    with pytest.raises(SimulationError, match="infeasible"):
        simulate(wl, nodes, policies.FIFO(), greedy, _cfg())


def test_job_that_never_fits_stops_the_run_as_stalled():
    nodes = cluster.homogeneous(1, gpus=2, cpus=8, mem_gb=64)
    wl = _workload([("big", 0, 50, 4, "flat")], nodes)
    res = simulate(wl, nodes, policies.FIFO(), first_fit, _cfg())
    assert res.info["stalled"] and res.summary()["unfinished"] == 1


def test_rounds_that_restart_every_job_before_it_does_work_stop_the_run():
    # a rotation on one GPU whose restart (500 s) outlasts a round (100 s): after the two free
    # first starts no job ever does work again, and the replay would never end
    nodes = cluster.homogeneous(1, gpus=1, cpus=8, mem_gb=64)
    wl = _workload([("a", 0, 1000, 1, "flat"), ("b", 0, 1000, 1, "flat")], nodes, restart_s=500.0)

    def rotate(instance):
        job = next(j for j in sorted(instance.jobs, key=lambda j: j.id) if j.placement is None)
        return Schedule(instance.name, {job.id: Assignment({"n0": 1}, *job.demand)})

    res = simulate(wl, nodes, policies.LAS(), rotate, _cfg(reuse_unchanged=False, horizon_s=1e5))  # asked every round; the horizon ends it without the check
    assert res.info["stalled"] and res.info["stall"] == "no progress"
    assert res.summary()["unfinished"] == 2 and res.info["end_s"] <= 2 * 500 + 10 * 100 + 4 * 100
    steady = simulate(wl, nodes, policies.LAS(), first_fit, _cfg())  # no rotation: both finish
    assert not steady.info["stalled"] and steady.info["stall"] is None and steady.summary()["unfinished"] == 0


def test_horizon_reports_unfinished_jobs():
    nodes = cluster.homogeneous(1, gpus=1, cpus=8, mem_gb=64)
    wl = _workload([("a", 0, 1000, 1, "flat")], nodes)
    res = simulate(wl, nodes, policies.FIFO(), first_fit, _cfg(horizon_s=300))
    assert res.summary()["unfinished"] == 1 and math.isnan(res.jobs["finish_s"][0])


def test_horizon_utilisation_covers_the_whole_replay():
    """Cut by the horizon, utilisation averages up to where the replay stopped, not up to the last
    completion: a 100 s job and a 10,000 s one on 2 GPUs, horizon 1,000 s. The long one holds a
    GPU all along, the short one its GPU for the first round: (2 x 100 + 1 x 900) / (2 x 1000).
    With no job finished it is still defined."""
    nodes = cluster.homogeneous(1, gpus=2, cpus=8, mem_gb=64)
    wl = _workload([("a", 0, 100, 1, "flat"), ("b", 0, 10_000, 1, "flat")], nodes)
    s = simulate(wl, nodes, policies.FIFO(), first_fit, _cfg(horizon_s=1000)).summary()
    assert s["unfinished"] == 1 and s["gpu_util"] == pytest.approx(1100 / 2000)
    wl = _workload([("b", 0, 10_000, 1, "flat")], nodes)
    s = simulate(wl, nodes, policies.FIFO(), first_fit, _cfg(horizon_s=1000)).summary()
    assert s["finished"] == 0 and s["gpu_util"] == pytest.approx(0.5)


def test_bad_config_and_weights_are_refused():
    with pytest.raises(InputError, match="round_s"):
        SimConfig(round_s=0)
    nodes = cluster.homogeneous(1, gpus=1, cpus=8, mem_gb=64)
    wl = _workload([("a", 0, 10, 1, "flat")], nodes)

    class Zero:
        name = "zero"

        def weights(self, state):
            return np.zeros(len(state.submit_s))

    with pytest.raises(InputError, match="policy.weights"):
        simulate(wl, nodes, Zero(), first_fit, _cfg())


# --- properties on random workloads ----------------------------------------------------------------


def _random_workload(seed: int, n: int, nodes):
    rng = np.random.default_rng(seed)
    tr = Trace.from_columns("r", {
        "job_id": [f"j{i}" for i in range(n)],
        "submit_s": np.sort(rng.uniform(0, 2000, n)).round(),
        "duration_s": rng.integers(10, 900, n).astype(float),
        "gpus": rng.choice([1, 1, 1, 2, 4], n),
    })
    return build_workload(tr, nodes, seed=seed, catalogue=CAT, restart_s=20.0)


class Recording:
    """Wraps an allocator and checks every round's schedule with the independent checker."""

    def __init__(self, inner):
        self.inner, self.rounds = inner, 0
        self.name = "recording"

    def __call__(self, inst: Instance) -> Schedule:
        s = self.inner(inst)
        assert not check_schedule(inst, s), "round schedule violates capacity"
        for nd in inst.nodes:  # explicit: no node ever over capacity
            used = [(a.nodes.get(nd.id, 0), a.cpus_per_gpu, a.mem_per_gpu_gb) for a in s.jobs.values()]
            assert sum(g for g, _, _ in used) <= nd.gpus
            assert sum(g * c for g, c, _ in used) <= nd.cpus
            assert sum(g * m for g, _, m in used) <= nd.mem_gb
        self.rounds += 1
        return s


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 25), policy=st.sampled_from(["fifo", "srf", "las", "maxmin"]),
       fungible=st.booleans(), window=st.sampled_from([None, 0.5, 2.0]))
def test_conservation_and_capacity(seed, n, policy, fungible, window):
    """Every arrived job finishes (or is still present, with a horizon); no job finishes before it
    could; no round overfills a node."""
    nodes = cluster.homogeneous(2, gpus=4, cpus=24, mem_gb=192)
    wl = _random_workload(seed, n, nodes)
    alloc = Recording(fungible_first_fit if fungible else first_fit)
    res = simulate(wl, nodes, policies.get_policy(policy), alloc, _cfg(queue_window=window))
    fin = res.finished
    assert fin.all()
    jct = res.jct_s
    # fungible rate is at most 1.5x the demand rate in the stand-in profile
    assert np.all(jct >= res.jobs["duration_s"] / 1.5 - 1e-6)
    assert np.all(res.jobs["start_s"] >= res.jobs["submit_s"])
    assert np.all(res.rounds["gpu_util"] <= 1 + 1e-9) and np.all(res.rounds["cpu_util"] <= 1 + 1e-9)
    if not fungible:
        # at the fixed demand on speed-1 GPUs, a job runs exactly its duration (no restarts here
        # because first_fit never moves or preempts a running job? it may: then it pays restarts)
        extra = res.jobs["run_s"] - res.jobs["duration_s"]
        assert np.all(extra >= -1e-6)
        assert np.all(extra <= 20.0 * (res.jobs["preemptions"] + res.jobs["moves"]) + 1e-6)


def test_horizon_conservation_keeps_unfinished_jobs():
    nodes = cluster.homogeneous(1, gpus=2, cpus=16, mem_gb=128)
    wl = _random_workload(3, 30, nodes)
    res = simulate(wl, nodes, policies.FIFO(), first_fit, _cfg(horizon_s=1500))
    s = res.summary()
    assert s["finished"] + s["unfinished"] == 30
    arrived = res.jobs["submit_s"] <= 1500
    assert np.all(res.finished <= arrived)


def test_deterministic_by_seed():
    nodes = cluster.homogeneous(2, gpus=4, cpus=24, mem_gb=192)
    runs = [simulate(_random_workload(7, 20, nodes), nodes, policies.LAS(), fungible_first_fit, _cfg()) for _ in range(2)]
    assert np.array_equal(runs[0].jobs["finish_s"], runs[1].jobs["finish_s"])
    assert list(runs[0].jobs["model"]) == list(runs[1].jobs["model"])
    other = simulate(_random_workload(8, 20, nodes), nodes, policies.LAS(), fungible_first_fit, _cfg())
    assert not np.array_equal(runs[0].jobs["finish_s"], other.jobs["finish_s"])


@pytest.mark.parametrize("policy", [policies.FIFO(), policies.LAS(thresholds=(150.0, 900.0)), policies.ShortestRemaining()])
@pytest.mark.parametrize("seed", [11, 12])
def test_reusing_and_skipping_unchanged_rounds_gives_the_same_result(policy, seed):
    """Reusing schedules and advancing blocks of unchanged rounds at once is exact."""
    nodes = cluster.homogeneous(2, gpus=4, cpus=24, mem_gb=192)
    wl = _random_workload(seed, 25, nodes)
    a = simulate(wl, nodes, policy, fungible_first_fit, _cfg(reuse_unchanged=True))
    b = simulate(wl, nodes, policy, fungible_first_fit, _cfg(reuse_unchanged=False))
    assert np.allclose(a.jobs["finish_s"], b.jobs["finish_s"], rtol=1e-12, atol=1e-6)
    assert np.array_equal(a.jobs["preemptions"], b.jobs["preemptions"])
    assert np.allclose(a.jobs["run_s"], b.jobs["run_s"])
    assert a.info["solver_calls"] < b.info["solver_calls"]
    sa, sb = a.summary(), b.summary()
    assert sa["rounds"] == sb["rounds"] and sa["gpu_util"] == pytest.approx(sb["gpu_util"])


def test_offer_window_keeps_running_jobs_and_a_minimum_of_waiting_ones():
    from optsched.sim.queue import offer

    active = np.arange(6)
    w = np.array([0.1, 1.0, 0.9, 0.8, 0.7, 0.6])
    running = np.array([True, False, False, False, False, False])
    gpus = np.array([1, 8, 8, 1, 1, 1])
    # budget 0.5 x 16 GPUs = 8: job 1 (8 GPUs) crosses it; job 0 runs, so it is always offered
    assert offer(active, w, running, gpus, 16, 0.5, 0).tolist() == [0, 1]
    assert offer(active, w, running, gpus, 16, 0.5, 3).tolist() == [0, 1, 2, 3]
    assert offer(active, w, running, gpus, 16, None, 0).tolist() == list(range(6))


def test_offer_window_backfills_jobs_that_fit_the_free_gpus():
    """A head of gangs too big for the free GPUs does not hide the small jobs behind it."""
    from optsched.sim.queue import offer

    active = np.arange(8)
    w = np.array([1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    running = np.array([True, False, False, False, False, False, False, False])
    gpus = np.array([56, 128, 128, 2, 4, 2, 8, 1])  # 64 GPUs, one type: 8 free
    allowed = np.ones((8, 1), dtype=bool)
    free = np.array([8.0])
    # the window (1 x 64 GPUs) closes after the first gang; nothing offered fits the 8 free GPUs
    assert offer(active, w, running, gpus, 64, 1.0, 0).tolist() == [0, 1]
    # backfill: fitting jobs join in weight order until they could fill the 8 free GPUs once (2+4+2)
    assert offer(active, w, running, gpus, 64, 1.0, 0, free, allowed).tolist() == [0, 1, 3, 4, 5]
    # twice over (the window now closes at 128 GPUs, after the first gang): 2+4+2+8 = 16
    assert offer(active, w, running, gpus, 64, 2.0, 0, free, allowed).tolist() == [0, 1, 3, 4, 5, 6]
    # a job may use only a type with no free GPUs: it does not count as fitting
    two = np.array([[True, False]] * 8)
    two[5] = [False, True]
    assert offer(active, w, running, gpus, 64, 1.0, 0, np.array([8.0, 0.0]), two).tolist() == [0, 1, 3, 4, 6]


def test_window_never_idles_gpus_a_waiting_job_could_use():
    """End to end: an 8-GPU job holds one of two 8-GPU nodes; two 16-GPU gangs head the queue
    and fill the window; the 1-GPU job behind them is offered anyway and starts at once."""
    nodes = cluster.homogeneous(2, gpus=8, cpus=64, mem_gb=512, rack_size=None)
    rows = [("a", 0, 3000.0, 8, "flat"), ("g1", 1, 600.0, 16, "flat"), ("g2", 2, 600.0, 16, "flat"), ("s", 3, 300.0, 1, "flat")]
    wl = _workload(rows, nodes)
    res = simulate(wl, nodes, policies.FIFO(), fungible_first_fit, _cfg(queue_window=0.5, queue_min_jobs=1))
    start = dict(zip(res.jobs["id"], res.jobs["start_s"], strict=True))
    assert start["s"] == pytest.approx(100.0)


@pytest.mark.parametrize("policy", ["fifo", "las"])
def test_a_window_of_gangs_no_node_can_feed_does_not_hide_the_queue(policy):
    """The window counts GPUs only: two 16-GPU gangs fill it and "fit" the two empty 8-GPU nodes,
    but at their demand (32 GB a GPU) a node of 100 GB holds 3 of their GPUs, so they never
    start. The round after one that started none of the window's jobs with GPUs free offers the
    whole queue, and the 1-GPU job behind them runs (before, the replay stopped with it unstarted)."""
    nodes = cluster.homogeneous(2, gpus=8, cpus=64, mem_gb=100, rack_size=None)
    rows = [("g1", 0, 600.0, 16, "flat"), ("g2", 1, 600.0, 16, "flat"), ("s", 2, 300.0, 1, "flat")]
    wl = _workload(rows, nodes)
    res = simulate(wl, nodes, policies.get_policy(policy), first_fit, _cfg(queue_window=0.5, queue_min_jobs=1))
    start = dict(zip(res.jobs["id"], res.jobs["start_s"], strict=True))
    # s arrives in the round at 100, which offers g1 alone and starts nothing; the next offers all
    assert start["s"] == pytest.approx(200.0) and math.isnan(start["g1"]) and math.isnan(start["g2"])
    assert res.info["stalled"] and res.info["window_widened_rounds"] >= 1
    wide = simulate(wl, nodes, policies.get_policy(policy), first_fit, _cfg(queue_window=None))
    assert wide.info["window_widened_rounds"] == 0 and dict(zip(wide.jobs["id"], wide.jobs["start_s"], strict=True))["s"] == 100.0


def test_at_demand_view_removes_fungibility_only():
    from optsched.sim.allocators import AtDemand, at_demand_instance

    nodes = cluster.homogeneous(2, gpus=4, cpus=24, mem_gb=192)
    wl = _random_workload(5, 20, nodes)
    fixed = simulate(wl, nodes, policies.LAS(), first_fit, _cfg())
    view = simulate(wl, nodes, policies.LAS(), AtDemand(fungible_first_fit), _cfg())
    fung = simulate(wl, nodes, policies.LAS(), fungible_first_fit, _cfg())
    assert np.allclose(view.jobs["finish_s"], fixed.jobs["finish_s"])
    assert not np.allclose(fung.jobs["finish_s"], fixed.jobs["finish_s"])
    job = wl.jobs[0]
    inst = Instance("v", nodes, (Job(id=job.id, gpus=job.gpus, profile=job.profile, demand=job.demand),))
    cut = at_demand_instance(inst)
    assert cut.jobs[0].profile.points() == [(*job.demand, job.profile.at(*job.demand))]
