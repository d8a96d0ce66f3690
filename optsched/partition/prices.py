"""Price coordination between passes: move the jobs a part left out to parts where they pay.

After a pass, each part reports its schedule and the prices of its GPUs, cores and memory per
GPU type (the Lagrange multipliers of its aggregate relaxation: high where the part's offered
jobs compete for scarce room, zero where room is left). A job its part left out is offered,
in the next pass, to the part where its *reduced profit* is highest,

    r(j, q) = max over allowed types t and grid points p of
              worth(j, t, p) - lambda_q[t] . (g, g c_p, g m_p),

among the parts whose unused room of type t (GPUs, cores and memory left by their schedules,
summed over nodes) still holds it at p, if that profit is positive; the room it takes there is
booked, so one part's room is not promised twice. This is the decomposition's coordination:
jobs flow from parts whose prices are high to parts whose prices are low, as the prices of
the whole round's relaxation would have them. ``mode="leftover"`` (for comparison) ignores the
prices: the job goes to the part with room where it is worth most.

Moving is a move for a running job (it runs in its own part now): its restart is folded into
its weight in the new part (:func:`moved_in`), and a job whose restart costs the whole round or
more, or a pinned job, never moves.
"""

from __future__ import annotations

from dataclasses import replace

from optsched.capacity import node_usage
from optsched.errors import InputError
from optsched.model import Instance, Job
from optsched.schedule import Schedule

__all__ = ["MODES", "movable", "moved_in", "rebalance"]

#: how jobs are moved between passes
MODES = ("prices", "leftover")

#: one part's prices: per GPU type, the price of a GPU, a core and a GB
PartPrices = dict[str, tuple[float, float, float]]


def moved_in(instance: Instance, job: Job) -> Job:
    """``job`` as offered to a part that does not hold its placement: any placement there is a
    move, so the restart factor goes into its weight (the worth it then has in the whole round)."""
    if job.placement is None:
        return job
    factor = 1.0 - job.restart_s / instance.round.duration_s
    return replace(job, weight=job.weight * factor, placement=None, restart_s=0.0)


def movable(instance: Instance, job: Job) -> bool:
    """Whether ``job`` may join another part: not pinned, and waiting or worth restarting."""
    return not job.pinned and (job.placement is None or job.restart_s < instance.round.duration_s)


def _room(instance: Instance, nodes: tuple[str, ...], schedule: Schedule) -> dict[str, list[int]]:
    """Per GPU type: the GPUs, cores and GB the schedule leaves free on ``nodes``."""
    free: dict[str, list[int]] = {}
    used = node_usage(schedule)
    for nid in nodes:
        node = instance.node(nid)
        u = used[nid]
        f = free.setdefault(node.gpu_type, [0, 0, 0])
        f[0] += node.gpus - u[0]
        f[1] += node.cpus - u[1]
        f[2] += node.mem_gb - u[2]
    return free


def rebalance(instance: Instance, nodes: tuple[tuple[str, ...], ...], schedules: list[Schedule], offered: list[list[str]],
              prices: list[PartPrices] | None, *, mode: str = "prices") -> tuple[list[list[str]], list[tuple[str, int, int, float]]]:
    """The jobs each part is offered in the next pass, and the moves made: ``(job, from, to, profit)``.

    ``offered[q]`` are the jobs part ``q`` was offered, ``schedules[q]`` its answer (part of the
    round: node and job ids of the whole round), ``prices[q]`` its prices (``mode="prices"``).
    Jobs are considered by worth per GPU at their best point, highest first (ties in round order).
    """
    if mode not in MODES:
        raise InputError("rebalance", mode, f"unknown rebalancing; known: {list(MODES)}")
    if mode == "prices" and (prices is None or len(prices) != len(nodes)):
        raise InputError("prices", prices, "rebalancing by prices needs each part's prices")
    parts = len(nodes)
    room = [_room(instance, nodes[q], schedules[q]) for q in range(parts)]
    out = [list(o) for o in offered]
    left: list[tuple[float, int, str, int]] = []
    for q in range(parts):
        for j in offered[q]:
            job = instance.job(j)
            if j not in schedules[q].jobs and movable(instance, job):
                top = max(thr for _c, _m, thr in job.profile.points()) / job.demand_throughput * job.weight / job.gpus
                left.append((-top, instance.job_idx(j), j, q))
    left.sort()
    moves: list[tuple[str, int, int, float]] = []
    duration = instance.round.duration_s
    for _key, _i, j, home in left:
        job = instance.job(j)
        factor = 1.0 - job.restart_s / duration if job.placement is not None else 1.0
        g = job.gpus
        best: tuple[float, int, str, int, int] | None = None
        for q in range(parts):
            if q == home:
                continue
            for t, free in room[q].items():
                speed = job.speed(t)
                if speed is None or free[0] < g:
                    continue
                lam = prices[q].get(t, (0.0, 0.0, 0.0)) if mode == "prices" and prices is not None else (0.0, 0.0, 0.0)
                for c, m, thr in job.profile.points():
                    if g * c > free[1] or g * m > free[2]:
                        continue
                    worth = job.weight * speed * thr / job.demand_throughput * factor
                    r = worth - (lam[0] * g + lam[1] * g * c + lam[2] * g * m)
                    # ties: the part with more free GPUs of the type, then the lower part index
                    key = (r, free[0], -q)
                    if r > 1e-12 and (best is None or key > (best[0], room[best[1]][best[2]][0], -best[1])):
                        best = (r, q, t, c, m)
        if best is None:
            continue
        r, q, t, c, m = best
        f = room[q][t]
        f[0] -= g
        f[1] -= g * c
        f[2] -= g * m
        out[home].remove(j)
        out[q].append(j)
        moves.append((j, home, q, r))
    return out, moves
