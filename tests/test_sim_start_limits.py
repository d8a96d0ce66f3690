"""Where a round that pins running jobs lets a waiting job start (``SimConfig.start_min_throughput``):
only on nodes that can feed it, since a start there keeps its nodes until the job ends."""

from __future__ import annotations

import math

import pytest

from optsched.catalogue import profile
from optsched.errors import InputError
from optsched.model import Job, Node, Profile
from optsched.schedule import Assignment, Schedule
from optsched.sim import cluster, policies
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate_steps
from optsched.sim.rounds import node_shapes, start_limits
from optsched.sim.traces import Trace
from optsched.sim.workload import build_workload

#: an image model's shape: below 32 GB per GPU its data cache no longer fits (a tenth of the speed)
CACHE = Profile((2, 4), (16, 32, 64), ((0.1, 0.8, 0.85), (0.12, 1.0, 1.05)))
#: 8 GPUs each: "big" nodes give 64 GB per GPU, "lean" ones 24 GB when all 8 GPUs are one job's
BIG, LEAN = (8, 64, 512), (8, 64, 192)


def _shapes(big: int, lean: int) -> dict:
    nodes = [Node(f"b{i}", "A", *BIG) for i in range(big)] + [Node(f"l{i}", "B", *LEAN) for i in range(lean)]
    return node_shapes(nodes)


def test_a_gang_that_lean_nodes_cannot_feed_does_not_start_there():
    """16 GPUs on the two lean nodes get 24 GB per GPU, below the cache: type B is refused."""
    job = Job("g", 16, CACHE, (4, 32))
    types, grid = start_limits(job, ["A", "B"], _shapes(2, 2), 0.5)
    assert types == frozenset({"A"})
    assert grid is not None and 16 not in grid.mem_per_gpu_gb  # nor may it start starved on A


def test_a_gang_that_can_spread_to_be_fed_keeps_the_type_but_not_the_starved_points():
    """8 GPUs as 4 + 4 on two lean nodes get 48 GB per GPU: B stays, the 16 GB level goes."""
    job = Job("g", 8, CACHE, (4, 32))
    types, grid = start_limits(job, ["A", "B"], _shapes(1, 2), 0.5)
    assert types is None
    assert grid == Profile((2, 4), (32, 64), ((0.8, 0.85), (1.0, 1.05)))


FED = Profile((2, 4), (32, 64), ((0.8, 0.85), (1.0, 1.05)))  # CACHE without its starved 16 GB level


def test_fed_is_measured_from_the_demand():
    lean_demand = Job("d", 16, CACHE, (2, 16))  # asks for the cache-less point itself: that feeds it
    assert start_limits(lean_demand, ["A", "B"], _shapes(2, 2), 0.5) == (None, None)


def test_where_every_node_feeds_it_a_job_of_one_node_keeps_its_lean_starts():
    """Big nodes only: a lean start of a job that fits one node grows there as its neighbours end."""
    assert start_limits(Job("f", 8, CACHE, (4, 32)), ["A"], _shapes(4, 0), 0.5) == (None, None)
    assert start_limits(Job("f", 4, CACHE, (4, 32)), ["A"], _shapes(4, 0), 0.5) == (None, None)


def test_a_gang_larger_than_any_node_starts_only_at_fed_levels_even_where_every_node_feeds_it():
    """16 GPUs over two big nodes run at one grid point, set by the more crowded node: a lean start
    beside older jobs would not grow, so it waits for room that feeds it."""
    assert start_limits(Job("f", 16, CACHE, (4, 32)), ["A"], _shapes(4, 0), 0.5) == (None, FED)


def test_a_type_too_small_to_hold_the_gang_is_refused():
    """16 GPUs do not fit on one lean node: only the big nodes can hold it, and they feed it."""
    job = Job("g", 16, CACHE, (4, 32))
    assert start_limits(job, ["A", "B"], _shapes(2, 1), 0.5) == (frozenset({"A"}), FED)


def test_where_no_fewest_nodes_feed_it_the_profile_stays_whole():
    """Lean nodes only: 8 GPUs on one starve it and 4 + 4 feed it, but no node shape feeds it
    compactly, so a starved start stays possible (waiting would not end)."""
    job = Job("g", 8, CACHE, (4, 32))
    assert start_limits(job, ["B"], _shapes(0, 4), 0.5) == (None, None)


def test_nothing_feeds_it_anywhere_then_its_best_counts():
    """On lean nodes only, the best it can reach is the reference: it still starts somewhere."""
    job = Job("g", 16, CACHE, (4, 32))
    assert start_limits(job, ["B"], _shapes(0, 2), 0.5)[0] is None


@pytest.mark.parametrize("model", ["transformer", "lstm", "vae"])
def test_models_without_a_data_cache_are_fed_on_gavels_k80_nodes(model):
    nodes = cluster.mix("v100-p100-k80", 24)
    job = Job("j", 64, profile(model, 64), (3, 62))
    assert start_limits(job, ["V100", "P100", "K80"], node_shapes(nodes), 0.5)[0] is None


def test_a_64_gpu_image_gang_is_not_started_on_k80_nodes_it_fills():
    nodes = cluster.mix("v100-p100-k80", 24)  # 8 K80 nodes of 48 GB per GPU: a 64-GPU gang fills them all
    job = Job("j", 64, profile("resnet50", 64), (3, 62))
    types, _ = start_limits(job, ["V100", "P100", "K80"], node_shapes(nodes), 0.5)
    assert types == frozenset({"V100", "P100"})


def _steps(cfg: SimConfig, policy=None):
    tr = Trace.from_columns("t", {"job_id": ["big", "lean"], "submit_s": [0.0, 0.0], "duration_s": [3600.0, 3600.0],
                                  "gpus": [16, 8], "model": ["resnet50", "resnet50"]})
    ns = (Node("a0", "V100", *BIG), Node("a1", "V100", *BIG), Node("k0", "K80", 8, 48, 384))
    wl = build_workload(tr, ns, restart_s=0.0, spread_factor=0.9)
    return simulate_steps(wl, ns, policy or policies.FIFO(), cfg), wl


def test_fifo_rounds_offer_waiting_jobs_only_nodes_that_feed_them_and_running_ones_everything():
    steps, wl = _steps(SimConfig(round_s=300.0, progress=False, reuse_unchanged=False))
    first = next(steps)
    by_id = {j.id: j for j in first.jobs}
    assert set(by_id["lean"].gpu_speed) == {"V100"}  # one K80 node of 48 GB per GPU cannot feed 8 GPUs
    assert min(by_id["lean"].profile.mem_per_gpu_gb) > 48
    c, m = wl.jobs[0].demand
    second = steps.send(Schedule(first.name, {"big": Assignment({"a0": 8, "a1": 8}, c, m)}))
    by_id = {j.id: j for j in second.jobs}
    assert by_id["big"].pinned and by_id["big"].profile == wl.jobs[0].profile  # running: its whole profile
    assert set(by_id["lean"].gpu_speed) == {"V100"}
    steps.close()


def test_the_round_after_a_start_with_a_cut_profile_is_solved_again():
    """Running, the job may use its whole profile: the next round is worth solving even though the
    same jobs are offered at the same weights (the unchanged-round shortcut would skip it)."""
    steps, wl = _steps(SimConfig(round_s=300.0, progress=False))
    first = next(steps)
    c, m = wl.jobs[1].demand
    second = steps.send(Schedule(first.name, {"lean": Assignment({"a0": 8}, c, m)}))
    assert second.name.endswith("-t300") and {j.id for j in second.jobs} == {"big", "lean"}
    steps.close()


@pytest.mark.parametrize("cfg, policy", [
    (SimConfig(progress=False, start_min_throughput=0.0), policies.FIFO()),  # switched off
    (SimConfig(progress=False), policies.LAS()),  # LAS preempts: a start is not for good
])
def test_rounds_that_do_not_pin_or_no_share_keep_every_type(cfg, policy):
    steps, _ = _steps(cfg, policy)
    assert all(set(j.gpu_speed) == {"V100", "K80"} for j in next(steps).jobs)
    steps.close()


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, "half"])
def test_the_share_is_checked(bad):
    with pytest.raises(InputError, match="start_min_throughput"):
        SimConfig(start_min_throughput=bad)


def test_the_command_line_passes_the_share_into_the_run_manifest(tmp_path, capsys):
    import json

    from optsched.cli import main

    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus\na,0,600,1\nb,10,900,2\n")
    out = tmp_path / "runs"
    rc = main(["simulate", str(trace), "--cluster", "mix:v100-p100-k80:3", "--policy", "fifo", "--allocator", "fungible-greedy",
               "--start-min-throughput", "0.25", "-o", str(out), "--no-progress"])
    assert rc == 0
    (metrics,) = out.glob("*.metrics.json")
    assert json.loads(metrics.read_text())["manifest"]["config"]["start_min_throughput"] == 0.25
    assert main(["simulate", str(trace), "--cluster", "2x8", "--start-min-throughput", "2", "-o", str(out), "--no-progress"]) == 2
    assert "--start-min-throughput: must be a share in [0, 1]" in capsys.readouterr().err
