"""Gang sizes for elastic jobs (contract v2 ``elastic``) in the greedy heuristics.

Used by ``fungible-greedy`` (formulations/policies.md, "Elastic gangs"):

* :func:`admission_sizes` orders the sizes ``place`` (:func:`optsched.heuristics.common.place`)
  tries when admitting a job: its most GPU-efficient size first (largest ``scaling(k) / k``: the
  smallest size for a concave curve, so more jobs get in), then *shrinking* it -- every other
  size, most efficient first -- when that does not fit; a running job keeps its current nodes
  when they still hold it (no restart).
* :func:`grow` then spends the GPUs left over: repeatedly, the job whose next larger size adds
  the most value per extra GPU (``weight x speed x throughput / demand x (s_k - s_g) / (k - g)``,
  the marginal gain of a concave knapsack) is re-placed at that size -- on its own node when the
  node has the room, else best fit -- and kept only when its contract worth (spread over nodes
  and a running job's restart included) really rises; finally every elastic job takes the best
  placement of any size and allowed type that beats its own (a job grown on slow GPUs while the
  fast ones were full moves when they free up).
* :func:`knapsack_place` does both in one queue of increments (admit a job, grow a job), best
  value per GPU first, so a large low-value gang cannot take GPUs that growing elastic jobs turn
  into more worth; ``fungible-greedy`` tries it beside its weight order and keeps the better.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection

from optsched.heuristics.common import Cluster, place
from optsched.model import Instance, Job
from optsched.round_policies import urgent
from optsched.values import job_value

__all__ = ["admission_sizes", "grow", "knapsack_place"]


def admission_sizes(job: Job) -> list[int]:
    """The sizes to try when admitting ``job``: most value per GPU first (ties: smaller first)."""
    if job.elastic is None:
        return [job.gpus]
    return sorted(job.sizes, key=lambda k: (-(job.scaling(k) or 0.0) / k, k))


def _value(instance: Instance, job: Job, nodes: dict[str, int], c: int, m: int) -> float:
    t = instance.node(next(iter(nodes))).gpu_type
    moved = job.placement is not None and dict(job.placement) != nodes
    return job_value(instance, job, t, c, m, len(nodes), moved, sum(nodes.values()))


def _next_step(instance: Instance, job: Job, nodes: dict[str, int], c: int, m: int, tried: set[int],
               free: int) -> tuple[float, int] | None:
    """The larger size not yet tried, at most ``free`` GPUs more, with the best estimated marginal
    value per extra GPU."""
    g = sum(nodes.values())
    now = job.scaling(g) or 0.0
    t = instance.node(next(iter(nodes))).gpu_type
    unit = job.weight * (job.speed(t) or 0.0) * job.profile.at(c, m) / job.demand_throughput
    best = None
    for k in job.sizes:
        if k - g > free:
            break  # sizes increase
        if k <= g or k in tried:
            continue
        gain = unit * ((job.scaling(k) or 0.0) - now) / (k - g)
        if gain > 0 and (best is None or gain > best[0]):
            best = (gain, k)
    return best


def _try_grow(instance: Instance, cl: Cluster, chosen: dict[str, tuple[dict[str, int], int, int]], jid: str,
              sizes: Collection[int]) -> bool:
    """Re-place job ``jid`` of ``chosen`` at its point with one of ``sizes`` GPUs -- grown on its
    own node when the node has the room, or best fit on any allowed type -- choosing the candidate
    of highest contract worth, and keep it if that beats the current one."""
    job = instance.job(jid)
    nodes, c, m = chosen[jid]
    old = _value(instance, job, nodes, c, m)
    cl.take(nodes, c, m, sign=-1)
    best, best_v = None, old * (1 + 1e-12)
    for k in sizes:
        cands = []
        if len(nodes) == 1:
            n = next(iter(nodes))
            if cl.fits_at({n: k}, c, m):
                cands.append({n: k})
        for u in cl.allowed_types(job):
            where = cl.best_fit(u, k, c, m)
            if where is not None:
                cands.append(where)
        for where in cands:
            v = _value(instance, job, where, c, m)
            if v > best_v:
                best, best_v = where, v
    if best is not None:
        chosen[jid] = (best, c, m)
    cl.take(chosen[jid][0], c, m)
    return best is not None


def grow(instance: Instance, cl: Cluster, chosen: dict[str, tuple[dict[str, int], int, int]],
         frozen: Collection[str] = ()) -> None:
    """Enlarge elastic jobs in ``chosen`` (job id -> (nodes, c, m), updated in place, room taken
    from ``cl``) while free GPUs add worth, best marginal value per extra GPU first; jobs in
    ``frozen`` keep their nodes."""
    heap: list[tuple[float, str, int]] = []
    tried: dict[str, set[int]] = {}

    def push(jid: str) -> None:
        nodes, c, m = chosen[jid]
        step = _next_step(instance, instance.job(jid), nodes, c, m, tried[jid], int(cl.free_g.sum()))
        if step is not None:
            heapq.heappush(heap, (-step[0], jid, step[1]))

    for jid in chosen:
        if instance.job(jid).elastic is not None and jid not in frozen:
            tried[jid] = set()
            push(jid)
    while heap and int(cl.free_g.sum()) > 0:
        _, jid, k = heapq.heappop(heap)
        tried[jid].add(k)
        _try_grow(instance, cl, chosen, jid, (k,))
        push(jid)
    # then each elastic job, heaviest first, takes the best placement of any size and type that
    # beats its own (e.g. a job grown on slow GPUs while the fast ones were full)
    for jid in sorted(tried, key=lambda j: (-instance.job(j).weight, j)):
        room = sum(chosen[jid][0].values()) + int(cl.free_g.sum())  # its own GPUs and the free ones
        _try_grow(instance, cl, chosen, jid, [k for k in instance.job(jid).sizes if k <= room])


def knapsack_place(instance: Instance, cl: Cluster, chosen: dict[str, tuple[dict[str, int], int, int]],
                   points: dict[str, tuple[int, int]]) -> None:
    """Place every job of ``points`` (job id -> its per-GPU point) not yet in ``chosen`` by one
    greedy over *increments*, best value per GPU first: admitting a job (at its most efficient
    size, :func:`admission_sizes`) and growing an elastic one to a larger size (:func:`_try_grow`)
    compete in one queue -- the greedy of a knapsack with concave items. Urgent deadline jobs are
    admitted first. A job's estimate uses its fastest allowed type and its point."""
    heap: list[tuple[int, float, int, str, int]] = []
    tried: dict[str, set[int]] = {}
    seq = 0

    def push(key: int, gain: float, jid: str, k: int) -> None:
        nonlocal seq
        heapq.heappush(heap, (key, -gain, seq, jid, k))
        seq += 1

    for job in instance.jobs:
        if job.id in chosen or job.id not in points:
            continue
        c, m = points[job.id]
        speed = max((s for t in cl.allowed_types(job) if (s := job.speed(t)) is not None), default=0.0)
        k = sum(job.placement.values()) if job.placement is not None else admission_sizes(job)[0]
        unit = job.weight * speed * job.profile.at(c, m) / job.demand_throughput
        push(0 if urgent(instance, job) else 1, unit * (job.scaling(k) or 0.0) / k, job.id, 0)
    while heap:
        _, _, _, jid, k = heapq.heappop(heap)
        job = instance.job(jid)
        if k == 0:  # admission
            c, m = points[jid]
            nodes = place(instance, cl, job, c, m, admission_sizes(job))
            if nodes is None:
                continue
            chosen[jid] = (nodes, c, m)
            if job.elastic is None:
                continue
            tried[jid] = set()
        else:
            tried[jid].add(k)
            _try_grow(instance, cl, chosen, jid, (k,))
        nodes, c, m = chosen[jid]
        step = _next_step(instance, job, nodes, c, m, tried[jid], int(cl.free_g.sum()))
        if step is not None:
            push(1, step[0], jid, step[1])
