"""Exchanges of two jobs' nodes on a placement state, that never lower its worth (:func:`swap_nodes`;
part of :func:`optsched.learned.moves.polish` and of the repair's final pass)."""

from __future__ import annotations

import time

import numpy as np

from optsched.learned.decode import PlacementState, move_multiplier, place_job_on
from optsched.learned.features import RoundFeatures
from optsched.model import Instance

__all__ = ["SWAP_CELLS", "swap_nodes"]

#: :func:`swap_nodes` runs on rounds of at most this many nodes x jobs (pairs of jobs are compared)
SWAP_CELLS = 1_024


def _best_on(feats: RoundFeatures, j: int, g: int, c: int, m: int, mult: float) -> tuple[float, int]:
    """Job ``j``'s best worth and grid point with ``g`` GPUs in ``c`` cores and ``m`` GB (``-inf``, -1: none fits)."""
    ok = feats.point_ok[j] & feats.point_mask[j] & (feats.point_c[j] * g <= c) & (feats.point_m[j] * g <= m)
    if not ok.any():
        return -np.inf, -1
    v = np.where(ok, feats.point_value[j], -np.inf)
    p = int(np.argmax(v))
    return float(v[p]) * mult, p


def swap_nodes(instance: Instance, feats: RoundFeatures, st: PlacementState, *, deadline: float | None = None, rounds: int = 50) -> int:
    """Exchange the nodes of two single-node jobs of equal GPU counts, each at its best grid point
    in the room the other leaves, where the two are worth more together: a job placed on a slow
    GPU type while a less valuable one holds a fast node, or two jobs on nodes whose shapes suit
    the other better. :func:`relocate` moves one job where it fits as things are and cannot make
    such an exchange. Best pair first, repeated while one gains (at most ``rounds`` times); pairs
    whose best worth on each other's node, room aside, cannot gain are not looked at.
    Returns the exchanges made."""
    jobs = np.array([j for j, w in st.where.items() if len(w) == 1], dtype=np.int64)
    if jobs.size < 2:
        return 0
    g = feats.gpus[jobs].astype(np.int64)
    ok = feats.point_ok[jobs] & feats.point_mask[jobs]
    top = np.where(ok, feats.point_value[jobs], 0.0).max(axis=1)
    # each job's worth per unit of point value on each node, as a single-node job there
    mult = np.array([[move_multiplier(instance, feats, int(j), {n: int(k)}) if feats.speed[j, n] > 0 else 0.0 for n in range(feats.n_nodes)]
                     for j, k in zip(jobs, g, strict=True)])
    bound = top[:, None] * mult
    done = 0
    for _ in range(rounds):
        if deadline is not None and time.perf_counter() > deadline:
            break
        node = np.array([next(iter(st.where[int(j)])) for j in jobs], dtype=np.int64)
        cur = np.array([feats.point_value[j, st.point[int(j)]] for j in jobs]) * mult[np.arange(jobs.size), node]
        # pairs (a, b), a < b, on different nodes with equal GPUs, that could gain at all
        est = bound[:, node] + bound[:, node].T - cur[:, None] - cur[None, :]
        allowed = mult[:, node] > 0  # [a, b]: job a may run on b's node's GPU type
        cand = np.triu((node[:, None] != node[None, :]) & (g[:, None] == g[None, :]) & allowed & allowed.T
                       & (est > 1e-9 * max(1.0, float(cur.sum()))), 1)
        ia, ib = np.nonzero(cand)
        if ia.size == 0:
            break
        order = np.argsort(-est[ia, ib], kind="stable")
        best: tuple[float, int, int, int, int] | None = None
        for a, b in zip(ia[order].tolist(), ib[order].tolist(), strict=True):
            if best is not None and est[a, b] <= best[0]:
                break  # no later pair can gain more than the best found
            ja, jb, na, nb, k = int(jobs[a]), int(jobs[b]), int(node[a]), int(node[b]), int(g[a])
            ca = int(st.free_c[na]) + int(feats.point_c[ja, st.point[ja]]) * k
            ma = int(st.free_m[na]) + int(feats.point_m[ja, st.point[ja]]) * k
            cb = int(st.free_c[nb]) + int(feats.point_c[jb, st.point[jb]]) * k
            mb = int(st.free_m[nb]) + int(feats.point_m[jb, st.point[jb]]) * k
            va, pa = _best_on(feats, ja, k, cb, mb, float(mult[a, nb]))
            vb, pb = _best_on(feats, jb, k, ca, ma, float(mult[b, na]))
            gain = va + vb - float(cur[a] + cur[b])
            if pa >= 0 and pb >= 0 and gain > 1e-9 * max(1.0, float(cur[a] + cur[b])) and (best is None or gain > best[0]):
                best = (gain, a, b, pa, pb)
        if best is None:
            break
        _, a, b, pa, pb = best
        ja, jb, na, nb, k = int(jobs[a]), int(jobs[b]), int(node[a]), int(node[b]), int(g[a])
        for j, n in ((ja, na), (jb, nb)):
            st.free_g[n] += k
            st.free_c[n] += int(feats.point_c[j, st.point[j]]) * k
            st.free_m[n] += int(feats.point_m[j, st.point[j]]) * k
            del st.where[j]
        place_job_on(st, feats, ja, {nb: k}, pa)
        place_job_on(st, feats, jb, {na: k}, pb)
        done += 1
    return done
