"""The final repair across parts: gangs no part could hold, then a fill of the whole round.

The parts' schedules use disjoint nodes and disjoint jobs, so their union is feasible. Two
completions of it are built and the one worth more is kept:

1. the union completed by the fungible greedy on the whole round
   (:func:`~optsched.heuristics.fungible_greedy.fungible_greedy_schedule` with ``fixed``): every
   job keeps its nodes, the jobs left out take the room left on any node, and the leftover pass
   raises grid points where cores and memory are left;
2. (when some gangs were too large for every part) first :func:`place_gangs`: each such gang,
   worth most first, takes the nodes of one allowed type (any parts) that hold it whose jobs are
   worth least per GPU, evicting those jobs when the gang is worth more than they are; then the
   same fill, which re-places what it can of the evicted jobs.

Every step checks the nodes' GPUs, cores and memory and the job's type and grid point, so the
result is feasible by construction (the tests check it with the independent checker).
"""

from __future__ import annotations

import numpy as np

from optsched.heuristics.fungible_greedy import fungible_greedy_schedule
from optsched.model import Instance, Job
from optsched.schedule import Assignment, Schedule
from optsched.values import assignment_value, schedule_value

__all__ = ["place_gangs", "repair_across"]


def _points(instance: Instance, job: Job) -> list[tuple[int, int, float]]:
    """The job's grid points, fastest first (in a fair round only those at least as fast as its demand)."""
    pts = job.profile.points()
    if instance.round.fair:
        pts = [p for p in pts if p[2] >= job.demand_throughput]
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


def repair_across(instance: Instance, merged: Schedule, gangs: list[str], *, seed: int = 0) -> tuple[Schedule, dict[str, float]]:
    """The better of the two completions of ``merged`` (module text), and what each was worth."""
    plain = fungible_greedy_schedule(instance, seed=seed, fixed=merged)
    stats = {"repair_fill_objective": schedule_value(instance, plain)}
    best, best_v = plain, stats["repair_fill_objective"]
    if gangs:
        with_gangs = fungible_greedy_schedule(instance, seed=seed, fixed=place_gangs(instance, merged, gangs))
        stats["repair_gangs_objective"] = v = schedule_value(instance, with_gangs)
        if v > best_v + 1e-9:
            best, best_v = with_gangs, v
    return best, stats
