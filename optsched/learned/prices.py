"""Prices of a round's resources for the price-guided repair (:mod:`optsched.learned.repair`).

:func:`resource_prices`: Lagrange multipliers of each GPU type's GPUs, cores and memory in the
aggregate relaxation (every job picks its best (type, grid point) or waits, at ``value - price x
resources``), found by a cutting-plane method on the dual over the options of
:func:`option_table`. A gang that fills whole nodes is charged those nodes' *whole* cores and
memory (nobody else can use what it leaves there).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from ortools.linear_solver import pywraplp

from optsched.learned.features import RoundFeatures
from optsched.model import Instance

__all__ = ["OptionTable", "option_table", "reduced_profit", "resource_prices"]


@dataclass
class OptionTable:
    """Every (job, option, grid point) of a round, for pricing.

    Options are *virtual types* ``v``: ``v < T`` runs on GPU type ``v`` the usual way (a gang that
    fills whole nodes on the fewest nodes, charged those nodes' whole cores and memory; any other
    job charged what it uses), ``v = T + t`` (gangs of at least a node only) spreads the gang
    over more nodes of type ``t`` that it shares with other jobs: one more node's spread factor,
    charged per GPU. ``value`` (J, 2T, P): the job's worth (on the type's largest node shape, not
    moved if it runs on that type now, else with its restart cost; ``-inf``: not allowed or not
    holdable); ``gpus``, ``cpus``, ``mem`` (J, 2T, P): what it is charged; ``cap`` (3, T): the
    types' total GPUs, cores and memory; ``shape`` (3, T): the largest node of each type;
    ``whole`` (J, T): whole nodes a gang fills on the type.
    """

    value: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray
    mem: np.ndarray
    cap: np.ndarray
    shape: np.ndarray
    whole: np.ndarray

    @property
    def n_types(self) -> int:
        return self.cap.shape[1]


def _type_speed(feats: RoundFeatures, n_types: int) -> np.ndarray:
    """(J, T) speed of each job on each GPU type (0: not allowed)."""
    first = np.array([int(np.flatnonzero(feats.node_type == t)[0]) if (feats.node_type == t).any() else -1 for t in range(n_types)])
    out = np.zeros((feats.n_jobs, n_types))
    have = first >= 0
    out[:, have] = feats.speed[:, first[have]]
    return out


def _spread_bases(instance: Instance, feats: RoundFeatures, n_types: int) -> np.ndarray:
    """(J, T) each job's spread base on each GPU type index (:meth:`optsched.model.Instance.spread_base`)."""
    out = np.ones((feats.n_jobs, n_types))
    for t in range(n_types):
        on_t = np.flatnonzero(feats.node_type == t)
        if on_t.size:
            name = instance.nodes[int(on_t[0])].gpu_type
            out[:, t] = [instance.spread_base(name, int(gj)) for gj in feats.gpus]
    return out


def option_table(instance: Instance, feats: RoundFeatures, *, pack_eff: float = 1.0, spread: bool = False) -> OptionTable:
    """The :class:`OptionTable` of a round (vectorised; a few ms for 4,000 jobs). Cores and memory
    of jobs that share nodes count ``1 / pack_eff`` times (what packing them leaves unused).
    ``spread``: offer gangs the shared-spread options (``v >= T``). Off by default: priced that
    way, gangs took 99 % of the GPUs in 4+4 splits and the packing of the small jobs around them
    failed (1,024 x 4,000: 6.4 % from the LP bound instead of 2 %)."""
    T = int(feats.node_type.max()) + 1 if feats.n_nodes else 0
    nt = feats.node_type
    shape = np.zeros((3, T))
    cap = np.zeros((3, T))
    for r, arr in enumerate((feats.node_gpus, feats.node_cpus, feats.node_mem)):
        cap[r] = np.bincount(nt, weights=arr, minlength=T)
        np.maximum.at(shape[r], nt, arr)
    Gn, Cn, Mn = shape
    speed = _type_speed(feats, T)
    g = feats.gpus.astype(np.float64)
    sf = np.array([j.spread_factor for j in instance.jobs], dtype=np.float64)
    kbase = _spread_bases(instance, feats, T)
    whole = np.floor(g[:, None] / np.maximum(Gn, 1)[None, :])
    rem = g[:, None] - whole * Gn[None, :]
    k = whole + (rem > 0)
    # shared spread of a gang: at most G - 1 GPUs a node, so at least ceil(g / (G - 1)) nodes
    k_shared = np.ceil(g[:, None] / np.maximum(Gn - 1, 1)[None, :])
    per = np.minimum(g[:, None], Gn[None, :])  # GPUs on its fullest node
    pc = feats.point_c[:, None, :].astype(np.float64)
    pm = feats.point_m[:, None, :].astype(np.float64)
    ok = (feats.point_ok & feats.point_mask)[:, None, :] & (speed > 0)[:, :, None] & (g[:, None] <= cap[0][None, :])[:, :, None]
    ok_whole = ok & (per[:, :, None] * pc <= Cn[None, :, None]) & (per[:, :, None] * pm <= Mn[None, :, None])
    ok_shared = ok & (whole >= 1)[:, :, None] & (Gn > 1)[None, :, None] & spread
    moved = np.ones((feats.n_jobs, T))  # a running job keeps its type without a restart; elsewhere it pays it
    for j, job in enumerate(instance.jobs):
        if job.placement is not None and job.restart_s > 0:
            t0 = int(nt[instance.node_idx(next(iter(job.placement)))])
            keep = moved[j, t0]
            moved[j] = max(0.0, 1.0 - job.restart_s / instance.round.duration_s)
            moved[j, t0] = keep
    base = feats.point_value[:, None, :] * (speed * moved)[:, :, None]
    value = np.concatenate([
        np.where(ok_whole, base * (sf[:, None] ** np.maximum(k - kbase, 0))[:, :, None], -np.inf),
        np.where(ok_shared, base * (sf[:, None] ** np.maximum(k_shared - kbase, 0))[:, :, None], -np.inf),
    ], axis=1)
    gpus = np.broadcast_to(g[:, None, None], value.shape)
    cpus = np.concatenate([whole[:, :, None] * Cn[None, :, None] + rem[:, :, None] * pc / pack_eff,
                           np.broadcast_to(g[:, None, None] * pc / pack_eff, ok.shape)], axis=1)
    mem = np.concatenate([whole[:, :, None] * Mn[None, :, None] + rem[:, :, None] * pm / pack_eff,
                          np.broadcast_to(g[:, None, None] * pm / pack_eff, ok.shape)], axis=1)
    return OptionTable(value, gpus, cpus, mem, cap, shape, whole)


def reduced_profit(table: OptionTable, lam: np.ndarray) -> np.ndarray:
    lv = np.concatenate([lam, lam], axis=1)  # prices per virtual type
    return table.value - (lv[0][None, :, None] * table.gpus + lv[1][None, :, None] * table.cpus + lv[2][None, :, None] * table.mem)


def _dual(table: OptionTable, lam: np.ndarray) -> tuple[float, np.ndarray]:
    """Dual value and the resources the jobs' best options use at prices ``lam``."""
    red = reduced_profit(table, lam)
    J = red.shape[0]
    if J == 0:
        return float((lam * table.cap).sum()), np.zeros_like(table.cap)
    flat = red.reshape(J, -1)
    best = flat.argmax(axis=1)
    bv = flat[np.arange(J), best]
    take = bv > 0
    t = (best // red.shape[2]) % table.n_types
    use = np.stack([
        np.bincount(t[take], weights=arr.reshape(J, -1)[np.arange(J), best][take], minlength=table.n_types)
        for arr in (table.gpus, table.cpus, table.mem)
    ])
    return float((lam * table.cap).sum() + bv[take].sum()), use


#: wall seconds the cutting-plane LPs of :func:`resource_prices` get in all (they converge in tens of
#: ms on the library's large rounds; GLOP has been seen to stall on a degenerate cut set)
PRICES_TIME_S = 1.0


def resource_prices(table: OptionTable, *, iters: int = 40, tol: float = 1e-4,
                    time_limit: float = PRICES_TIME_S) -> tuple[np.ndarray, float]:
    """``(prices (3, T), dual value)``: the Lagrangian dual of the aggregate relaxation minimised by
    a cutting-plane method with a trust region (Kelley's, in prices x capacity; each step one
    small LP over the cuts so far, solved incrementally by GLOP; the region halves when a step
    does not improve). It converges in 5-20 steps on the library's large rounds (tens of ms),
    where plain subgradient steps needed hundreds. The dual value bounds the priced model, which
    charges gangs whole nodes: a guide here, not a proven bound on the round. The LPs share
    ``time_limit`` wall seconds; when it runs out the best prices so far are returned."""
    cap = table.cap
    safe = np.maximum(cap, 1e-9)
    K = cap.size
    valid = cap.ravel() > 0
    x = np.zeros(K)
    if table.value.size:
        top = np.where(np.isfinite(table.value), table.value, 0.0).max(axis=(1, 2))
        x.reshape(cap.shape)[0] = float(np.median(top / table.gpus[:, 0, 0])) * cap[0]
    delta = max(float(x.max()), 1.0)
    lp = pywraplp.Solver.CreateSolver("GLOP")
    inf = lp.infinity()
    xs = [lp.NumVar(0.0, 0.0, "") for _ in range(K)]
    z = lp.NumVar(-inf, inf, "z")
    lp.Minimize(z)
    best_d, best_x = np.inf, x.copy()
    until = time.perf_counter() + time_limit
    for _ in range(iters):
        d, use = _dual(table, x.reshape(cap.shape) / safe)
        sub = np.where(cap > 0, 1.0 - use / safe, 0.0).ravel()  # subgradient in prices x capacity
        cut = lp.Constraint(-inf, float(sub @ x) - d)  # z >= d + sub . (y - x)
        for i in np.flatnonzero(sub):
            cut.SetCoefficient(xs[i], float(sub[i]))
        cut.SetCoefficient(z, -1.0)
        if d < best_d - 1e-9:
            best_d, best_x = d, x.copy()
        else:
            delta *= 0.5
        for i in range(K):
            lo, hi = (max(0.0, best_x[i] - delta), best_x[i] + delta) if valid[i] else (0.0, 0.0)
            xs[i].SetBounds(lo, hi)
        left = until - time.perf_counter()
        if left <= 0:
            break
        lp.SetTimeLimit(max(1, int(left * 1000)))
        if lp.Solve() != pywraplp.Solver.OPTIMAL or best_d - z.solution_value() <= tol * max(abs(best_d), 1.0):
            break
        x = np.array([v.solution_value() for v in xs])
    return best_x.reshape(cap.shape) / safe, best_d
