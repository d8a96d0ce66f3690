"""Best response: improve a feasible schedule one job at a time.

Each job in turn (heaviest first) is taken out of the schedule and put back where it is worth
most given everybody else: on each GPU type it may use and at each grid point, the nodes that
hold most of its GPUs at that point (``min(free GPUs, free cores // c, free GB // m)``) first, as
few of them as its GPUs need, so it pays the least spread; a running job may also stay where it
runs (no restart). A job is moved only when that is worth strictly more, so the schedule's worth
never falls. Pinned jobs stay where they run. Used by :mod:`optsched.incremental` on carried-over
schedules that are not already proven within the gap target.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from optsched.model import Instance, Job, fair_floor
from optsched.schedule import Assignment, Schedule
from optsched.values import assignment_value, job_value

__all__ = ["best_response"]


def _free(instance: Instance, jobs: Iterable[tuple[str, Assignment]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g = np.array([n.gpus for n in instance.nodes], dtype=np.int64)
    c = np.array([n.cpus for n in instance.nodes], dtype=np.int64)
    m = np.array([n.mem_gb for n in instance.nodes], dtype=np.int64)
    for _, a in jobs:
        _take(instance, a, g, c, m, -1)
    return g, c, m


def _take(instance: Instance, a: Assignment, g: np.ndarray, c: np.ndarray, m: np.ndarray, sign: int) -> None:
    for nid, k in a.nodes.items():
        i = instance.node_idx(nid)
        g[i] += sign * k
        c[i] += sign * k * a.cpus_per_gpu
        m[i] += sign * k * a.mem_per_gpu_gb


def _best_place(instance: Instance, job: Job, free: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[float, Assignment | None]:
    """The most valuable assignment of ``job`` into the free room (see the module text)."""
    g, c, m = free
    prof = job.profile
    cg = np.asarray(prof.cpus_per_gpu, dtype=np.int64)
    mg = np.asarray(prof.mem_per_gpu_gb, dtype=np.int64)
    best_v, best_a = 0.0, None
    speeds = job.gpu_speed if job.gpu_speed is not None else dict.fromkeys(instance.gpu_types, 1.0)
    for t in speeds:
        idx = np.array([i for i, n in enumerate(instance.nodes) if n.gpu_type == t], dtype=np.int64)
        if not idx.size or g[idx].sum() < job.gpus:
            continue
        gi, ci, mi = np.maximum(g[idx], 0), np.maximum(c[idx], 0), np.maximum(m[idx], 0)
        by_c = np.minimum(gi[None, :], np.where(cg[:, None] > 0, ci[None, :] // np.maximum(cg[:, None], 1), gi[None, :]))
        by_m = np.minimum(gi[None, :], np.where(mg[:, None] > 0, mi[None, :] // np.maximum(mg[:, None], 1), gi[None, :]))
        q = np.minimum(by_c[:, None, :], by_m[None, :, :])
        order = np.argsort(-q, axis=2, kind="stable")
        cum = np.take_along_axis(q, order, axis=2).cumsum(axis=2)
        fits = cum[:, :, -1] >= job.gpus
        if not fits.any():
            continue
        k = (cum < job.gpus).sum(axis=2) + 1
        thr = np.asarray(prof.throughput, dtype=np.float64)
        thr = np.where(thr >= fair_floor(job, instance.round.fair), thr, 0.0)
        score = np.where(fits, thr * job.spread_factor ** np.maximum(0, k - instance.spread_base(t, job.gpus)), -1.0)
        a, b = np.unravel_index(int(np.argmax(score)), score.shape)
        if score[a, b] <= 0:
            continue
        nodes: dict[str, int] = {}
        left = job.gpus
        for pos in order[a, b, : int(k[a, b])]:
            take = int(min(q[a, b, pos], left))
            if take:
                nodes[instance.nodes[int(idx[pos])].id] = take
                left -= take
        if left:
            continue
        a_new = Assignment(nodes, int(cg[a]), int(mg[b]))
        v = assignment_value(instance, job, a_new)
        if v > best_v:
            best_v, best_a = v, a_new
    if job.placement:  # staying where it runs, at the best point the room there allows
        home = {instance.node_idx(n): k for n, k in job.placement.items()}
        t = instance.nodes[next(iter(home))].gpu_type
        if job.speed(t) is not None and all(g[i] >= k for i, k in home.items()):
            for c_pt, m_pt, _ in prof.allowed(fair_floor(job, instance.round.fair)):
                if all(c[i] >= k * c_pt and m[i] >= k * m_pt for i, k in home.items()):
                    v = job_value(instance, job, t, c_pt, m_pt, len(home), False)
                    if v > best_v:
                        best_v, best_a = v, Assignment(dict(job.placement), c_pt, m_pt)
    return best_v, best_a


def best_response(instance: Instance, schedule: Schedule, rounds: int = 1) -> Schedule:
    """``schedule`` improved by ``rounds`` passes of single-job best responses (module text);
    never worth less. ``schedule`` must be feasible; so is the answer for the contract's rules
    (round policies such as quotas or move budgets are the caller's to check)."""
    jobs = dict(schedule.jobs)
    free = _free(instance, jobs.items())
    order = sorted(instance.jobs, key=lambda j: (-j.weight, j.id))
    for _ in range(rounds):
        changed = False
        for job in order:
            if job.pinned or job.elastic is not None:
                continue
            cur = jobs.get(job.id)
            cur_v = 0.0 if cur is None else assignment_value(instance, job, cur)
            if cur is not None:
                _take(instance, cur, *free, +1)
            v, a = _best_place(instance, job, free)
            if a is not None and v > cur_v * (1 + 1e-9) + 1e-12:
                jobs[job.id] = a
                _take(instance, a, *free, -1)
                changed = True
            elif cur is not None:
                _take(instance, cur, *free, -1)
        if not changed:
            break
    return Schedule(schedule.instance, jobs)
