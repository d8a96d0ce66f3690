"""Gavel's makespan objective as a queue policy (``gavel-makespan``, optsched.sim.literature):
weights from the remaining work at the equal-share speed, and a simulation where it finishes the
whole workload sooner than shortest-remaining-first."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sim_support import StandInCatalogue, first_fit

from optsched.errors import InputError
from optsched.sim import cluster
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate
from optsched.sim.literature import SRTF, GavelMakespan
from optsched.sim.policies import get_policy
from optsched.sim.policy_base import QueueState
from optsched.sim.traces import Trace
from optsched.sim.workload import build_workload


def _state(remaining, eq=None, gpus=None):
    n = len(remaining)
    return QueueState(now=100.0, submit_s=np.zeros(n), gpus=np.asarray(gpus or [1] * n), attained_gpu_s=np.zeros(n),
                      remaining_s=np.asarray(remaining, dtype=float), running=np.zeros(n, dtype=bool), work_s=np.full(n, 1e4),
                      equal_speed=np.asarray(eq or [1.0] * n, dtype=float), total_gpus=8.0)


def test_weights_follow_remaining_time_at_the_equal_share_speed():
    g = get_policy("gavel-makespan")
    assert isinstance(g, GavelMakespan)
    w = g.weights(_state([1000.0, 500.0, 0.0]))
    assert w[0] == pytest.approx(1.0) and w[2] == pytest.approx(0.01)
    assert w[1] == pytest.approx(0.01 + 0.99 * 0.5)
    # the same remaining work on GPUs half as fast for it: twice the time, the longest; weight / speed
    h = g.weights(_state([1000.0, 1000.0], eq=[1.0, 0.5]))
    assert h[1] == pytest.approx(1.0 / 0.5) and h[0] == pytest.approx((0.01 + 0.99 * 0.5) / 1.0)
    # per GPU: a 4-GPU job with 500 s left outweighs a 1-GPU job with 1,000 s left (value per GPU
    # is what an objective-maximising round compares); per job, the longer one weighs more
    gang = _state([500.0, 1000.0], gpus=[4, 1])
    assert g.weights(gang).tolist() == pytest.approx([1.0, 0.01 + 0.99 * 0.5])
    assert GavelMakespan(per_gpu=False).weights(gang).tolist() == pytest.approx([0.01 + 0.99 * 0.5, 1.0])


def test_bad_settings_and_missing_inputs_are_refused_by_name():
    with pytest.raises(InputError) as e:
        GavelMakespan(spread=0.5)
    assert e.value.field == "policy.spread"
    with pytest.raises(InputError) as e:
        GavelMakespan(per_gpu="yes")
    assert e.value.field == "policy.per_gpu"
    bare = QueueState(now=0.0, submit_s=np.zeros(1), gpus=np.ones(1), attained_gpu_s=np.zeros(1), remaining_s=np.ones(1),
                      running=np.zeros(1, dtype=bool))
    with pytest.raises(InputError) as e:
        GavelMakespan().weights(bare)
    assert e.value.field == "policy.gavel-makespan" and "equal_speed" in str(e.value)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 1e6), st.sampled_from([0.5, 1.0, 2.0]), st.sampled_from([1, 2, 8])), min_size=1, max_size=12),
       st.floats(1.0, 1e3))
def test_weights_are_positive_bounded_and_monotone_in_remaining_gpu_time(jobs, spread):
    rem = [r for r, _, _ in jobs]
    eq = [e for _, e, _ in jobs]
    gpus = [g for _, _, g in jobs]
    w = GavelMakespan(spread=spread).weights(_state(rem, eq, gpus))
    scaled = w * np.asarray(eq)  # undo the speed normalisation: in [1/spread, 1]
    assert np.all(np.isfinite(w)) and np.all(w > 0)
    assert np.all(scaled >= 1.0 / spread - 1e-12) and np.all(scaled <= 1.0 + 1e-12)
    t = np.asarray(rem) / np.asarray(eq) * np.asarray(gpus)
    order = np.argsort(t, kind="stable")
    assert np.all(np.diff(scaled[order]) >= -1e-12)  # more remaining time, no smaller weight
    assert scaled[int(np.argmax(t))] == pytest.approx(1.0)


def test_it_finishes_the_workload_sooner_than_shortest_remaining_first():
    # two GPUs, one long job and four short ones at once: SRTF runs the short ones first and the
    # long one last (makespan 1,200 s); the makespan policy starts the long one at once (1,000 s)
    nodes = cluster.homogeneous(1, gpus=2, cpus=16, mem_gb=128)
    rows = [("long", 0.0, 1000.0), *[(f"s{i}", 0.0, 100.0) for i in range(4)]]
    ids, sub, dur = zip(*rows, strict=True)
    tr = Trace.from_columns("t", {"job_id": ids, "submit_s": sub, "duration_s": dur, "gpus": [1] * 5, "model": ["flat"] * 5})
    wl = build_workload(tr, nodes, catalogue=StandInCatalogue(), restart_s=0.0, spread_factor=1.0)
    cfg = SimConfig(round_s=100.0, check=True, progress=False)
    srtf = simulate(wl, nodes, SRTF(), first_fit, cfg).summary()
    mk = simulate(wl, nodes, get_policy("gavel-makespan"), first_fit, cfg).summary()
    assert srtf["makespan_s"] == pytest.approx(1200.0) and mk["makespan_s"] == pytest.approx(1000.0)
    assert mk["finished"] == 5 and srtf["avg_jct_s"] < mk["avg_jct_s"]  # the price: short jobs wait longer
