"""Node refill: re-solve one node at a time exactly, given everything else.

On one node, the jobs a schedule places there alone are re-chosen together with the waiting jobs
that could fill the node's GPUs: each pinned job keeps its GPUs and may change its grid point;
each other job there alone may change its point or leave; waiting jobs (not running, not
scheduled elsewhere) may enter whole at any point. Jobs that span this node and others keep
what they hold. A dynamic programme over the node's (GPUs, cores, memory) left, one layer per job,
finds the best such choice, and it replaces the node's part of the schedule when it is worth
strictly more. Nodes are visited in order; each sees the schedule the previous ones left.

This is the move a congested round needs when most running jobs are pinned (strict FIFO): the
few free GPUs go to the waiting jobs whose speed-up is worth most once the pinned jobs on that
node give up some cores or memory, a trade no single-job move finds. Of the waiting jobs alike in
all but weight (profile, GPUs, speeds, spread factor, demand), only the heaviest ones that fit the
node's free GPUs are offered (no lighter one can be worth more at any point). Used by
:class:`optsched.incremental.RoundSolver` on rounds the carried-over schedule leaves open.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from optsched.model import Instance, Job
from optsched.schedule import Assignment, Schedule
from optsched.values import assignment_value, job_value

__all__ = ["MAX_CELLS", "node_refill"]

#: most cells of one node's (GPUs, cores, memory) table (a node above it is left as it is)
MAX_CELLS = 400_000


def _options(instance: Instance, job: Job, node: Any, cap_c: int, cap_m: int) -> list[tuple[int, int, float]]:
    """``job``'s grid points on ``node`` alone as (cores, GB, worth) for all its GPUs, those that
    fit the node's room and are not dominated (no less of either and worth no more)."""
    g = job.gpus
    pts = _points(job)
    if pts is None:
        return []
    c, m, thr = pts
    keep = (g * c <= cap_c) & (g * m <= cap_m)
    if instance.round.fair:
        keep &= thr >= job.demand_throughput * (1 - 1e-12)
    if not keep.any():
        return []
    moved = job.placement is not None and dict(job.placement) != {node.id: g}
    one = float(thr[keep][0])  # worth is throughput times a factor fixed for the job on this node
    factor = job_value(instance, job, node.gpu_type, int(c[keep][0]), int(m[keep][0]), 1, moved) / one
    return list(zip((g * c[keep]).tolist(), (g * m[keep]).tolist(), (factor * thr[keep]).tolist(), strict=True))


def _points(job: Job) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The job's profile points (cores per GPU, GB per GPU, throughput) of positive throughput
    that no other point dominates (no more of either resource and at least as fast), built once
    per profile; None when there is none."""
    prof = job.profile
    out = prof.__dict__.get("_refill_points")
    if out is None:
        pts = prof.points()
        c = np.array([p[0] for p in pts], dtype=np.int64)
        m = np.array([p[1] for p in pts], dtype=np.int64)
        thr = np.array([p[2] for p in pts], dtype=np.float64)
        keep = thr > 0
        c, m, thr = c[keep], m[keep], thr[keep]
        dominated = ((c[None, :] <= c[:, None]) & (m[None, :] <= m[:, None]) & (thr[None, :] >= thr[:, None])
                     & ((c[None, :] < c[:, None]) | (m[None, :] < m[:, None]) | (thr[None, :] > thr[:, None])))
        keep = ~dominated.any(axis=1)
        out = (c[keep], m[keep], thr[keep]) if keep.any() else ()
        object.__setattr__(prof, "_refill_points", out)
    return out or None


def _solve_node(room: tuple[int, int, int], items: list[tuple[bool, list[tuple[int, int, float]], int]]) -> list[int | None] | None:
    """The best choice of one option per item (``None``: left out, allowed unless the item is
    mandatory) within ``room`` (GPUs, cores, GB); items are ``(mandatory, options, gpus)``.
    ``None`` when the table would exceed :data:`MAX_CELLS` or no choice fits."""
    G, C, M = room
    sizes = [s for _, opts, _ in items for o in opts for s in o[:2]] + [C, M]
    uc = math.gcd(*[s for s in sizes[0::2]]) or 1
    um = math.gcd(*[s for s in sizes[1::2]]) or 1
    cc, mm = C // uc, M // um
    if (G + 1) * (cc + 1) * (mm + 1) > MAX_CELLS:
        return None
    tables = [np.zeros((G + 1, cc + 1, mm + 1))]  # tables[i]: the best of the first i items within each room
    for mandatory, opts, g in items:
        dp = tables[-1]
        new = np.full_like(dp, -np.inf) if mandatory else dp.copy()
        for c, m, v in opts:
            a, b = c // uc, m // um
            if g <= G and a <= cc and b <= mm:
                np.maximum(new[g:, a:, b:], dp[: G + 1 - g, : cc + 1 - a, : mm + 1 - b] + v, out=new[g:, a:, b:])
        tables.append(new)
    if not np.isfinite(tables[-1][G, cc, mm]):
        return None
    state = (G, cc, mm)
    choice: list[int | None] = [None] * len(items)
    for i in range(len(items) - 1, -1, -1):  # read the choice back, last item first
        target, before = tables[i + 1][state], tables[i]
        tol = 1e-9 * max(1.0, abs(target))
        mandatory, opts, g = items[i]
        if not mandatory and before[state] >= target - tol:
            continue
        for k, (c, m, v) in enumerate(opts):
            rest = (state[0] - g, state[1] - c // uc, state[2] - m // um)
            if min(rest) >= 0 and before[rest] + v >= target - tol:
                choice[i], state = k, rest
                break
        else:
            return None
    return choice


def node_refill(instance: Instance, schedule: Schedule, nodes: list[str] | None = None) -> Schedule:
    """``schedule`` with each node in turn (``nodes``, default: those with a GPU not held by a
    pinned job or a job spanning several nodes) re-solved as the module text says. The result is
    worth at least as much; check it with :func:`optsched.check_schedule` before use."""
    jobs = dict(schedule.jobs)
    fixed_gpus = dict.fromkeys((n.id for n in instance.nodes), 0)
    for jid, a in jobs.items():
        j = instance.job(jid)
        if j.pinned or len(a.nodes) > 1:
            for nid, k in a.nodes.items():
                fixed_gpus[nid] += k
    if nodes is None:
        nodes = [n.id for n in instance.nodes if n.gpus > fixed_gpus[n.id]]
    waiting = [j for j in instance.jobs if j.placement is None]
    classes: dict[tuple[Any, ...], list[Job]] = {}
    for j in waiting:
        speeds = tuple(sorted(j.gpu_speed.items())) if j.gpu_speed is not None else None
        classes.setdefault((j.profile, j.gpus, speeds, j.spread_factor, j.demand_throughput), []).append(j)
    ranked = [sorted(js, key=lambda j: -j.weight) for js in classes.values()]
    for nid in nodes:
        node = instance.node(nid)
        here = [(jid, a) for jid, a in jobs.items() if nid in a.nodes]
        alone = [(jid, a) for jid, a in here if len(a.nodes) == 1]
        spanning = [a for _, a in here if len(a.nodes) > 1]
        room = (node.gpus - sum(a.nodes[nid] for a in spanning), node.cpus - sum(a.nodes[nid] * a.cpus_per_gpu for a in spanning),
                node.mem_gb - sum(a.nodes[nid] * a.mem_per_gpu_gb for a in spanning))
        free = room[0] - sum(instance.job(jid).gpus for jid, _ in alone if instance.job(jid).pinned)
        if min(room) < 0 or free < 0:
            continue
        offered = [instance.job(jid) for jid, _ in alone]
        taken = set(jobs)
        for js in ranked:
            fits = [j for j in js if j.gpus <= free and j.id not in taken and (j.gpu_speed is None or node.gpu_type in j.gpu_speed)]
            offered += fits[: free // fits[0].gpus] if fits else []
        # pinned jobs keep their GPUs: the table's GPU axis counts only the others'
        items = [(j.pinned, _options(instance, j, node, room[1], room[2]), 0 if j.pinned else j.gpus) for j in offered]
        choice = _solve_node((free, room[1], room[2]), items)
        if choice is None:
            continue
        now = sum(assignment_value(instance, instance.job(jid), a) for jid, a in alone)
        new_value = sum(items[i][1][k][2] for i, k in enumerate(choice) if k is not None)
        if new_value <= now * (1 + 1e-9) + 1e-12:
            continue
        for jid, _ in alone:
            del jobs[jid]
        for j, k, (_, opts, _g) in zip(offered, choice, items, strict=True):
            if k is not None:
                c, m, _v = opts[k]
                jobs[j.id] = Assignment({nid: j.gpus}, c // j.gpus, m // j.gpus)
    return Schedule(schedule.instance, jobs)
