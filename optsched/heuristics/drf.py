"""Dominant resource fairness in the greedy heuristics (contract v2 ``round.fairness = "drf"``).

The round's objective is lexicographic: the largest smallest dominant share across tenants
(:func:`optsched.round_policies.drf_level`), then worth. ``fixed-demand`` and ``fungible-greedy``
admit jobs by **progressive filling** (:func:`progressive_fill`, as in DRF, NSDI'11): repeatedly
the tenant with the smallest dominant share offers its next job, until no tenant has a job left.
That fill fixes a level ``L``; a second fill stops progressive filling as soon as every tenant
holds at least ``L`` and admits the rest in the usual worth order, so it keeps ``L`` (shares only
grow as jobs are added) and usually earns more worth. The heuristics keep the best of their
schedules by :func:`drf_key`. See ``formulations/policies.md``.

In a HUG round (``round.fairness = "hug"``) the same machinery ranks tenants by their progress
along their correlated demand vectors (:func:`optsched.round_policies.hug_level`), counting the
cores and GB each admitted job got at its point: ``admit`` then returns the job's usage.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence

from optsched.model import Instance, Job
from optsched.round_policies import (
    DRF_NO_TENANT,
    drf_capacity,
    drf_scale,
    drf_tenants,
    drf_usage,
    fair_level,
    fair_scale,
    hug_coefficients,
)
from optsched.schedule import Schedule
from optsched.values import schedule_value

__all__ = ["best_by_drf", "drf_key", "fair_round", "fair_stats", "keep_level", "progressive_fill"]

#: what ``admit`` returns for an admitted job: the GPUs it got (usage at its fixed demand), or
#: its GPUs, cores and GB (usage at the point it got; what a HUG round counts)
Got = int | tuple[int, int, int]


def fair_round(instance: Instance) -> bool:
    """Whether the round asks for a fairness level first (``round.fairness``: ``"drf"`` or ``"hug"``)."""
    return instance.round.fairness in ("drf", "hug")


def fair_stats(instance: Instance, schedule: Schedule) -> dict[str, float]:
    """The level a heuristic reports: ``drf_min_share`` or ``hug_min_progress`` (none without fairness)."""
    if not fair_round(instance):
        return {}
    key = "drf_min_share" if instance.round.fairness == "drf" else "hug_min_progress"
    return {key: fair_level(instance, schedule.jobs) / fair_scale(instance)}


def drf_key(instance: Instance, schedule: Schedule) -> tuple[int, float]:
    """The lexicographic objective of a DRF or HUG round: ``(fair_level, worth)`` (plain worth elsewhere)."""
    level = fair_level(instance, schedule.jobs) if fair_round(instance) else 0
    return level, schedule_value(instance, schedule)


def best_by_drf(instance: Instance, candidates: Iterable[tuple[str, Schedule]]) -> tuple[str, Schedule]:
    """The first candidate with the largest :func:`drf_key` (outside a DRF or HUG round: the most
    worth); a lone candidate is returned without being valued."""
    candidates = list(candidates)
    if len(candidates) == 1:
        return candidates[0]
    best: tuple[str, Schedule] | None = None
    best_key = (0, 0.0)
    for name, s in candidates:
        k = drf_key(instance, s)
        if best is None or k > best_key:
            best, best_key = (name, s), k
    if best is None:
        raise ValueError("no candidate schedule")
    return best


def keep_level(instance: Instance, base: Schedule, candidates: Iterable[Schedule]) -> list[Schedule]:
    """The candidates whose DRF (HUG) level is at least ``base``'s (all of them outside such a
    round): what a later pass (packing) may pick from without undoing the fairness."""
    if not fair_round(instance):
        return list(candidates)
    level = fair_level(instance, base.jobs)
    return [s for s in candidates if fair_level(instance, s.jobs) >= level]


def progressive_fill(instance: Instance, order: Sequence[Job], admit: Callable[[Job], Got | None], *,
                     target: int | None = None, held: Mapping[str, Got] | None = None) -> tuple[list[Job], int]:
    """DRF progressive filling over ``order``; returns the jobs never offered (in ``order``) and
    the level reached (the smallest scaled dominant share, as :func:`drf_level` counts it).

    Tenants are :func:`~optsched.round_policies.drf_tenants` (those with a runnable job; jobs
    without a tenant form ``DRF_NO_TENANT``). Repeatedly, the tenant with the smallest scaled
    dominant share (ties: the one whose next job comes first in ``order``) offers its next job in
    ``order``; ``admit(job)`` places it and returns the GPUs it got (or its GPUs, cores and GB),
    or ``None`` when it does not fit -- the job is then passed over (room only shrinks while
    filling). A tenant without jobs left drops out. ``held`` (job id -> the same) are jobs already
    placed; they count in the shares. In a HUG round the shares are the tenants' progress levels
    (:func:`~optsched.round_policies.hug_levels`; a job reported by its GPUs counts at its demand
    point).
    With ``target``: stop as soon as every tenant with jobs left holds at least ``target`` (a
    fill with ``target`` = the level of a full fill repeats it up to the step where that level
    is reached, and leaves the rest of the jobs to the caller).
    """
    caps, scale = drf_capacity(instance), drf_scale(instance)
    tenants = drf_tenants(instance)
    tenant_of = {j.id: (j.tenant if j.tenant is not None else DRF_NO_TENANT) for j in instance.jobs}
    used = {t: [0, 0, 0] for t in tenants}
    hug = hug_coefficients(instance)[1] if instance.round.fairness == "hug" else None

    def usage(job: Job, got: Got) -> tuple[int, int, int]:  # DRF counts the fixed demand of the GPUs got
        if isinstance(got, tuple):
            return got if hug is not None else drf_usage(job, got[0])
        return drf_usage(job, got)

    for jid, g in (held or {}).items():
        t = tenant_of[jid]
        if t in used:
            for r, a in enumerate(usage(instance.job(jid), g)):
                used[t][r] += a

    def share(t: str) -> int:
        if hug is not None:
            return min((num * used[t][r] // den for r, num, den in hug.get(t, ())), default=0)
        return max((scale * u // c for u, c in zip(used[t], caps, strict=True) if c > 0), default=0)

    queues: dict[str, list[int]] = {t: [] for t in tenants}
    for pos, job in enumerate(order):
        t = tenant_of[job.id]
        if t in queues:
            queues[t].append(pos)
    offered = [False] * len(order)
    heap = [(share(t), q[0], t, 0) for t, q in queues.items() if q]
    heapq.heapify(heap)
    done = [share(t) for t, q in queues.items() if not q]  # tenants with nothing to offer: final shares
    while heap and (target is None or heap[0][0] < target):
        _s, pos, t, k = heapq.heappop(heap)
        job = order[pos]
        offered[pos] = True
        got = admit(job)
        if got is not None:
            for r, a in enumerate(usage(job, got)):
                used[t][r] += a
        q = queues[t]
        if k + 1 < len(q):
            heapq.heappush(heap, (share(t), q[k + 1], t, k + 1))
        else:
            done.append(share(t))
    level = min([s for s, *_ in heap] + done, default=0)
    return [job for pos, job in enumerate(order) if not offered[pos]], level
