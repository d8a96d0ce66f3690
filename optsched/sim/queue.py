"""The queue side of a round: the per-job quantities queue policies read besides the basics
(:class:`PolicyExtras`), and which waiting jobs a round offers the allocator (the queue window
with backfill, :func:`offer`; a non-preemptive queue's head first, :func:`head_first`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from optsched.model import Node
from optsched.sim.workload import SimJob

__all__ = ["PolicyExtras", "head_first", "offer", "policy_extras", "reservation", "widen_next"]


@dataclass(frozen=True)
class PolicyExtras:
    """Per-job quantities some queue policies use (the optional fields of :class:`QueueState`)."""

    work_s: np.ndarray
    equal_speed: np.ndarray
    total_gpus: float

    def at(self, active: np.ndarray, attained: np.ndarray, done: np.ndarray) -> dict[str, Any]:
        return {"work_s": self.work_s[active], "equal_speed": self.equal_speed[active], "total_gpus": self.total_gpus,
                "finished_gpu_s": attained[done]}


def policy_extras(jobs: tuple[SimJob, ...], nodes: tuple[Node, ...], total_gpus: float) -> PolicyExtras:
    """Each job's run time at demand, and its GPU-weighted mean speed over the GPUs it may use
    (what an equal share of the cluster would give it; Gavel's normalisation)."""
    per_type: dict[str, int] = {}
    for nd in nodes:
        per_type[nd.gpu_type] = per_type.get(nd.gpu_type, 0) + nd.gpus
    cache: dict[tuple[tuple[str, float], ...] | None, float] = {}
    eq = np.ones(len(jobs))
    for i, j in enumerate(jobs):
        key = None if j.gpu_speed is None else tuple(sorted(j.gpu_speed.items()))
        if key not in cache:
            sp = {t: (1.0 if j.gpu_speed is None else j.gpu_speed.get(t)) for t in per_type}
            tot = sum(per_type[t] for t, v in sp.items() if v is not None)
            cache[key] = sum(per_type[t] * v for t, v in sp.items() if v is not None) / tot if tot else 1.0
        eq[i] = cache[key]
    return PolicyExtras(np.array([j.duration_s for j in jobs], dtype=np.float64), eq, total_gpus)


def head_first(w: np.ndarray, wait: np.ndarray, h: int, g: int) -> np.ndarray:
    """``w`` with the head of the queue (position ``h``, ``g`` GPUs) weighing more than any set
    of other waiting jobs that could take its GPUs: at most ``g`` of them, so 4 x the sum of the
    ``g`` largest other waiting weights, plus 1 (the 4 covers their better throughput ratios, as
    for due deadline jobs). Bounded by the head's size, not the queue's length, so the round's
    values stay within the range every method accepts (``optsched.limits``)."""
    others = np.sort(w[wait[wait != h]])[::-1][:g]
    out = w.copy()
    out[h] = max(float(w[h]), 4.0 * float(others.sum()) + 1.0)
    return out


def offer(
    active: np.ndarray, w: np.ndarray, running: np.ndarray, gpus: np.ndarray, total_gpus: float, window: float | None, min_jobs: int,
    free: np.ndarray | None = None, allowed: np.ndarray | None = None,
) -> np.ndarray:
    """Job indices offered this round, sorted: every running job, then waiting ones by weight
    until their GPUs reach ``window`` x the cluster's GPUs (the one crossing it included) and at
    least ``min_jobs`` of them (so a few huge jobs at the head cannot hide the whole queue).

    Backfill: with ``free`` (GPUs per type not held by running jobs) and ``allowed`` (job x type,
    the types each job may use), later waiting jobs that fit in the free GPUs of a type they may
    use join, in weight order, until the offered jobs that fit could fill the free GPUs ``window``
    times over. So a queue whose head is a backlog of gangs too big for the free GPUs never hides
    the smaller jobs that could use them (docs/simulator.md, "Queue window")."""
    if window is None:
        return active
    waiting = active[~running]
    order = np.lexsort((waiting, -w[~running]))
    ranked = waiting[order]
    cum = np.cumsum(gpus[ranked])
    k = max(int(np.searchsorted(cum, window * total_gpus, side="left")) + 1, min_jobs)
    chosen = ranked[:k]
    if free is not None and allowed is not None and k < ranked.size and free.sum() > 0:
        fits = (allowed[ranked] & (gpus[ranked][:, None] <= free[None, :])).any(axis=1)
        need = window * float(free.sum()) - float(gpus[chosen][fits[:k]].sum())
        if need > 0:
            extra = ranked[k:][fits[k:]]
            m = int(np.searchsorted(np.cumsum(gpus[extra]), need, side="left")) + 1
            chosen = np.concatenate([chosen, extra[:m]])
    return np.sort(np.concatenate([active[running], chosen]))


def reservation(head: int, others: np.ndarray, gpus: np.ndarray, allowed: np.ndarray, free: np.ndarray,
                releases: list[tuple[float, int, int]], run_s: np.ndarray) -> np.ndarray:
    """EASY backfilling's rule for a head of the queue that does not fit now: which of the
    waiting jobs ``others`` (job indices, in the queue's order) may be offered without delaying
    the head's start.

    The head (job index ``head``) is given a reservation on the GPU type it may use where enough
    GPUs come free earliest: ``releases`` lists the running jobs' (seconds left, type index,
    GPUs held of that type), and the head's *shadow time* is when the GPUs free now (``free``,
    per type) and those released reach its GPUs; the GPUs beyond them then are the *extra*. A
    waiting job may then start where it cannot use that type, where its run time at demand
    (``run_s``, per job index) ends by the shadow time, or, in queue order, while its GPUs fit in
    what is left of the extra. Any other waiting job is held back this round. Where the head
    fits now, or can never fit, nothing is held back."""
    ok = np.ones(others.size, dtype=bool)
    g = int(gpus[head])
    best: tuple[float, int, int] | None = None  # (shadow time, -extra, type)
    for ty in np.flatnonzero(allowed[head]):
        have = int(free[ty])
        if have >= g:
            return ok
        for left, _ty, k in sorted(r for r in releases if r[1] == ty):
            have += k
            if have >= g:
                cand = (left, -(have - g), int(ty))
                best = cand if best is None or cand < best else best
                break
    if best is None:
        return ok
    shadow, extra, ty = best[0], -best[1], best[2]
    for i, j in enumerate(others):
        if not allowed[j, ty] or run_s[j] <= shadow:
            continue
        if gpus[j] <= extra:
            extra -= int(gpus[j])
        else:
            ok[i] = False
    return ok


def widen_next(windowed: bool, active: np.ndarray, running_now: np.ndarray, sel: np.ndarray, rate: np.ndarray, gpus: np.ndarray,
               total_gpus: float, widened: bool) -> bool:
    """Whether the next round offers every waiting job, the queue window left open: from a
    round whose window hid waiting jobs and that started none of those it offered (``sel``)
    while GPUs stayed free, until a round starts a waiting job. The window's own test of what
    fits counts GPUs only, so a backlog of gangs that no node's cores or memory can feed would
    otherwise hold the jobs behind it back for good."""
    if not windowed:
        return False
    waiting_sel = sel[~np.isin(sel, active[running_now])]
    if (rate[waiting_sel] > 0).any():
        return False  # a waiting job started: the window works again
    if widened:
        return True  # stay open (the same offer each round, so a stall is still seen as one)
    hidden = waiting_sel.size < int((~running_now).sum())
    return hidden and int(gpus[rate > 0].sum()) < total_gpus
