"""Queue policies: each turns the simulator's queue state into round weights (the contract's
``weight``), so that any policy runs with any allocator.

Order-based policies (FIFO, SRF, LAS) rank the jobs and give rank ``r`` of ``n`` the weight
``spread ** (-r / (n - 1))``: the first job weighs 1, the last ``1 / spread``. A weight-ordered
allocator (fixed-demand) follows the order strictly; an objective-maximising one (CP-SAT) trades
priority against throughput at the exchange rate the spread sets (default 100: the head job is
worth 100 last ones). Weights depend on ranks only, so they change only when the order changes,
which lets the engine skip re-solving unchanged rounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from optsched.errors import InputError
from optsched.sim.literature import LITERATURE_POLICIES
from optsched.sim.policy_base import QueuePolicy, QueueState, check_spread, rank_weights

__all__ = ["FIFO", "LAS", "POLICIES", "MaxMinFairness", "ShortestRemaining", "get_policy"]


@dataclass(frozen=True)
class FIFO:
    """First in, first out: earlier arrivals weigh more. Not preemptive: a FIFO scheduler as its
    users know it (Slurm's, Synergy's) never stops a running job for a later one; waiting jobs
    backfill the GPUs the head of the queue cannot use."""

    spread: float = 100.0
    name: str = "fifo"
    preemptive: ClassVar[bool] = False

    def __post_init__(self) -> None:
        check_spread(self.spread)

    def weights(self, state: QueueState) -> np.ndarray:
        sub = state.submit_s
        # the engine lists jobs in arrival order already: skip the sort then
        order = np.arange(sub.size) if np.all(sub[1:] >= sub[:-1]) else np.argsort(sub, kind="stable")
        return rank_weights(order, self.spread)

    def stable_for(self, state: QueueState) -> float:
        return math.inf  # the order depends on the set of jobs only


@dataclass(frozen=True)
class ShortestRemaining:
    """Shortest remaining first, by remaining GPU-time at the fixed demand (an oracle, as in
    Tiresias' SRTF baseline); ties by arrival."""

    spread: float = 100.0
    name: str = "srf"

    def __post_init__(self) -> None:
        check_spread(self.spread)

    def weights(self, state: QueueState) -> np.ndarray:
        order = np.lexsort((state.submit_s, state.remaining_s * state.gpus))
        return rank_weights(order, self.spread)


@dataclass(frozen=True)
class LAS:
    """Tiresias' discretised two-dimensional least-attained-service: a job's attained service is
    GPUs x time held; queue ``k`` holds jobs with service in ``[thresholds[k-1], thresholds[k])``;
    lower queues first, FIFO within a queue. No knowledge of job length is needed."""

    thresholds: Sequence[float] = (3600.0, 36000.0)  #: GPU-seconds (1 and 10 GPU-hours)
    spread: float = 100.0
    name: str = "las"

    def __post_init__(self) -> None:
        check_spread(self.spread)
        th = tuple(float(t) for t in self.thresholds)
        if any(t <= 0 for t in th) or any(b <= a for a, b in zip(th, th[1:], strict=False)):
            raise InputError("policy.thresholds", list(th), "must be positive and strictly increasing")
        object.__setattr__(self, "thresholds", th)

    def queues(self, state: QueueState) -> np.ndarray:
        return np.searchsorted(np.asarray(self.thresholds), state.attained_gpu_s, side="right")

    def weights(self, state: QueueState) -> np.ndarray:
        order = np.lexsort((state.submit_s, self.queues(state)))
        return rank_weights(order, self.spread)

    def stable_for(self, state: QueueState) -> float:
        """Until the first running job's attained service reaches its next threshold."""
        th = np.asarray(self.thresholds)
        run = state.running
        att, g = state.attained_gpu_s[run], state.gpus[run]
        nxt = np.searchsorted(th, att, side="right")
        below = nxt < th.size
        if not below.any():
            return math.inf
        return float(np.min((th[nxt[below]] - att[below]) / g[below]))


@dataclass(frozen=True)
class MaxMinFairness:
    """Max-min fairness weighting: a job's weight is inversely proportional to the share of its
    time in the system it has held its GPUs (``attained / (gpus x age)``), so the jobs furthest
    behind an equal share come first. Weights are capped at ``spread`` times the smallest."""

    spread: float = 100.0
    name: str = "maxmin"

    def __post_init__(self) -> None:
        check_spread(self.spread)

    def weights(self, state: QueueState) -> np.ndarray:
        age = np.maximum(state.now - state.submit_s, 1.0)
        share = np.clip(state.attained_gpu_s / (state.gpus * age), 0.0, 1.0)
        return 1.0 / (1.0 + (self.spread - 1.0) * share)


#: every queue policy by name: the ones above and the literature's (:mod:`optsched.sim.literature`)
POLICIES: dict[str, type] = {"fifo": FIFO, "srf": ShortestRemaining, "las": LAS, "maxmin": MaxMinFairness, **LITERATURE_POLICIES}


def get_policy(name: str, **kwargs: float) -> QueuePolicy:
    """A policy by name (``fifo``, ``srf``, ``las``, ``maxmin``, and the literature's ``srtf``,
    ``gittins``, ``themis``, ``gavel``: :mod:`optsched.sim.literature`)."""
    if name not in POLICIES:
        raise InputError("policy", name, f"unknown queue policy; known: {sorted(POLICIES)}")
    return POLICIES[name](**kwargs)  # type: ignore[arg-type]

