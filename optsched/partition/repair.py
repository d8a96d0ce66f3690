"""The final repair across parts: gangs no part could hold, then a fill of the whole round.

The parts' schedules use disjoint nodes and disjoint jobs, so their union is feasible. Two
completions of it are built and the one worth more is kept:

1. the union completed by the fungible greedy on the *residual* round (:func:`fill_residual`):
   every job keeps its nodes and point, and the jobs left out take the room left on any node, so
   the cost grows with what is left, not with the round (in a round with preemption rules, the
   fungible greedy on the whole round with ``fixed``, which also raises grid points);
2. (when some gangs were too large for every part) first :func:`place_gangs`: each such gang,
   worth most first, takes the nodes of one allowed type (any parts) that hold it whose jobs are
   worth least per GPU, evicting those jobs when the gang is worth more than they are; then the
   same fill, which re-places what it can of the evicted jobs.

Every step checks the nodes' GPUs, cores and memory and the job's type and grid point, so the
result is feasible by construction (the tests check it with the independent checker).
"""

from __future__ import annotations

import numpy as np

from optsched.capacity import node_usage
from optsched.heuristics.fungible_greedy import fungible_greedy_schedule
from optsched.model import Instance, Job, Node, fair_floor
from optsched.partition.prices import movable, moved_in
from optsched.round_policies import policy_families
from optsched.schedule import Assignment, Schedule
from optsched.values import assignment_value, schedule_value

__all__ = ["fill_residual", "place_gangs", "repair_across"]


def _points(instance: Instance, job: Job) -> list[tuple[int, int, float]]:
    """The job's grid points, fastest first (in a fair round only those at least as fast as its demand)."""
    pts = job.profile.allowed(fair_floor(job, instance.round.fair))
    return sorted(pts, key=lambda p: (-p[2], p[0], p[1]))


def place_gangs(instance: Instance, schedule: Schedule, gangs: list[str]) -> Schedule:
    """``schedule`` with each of ``gangs`` placed where the jobs it evicts are worth less than it
    (see the module text); a gang that would not pay, or fits nowhere, is left out. Per gang and
    type one sort of the type's nodes by the worth their jobs hold per GPU (numpy)."""
    jobs = dict(schedule.jobs)
    nodes = instance.nodes
    on_node: dict[int, set[str]] = {}
    worth = {j: assignment_value(instance, instance.job(j), a) for j, a in jobs.items()}
    cost = np.zeros(len(nodes))
    blocked = np.array([n.gpus == 0 for n in nodes])
    for j, a in jobs.items():
        pinned = instance.job(j).pinned
        for n in a.nodes:
            i = instance.node_idx(n)
            on_node.setdefault(i, set()).add(j)
            cost[i] += worth[j]
            blocked[i] |= pinned
    gpus = np.array([n.gpus for n in nodes], dtype=np.int64)
    of_type = {t: np.array([i for i, n in enumerate(nodes) if n.gpu_type == t], dtype=np.int64) for t in instance.gpu_types}
    order = sorted(gangs, key=lambda j: (-instance.job(j).weight * instance.job(j).gpus, instance.job_idx(j)))
    for j in order:
        job = instance.job(j)
        best: tuple[float, Assignment, set[str]] | None = None
        for t, idx in of_type.items():
            if job.speed(t) is None:
                continue
            idx = idx[~blocked[idx]]
            if int(gpus[idx].sum()) < job.gpus:
                continue
            idx = idx[np.lexsort((idx, -gpus[idx], cost[idx] / gpus[idx]))]
            k = int(np.searchsorted(np.cumsum(gpus[idx]), job.gpus)) + 1
            chosen: dict[str, int] = {}
            left = job.gpus
            for i in idx[:k].tolist():
                chosen[nodes[i].id] = min(left, int(gpus[i]))
                left -= chosen[nodes[i].id]
            for c, m, _thr in _points(instance, job):
                if all(g * c <= instance.node(n).cpus and g * m <= instance.node(n).mem_gb for n, g in chosen.items()):
                    a = Assignment(chosen, c, m)
                    evicted = set().union(*(on_node.get(i, set()) for i in idx[:k].tolist()))
                    net = assignment_value(instance, job, a) - sum(worth[x] for x in evicted)
                    if net > 1e-9 and (best is None or net > best[0]):
                        best = (net, a, evicted)
                    break
        if best is None:
            continue
        _net, a, evicted = best
        for x in evicted:
            for n in jobs.pop(x).nodes:
                i = instance.node_idx(n)
                on_node[i].discard(x)
                cost[i] -= worth[x]
            del worth[x]
        jobs[j] = a
        worth[j] = assignment_value(instance, job, a)
        for n in a.nodes:
            i = instance.node_idx(n)
            on_node.setdefault(i, set()).add(j)
            cost[i] += worth[j]
    return Schedule(schedule.instance, jobs)


def fill_residual(instance: Instance, schedule: Schedule, *, seed: int = 0) -> Schedule:
    """``schedule`` completed by the fungible greedy on the *residual* round only: the jobs it
    leaves out (a running one as moved, :func:`~optsched.partition.prices.moved_in`; pinned ones
    stay out) on the room it leaves free (nodes with a free GPU, core and GB, at their free
    room), valued as in the whole round (:meth:`Instance.subround`). Its cost grows with what is
    left, not with the round; unlike the whole-round fill it does not raise placed jobs' points."""
    used = node_usage(schedule)
    nodes = []
    for n in instance.nodes:
        u = used[n.id]
        g, c, m = n.gpus - u[0], n.cpus - u[1], n.mem_gb - u[2]
        if g > 0 and c > 0 and m > 0:
            nodes.append(Node(n.id, n.gpu_type, g, c, m, n.rack))
    left = [moved_in(instance, j) for j in instance.jobs if j.id not in schedule.jobs and movable(instance, j)]
    types = {n.gpu_type for n in nodes}
    left = [j for j in left if any(j.speed(t) is not None for t in types)]
    if not nodes or not left:
        return schedule
    sub = instance.subround(f"{instance.name}/residual", tuple(nodes), tuple(left))
    extra = fungible_greedy_schedule(sub, seed=seed)
    return Schedule(schedule.instance, {**schedule.jobs, **extra.jobs})


def _fill(instance: Instance, schedule: Schedule, seed: int) -> Schedule:
    """The whole-round fill around ``schedule`` where the round limits moves (preemption rules),
    the residual fill (:func:`fill_residual`) otherwise."""
    if "preemption" in policy_families(instance):
        return fungible_greedy_schedule(instance, seed=seed, fixed=schedule)
    return fill_residual(instance, schedule, seed=seed)


def repair_across(instance: Instance, merged: Schedule, gangs: list[str], *, seed: int = 0) -> tuple[Schedule, dict[str, float]]:
    """The better of the two completions of ``merged`` (module text), and what each was worth."""
    plain = _fill(instance, merged, seed)
    stats = {"repair_fill_objective": schedule_value(instance, plain)}
    best, best_v = plain, stats["repair_fill_objective"]
    if gangs:
        with_gangs = _fill(instance, place_gangs(instance, merged, gangs), seed)
        stats["repair_gangs_objective"] = v = schedule_value(instance, with_gangs)
        if v > best_v + 1e-9:
            best, best_v = with_gangs, v
    return best, stats
