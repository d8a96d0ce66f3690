"""The round's knapsack bound: a proven upper bound on a round's optimum from the jobs' best
values and the GPUs alone, refined for running jobs (restarts) and pinned jobs (their exact
joint worth, :mod:`optsched.incremental_bound`).

It is what lets a round chain (:class:`optsched.incremental.RoundSolver`) stop a round with no
search: ``formulations/incremental.md`` has why each refinement stays an upper bound.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from optsched.incremental_bound import pinned_worth_bound
from optsched.model import Instance, fair_floor
from optsched.room import residual_nodes, spread_caps
from optsched.round_policies import policy_families

__all__ = ["BOUND_FAMILIES", "FIT_CACHE_SIZE", "KNAPSACK_CELLS", "gpu_knapsack_bound", "worth_bound"]

#: policy families under which a round still ranks schedules by worth alone, so that a worth bound
#: may end the round early (quotas, move budgets and pinned jobs only restrict the schedules)
BOUND_FAMILIES = frozenset({"preemption", "quotas", "max_moves"})


def _fit_factors(instance: Instance, job: Any, gpu_type: str, nodes: tuple[np.ndarray, np.ndarray, np.ndarray]) -> float:
    """The most ``throughput[c][m] x spread multiplier`` a job reaches on ``gpu_type``'s nodes:
    at grid point ``(c, m)`` node ``n`` holds at most ``min(gpus_n, cpus_n // c, mem_n // m)`` of its
    GPUs, so the job needs at least ``k`` nodes (the fewest whose such counts add up to its
    GPUs) and pays at least ``spread_factor ** (k - spread_base)`` (:func:`spread_caps`); a point
    no set of nodes holds is left out (0 when none is held)."""
    prof = job.profile
    thr = np.asarray(prof.throughput, dtype=np.float64)
    thr = np.where(thr >= fair_floor(job, instance.round.fair), thr, 0.0)  # a fair round's points
    c = np.asarray(prof.cpus_per_gpu, dtype=np.int64)[:, None]
    m = np.asarray(prof.mem_per_gpu_gb, dtype=np.int64)[None, :]
    c, m = np.broadcast_arrays(c, m)
    factor = thr * spread_caps(instance, job, gpu_type, nodes, c, m)
    return float(factor.max()) if factor.size else 0.0


def _staying_value(instance: Instance, job: Any) -> float | None:
    """The most a running job is worth where it runs (same nodes, same GPU counts, so no restart):
    its fastest grid point whose cores and memory fit on each of those nodes alone x its speed
    there x the spread factor its node count pays; ``None`` when it could not stay (a node left
    the round, or the nodes are of several types or of one it may not use)."""
    if any(n not in instance._node_index for n in job.placement):
        return None
    nodes = [instance.node(n) for n in job.placement]
    types = {n.gpu_type for n in nodes}
    speed = job.speed(nodes[0].gpu_type) if len(types) == 1 else None
    if speed is None or sum(job.placement.values()) != job.gpus:
        return None
    # a grid point fits when its cores and memory per GPU times the GPUs on each node fit that
    # node: at most the smallest per-GPU share over the nodes (integers: c * k <= cap iff c <= cap // k)
    shares = [(n.cpus // k, n.mem_gb // k) for k, n in zip(job.placement.values(), nodes, strict=True) if k > 0]
    best = job.profile.best_within(min((c for c, _ in shares), default=math.inf), min((m for _, m in shares), default=math.inf))
    if best < fair_floor(job, instance.round.fair):  # the fastest fitting point is below a fair round's demand
        best = 0.0
    base = instance.spread_base(nodes[0].gpu_type, job.gpus)
    return speed * float(best) * job.spread_factor ** (len(job.placement) - base)


#: most fit factors a :class:`RoundSolver` keeps between rounds (cleared when full)
FIT_CACHE_SIZE = 4096


def _best_values(instance: Instance, cache: dict[tuple[Any, ...], Any] | None = None,
                 nodes: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None, unpinned: bool = False) -> list[float]:
    """Per job, the most it can be worth on the round's nodes (:func:`_fit_factors` over its
    allowed GPU types, times its weight, speed and one over its demand's throughput), or on
    ``nodes`` (per GPU type, the GPUs, cores and GB of each node: e.g. :func:`residual_nodes`).
    With ``unpinned``, pinned jobs get 0 (their caller bounds them otherwise).
    ``cache`` (fit factors keyed by everything they depend on: the type's nodes, the job's
    profile, GPUs, spread factor and base, the round's fairness and the job's demand where
    fair) may be shared between rounds on the same nodes."""
    cache = {} if cache is None else cache
    if len(cache) > FIT_CACHE_SIZE:
        cache.clear()
    by_type: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    sig: dict[str, bytes] = {}
    for t in instance.gpu_types:
        if nodes is not None:
            by_type[t] = nodes.get(t) or (np.zeros(0, dtype=np.int64),) * 3
        else:
            ns = [n for n in instance.nodes if n.gpu_type == t and n.gpus > 0]
            by_type[t] = (np.array([n.gpus for n in ns], dtype=np.int64), np.array([n.cpus for n in ns], dtype=np.int64),
                          np.array([n.mem_gb for n in ns], dtype=np.int64))
        sig[t] = b"".join(a.tobytes() for a in by_type[t]) + bytes(len(by_type[t][0]))
    fair = instance.round.fair
    out = []
    alike: dict[tuple[Any, ...], float] = {}  # jobs alike but for weight share their best per unit of weight
    for j in instance.jobs:
        if unpinned and j.pinned:
            out.append(0.0)
            continue
        speeds = j.gpu_speed if j.gpu_speed is not None else dict.fromkeys(instance.gpu_types, 1.0)
        mine = (j.profile, j.gpus, j.spread_factor, tuple(speeds.items()), j.demand_throughput)
        per_weight = alike.get(mine)
        if per_weight is None:
            best = 0.0
            for t, speed in speeds.items():
                if t not in by_type or not by_type[t][0].size:
                    continue
                key = (t, sig[t], j.profile, j.gpus, j.spread_factor, instance.spread_base(t, j.gpus), fair,
                       j.demand_throughput if fair else None)
                f = cache.get(key)
                if f is None:
                    f = cache[key] = _fit_factors(instance, j, t, by_type[t])
                best = max(best, speed * f)
            per_weight = alike[mine] = best / j.demand_throughput
        out.append(j.weight * per_weight)
    return out


def _restart_value(instance: Instance, job: Any, value: float) -> float:
    """A running job's ``value`` (:func:`_best_values`) with its restart counted: if it moves it
    pays ``1 - restart_s / duration_s`` of its worth, so it is worth at most the larger of that
    share and its worth where it runs (:func:`_staying_value`, itself at most its value)."""
    stay = _staying_value(instance, job)
    stay_v = 0.0 if stay is None else job.weight * stay / job.demand_throughput
    return max(value * max(0.0, 1.0 - job.restart_s / instance.round.duration_s), min(value, stay_v))


def _restart_values(instance: Instance, values: list[float], pinned: bool = True) -> list[float]:
    """``values`` with each running job's restart counted (:func:`_restart_value`); with
    ``pinned`` false, pinned jobs keep theirs (the pinned-jobs bound counts them exactly)."""
    return [_restart_value(instance, j, v) if j.placement and j.elastic is None and (pinned or not j.pinned) else v
            for j, v in zip(instance.jobs, values, strict=True)]


#: the 0/1 knapsack is solved exactly up to this many table cells (numpy, one pass per job size),
#: above it by its fractional relaxation
KNAPSACK_CELLS = 4_000_000


def _knapsack(items: list[tuple[float, int]], capacity: int) -> float:
    """The 0/1 knapsack's optimum over ``items`` (value, GPUs) into ``capacity`` GPUs, or its
    fractional relaxation (an upper bound on it) when the table would be large. Jobs of one size
    are one pass: of ``t`` jobs taken of a size, the ``t`` most valuable are best."""
    capacity = max(0, int(capacity))
    items = [(v, g) for v, g in items if v > 0]
    if sum(g for _, g in items) <= capacity:
        return sum(v for v, _ in items)
    by_size: dict[int, list[float]] = {}
    for v, g in items:
        if g <= capacity:
            by_size.setdefault(g, []).append(v)
    tops = {g: sorted(vs, reverse=True)[: capacity // g] for g, vs in by_size.items()}
    if sum(len(top) + 1 for top in tops.values()) * (capacity + 1) <= KNAPSACK_CELLS:
        x = np.arange(capacity + 1)
        dp = np.zeros(capacity + 1)
        for g, top in tops.items():
            gain = np.concatenate(([0.0], np.cumsum(top)))  # the t most valuable of size g
            at = x[None, :] - g * np.arange(gain.size)[:, None]
            dp = np.where(at >= 0, dp[np.maximum(at, 0)] + gain[:, None], -np.inf).max(axis=0)
        return float(dp[-1])
    total, left = 0.0, float(capacity)
    for v, g in sorted(items, key=lambda vg: vg[0] / vg[1], reverse=True):
        if left <= 0:
            break
        take = min(1.0, left / g)
        total += take * v
        left -= take * g
    return total


def _pinned_bound(instance: Instance, values: list[float], cache: dict[tuple[Any, ...], Any] | None = None) -> float:
    """The knapsack bound with pinned jobs where they run: a pinned job (``preemptible`` false,
    running) keeps its GPUs, so the other jobs share the GPUs left, and the pinned jobs' own worth
    is bounded by the best choice of their grid points that fits their nodes' cores and memory
    together (:func:`~optsched.incremental_bound.pinned_worth_bound`; each job's ``values`` where
    that is not defined)."""
    pinned, held = pinned_worth_bound(instance, cache)
    if not math.isfinite(pinned):
        pinned = sum(_restart_value(instance, j, v) if j.elastic is None else v
                     for j, v in zip(instance.jobs, values, strict=True) if j.pinned)
    # the other jobs on the room the pinned jobs leave: the fewest of those nodes that hold a job
    # may be more than on empty nodes, and its spread factor is paid from there
    room = _restart_values(instance, _best_values(instance, cache, residual_nodes(instance), unpinned=True), pinned=False)
    others = [(min(v, r), j.gpus) for j, v, r in zip(instance.jobs, values, room, strict=True) if not j.pinned]
    types = {t for j in instance.jobs for t in (j.gpu_speed if j.gpu_speed is not None else instance.gpu_types)}
    free = sum(n.gpus for n in instance.nodes if n.gpu_type in types) - held
    return pinned + _knapsack(others, free)


def gpu_knapsack_bound(instance: Instance, good_enough: float | None = None,
                       cache: dict[tuple[Any, ...], Any] | None = None) -> float:
    """A proven upper bound on the round's optimum: the 0/1 knapsack of the jobs' best values
    (:func:`_best_values`; for running jobs, :func:`_restart_values`) into the GPUs of the types
    some job may use (its fractional relaxation beyond :data:`KNAPSACK_CELLS`), or, where running
    jobs are pinned, the same over the GPUs they leave with their own worth bounded per node
    (:func:`_pinned_bound`), whichever is smaller. The latter never exceeds the knapsack with
    restarts counted (its choice, the pinned jobs in, is one of that knapsack's, and the pinned
    jobs' joint worth is at most the sum of their staying values), so it replaces it.

    Valid because every feasible schedule gives each scheduled job at most its best value (a
    running job either keeps its exact placement or pays its restart) and uses
    at most the GPUs of the types its jobs run on; dropping the per-node, core, memory and
    one-type rules (and allowing fractions) only enlarges the set the maximum is taken over. Not
    defined for elastic jobs (their size changes the value): callers check
    :data:`BOUND_FAMILIES` first. A relative 1e-9 is added for rounding. With ``good_enough``,
    the restart and pinned-job refinements are skipped when the plain bound is already at most
    that; ``cache`` is passed to :func:`_best_values` (a :class:`RoundSolver` keeps one between
    rounds).
    """
    types = {t for j in instance.jobs for t in (j.gpu_speed if j.gpu_speed is not None else instance.gpu_types)}
    capacity = sum(n.gpus for n in instance.nodes if n.gpu_type in types)
    values = _best_values(instance, cache)
    total = _knapsack([(v, j.gpus) for j, v in zip(instance.jobs, values, strict=True)], capacity)
    if (good_enough is None or total > good_enough) and any(j.placement for j in instance.jobs):
        if any(j.pinned for j in instance.jobs):  # at most the knapsack with restarts counted (the text)
            total = min(total, _pinned_bound(instance, _restart_values(instance, values, pinned=False), cache))
        else:
            values = _restart_values(instance, values)
            total = min(total, _knapsack([(v, j.gpus) for j, v in zip(instance.jobs, values, strict=True)], capacity))
    return total * (1 + 1e-9) + 1e-9


def worth_bound(instance: Instance) -> float | None:
    """:func:`gpu_knapsack_bound` where it bounds the round's optimum (its policy families are in
    :data:`BOUND_FAMILIES`: no elastic gangs, no fairness, packing or deadline rules), else
    ``None``. It needs no LP: one pass over the jobs, one fit test per distinct job shape and GPU
    type (under a second for 50,000 jobs on 12,500 nodes), for solvers that have no other bound
    in time."""
    if not policy_families(instance) <= BOUND_FAMILIES:
        return None
    return gpu_knapsack_bound(instance)
