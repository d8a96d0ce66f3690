"""What every queue policy shares: the queue state it reads, the protocol it implements, and the
rank-to-weight rule of the order-based policies (:mod:`optsched.sim.policies`,
:mod:`optsched.sim.literature`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from optsched.errors import InputError

__all__ = ["QueuePolicy", "QueueState", "check_spread", "rank_weights"]


@dataclass(frozen=True)
class QueueState:
    """The active (arrived, unfinished) jobs as a policy sees them; one entry per job."""

    now: float
    submit_s: np.ndarray  #: arrival time
    gpus: np.ndarray  #: gang size
    attained_gpu_s: np.ndarray  #: GPU-seconds held so far (Tiresias' 2D attained service)
    remaining_s: np.ndarray  #: remaining run time at the fixed demand on a speed-1.0 GPU
    running: np.ndarray  #: bool, holds GPUs now
    #: optional extras (``None`` when the caller does not know them; policies that need one say so)
    work_s: np.ndarray | None = None  #: total run time at the fixed demand on a speed-1.0 GPU (the trace's duration)
    equal_speed: np.ndarray | None = None  #: the job's mean GPU speed over the cluster's GPUs it may use
    total_gpus: float | None = None  #: GPUs in the cluster
    finished_gpu_s: np.ndarray | None = None  #: attained GPU-seconds of the jobs finished so far (history)


class QueuePolicy(Protocol):
    """``weights(state)``: one weight > 0 per active job. A policy may also define
    ``stable_for(state) -> float``: seconds from ``state.now`` during which its weights stay the
    same provided no job arrives or finishes and the running jobs keep running; the engine then
    advances that many rounds at once. ``preemptive`` (default true when absent) says whether the
    policy, as its users know it, stops a running job for a job it ranks higher; the simulator's
    ``SimConfig(preemption="auto")`` follows it."""

    name: str

    def weights(self, state: QueueState) -> np.ndarray: ...


def rank_weights(order: np.ndarray, spread: float) -> np.ndarray:
    """Weights for jobs listed in priority order ``order`` (indices, best first)."""
    n = len(order)
    w = np.empty(n)
    if n == 0:
        return w
    w[order] = np.exp(np.arange(n, dtype=np.float64) * (-math.log(spread) / max(n - 1, 1)))
    return w


def check_spread(spread: float) -> None:
    """Refuse a policy ``spread`` (the head-to-tail weight ratio) that is not a finite number >= 1."""
    if not np.isfinite(spread) or spread < 1:
        raise InputError("policy.spread", spread, "must be >= 1")
