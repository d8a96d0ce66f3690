"""Queue policies from the GPU-scheduling literature, as round weights (see ``formulations/policies.md``).

Each turns the simulator's :class:`~optsched.sim.policy_base.QueueState` into one weight per active
job, like the policies of :mod:`optsched.sim.policies`, so any of them runs with any allocator:

* ``srtf`` -- shortest remaining *time* first (Tiresias' oracle baseline; ``srf`` ranks by
  remaining GPU-time instead);
* ``gittins`` -- Tiresias' discretised 2D Gittins index: attained service (GPUs x time held) is
  snapped to a geometric grid of levels, and each job's index is the best ratio of "chance to
  finish within the next quantum" to "expected service spent in it", under the service
  distribution of the jobs finished so far (a log-uniform prior until there are enough);
* ``themis`` -- finish-time fairness: ``rho = shared finish time / isolated finish time``
  (estimated from the remaining work; isolated = alone on a 1/N share of the cluster), the jobs
  with the largest rho first;
* ``gavel`` -- heterogeneity-aware max-min of normalised effective throughput: the jobs furthest
  below the throughput an equal share of the cluster would give them weigh most, and each weight
  is divided by the job's equal-share GPU speed, so the round's value of a placement is its
  throughput *relative to the job's equal share*: fast GPUs go to the jobs they speed up most;
* ``gavel-makespan`` -- Gavel's makespan policy as weights: a job's weight per GPU grows with
  its remaining run time at its equal-share speed (the jobs that set the makespan first), divided
  by that speed as for ``gavel``, so each GPU goes to the job with the most time left.

Order-based policies use :func:`~optsched.sim.policy_base.rank_weights` (head weighs 1, tail
``1 / spread``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from optsched.errors import InputError
from optsched.sim.policy_base import QueueState, check_spread, rank_weights

__all__ = ["LITERATURE_POLICIES", "FinishTimeFairness", "GavelMakespan", "GavelMaxMin", "GittinsIndex", "SRTF", "finish_time_fairness",
           "gittins_index"]


def _need(state: QueueState, name: str, policy: str) -> np.ndarray | float:
    v = getattr(state, name)
    if v is None:
        raise InputError(f"policy.{policy}", name, f"needs QueueState.{name} (the simulator supplies it)")
    return v


@dataclass(frozen=True)
class SRTF:
    """Shortest remaining time first (an oracle: it knows each job's remaining run time); ties by arrival."""

    spread: float = 100.0
    name: str = "srtf"

    def __post_init__(self) -> None:
        check_spread(self.spread)

    def weights(self, state: QueueState) -> np.ndarray:
        return rank_weights(np.lexsort((state.submit_s, state.remaining_s)), self.spread)


def gittins_index(levels: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """The Gittins index at each attained-service level under the empirical distribution ``samples``.

    For level ``a`` and quantum end ``b`` (any later level, or infinity)::

        G(a) = max_b  P(a < S <= b) / E[min(S, b) - a ; S > a]

    i.e. the probability of finishing within the quantum per unit of expected service spent in it.
    A level past every sample gets ``1 / a`` (a mean residual life equal to the age).
    """
    s = np.sort(np.asarray(samples, dtype=np.float64))
    csum = np.concatenate([[0.0], np.cumsum(s)])
    lv = np.asarray(levels, dtype=np.float64)
    out = np.empty(lv.size)
    n = s.size
    for k, a in enumerate(lv):
        i = int(np.searchsorted(s, a, side="right"))  # samples > a start at i
        if i >= n:
            out[k] = 1.0 / max(a, 1.0)
            continue
        best = (n - i) / max(csum[n] - csum[i] - a * (n - i), 1e-12)  # b = infinity
        for b in lv[k + 1:]:
            jj = int(np.searchsorted(s, b, side="right"))
            done = jj - i
            spent = (csum[jj] - csum[i]) - a * done + (n - jj) * (b - a)
            if done > 0 and spent > 0:
                best = max(best, done / spent)
        out[k] = best
    return out


@dataclass(frozen=True)
class GittinsIndex:
    """Tiresias' discretised 2D Gittins-index priority (no knowledge of job lengths needed).

    Attained service (GPU-seconds held) is snapped down to ``levels`` = ``first x ratio^k``; the
    index of each level is :func:`gittins_index` under the attained service of the jobs finished
    so far (``QueueState.finished_gpu_s``), mixed with a log-uniform prior over
    ``[first, first x ratio^(n_levels-1)]`` while fewer than ``min_history`` jobs have finished.
    Higher index first; ties by arrival. The weights change only when a running job crosses a
    level or a job finishes, so the engine can skip rounds (``stable_for``).
    """

    first: float = 60.0  #: the first level above 0 (GPU-seconds)
    ratio: float = 2.0
    n_levels: int = 24  #: 60 GPU-s .. about 16 GPU-years at ratio 2
    min_history: int = 20
    spread: float = 100.0
    name: str = "gittins"

    def __post_init__(self) -> None:
        check_spread(self.spread)
        if not self.first > 0 or not math.isfinite(self.first):
            raise InputError("policy.first", self.first, "must be > 0")
        if not self.ratio > 1 or not math.isfinite(self.ratio):
            raise InputError("policy.ratio", self.ratio, "must be > 1")
        if isinstance(self.n_levels, bool) or not isinstance(self.n_levels, int) or self.n_levels < 1:
            raise InputError("policy.n_levels", self.n_levels, "must be a positive integer")

    @property
    def levels(self) -> np.ndarray:
        return np.concatenate([[0.0], self.first * self.ratio ** np.arange(self.n_levels)])

    def samples(self, state: QueueState) -> np.ndarray:
        hist = state.finished_gpu_s
        hist = np.zeros(0) if hist is None else np.asarray(hist, dtype=np.float64)
        hist = hist[hist > 0]
        if hist.size >= self.min_history:
            return hist
        prior = np.geomspace(self.first, self.first * self.ratio ** (self.n_levels - 1), 64)
        return np.concatenate([prior, hist])

    def index(self, state: QueueState) -> np.ndarray:
        lv = self.levels
        k = np.searchsorted(lv, state.attained_gpu_s, side="right") - 1
        used = np.unique(k)
        # the index at a level needs only the levels from it on; compute per distinct level
        g = np.empty(lv.size)
        samples = self.samples(state)
        for kk in used:
            g[kk] = gittins_index(lv[kk:], samples)[0]
        return g[k]

    def weights(self, state: QueueState) -> np.ndarray:
        return rank_weights(np.lexsort((state.submit_s, -self.index(state))), self.spread)

    def stable_for(self, state: QueueState) -> float:
        """Until the first running job's attained service reaches its next level."""
        lv = self.levels
        run = state.running
        att, g = state.attained_gpu_s[run], state.gpus[run]
        nxt = np.searchsorted(lv, att, side="right")
        below = nxt < lv.size
        if not below.any():
            return math.inf
        return float(np.min((lv[nxt[below]] - att[below]) / g[below]))


def finish_time_fairness(state: QueueState) -> np.ndarray:
    """Themis' ``rho`` per active job, estimated from the remaining work.

    Shared finish time: ``age + remaining_s`` (if it ran at its demand from now on). Isolated
    finish time: ``work_s x max(1, gpus x N / G)`` -- the job alone on a 1/N share of the
    cluster's G GPUs, N the active jobs (a gang larger than the share runs proportionally
    slower).
    """
    work = np.asarray(_need(state, "work_s", "themis"), dtype=np.float64)
    total = float(_need(state, "total_gpus", "themis"))
    n = max(1, state.submit_s.size)
    age = np.maximum(state.now - state.submit_s, 0.0)
    t_sh = age + state.remaining_s
    t_id = np.maximum(work, 1e-9) * np.maximum(1.0, state.gpus * n / max(total, 1.0))
    return t_sh / t_id


@dataclass(frozen=True)
class FinishTimeFairness:
    """Themis: the jobs with the largest finish-time fairness ``rho`` first (ties by arrival),
    which drives down the maximum rho (:func:`finish_time_fairness`)."""

    spread: float = 100.0
    name: str = "themis"

    def __post_init__(self) -> None:
        check_spread(self.spread)

    def weights(self, state: QueueState) -> np.ndarray:
        return rank_weights(np.lexsort((state.submit_s, -finish_time_fairness(state))), self.spread)


@dataclass(frozen=True)
class GavelMaxMin:
    """Gavel-style heterogeneity-aware max-min fairness of normalised effective throughput.

    A job's normalised throughput so far is its progress (run time at demand on a speed-1.0 GPU
    done, ``work_s - remaining_s``) over what an equal share would have given it in its time in
    the system (``age x equal_speed x min(1, G / (N x gpus))``). Its priority is
    ``1 / (1 + (spread - 1) x min(share, 1))`` (1 for a job that got nothing, ``1/spread`` at its
    equal share or above), divided by ``equal_speed`` so that a round's value measures throughput
    relative to the job's equal share (fast GPUs go where they help most).
    """

    spread: float = 100.0
    name: str = "gavel"

    def __post_init__(self) -> None:
        check_spread(self.spread)

    def shares(self, state: QueueState) -> np.ndarray:
        work = np.asarray(_need(state, "work_s", "gavel"), dtype=np.float64)
        eq = np.asarray(_need(state, "equal_speed", "gavel"), dtype=np.float64)
        total = float(_need(state, "total_gpus", "gavel"))
        n = max(1, state.submit_s.size)
        age = np.maximum(state.now - state.submit_s, 1.0)
        progress = np.maximum(work - state.remaining_s, 0.0)
        fair_rate = eq * np.minimum(1.0, total / (n * state.gpus))
        return progress / (age * np.maximum(fair_rate, 1e-12))

    def weights(self, state: QueueState) -> np.ndarray:
        eq = np.asarray(_need(state, "equal_speed", "gavel"), dtype=np.float64)
        share = np.clip(self.shares(state), 0.0, 1.0)
        return 1.0 / (1.0 + (self.spread - 1.0) * share) / np.maximum(eq, 1e-12)


@dataclass(frozen=True)
class GavelMakespan:
    """Gavel's makespan objective as round weights (an approximation; formulations/policies.md).

    Gavel minimises the time to finish every job, ``max_j R_j / X_j`` over time-shares ``X``; its
    fluid optimum runs every job at a rate proportional to its remaining work so that all finish
    together. A round picks whole placements, not shares, so here a job's weight *per GPU* is
    proportional to its remaining time at its equal-share speed, ``T_j = R_j / e_j``::

        w_j = (1 / spread + (1 - 1 / spread) x g_j T_j / max_k g_k T_k) / e_j

    -- a round's worth, a sum of per-job values, then gives each GPU the value ``T_j x
    rate_j / e_j``: the GPUs go to the jobs with the most time left (longest remaining first, the
    classical makespan rule), a long gang outweighing as many short 1-GPU jobs as it has GPUs, and
    fast GPUs to the long jobs they speed up most. ``per_gpu=False`` weighs jobs by ``T_j`` alone
    (measured: an exact allocator then fills GPUs with short jobs around a long gang). Weights
    follow the remaining work, so they change every round (no ``stable_for``).
    """

    spread: float = 100.0
    per_gpu: bool = True
    name: str = "gavel-makespan"

    def __post_init__(self) -> None:
        check_spread(self.spread)
        if not isinstance(self.per_gpu, bool):
            raise InputError("policy.per_gpu", self.per_gpu, "must be true or false")

    def weights(self, state: QueueState) -> np.ndarray:
        eq = np.maximum(np.asarray(_need(state, "equal_speed", "gavel-makespan"), dtype=np.float64), 1e-12)
        t = np.maximum(state.remaining_s, 0.0) / eq
        if self.per_gpu:
            t = t * state.gpus
        top = float(t.max()) if t.size else 0.0
        share = t / top if top > 0 else np.ones_like(t)
        return (1.0 / self.spread + (1.0 - 1.0 / self.spread) * share) / eq


LITERATURE_POLICIES: dict[str, type] = {"srtf": SRTF, "gittins": GittinsIndex, "themis": FinishTimeFairness, "gavel": GavelMaxMin,
                                        "gavel-makespan": GavelMakespan}
