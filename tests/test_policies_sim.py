"""The literature's queue policies (optsched.sim.literature): orders, the Gittins index against
its definition, Themis' rho, Gavel's normalisation, and whole simulations under each."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sim_support import StandInCatalogue, first_fit

from optsched.errors import InputError
from optsched.sim import cluster, policies
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate
from optsched.sim.literature import (
    SRTF,
    FinishTimeFairness,
    GavelMaxMin,
    GittinsIndex,
    finish_time_fairness,
    gittins_index,
)
from optsched.sim.policies import POLICIES, get_policy
from optsched.sim.policy_base import QueueState
from optsched.sim.traces import Trace
from optsched.sim.workload import build_workload


def _state(**kw):
    n = len(kw["submit_s"])
    base = dict(now=1000.0, gpus=np.ones(n, dtype=np.int64), attained_gpu_s=np.zeros(n), remaining_s=np.ones(n),
                running=np.zeros(n, dtype=bool))
    base.update(kw)
    return QueueState(**{k: (np.asarray(v) if isinstance(v, (list, tuple, np.ndarray)) else v) for k, v in base.items()})


def _order(w):
    return np.argsort(-w, kind="stable").tolist()


def test_new_policies_are_selectable_by_name():
    for name in ("srtf", "gittins", "themis", "gavel"):
        assert name in POLICIES and get_policy(name).name == name


def test_srtf_ranks_by_remaining_time_not_gpu_time():
    st_ = _state(submit_s=[0.0, 1.0, 2.0], remaining_s=[100.0, 60.0, 60.0], gpus=[1, 8, 1])
    assert _order(SRTF().weights(st_)) == [1, 2, 0]  # ties by arrival
    assert _order(policies.ShortestRemaining().weights(st_)) == [2, 0, 1]


def _gittins_by_definition(a, levels, samples):
    """sup over quantum ends b of P(a < S <= b) / E[min(S, b) - a; S > a], by plain sums."""
    s = np.asarray(samples, dtype=float)
    alive = s[s > a]
    if alive.size == 0:
        return 1.0 / max(a, 1.0)
    best = alive.size / np.sum(alive - a)
    for b in [x for x in levels if x > a]:
        done = np.sum(alive <= b)
        spent = np.sum(np.minimum(alive, b) - a)
        if done and spent > 0:
            best = max(best, done / spent)
    return best


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(1.0, 1e5), min_size=1, max_size=30), st.integers(0, 6))
def test_gittins_index_matches_its_definition(samples, k):
    levels = np.concatenate([[0.0], 60.0 * 2.0 ** np.arange(8)])
    got = gittins_index(levels[k:], np.asarray(samples))[0]
    assert got == pytest.approx(_gittins_by_definition(levels[k], levels[k:], samples), rel=1e-9)


def test_gittins_prefers_new_jobs_under_heavy_tails_and_old_ones_under_light_tails():
    """Many short jobs and a few very long ones (heavy tail): a fresh job is likely short, so it
    comes first (LAS-like). All jobs of one length: a job near that length is about to finish, so
    it comes first (SRPT-like) -- what LAS cannot do."""
    pol = GittinsIndex(min_history=5)
    heavy = np.array([100.0] * 40 + [1e6] * 4)
    st_ = _state(submit_s=[0.0, 1.0], attained_gpu_s=[500.0, 0.0], finished_gpu_s=heavy)
    assert _order(pol.weights(st_)) == [1, 0]
    light = np.full(40, 1000.0)
    st_ = _state(submit_s=[0.0, 1.0], attained_gpu_s=[960.0, 0.0], finished_gpu_s=light)
    assert _order(pol.weights(st_)) == [0, 1]
    assert _order(policies.LAS(thresholds=(500.0,)).weights(st_)) == [1, 0]


def test_gittins_stable_until_a_level_is_crossed():
    pol = GittinsIndex(first=60.0, ratio=2.0)
    st_ = _state(submit_s=[0.0, 1.0], attained_gpu_s=[100.0, 0.0], gpus=[2, 1], running=[True, False])
    assert pol.stable_for(st_) == pytest.approx((120.0 - 100.0) / 2)
    with pytest.raises(InputError, match="ratio"):
        GittinsIndex(ratio=1.0)


def test_themis_rho_and_order():
    st_ = _state(now=100.0, submit_s=[0.0, 50.0, 90.0], remaining_s=[100.0, 10.0, 10.0], work_s=[100.0, 10.0, 10.0],
                 gpus=[1, 1, 4], total_gpus=4.0)
    rho = finish_time_fairness(st_)
    # N = 3 active jobs on 4 GPUs: a 4-GPU job's isolated time is 3x its work
    assert rho.tolist() == pytest.approx([200.0 / 100.0, 60.0 / 10.0, 20.0 / 30.0])
    assert _order(FinishTimeFairness().weights(st_)) == [1, 0, 2]
    with pytest.raises(InputError, match="work_s"):
        FinishTimeFairness().weights(_state(submit_s=[0.0]))


def test_gavel_weights_normalise_by_equal_share_speed():
    st_ = _state(now=100.0, submit_s=[0.0, 0.0, 0.0], remaining_s=[100.0, 50.0, 100.0], work_s=[100.0, 100.0, 100.0],
                 equal_speed=[1.0, 1.0, 2.0], total_gpus=3.0)
    g = GavelMaxMin()
    assert g.shares(st_).tolist() == pytest.approx([0.0, 0.5, 0.0])
    w = g.weights(st_)
    assert w[0] == pytest.approx(1.0) and w[2] == pytest.approx(0.5)  # same priority, twice the equal-share speed
    assert w[1] == pytest.approx(1.0 / (1.0 + 99.0 * 0.5))


CAT = StandInCatalogue()


def _workload(rows, nodes):
    ids, sub, dur, g, model = zip(*rows, strict=True)
    tr = Trace.from_columns("t", {"job_id": ids, "submit_s": sub, "duration_s": dur, "gpus": g, "model": model})
    return build_workload(tr, nodes, catalogue=CAT, restart_s=0.0, spread_factor=1.0)


def _cfg(**kw):
    return SimConfig(round_s=100.0, check=True, progress=False, **kw)


def test_srtf_beats_fifo_on_average_jct_when_a_long_job_comes_first():
    nodes = cluster.homogeneous(1, gpus=1, cpus=16, mem_gb=128)
    wl = _workload([("long", 0, 1000, 1, "flat"), ("s1", 10, 100, 1, "flat"), ("s2", 20, 100, 1, "flat")], nodes)
    fifo = simulate(wl, nodes, policies.FIFO(), first_fit, _cfg())
    srtf = simulate(wl, nodes, SRTF(), first_fit, _cfg())
    assert srtf.summary()["avg_jct_s"] < fifo.summary()["avg_jct_s"]
    assert srtf.summary()["finished"] == 3


@pytest.mark.parametrize("name", ["srtf", "gittins", "themis", "gavel"])
def test_every_new_policy_runs_a_simulation_to_the_end(name):
    nodes = cluster.homogeneous(2, gpus=4, cpus=32, mem_gb=256)
    rng = np.random.default_rng(1)
    rows = [(f"j{i}", float(i * 40), float(rng.integers(50, 900)), int(rng.choice([1, 2, 4])), "cpu" if i % 2 else "flat")
            for i in range(24)]
    res = simulate(_workload(rows, nodes), nodes, get_policy(name), first_fit, _cfg())
    s = res.summary()
    assert s["finished"] == 24 and math.isfinite(s["avg_jct_s"])
    again = simulate(_workload(rows, nodes), nodes, get_policy(name), first_fit, _cfg())
    assert np.array_equal(res.jobs["finish_s"], again.jobs["finish_s"])


def _tenant_workload(rows, nodes):
    ids, sub, dur, g, model, tenant = zip(*rows, strict=True)
    tr = Trace.from_columns("t", {"job_id": ids, "submit_s": sub, "duration_s": dur, "gpus": g, "model": model, "tenant": tenant})
    return build_workload(tr, nodes, catalogue=CAT, restart_s=0.0, spread_factor=1.0)


@pytest.mark.parametrize("solver", ["fungible-greedy", "fixed-demand", "cpsat"])
def test_simulated_quota_owner_reclaims_borrowed_gpus_at_the_next_round(solver):
    """Tenant a borrows the whole node while b is idle; b's jobs arrive mid-round and get b's
    quota at the next boundary (a's borrowed jobs are preempted), though a's weigh more (FIFO)."""
    from optsched.sim.solving import SolveRoundAllocator

    nodes = cluster.homogeneous(1, gpus=4, cpus=32, mem_gb=256)
    rows = [*[(f"a{i}", 0.0, 2000.0, 1, "flat", "a") for i in range(4)], *[(f"b{i}", 150.0, 500.0, 1, "flat", "b") for i in range(2)]]
    cfg = _cfg(tenant_quotas={"a": 2, "b": 2}, max_moves=0)
    res = simulate(_tenant_workload(rows, nodes), nodes, policies.FIFO(), SolveRoundAllocator(solver, time_limit=2.0), cfg)
    start = dict(zip(res.jobs["id"], res.jobs["start_s"].tolist(), strict=True))
    assert start["b0"] == start["b1"] == 200.0  # the first boundary after 150 (100 s rounds)
    assert res.summary()["preemptions"] == 2 and res.summary()["moves"] == 0
    with pytest.raises(InputError, match="max_moves"):
        SimConfig(max_moves=-1)
