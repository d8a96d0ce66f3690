"""Queue policies: orders, weight ranges, LAS queues and how long their weights stay put."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optsched.errors import InputError
from optsched.sim.policies import FIFO, LAS, MaxMinFairness, ShortestRemaining, get_policy
from optsched.sim.policy_base import QueueState, rank_weights


def _state(**kw):
    n = len(kw["submit_s"])
    base = dict(now=1000.0, gpus=np.ones(n, dtype=np.int64), attained_gpu_s=np.zeros(n), remaining_s=np.ones(n),
                running=np.zeros(n, dtype=bool))
    base.update(kw)
    return QueueState(**{k: np.asarray(v) if k != "now" else v for k, v in base.items()})


def test_rank_weights_span_one_to_one_over_spread():
    w = rank_weights(np.array([2, 0, 1]), 100.0)
    assert w[2] == 1.0 and w[1] == pytest.approx(0.01) and w[0] == pytest.approx(0.1)
    assert rank_weights(np.array([0]), 100.0).tolist() == [1.0]


def test_fifo_srf_las_orders():
    st = _state(submit_s=[0.0, 10.0, 20.0], remaining_s=[500.0, 100.0, 300.0], gpus=[1, 1, 1],
                attained_gpu_s=[7200.0, 0.0, 100.0])
    assert np.argsort(-FIFO().weights(st)).tolist() == [0, 1, 2]
    assert np.argsort(-ShortestRemaining().weights(st)).tolist() == [1, 2, 0]
    las = LAS()
    assert las.queues(st).tolist() == [1, 0, 0]
    assert np.argsort(-las.weights(st)).tolist() == [1, 2, 0]  # queue 0 (FIFO inside) before queue 1
    unsorted = _state(submit_s=[20.0, 0.0, 10.0])
    assert np.argsort(-FIFO().weights(unsorted)).tolist() == [1, 2, 0]


def test_srf_uses_gpu_time():
    st = _state(submit_s=[0.0, 1.0], remaining_s=[100.0, 60.0], gpus=[1, 2])
    assert np.argsort(-ShortestRemaining().weights(st)).tolist() == [0, 1]


def test_las_stable_for_is_time_to_the_next_threshold():
    st = _state(submit_s=[0.0, 1.0, 2.0], attained_gpu_s=[3000.0, 0.0, 50000.0], gpus=[2, 1, 1],
                running=[True, False, True])
    assert LAS().stable_for(st) == pytest.approx(300.0)  # (3600 - 3000) / 2 GPUs; job 2 is past the last
    assert FIFO().stable_for(st) == math.inf
    done = _state(submit_s=[0.0], attained_gpu_s=[1e6], running=[True])
    assert LAS().stable_for(done) == math.inf


def test_maxmin_favours_jobs_furthest_behind():
    st = _state(submit_s=[0.0, 0.0, 500.0], attained_gpu_s=[1000.0, 0.0, 250.0], gpus=[1, 1, 1])
    w = MaxMinFairness().weights(st)
    assert w[1] == 1.0 and w[0] == pytest.approx(0.01) and w[1] > w[2] > w[0]


def test_bad_policies_are_refused():
    with pytest.raises(InputError, match="policy"):
        get_policy("lottery")
    with pytest.raises(InputError, match="thresholds"):
        LAS(thresholds=(10.0, 5.0))
    with pytest.raises(InputError, match="spread"):
        FIFO(spread=0.5)
