"""Preprocessing shared by the exact model and the heuristics built on it.

* :func:`pareto_points`: a job's admissible grid points (``round.fair`` filter first), with the
  points another point dominates (no more CPU, no more memory, at least the throughput) removed.
  Removing them keeps the optimum: a schedule using a dominated point stays feasible and is
  worth no less with the dominating point. Not in a HUG round (``round.fairness = "hug"``): there
  a tenant's progress counts the cores and GB its jobs hold, so a dominated point may raise it
  and every admissible point is kept.
* :class:`JobData`: per job, its allowed GPU types (present in the cluster), its points and the
  value of each (type, point) with and without spreading/moving.
* :func:`node_classes`: nodes that are interchangeable (same type and capacities, and no
  running job with a restart cost placed there), for symmetry breaking.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from optsched.model import Instance, Job, Node, Profile, fair_floor
from optsched.schedule import Schedule
from optsched.values import job_value

__all__ = ["HUG_ALL_POINTS_MAX", "JobData", "Point", "hug_keep", "hug_points_of", "job_data", "node_classes", "pareto_points"]


@dataclass(frozen=True)
class Point:
    """A grid point: per-GPU cores and memory, and the throughput there."""

    cpus: int
    mem: int
    throughput: float


def pareto_points(job: Job, fair: bool, prune: bool = True) -> tuple[Point, ...]:
    """The job's non-dominated admissible grid points, cheapest CPU first (every admissible point
    without ``prune``).

    Ties (same cores, memory and throughput cannot happen on a grid) are impossible; equal
    throughput at more resources is dominated and dropped. Cached per (profile, floor): jobs of
    one model share their profile, and lns rebuilds the job data for every sub-problem.
    """
    return _pareto(job.profile, fair_floor(job, fair), prune)


@lru_cache(maxsize=4096)
def _pareto(profile: Profile, floor: float, prune: bool = True) -> tuple[Point, ...]:
    pts = [Point(c, m, t) for c, m, t in profile.points() if t >= floor]
    if not prune:
        return tuple(sorted(pts, key=lambda p: (p.cpus, p.mem)))
    keep = []
    for p in pts:
        dominated = any(
            q is not p and q.cpus <= p.cpus and q.mem <= p.mem and q.throughput >= p.throughput
            and (q.cpus, q.mem, q.throughput) != (p.cpus, p.mem, p.throughput)
            for q in pts
        )
        if not dominated:
            keep.append(p)
    keep.sort(key=lambda p: (p.cpus, p.mem))
    return tuple(keep)


def best_point_within(points: tuple[Point, ...], cpus: float, mem: float) -> int | None:
    """Index of the highest-throughput point using at most ``cpus`` cores and ``mem`` GB per GPU."""
    best, best_t = None, -1.0
    for i, p in enumerate(points):
        if p.cpus <= cpus and p.mem <= mem and p.throughput > best_t:
            best, best_t = i, p.throughput
    return best


def dominating_point(points: tuple[Point, ...], cpus: int, mem: int, throughput: float) -> int | None:
    """A kept point at least as good as grid point ``(cpus, mem)`` using no more resources: the
    point itself when it is kept (in a HUG round its cores and GB count), else the best within."""
    for i, p in enumerate(points):
        if p.cpus == cpus and p.mem == mem:
            return i if p.throughput >= throughput else None
    best = best_point_within(points, cpus, mem)
    if best is None or points[best].throughput < throughput:
        return None
    return best


@dataclass(frozen=True)
class JobData:
    """What the model needs to know about one job."""

    index: int
    job: Job
    types: tuple[str, ...]  #: allowed GPU types present in the cluster, fastest first
    points: tuple[Point, ...]  #: admissible points, Pareto-reduced unless job_data keeps more (HUG)
    base: dict[tuple[str, int], float]  #: (type, point) -> value on one node, not moved

    def value(self, instance: Instance, t: str, p: int, n_nodes: int, moved: bool) -> float:
        pt = self.points[p]
        return job_value(instance, self.job, t, pt.cpus, pt.mem, n_nodes, moved)

    @property
    def best(self) -> float:
        return max(self.base.values(), default=0.0)


#: a HUG round keeps every admissible grid point (exact) while ``sum_j points_j x nodes`` is at
#: most this; above it the model gets the Pareto points, each job's demand point and the points
#: its candidate schedules use (:func:`hug_keep`). Measured: a 5-job, 16-node Philly round with
#: 45-point grids (3,600) built 4,484 variables against 892 pruned, and CP-SAT found no solution
#: of the level stage in 2.7 s where the pruned model was proven in 0.16 s.
HUG_ALL_POINTS_MAX = 1000


def hug_keep(instance: Instance, schedules: Iterable[Schedule]) -> dict[str, set[tuple[int, int]]] | None:
    """The grid points a HUG model keeps beyond the Pareto ones: ``None`` (every point) on rounds
    up to ``HUG_ALL_POINTS_MAX``, else per job its demand point and each point ``schedules`` give
    it (so a hint's cores and GB, hence its progress, are representable)."""
    size = sum(len(pareto_points(j, instance.round.fair, prune=False)) for j in instance.jobs) * len(instance.nodes)
    if size <= HUG_ALL_POINTS_MAX:
        return None
    return hug_points_of(instance, schedules)


def hug_points_of(instance: Instance, schedules: Iterable[Schedule]) -> dict[str, set[tuple[int, int]]]:
    """Per job, its demand point and each point ``schedules`` give it (what :func:`hug_keep`
    keeps past ``HUG_ALL_POINTS_MAX``, whatever the round's size: cpsat decides on the size of
    an elastic round's variant model, larger than the round itself)."""
    keep = {j.id: {j.demand} for j in instance.jobs}
    for s in schedules:
        for jid, a in s.jobs.items():
            if jid in keep:
                keep[jid].add(a.point)
    return keep


def job_data(instance: Instance, prune: bool | None = None, keep: Mapping[str, Collection[tuple[int, int]]] | None = None) -> list[JobData]:
    """Per-job preprocessing, in instance order (``prune``: drop dominated points; default: except
    in a HUG round). ``keep`` (job id -> grid points): admissible points kept even when dominated."""
    present = {n.gpu_type for n in instance.nodes if n.gpus > 0}
    out = []
    for i, job in enumerate(instance.jobs):
        types = [t for t in instance.gpu_types if t in present and job.speed(t) is not None]
        types.sort(key=lambda t: -float(job.speed(t) or 0.0))
        points = pareto_points(job, instance.round.fair, prune=instance.round.fairness != "hug" if prune is None else prune)
        extra = keep.get(job.id) if keep is not None else None
        if extra:
            have = {(p.cpus, p.mem) for p in points}
            more = [p for p in pareto_points(job, instance.round.fair, prune=False) if (p.cpus, p.mem) in extra and (p.cpus, p.mem) not in have]
            if more:
                points = tuple(sorted((*points, *more), key=lambda p: (p.cpus, p.mem)))
        base = {}
        for t in types:
            for p, pt in enumerate(points):
                base[(t, p)] = job_value(instance, job, t, pt.cpus, pt.mem, 1, False)
        out.append(JobData(i, job, tuple(types), points, base))
    return out


def node_key(node: Node) -> tuple[str, int, int, int]:
    return node.gpu_type, node.gpus, node.cpus, node.mem_gb


def node_classes(instance: Instance) -> list[list[int]]:
    """Groups (of size >= 2) of interchangeable node indices, in instance order.

    Nodes are interchangeable when type and capacities agree and no running job with a positive
    restart cost sits on them (moving such a job changes the objective, so its nodes are unique).
    """
    pinned = set()
    for job in instance.jobs:
        if job.placement and job.restart_s > 0:
            pinned.update(job.placement)
    groups: dict[tuple[str, int, int, int], list[int]] = defaultdict(list)
    for i, n in enumerate(instance.nodes):
        if n.id not in pinned and n.gpus > 0:
            groups[node_key(n)].append(i)
    return [g for g in groups.values() if len(g) >= 2]


def job_classes(instance: Instance, data: list[JobData]) -> list[list[int]]:
    """Groups (of size >= 2) of interchangeable jobs: same everything but the id, not running."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for d in data:
        j = d.job
        if j.placement is not None or not d.base:
            continue
        key = (
            j.gpus, j.weight, j.profile, j.demand, tuple(sorted((j.gpu_speed or {}).items())), j.spread_factor,
            j.tenant, j.deadline_s, j.remaining_s,
        )
        groups[key].append(d.index)
    return [g for g in groups.values() if len(g) >= 2]
