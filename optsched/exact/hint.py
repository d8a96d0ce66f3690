"""A fast greedy schedule used to seed CP-SAT (a complete hint) and as the fallback incumbent.

Linear-ish in jobs x open nodes, so it also serves 1,024 nodes x 4,000 jobs in about a second:

1. running jobs stay where they are (at the best point their nodes' room allows) when they fit;
2. other jobs, by best value per GPU, go whole to the first node of an allowed type (fastest
   type first) where a point within the node's per-GPU share fits; a job that fits no node
   whole is split over the nodes with most room, at its cheapest point;
3. upgrade: each scheduled job moves to the best point its nodes' leftover room allows (in a
   HUG round one with no fewer cores and no less memory, so no tenant's progress falls).

In a DRF or HUG round (``round.fairness``) ``drf_target`` admits the jobs of step 2 by
progressive filling (:func:`optsched.heuristics.drf.progressive_fill`, the running jobs kept in
step 1 counting in the shares) until every tenant holds that level, then the rest by value per
GPU: the exact greedy's drf-then-worth, so lns starts from its placement without losing the level.
"""

from __future__ import annotations

from optsched.exact.prep import JobData, best_point_within, job_data
from optsched.heuristics.drf import progressive_fill
from optsched.model import Instance, Job
from optsched.schedule import Assignment, Schedule

__all__ = ["greedy_schedule"]


def greedy_schedule(instance: Instance, data: list[JobData] | None = None, running_first: bool = True,
                    drf_target: int | None = None) -> Schedule:
    """A feasible schedule built greedily (see the module docstring).

    ``running_first=False``: running jobs are not placed first but take their turn by value per
    GPU like the others (trying their current nodes first), so dense waiting jobs may take the
    fast GPUs that large running gangs hold (which then move, paying their restart).
    ``drf_target`` (a scaled DRF level, :func:`~optsched.round_policies.drf_level`): progressive
    filling up to it first (the schedule reaches it when the greedy placement lets every tenant)."""
    data = job_data(instance) if data is None else data
    nodes = instance.nodes
    free_g = [n.gpus for n in nodes]
    free_c = [n.cpus for n in nodes]
    free_m = [n.mem_gb for n in nodes]
    by_type: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        if n.gpus > 0:
            by_type.setdefault(n.gpu_type, []).append(i)
    placed: dict[int, tuple[str, int, dict[int, int]]] = {}  # job -> (type, point, node -> gpus)

    def take(j: int, t: str, p: int, alloc: dict[int, int]) -> None:
        pt = data[j].points[p]
        for n, g in alloc.items():
            free_g[n] -= g
            free_c[n] -= g * pt.cpus
            free_m[n] -= g * pt.mem
        placed[j] = (t, p, alloc)

    def stay(d: JobData) -> bool:
        """Keep a running job where it runs, at the best point its nodes' room allows."""
        job = d.job
        if not job.placement or not d.points:
            return False
        alloc = {instance.node_idx(n): g for n, g in job.placement.items()}
        t = nodes[next(iter(alloc))].gpu_type
        if t not in d.types or any(free_g[n] < g for n, g in alloc.items()):
            return False
        cap_c = min(free_c[n] / g for n, g in alloc.items())
        cap_m = min(free_m[n] / g for n, g in alloc.items())
        p = best_point_within(d.points, cap_c, cap_m)
        if p is not None and d.value(instance, t, p, len(alloc), False) > 0:
            take(d.index, t, p, alloc)
            return True
        return False

    # 1. running jobs in place
    if running_first:
        for d in data:
            stay(d)

    # 2. the rest, densest first
    order = sorted((d for d in data if d.index not in placed and d.base), key=lambda d: (-d.best / d.job.gpus, d.index))

    def place(d: JobData) -> bool:
        """Step 2 for one job: whole on one node, else split; whether it was placed."""
        if not running_first and stay(d):
            return True
        g = d.job.gpus
        moved = d.job.placement is not None
        for t in d.types:
            for n in by_type.get(t, ()):
                if free_g[n] < g:
                    continue
                node = nodes[n]
                share_c = max(node.cpus / node.gpus, free_c[n] / free_g[n])
                share_m = max(node.mem_gb / node.gpus, free_m[n] / free_g[n])
                cap_c, cap_m = free_c[n] / g, free_m[n] / g
                p = best_point_within(d.points, min(cap_c, share_c), min(cap_m, share_m))
                if p is None:
                    p = best_point_within(d.points, cap_c, cap_m)
                if p is not None and d.value(instance, t, p, 1, moved) > 0:
                    take(d.index, t, p, {n: g})
                    return True
        if g < 2:
            return False
        for t in d.types:  # split at the cheapest point, fewest nodes first
            p = min(range(len(d.points)), key=lambda q: (d.points[q].cpus * d.points[q].mem, q))
            pt = d.points[p]
            room = []
            for n in by_type.get(t, ()):
                k = free_g[n]
                if pt.cpus:
                    k = min(k, free_c[n] // pt.cpus)
                if pt.mem:
                    k = min(k, free_m[n] // pt.mem)
                if k > 0:
                    room.append((-min(k, g - 1), n))
            room.sort()
            alloc: dict[int, int] = {}
            need = g
            for negk, n in room:
                if need == 0:
                    break
                k = min(-negk, need)
                alloc[n] = k
                need -= k
            if need == 0 and d.value(instance, t, p, len(alloc), moved) > 0:
                take(d.index, t, p, alloc)
                return True
        return False

    if drf_target is not None and instance.round.fairness in ("drf", "hug"):
        by_id = {d.job.id: d for d in order}

        def got(j: int) -> tuple[int, int, int]:  # GPUs, cores and GB at its point (what HUG counts)
            _t, p, alloc = placed[j]
            g = sum(alloc.values())
            return g, g * data[j].points[p].cpus, g * data[j].points[p].mem

        def admit(job: Job) -> tuple[int, int, int] | None:
            d = by_id[job.id]
            return got(d.index) if place(d) else None

        held = {data[j].job.id: got(j) for j in placed}
        rest, _level = progressive_fill(instance, [d.job for d in order], admit, target=drf_target, held=held)
        order = [by_id[j.id] for j in rest]
    for d in order:
        place(d)

    # 3. upgrade points with the leftovers, best value gain first (in a HUG round only upwards)
    hug = instance.round.fairness == "hug"
    for _ in range(2):
        changed = False
        for j in sorted(placed, key=lambda j: (-data[j].best / data[j].job.gpus, j)):
            t, p, alloc = placed[j]
            d = data[j]
            old = d.points[p]
            cap_c = min((free_c[n] + g * old.cpus) / g for n, g in alloc.items())
            cap_m = min((free_m[n] + g * old.mem) / g for n, g in alloc.items())
            if hug:  # only more cores and memory: no tenant's progress falls
                q = max((i for i, pt in enumerate(d.points) if old.cpus <= pt.cpus <= cap_c and old.mem <= pt.mem <= cap_m),
                        key=lambda i: (d.points[i].throughput, -i), default=None)
            else:
                q = best_point_within(d.points, cap_c, cap_m)
            if q is not None and q != p and d.points[q].throughput > old.throughput:
                for n, g in alloc.items():
                    free_c[n] += g * (old.cpus - d.points[q].cpus)
                    free_m[n] += g * (old.mem - d.points[q].mem)
                placed[j] = (t, q, alloc)
                changed = True
        if not changed:
            break

    jobs = {}
    for j, (_t, p, alloc) in placed.items():
        pt = data[j].points[p]
        jobs[data[j].job.id] = Assignment({nodes[n].id: g for n, g in alloc.items()}, pt.cpus, pt.mem)
    return Schedule(instance.name, jobs)
