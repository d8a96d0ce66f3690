"""Price-guided repair of a decoded schedule: the ``+ repair`` of "learned + repair" on large rounds.

The policy decides well *which* small jobs run and at which grid point (on the 1,024 x 4,000
library rounds it gives every 1-, 2- and 4-GPU job its best point, as the LP relaxation does),
but, trained on rounds of at most 6 nodes, it packs them over too many nodes: their cores and
memory run out with GPUs still free, and the 8- and 16-GPU gangs find no whole node (24-30 % of
the GPUs idle). The repair rebuilds the round around prices:

1. **Prices** (:func:`resource_prices`): Lagrange multipliers of each GPU type's GPUs, cores and
   memory in the aggregate relaxation (every job picks its best (type, grid point) or waits, at
   ``value - price x resources``), found by a cutting-plane method on the dual. A gang
   that fills whole nodes is charged those nodes' *whole* cores and memory (nobody else can use
   what it leaves there), so the prices see that a node given to a gang is a node taken from
   the small jobs, which the plain LP relaxation does not.
2. **Selection**: jobs whose best reduced profit is positive, cut to each type's capacity.
3. **Packing** (:func:`price_repack`): running jobs stay where they are (no restart), except that
   on a node they fill, some may leave when the node's best mix with leavers (their reduced
   profit elsewhere, restart paid, plus the priced room they free) beats its best mix with all
   staying (:func:`node_knapsack`); leavers join the selection. Gangs that
   fill whole nodes take whole free nodes at the best point one node holds, and the other jobs
   fill the remaining nodes one node at a time, each time the job whose target cores and memory
   best match what the node has left relative to the pool's average need per GPU (so nodes end
   with a mix that uses GPUs, cores and memory together). Targets are the policy's grid points
   where given (else the priced best), lowered by a common price until the pool fits in
   ``fill_to`` of the free cores and memory; a job that fits nowhere at its target takes the
   best point that fits.
4. **Point upgrades** (:func:`upgrade_points`): per node, repeatedly, the upgrade of one of its
   jobs with the largest value gain per unit of the node's cores and memory; then the decoder's
   leftover pass.
5. Anything still waiting is placed where it fits at its leanest point.

:func:`improve` runs this from a decoded state and keeps whichever of the two schedules is worth
more, so it never lowers the objective; then every node's single-node jobs get the node's best
mix of grid points (:func:`repoint_nodes`, an exact small knapsack per node), waiting gangs are
split over nodes they share with small jobs where that pays for the co-located jobs' lower points
(:func:`squeeze_gangs`), jobs move to nodes where they are worth more (:func:`relocate`) and to
faster GPU types whose nodes' jobs make room for them (:func:`move_to_faster`); the nodes these
touched get their best mix again. Every placement checks capacities: the result is
feasible by construction (tests check it with the independent checker). All steps are numpy
over jobs, nodes and grid points, with O(jobs) Python steps: 0.39 s on the homogeneous and
0.78 s on the three-type 1,024-node x 4,000-job library round (measured 25 Nov 2026, quiet
machine; docs/results.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from ortools.linear_solver import pywraplp

from optsched.learned.decode import _multiplier, _place_on, _repoint, _split, _State, redistribute_leftover
from optsched.learned.features import RoundFeatures
from optsched.model import Instance
from optsched.schedule import Schedule

__all__ = [
    "CONFIGS", "RELOCATE_CELLS", "OptionTable", "improve", "move_to_faster", "node_knapsack", "option_table", "polish", "price_repack", "price_schedule", "relocate",
    "repoint_nodes", "resource_prices", "squeeze_gangs", "squeeze_in", "state_value", "upgrade_points",
]


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


def _reduced(table: OptionTable, lam: np.ndarray) -> np.ndarray:
    lv = np.concatenate([lam, lam], axis=1)  # prices per virtual type
    return table.value - (lv[0][None, :, None] * table.gpus + lv[1][None, :, None] * table.cpus + lv[2][None, :, None] * table.mem)


def _dual(table: OptionTable, lam: np.ndarray) -> tuple[float, np.ndarray]:
    """Dual value and the resources the jobs' best options use at prices ``lam``."""
    red = _reduced(table, lam)
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


def resource_prices(table: OptionTable, *, iters: int = 40, tol: float = 1e-4) -> tuple[np.ndarray, float]:
    """``(prices (3, T), dual value)``: the Lagrangian dual of the aggregate relaxation minimised by
    a cutting-plane method with a trust region (Kelley's, in prices x capacity; each step one
    small LP over the cuts so far, solved incrementally by GLOP; the region halves when a step
    does not improve). It converges in 5-20 steps on the library's large rounds (tens of ms),
    where plain subgradient steps needed hundreds. The dual value bounds the priced model, which
    charges gangs whole nodes: a guide here, not a proven bound on the round."""
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
        if lp.Solve() != pywraplp.Solver.OPTIMAL or best_d - z.solution_value() <= tol * max(abs(best_d), 1.0):
            break
        x = np.array([v.solution_value() for v in xs])
    return best_x.reshape(cap.shape) / safe, best_d


# --- packing ------------------------------------------------------------------------------------


def _place_first_fit(st: _State, feats: RoundFeatures, j: int, nodes: dict[int, int], points: np.ndarray) -> bool:
    """Place job ``j`` on ``nodes`` ({node: GPUs}) at the first of ``points`` they have room for;
    whether it was placed."""
    for p in points:
        p = int(p)
        c, m = int(feats.point_c[j, p]), int(feats.point_m[j, p])
        if all(st.free_g[n] >= k and st.free_c[n] >= c * k and st.free_m[n] >= m * k for n, k in nodes.items()):
            _place_on(st, feats, j, nodes, p)
            return True
    return False


def _put(instance: Instance, feats: RoundFeatures, st: _State, j: int, allowed: np.ndarray, points: np.ndarray, *,
         balance: bool) -> list[int] | None:
    """Place job ``j`` on one allowed node (best fit, or most balanced use with ``balance``) at the
    first of ``points`` that fits, else split a gang over nodes of one type; the nodes used, or ``None``."""
    g = int(feats.gpus[j])
    for p in points:
        p = int(p)
        c, m = int(feats.point_c[j, p]), int(feats.point_m[j, p])
        cand = np.flatnonzero(allowed & (st.free_g >= g) & (st.free_c >= c * g) & (st.free_m >= m * g))
        if cand.size:
            if balance:
                ug = 1 - (st.free_g[cand] - g) / np.maximum(feats.node_gpus[cand], 1)
                uc = 1 - (st.free_c[cand] - c * g) / np.maximum(feats.node_cpus[cand], 1)
                um = 1 - (st.free_m[cand] - m * g) / np.maximum(feats.node_mem[cand], 1)
                n = int(cand[np.argmin(np.maximum(np.maximum(ug, uc), um) - np.minimum(np.minimum(ug, uc), um))])
            else:
                n = int(cand[np.lexsort((st.free_m[cand], st.free_c[cand], st.free_g[cand] - g))[0]])
            _place_on(st, feats, j, {n: g}, p)
            return [n]
        if g > 1:
            types = np.unique(feats.node_type[allowed])
            sp = _split(instance, j, g, np.array([p]), np.zeros(1), feats, allowed, np.zeros(feats.n_nodes), st, types)
            if sp is not None:
                _place_on(st, feats, j, sp[0], p)
                return list(sp[0])
    return None


def _fit_pool(feats: RoundFeatures, jobs: np.ndarray, value: np.ndarray, targets: np.ndarray, free_c: float, free_m: float,
              fill_to: float) -> np.ndarray:
    """The pool's targets, lowered when they need more than ``fill_to`` of the free cores or memory:
    each job then takes ``argmax value - kc x cores / free cores - km x memory / free memory``, with
    the smallest ``kc`` and ``km`` (bisection on each resource in turn) at which the pool fits."""
    if jobs.size == 0:
        return targets
    g = feats.gpus[jobs][:, None].astype(np.float64)
    cap = np.array([fill_to * free_c, fill_to * free_m])
    use = np.stack([feats.point_c[jobs] * g, feats.point_m[jobs] * g])  # (2, pool, P)
    rows = np.arange(jobs.size)
    allowed = np.isfinite(value)
    load = use / np.maximum(cap, 1.0)[:, None, None]

    def over(p: np.ndarray) -> np.ndarray:
        return use[:, rows, p].sum(axis=1) > cap

    if not over(targets).any():
        return targets
    k = np.zeros(2)

    def at(kk: np.ndarray) -> np.ndarray:
        return np.argmax(np.where(allowed, value - kk[0] * load[0] - kk[1] * load[1], -np.inf), axis=1)

    top = float(np.where(allowed, value, 0.0).sum()) + 1.0  # a price at which every job takes its leanest point
    for _ in range(3):
        p = at(k)
        if not over(p).any():
            return p
        for r in np.flatnonzero(over(p)):
            lo, hi = k[r], max(2 * k[r], top)
            for _ in range(30):
                k[r] = (lo + hi) / 2
                if over(at(k))[r]:
                    lo = k[r]
                else:
                    hi = k[r]
            k[r] = hi
    return at(k)


def _fill_nodes(feats: RoundFeatures, st: _State, jobs: np.ndarray, targets: np.ndarray, value: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Fill ``nodes`` one at a time (fullest first) from the pool ``jobs`` (single-node placements).

    Each step takes, among the jobs that fit at their target, the one whose target cores and
    memory leave the node closest to ``(GPUs left) x (the pool's average need per GPU)`` (most
    valuable first among equals); when none fits at its target, the most valuable job at the
    best point that fits. Jobs are grouped by (GPUs, target cores, target memory), so a step
    scans the groups, not the jobs. Filling node by node (rather than all nodes a job at a time,
    which was tried: 3.8 % instead of 2.3 % from the LP bound at 1,024 x 4,000) leaves the last
    nodes empty when the pool runs out, for the gangs still waiting. Returns the jobs left over."""
    if jobs.size == 0 or nodes.size == 0:
        return jobs
    g = feats.gpus[jobs].astype(np.int64)
    c = feats.point_c[jobs, targets] * g
    m = feats.point_m[jobs, targets] * g
    best_v = value[np.arange(jobs.size), targets]
    classes, inv = np.unique(np.stack([g, c, m], axis=1), axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    cg, cc, cm = classes[:, 0], classes[:, 1], classes[:, 2]
    order = np.lexsort((-best_v, inv))  # by class, most valuable first
    start = np.searchsorted(inv[order], np.arange(len(classes)))
    taken = np.zeros(len(classes), dtype=np.int64)
    count = np.bincount(inv, minlength=len(classes)).astype(np.int64)
    alive = np.ones(jobs.size, dtype=bool)
    pc_all = pm_all = None
    finite = np.isfinite(value)
    tot_g, tot_c, tot_m = int(g.sum()), int(c.sum()), int(m.sum())
    for n in nodes[np.argsort(st.free_g[nodes], kind="stable")]:
        n = int(n)
        C0, M0 = max(int(feats.node_cpus[n]), 1), max(int(feats.node_mem[n]), 1)
        while st.free_g[n] > 0 and alive.any():
            fg, fc, fm = int(st.free_g[n]), int(st.free_c[n]), int(st.free_m[n])
            ok = (count > 0) & (cg <= fg) & (cc <= fc) & (cm <= fm)
            k = -1
            if ok.any():
                rg = fg - cg
                score = np.abs((fc - cc) - rg * (tot_c / max(tot_g, 1))) / C0 + np.abs((fm - cm) - rg * (tot_m / max(tot_g, 1))) / M0
                k = int(np.argmin(np.where(ok, score, np.inf)))
            if k >= 0:
                i = int(order[start[k] + taken[k]])
                p = int(targets[i])
            else:
                if pc_all is None:
                    pc_all, pm_all = feats.point_c[jobs] * g[:, None], feats.point_m[jobs] * g[:, None]
                fit = (alive & (g <= fg))[:, None] & (pc_all <= fc) & (pm_all <= fm) & finite
                if not fit.any():
                    break
                i, p = divmod(int(np.argmax(np.where(fit, value, -np.inf))), value.shape[1])
                k = int(inv[i])  # take it out of its class (classes are consumed in order)
                rest = order[start[k] + taken[k]:start[k] + taken[k] + count[k]]
                at = int(np.flatnonzero(rest == i)[0])
                order[start[k] + taken[k]:start[k] + taken[k] + at + 1] = np.r_[i, rest[:at]]
            taken[k] += 1  # job i leaves its class and the pool
            count[k] -= 1
            tot_g -= int(g[i])
            tot_c -= int(c[i])
            tot_m -= int(m[i])
            alive[i] = False
            _place_on(st, feats, int(jobs[i]), {n: int(g[i])}, p)
    return jobs[alive]


def _spread(feats: RoundFeatures, st: _State, j: int, allowed: np.ndarray, points: np.ndarray, avoid: np.ndarray) -> list[int] | None:
    """Spread gang ``j`` evenly over the fewest nodes that it can share (at most ``G - 1`` GPUs on
    each), those with the most free GPUs first, at the first of ``points`` that fits."""
    g = int(feats.gpus[j])
    for p in points:
        p = int(p)
        c, m = int(feats.point_c[j, p]), int(feats.point_m[j, p])
        G = int(feats.node_gpus[allowed].max()) if allowed.any() else 0
        if G < 2:
            return None
        k = -(-g // (G - 1))
        h = -(-g // k)
        cand = np.flatnonzero(allowed & ~avoid & (st.free_g >= h) & (st.free_c >= c * h) & (st.free_m >= m * h))
        if cand.size < k:
            continue
        pick = cand[np.lexsort((-st.free_m[cand], -st.free_g[cand]))[:k]]
        nodes = {int(n): h for n in pick[:-1]}
        nodes[int(pick[-1])] = g - h * (k - 1)
        _place_on(st, feats, j, nodes, p)
        return list(nodes)
    return None


def _evict_crowded(instance: Instance, feats: RoundFeatures, st: _State, table: OptionTable, lam: np.ndarray, red: np.ndarray,
                   sel: np.ndarray, vb: np.ndarray, pb: np.ndarray, tb: np.ndarray, profit: np.ndarray) -> int:
    """On nodes whose GPUs the staying running jobs fill, let some of them leave (restart paid)
    when that is worth more at prices ``lam``: per node, the best mix of its single-node running
    jobs with all staying (worth at their points) against the best with leavers (:func:`node_knapsack`
    over worth less priced cores and memory for stayers, each leaver's best reduced profit elsewhere
    for leavers, plus the priced room they free). Leavers leave the node and join the selection
    at their best moved option (updating ``sel``, ``vb``, ``pb``, ``tb``, ``profit`` in place).
    Returns the number of leavers."""
    T = table.n_types
    P = feats.point_c.shape[1]
    share = np.array([job.restart_s / instance.round.duration_s if job.placement is not None else 0.0 for job in instance.jobs])
    residents: dict[int, list[int]] = {}
    for j, w in st.where.items():
        if len(w) == 1 and instance.jobs[j].placement is not None:
            residents.setdefault(next(iter(w)), []).append(j)
    ok_pts = feats.point_ok & feats.point_mask
    left = 0
    for n, jobs in residents.items():
        if st.free_g[n] > 0 or len(jobs) < 2:
            continue
        t0 = int(feats.node_type[n])
        lg, lc, lm = lam[0, t0], lam[1, t0], lam[2, t0]
        pts = [np.flatnonzero(ok_pts[j]) for j in jobs]
        g = np.array([int(feats.gpus[j]) for j in jobs])
        mult = [_multiplier(instance, feats, j, st.where[j]) for j in jobs]
        cap_c = int(st.free_c[n]) + sum(int(feats.point_c[j, st.point[j]]) * k for j, k in zip(jobs, g, strict=True))
        cap_m = int(st.free_m[n]) + sum(int(feats.point_m[j, st.point[j]]) * k for j, k in zip(jobs, g, strict=True))
        vals = [feats.point_value[j, p] * mu for j, p, mu in zip(jobs, pts, mult, strict=True)]
        cs = [feats.point_c[j, p] * k for j, p, k in zip(jobs, pts, g, strict=True)]
        ms = [feats.point_m[j, p] * k for j, p, k in zip(jobs, pts, g, strict=True)]
        # the moved options of each job: its own type now costs the restart too
        own = [t0, T + t0]
        moved = red[jobs]  # (jobs, virtual types, points): a copy
        worth = table.value[jobs][:, own]
        fin = np.isfinite(worth)
        moved[:, own] = np.where(fin, moved[:, own] - np.where(fin, worth, 0.0) * share[jobs][:, None, None], -np.inf)  # worth x (1 - share) less the same charge
        leave = [float(x) for x in moved.reshape(len(jobs), -1).max(axis=1)]
        if not any(x > 0 for x in leave):
            continue
        rv = [v - lc * c - lm * m - lg * k for v, c, m, k in zip(vals, cs, ms, g, strict=True)]
        opts_v = [np.append(r, x if x > 0 else -np.inf) for r, x in zip(rv, leave, strict=True)]
        opts_c = [np.append(c, 0) for c in cs]
        opts_m = [np.append(m, 0) for m in ms]
        res = node_knapsack(opts_v, opts_c, opts_m, cap_c, cap_m)
        if res is None:
            continue
        go = [i for i, (o, p) in enumerate(zip(res[1], pts, strict=True)) if o == p.size]
        if not go:  # nobody leaves: the all-staying mix is not needed (the final repoint_nodes finds it)
            continue
        stay = node_knapsack(vals, cs, ms, cap_c, cap_m)
        if stay is None or res[0] + lg * int(g.sum()) + lc * cap_c + lm * cap_m <= stay[0] + 1e-9:
            continue
        for j, k in zip(jobs, g, strict=True):
            st.free_g[n] += k
            st.free_c[n] += int(feats.point_c[j, st.point[j]]) * k
            st.free_m[n] += int(feats.point_m[j, st.point[j]]) * k
            del st.where[j]
            del st.point[j]
        for i, (j, p, o) in enumerate(zip(jobs, pts, res[1], strict=True)):
            if i in go:
                b = int(np.argmax(moved[i]))
                vb[j], pb[j] = divmod(b, P)
                tb[j] = vb[j] % T
                profit[j] = moved[i].ravel()[b]
                sel[j] = True
                left += 1
            else:
                _place_on(st, feats, j, {n: int(g[i])}, int(p[o]))
    return left


def price_repack(
    instance: Instance,
    feats: RoundFeatures,
    table: OptionTable,
    lam: np.ndarray,
    *,
    targets: dict[int, int] | None = None,
    fill_to: float = 0.95,
    evict: bool = True,
) -> _State:
    """A new feasible state built around prices ``lam`` (steps 2-5 of the module text).
    ``targets`` (job index -> grid point index): preferred points (e.g. the policy's)."""
    J = feats.n_jobs
    P = feats.point_c.shape[1]
    T = table.n_types
    st = _State(feats)
    if J == 0 or feats.n_nodes == 0:
        return st
    red = _reduced(table, lam)
    flat = red.reshape(J, -1)
    best = flat.argmax(axis=1)
    profit = flat[np.arange(J), best]
    vb, pb = np.divmod(best, P)  # best virtual type and point
    tb = vb % T  # its GPU type
    rows = np.arange(J)
    g = feats.gpus
    # selection, cut to each type's capacity (least profit per share of the scarcest resource out first)
    sel = profit > 0
    for t in range(T):
        idx = np.flatnonzero(sel & (tb == t))
        share = np.stack([arr[idx, vb[idx], pb[idx]] / max(table.cap[r, t], 1e-9) for r, arr in enumerate((table.gpus, table.cpus, table.mem))])
        order = np.argsort(-profit[idx] / np.maximum(share.max(axis=0), 1e-12), kind="stable")
        over = (np.cumsum(share[:, order], axis=1) > 1 + 1e-9).any(axis=0)
        sel[idx[order[over]]] = False
    if targets:
        for j, p in targets.items():
            if np.isfinite(table.value[j, vb[j], p]):
                pb[j] = p

    def by_profit(j: int, v: int) -> np.ndarray:
        r = red[j, v]
        ok = np.flatnonzero(np.isfinite(r))
        return ok[np.argsort(-r[ok], kind="stable")]

    # 1. selected running jobs whose best option is their current type stay where they are, at
    #    their leanest point there, then move up to the best priced point their nodes still hold
    ref_c = max(feats.node_cpus.sum() / max(feats.node_gpus.sum(), 1), 1e-9)  # rounds without cores or memory: no 0/0
    ref_m = max(feats.node_mem.sum() / max(feats.node_gpus.sum(), 1), 1e-9)
    lean_cost = np.where(feats.point_ok & feats.point_mask, feats.point_c / ref_c + feats.point_m / ref_m, np.inf)
    for j in np.flatnonzero(sel):
        job = instance.jobs[j]
        if job.placement is None:
            continue
        nodes = {instance.node_idx(n): k for n, k in job.placement.items()}
        if tb[j] != int(feats.node_type[next(iter(nodes))]):  # its best priced option is elsewhere: it moves
            continue
        lean = np.argsort(lean_cost[j], kind="stable")
        _place_first_fit(st, feats, int(j), nodes, lean[np.isfinite(lean_cost[j, lean])])
    for j in sorted(st.where, key=lambda j: -profit[j]):
        nodes, p0 = st.where[j], st.point[j]
        c0, m0 = int(feats.point_c[j, p0]), int(feats.point_m[j, p0])
        for p in by_profit(int(j), int(vb[j])):
            if p == p0:
                break
            c, m = int(feats.point_c[j, p]), int(feats.point_m[j, p])
            if feats.point_value[j, p] > feats.point_value[j, p0] and all(
                st.free_c[n] >= (c - c0) * k and st.free_m[n] >= (m - m0) * k for n, k in nodes.items()
            ):
                _repoint(st, feats, int(j), int(p))
                break
    if evict:
        _evict_crowded(instance, feats, st, table, lam, red, sel, vb, pb, tb, profit)
    placed = np.zeros(J, dtype=bool)
    placed[list(st.where)] = True
    gang_node = np.zeros(feats.n_nodes, dtype=bool)  # nodes a gang fills: no room for the pool
    for j, w in st.where.items():
        n0 = next(iter(w))
        if any(k >= feats.node_gpus[n] for n, k in w.items()) or (len(w) == 1 and st.free_g[n0] == 0 and g[j] >= feats.node_gpus[n0]):
            gang_node[list(w)] = True
    allowed_on = feats.speed > 0
    # 2. gangs that fill whole nodes: free whole nodes, biggest and most profitable first
    is_gang = (vb < T) & (table.whole[rows, tb] >= 1)
    gangs = np.flatnonzero(sel & is_gang & ~placed)
    for j in gangs[np.lexsort((-profit[gangs], -g[gangs]))]:
        used = _put(instance, feats, st, int(j), allowed_on[j] & (feats.node_type == tb[j]), np.array([pb[j]]), balance=False)
        if used is not None:
            placed[j] = True
            gang_node[[n for n in used if st.free_g[n] == 0]] = True
    # 3. gangs priced to share nodes spread over the emptiest nodes they may share ...
    shared = np.flatnonzero(sel & (vb >= T) & ~placed)
    for j in shared[np.lexsort((-profit[shared], -g[shared]))]:
        if _spread(feats, st, int(j), allowed_on[j] & (feats.node_type == tb[j]), by_profit(int(j), int(vb[j]))[:3], gang_node) is not None:
            placed[j] = True
    # ... and the rest of the selection fills the other nodes of its type, node by node
    pool_all = np.flatnonzero(sel & ~is_gang & (vb < T) & ~placed)
    for t in range(T):
        pool = pool_all[tb[pool_all] == t]
        if pool.size == 0:
            continue
        nodes = np.flatnonzero((feats.node_type == t) & (st.free_g > 0) & ~gang_node)
        val = table.value[pool, t]
        tg = _fit_pool(feats, pool, val, pb[pool], float(st.free_c[nodes].sum()), float(st.free_m[nodes].sum()), fill_to)
        # a job not allowed on every node of its type goes through the per-job path below
        everywhere = allowed_on[pool][:, nodes].all(axis=1) if nodes.size else np.zeros(pool.size, dtype=bool)
        left = _fill_nodes(feats, st, pool[everywhere], tg[everywhere], val[everywhere], nodes)
        for j in np.concatenate([left, pool[~everywhere]]):
            _put(instance, feats, st, int(j), allowed_on[j] & (feats.node_type == t), by_profit(int(j), t), balance=True)
    # 4. running jobs that found no room where the prices sent them stay if they still fit there,
    #    at the best point that fits; then anything still waiting, where it fits, at its leanest point
    placed[:] = False
    placed[list(st.where)] = True
    for j in np.flatnonzero(~placed):
        job = instance.jobs[j]
        if job.placement is None:
            continue
        nodes = {instance.node_idx(n): k for n, k in job.placement.items()}
        t0 = int(feats.node_type[next(iter(nodes))])
        placed[j] = _place_first_fit(st, feats, int(j), nodes, by_profit(int(j), t0))
    waiting = np.flatnonzero(~placed)
    if waiting.size:
        top = np.where(np.isfinite(table.value[waiting]), table.value[waiting], 0.0).reshape(waiting.size, -1).max(axis=1)
        for j in waiting[np.argsort(-top / g[waiting], kind="stable")]:
            if g[j] > int(st.free_g.sum()):
                continue
            _put(instance, feats, st, int(j), allowed_on[j], np.argsort(lean_cost[j], kind="stable")[:1], balance=False)
    polish(instance, feats, st)
    return st


def upgrade_points(instance: Instance, feats: RoundFeatures, st: _State, rounds: int = 500) -> None:
    """Per node, repeatedly apply the single-node job upgrade with the largest value gain per unit
    of the node's cores and memory it takes (one per node per round, all nodes at once)."""
    jobs = np.array([j for j, w in st.where.items() if len(w) == 1], dtype=np.int64)
    if jobs.size == 0:
        return
    node = np.array([next(iter(st.where[int(j)])) for j in jobs], dtype=np.int64)
    g = feats.gpus[jobs]
    mult = np.array([_multiplier(instance, feats, int(j), st.where[int(j)]) for j in jobs])
    val = feats.point_value[jobs] * mult[:, None]
    ok = feats.point_ok[jobs] & feats.point_mask[jobs]
    pc, pm = feats.point_c[jobs], feats.point_m[jobs]
    cur = np.array([st.point[int(j)] for j in jobs], dtype=np.int64)
    cn = np.maximum(feats.node_cpus[node], 1).astype(np.float64)[:, None]
    mn = np.maximum(feats.node_mem[node], 1).astype(np.float64)[:, None]
    active = np.ones(jobs.size, dtype=bool)
    for _ in range(rounds):
        a = np.flatnonzero(active)
        if a.size == 0:
            break
        dc = pc[a] - pc[a, cur[a]][:, None]
        dm = pm[a] - pm[a, cur[a]][:, None]
        gain = val[a] - val[a, cur[a]][:, None]
        fit = ok[a] & (gain > 1e-12) & (dc * g[a, None] <= st.free_c[node[a]][:, None]) & (dm * g[a, None] <= st.free_m[node[a]][:, None])
        cost = g[a, None] * (np.maximum(dc, 0) / cn[a] + np.maximum(dm, 0) / mn[a])
        ratio = np.where(fit, gain / np.maximum(cost, 1e-9), -np.inf)
        bp = ratio.argmax(axis=1)
        br = ratio[np.arange(a.size), bp]
        has = np.isfinite(br)
        active[a[~has]] = False
        if not has.any():
            break
        cand = np.flatnonzero(has)
        order = cand[np.lexsort((-br[cand], node[a[cand]]))]
        first = order[np.r_[True, node[a[order]][1:] != node[a[order]][:-1]]]
        for i in first:
            r, p = a[i], int(bp[i])
            _repoint(st, feats, int(jobs[r]), p)
            cur[r] = p


def _freeing_plan(feats: RoundFeatures, st: _State, n: int, need_c: int, need_m: int, residents: list[int],
                  mult: dict[int, float]) -> tuple[float, dict[int, int]] | None:
    """The cheapest downgrades (value lost, {job: new point}) of the single-node jobs on node ``n``
    that free ``need_c`` cores and ``need_m`` GB (greedy: most of what is still needed per unit
    of value lost first), or ``None`` when they cannot."""
    plan: dict[int, int] = {}
    lost = 0.0
    c0 = max(int(feats.node_cpus[n]), 1)
    m0 = max(int(feats.node_mem[n]), 1)
    while need_c > 0 or need_m > 0:
        best: tuple[float, int, int, int, int, float] | None = None
        for i in residents:
            p0 = plan.get(i, st.point[i])
            gi = int(feats.gpus[i])
            ok = feats.point_ok[i] & feats.point_mask[i]
            fc = (feats.point_c[i, p0] - feats.point_c[i]) * gi
            fm = (feats.point_m[i, p0] - feats.point_m[i]) * gi
            loss = (feats.point_value[i, p0] - feats.point_value[i]) * mult[i]
            cover = np.minimum(np.maximum(fc, 0), need_c) / c0 + np.minimum(np.maximum(fm, 0), need_m) / m0
            cand = np.flatnonzero(ok & (cover > 0) & (fc >= 0) & (fm >= 0))
            if cand.size == 0:
                continue
            ratio = cover[cand] / np.maximum(loss[cand], 1e-12)
            k = int(cand[np.argmax(ratio)])
            if best is None or ratio.max() > best[0]:
                best = (float(ratio.max()), i, k, int(fc[k]), int(fm[k]), float(loss[k]))
        if best is None:
            return None
        _, i, k, fc_i, fm_i, loss_i = best
        plan[i] = k
        need_c -= fc_i
        need_m -= fm_i
        lost += loss_i
    return lost, plan


#: ``_EARLIER[a, b]``: state ``b`` comes before state ``a`` (the dominance test of :func:`node_knapsack`)
_EARLIER = np.tri(512, k=-1, dtype=bool)


def node_knapsack(values: list[np.ndarray], cpus: list[np.ndarray], mem: list[np.ndarray], cap_c: int, cap_m: int, *,
                  max_states: int = 4000) -> tuple[float, list[int]] | None:
    """One option per item (item ``i``'s options: worth ``values[i]``, cores ``cpus[i]``, memory
    ``mem[i]``) with the largest total worth whose cores and memory fit ``cap_c`` and ``cap_m``:
    ``(worth, option index per item)``, or ``None`` when nothing fits.

    A dynamic programme over the items whose states are the Pareto-optimal (cores, memory, worth)
    totals so far (a state is dropped when another uses no more of either and is worth at least as
    much), so it is exact; past ``max_states`` states only the most valuable are kept (then it is a
    heuristic, still feasible). Nodes of the library rounds (8 GPUs, up to 8 jobs with 20 grid
    points) keep a few hundred states."""
    sc = np.zeros(1, dtype=np.int64)
    sm = np.zeros(1, dtype=np.int64)
    sv = np.zeros(1)
    back: list[tuple[np.ndarray, np.ndarray]] = []
    for v_i, c_i, m_i in zip(values, cpus, mem, strict=True):
        k = v_i.size
        c = (sc[:, None] + c_i).ravel()
        m = (sm[:, None] + m_i).ravel()
        v = (sv[:, None] + v_i).ravel()
        idx = np.flatnonzero((c <= cap_c) & (m <= cap_m) & (v > -np.inf))
        if idx.size == 0:
            return None
        idx = idx[np.argsort(-v[idx], kind="stable")]
        c, m, v = c[idx], m[idx], v[idx]
        if idx.size > 1:  # drop states dominated by a more valuable one (earlier in this order)
            if idx.size <= 512:
                dominated = ((c[None, :] <= c[:, None]) & (m[None, :] <= m[:, None]) & _EARLIER[: idx.size, : idx.size]).any(axis=1)
            else:
                uc = np.unique(c)
                least_m = np.minimum.accumulate(np.where(c[:, None] <= uc[None, :], m[:, None], np.iinfo(np.int64).max), axis=0)
                dominated = np.zeros(idx.size, dtype=bool)
                dominated[1:] = least_m[np.arange(idx.size - 1), np.searchsorted(uc, c[1:])] <= m[1:]
            keep = np.flatnonzero(~dominated)[:max_states]
            idx, c, m, v = idx[keep], c[keep], m[keep], v[keep]
        back.append((idx // k, idx % k))
        sc, sm, sv = c, m, v
    s = int(np.argmax(sv))
    best = float(sv[s])
    choice = [0] * len(back)
    for i in range(len(back) - 1, -1, -1):
        parent, opt = back[i]
        choice[i] = int(opt[s])
        s = int(parent[s])
    return best, choice


def _single_node_jobs(st: _State) -> dict[int, list[int]]:
    """Node -> the jobs placed wholly on it, in placement order."""
    residents: dict[int, list[int]] = {}
    for j, w in st.where.items():
        if len(w) == 1:
            residents.setdefault(next(iter(w)), []).append(j)
    return residents


def repoint_nodes(instance: Instance, feats: RoundFeatures, st: _State, *, nodes: np.ndarray | None = None,
                  deadline: float | None = None) -> float:
    """Re-choose, node by node, the grid points of all single-node jobs on the node at once
    (:func:`node_knapsack` over the node's cores and memory less what multi-node jobs hold there),
    where that is worth more than their points now. Greedy upgrades, one job at a time, get stuck
    where a node is full (e.g. eight running jobs that arrived at their demand: one job must go
    down the grid for two others to go up); this finds the node's best mix. ``nodes``: the nodes to
    treat (default: every node with two or more single-node jobs). Returns the worth gained."""
    residents = _single_node_jobs(st)
    todo = [n for n, js in residents.items() if len(js) > 1] if nodes is None else [int(n) for n in nodes if len(residents.get(int(n), ())) > 1]
    ok_pts = feats.point_ok & feats.point_mask
    gained = 0.0
    for n in todo:
        if deadline is not None and time.perf_counter() > deadline:
            break
        jobs = residents[n]
        pts = [np.flatnonzero(ok_pts[j]) for j in jobs]
        g = [int(feats.gpus[j]) for j in jobs]
        mult = [_multiplier(instance, feats, j, st.where[j]) for j in jobs]
        cur = sum(float(feats.point_value[j, st.point[j]]) * mu for j, mu in zip(jobs, mult, strict=True))
        if sum(float(feats.point_value[j, p].max()) * mu for j, p, mu in zip(jobs, pts, mult, strict=True)) <= cur + 1e-9 * max(1.0, abs(cur)):
            continue  # every job is at its best point already
        cap_c = int(st.free_c[n]) + sum(int(feats.point_c[j, st.point[j]]) * k for j, k in zip(jobs, g, strict=True))
        cap_m = int(st.free_m[n]) + sum(int(feats.point_m[j, st.point[j]]) * k for j, k in zip(jobs, g, strict=True))
        res = node_knapsack([feats.point_value[j, p] * mu for j, p, mu in zip(jobs, pts, mult, strict=True)],
                            [feats.point_c[j, p] * k for j, p, k in zip(jobs, pts, g, strict=True)],
                            [feats.point_m[j, p] * k for j, p, k in zip(jobs, pts, g, strict=True)], cap_c, cap_m)
        if res is None or res[0] <= cur + 1e-9 * max(1.0, abs(cur)):
            continue
        for j, k in zip(jobs, g, strict=True):  # free the node's single-node jobs' cores and memory, then book the new points
            st.free_c[n] += int(feats.point_c[j, st.point[j]]) * k
            st.free_m[n] += int(feats.point_m[j, st.point[j]]) * k
        for j, p, i, k in zip(jobs, pts, res[1], g, strict=True):
            st.point[j] = int(p[i])
            st.free_c[n] -= int(feats.point_c[j, st.point[j]]) * k
            st.free_m[n] -= int(feats.point_m[j, st.point[j]]) * k
        gained += res[0] - cur
    return gained


def _top_worth(feats: RoundFeatures, jobs: np.ndarray) -> np.ndarray:
    """Each job's worth at its best allowed grid point on its fastest GPU type, on one node and not
    moved (no placement is worth more)."""
    ok = feats.point_ok[jobs] & feats.point_mask[jobs]
    return np.where(ok, feats.point_value[jobs], 0.0).max(axis=1) * feats.speed[jobs].max(axis=1)


def squeeze_in(instance: Instance, feats: RoundFeatures, st: _State, *, max_nodes: int = 12, deadline: float | None = None) -> int:
    """Admit waiting jobs that fit on one node's free GPUs once co-located jobs move down their
    grid (trading their cores and memory where the marginal loss is small): for each waiting job,
    most valuable per GPU first, over the ``max_nodes`` candidate nodes with the most free room
    and its grid points, the admission with the largest net gain (its worth minus the value the
    downgrades lose), applied when positive. Returns the number of jobs admitted."""
    placed = np.zeros(feats.n_jobs, dtype=bool)
    placed[list(st.where)] = True
    waiting = np.flatnonzero(~placed & (feats.gpus <= feats.node_gpus.max(initial=0)))
    if waiting.size == 0 or not (st.free_g > 0).any():
        return 0
    residents = _single_node_jobs(st)
    mult = {j: _multiplier(instance, feats, j, w) for j, w in st.where.items()}
    ok_pts = feats.point_ok & feats.point_mask
    top = _top_worth(feats, waiting)
    admitted = 0
    for j in waiting[np.argsort(-top / feats.gpus[waiting], kind="stable")]:
        if deadline is not None and time.perf_counter() > deadline:
            break
        g = int(feats.gpus[j])
        cand = np.flatnonzero((feats.speed[j] > 0) & (st.free_g >= g))
        if cand.size == 0:
            continue
        room = st.free_c[cand] / np.maximum(feats.node_cpus[cand], 1) + st.free_m[cand] / np.maximum(feats.node_mem[cand], 1)
        cand = cand[np.argsort(-room, kind="stable")[:max_nodes]]
        pts = np.flatnonzero(ok_pts[j])
        best: tuple[float, int, int, dict[int, int]] | None = None
        for n in cand:
            n = int(n)
            worth = feats.point_value[j, pts] * _multiplier(instance, feats, int(j), {n: g})
            for pos in np.argsort(-worth, kind="stable"):
                p = int(pts[pos])
                if best is not None and worth[pos] <= best[0]:
                    break
                need_c = int(feats.point_c[j, p]) * g - int(st.free_c[n])
                need_m = int(feats.point_m[j, p]) * g - int(st.free_m[n])
                plan = _freeing_plan(feats, st, n, max(need_c, 0), max(need_m, 0), residents.get(n, []), mult)
                if plan is None:
                    continue
                gain = float(worth[pos]) - plan[0]
                if gain > 1e-9 and (best is None or gain > best[0]):
                    best = (gain, n, p, plan[1])
        if best is None:
            continue
        _, n, p, plan = best
        for i, k in plan.items():  # the downgrades of the node's single-node jobs
            _repoint(st, feats, i, k)
        _place_on(st, feats, int(j), {n: g}, p)
        residents.setdefault(n, []).append(int(j))
        mult[int(j)] = _multiplier(instance, feats, int(j), {n: g})
        admitted += 1
    return admitted


def _remix(feats: RoundFeatures, st: _State, n: int, c: int, m: int, residents: list[int],
           mult: dict[int, float]) -> tuple[float, dict[int, int]] | None:
    """What it costs to leave ``c`` cores and ``m`` GB free on node ``n`` by re-choosing the grid
    points of its single-node jobs ``residents`` (their best mix in what is left,
    :func:`node_knapsack`): ``(value lost, {job: new point})``, or ``None`` when they cannot.
    Negative ``c`` and ``m`` add that much room (the loss is then minus the gain)."""
    if not residents:
        return None
    ok = feats.point_ok & feats.point_mask
    pts = [np.flatnonzero(ok[i]) for i in residents]
    g = [int(feats.gpus[i]) for i in residents]
    cur = sum(float(feats.point_value[i, st.point[i]]) * mult[i] for i in residents)
    cap_c = int(st.free_c[n]) + sum(int(feats.point_c[i, st.point[i]]) * k for i, k in zip(residents, g, strict=True)) - c
    cap_m = int(st.free_m[n]) + sum(int(feats.point_m[i, st.point[i]]) * k for i, k in zip(residents, g, strict=True)) - m
    res = node_knapsack([feats.point_value[i, p] * mult[i] for i, p in zip(residents, pts, strict=True)],
                        [feats.point_c[i, p] * k for i, p, k in zip(residents, pts, g, strict=True)],
                        [feats.point_m[i, p] * k for i, p, k in zip(residents, pts, g, strict=True)], cap_c, cap_m)
    if res is None:
        return None
    return cur - res[0], {i: int(p[o]) for i, p, o in zip(residents, pts, res[1], strict=True)}


def _even_parts(g: int, k: int) -> list[int]:
    """``g`` GPUs over ``k`` nodes as evenly as possible, largest parts first."""
    return [g // k + (1 if i < g % k else 0) for i in range(k)]


def squeeze_gangs(instance: Instance, feats: RoundFeatures, st: _State, *, max_nodes: int = 16, extra_nodes: int = 0,
                  deadline: float | None = None) -> int:
    """Admit waiting multi-GPU jobs split over nodes that also hold other jobs: the gang spreads
    evenly over ``k`` nodes of one GPU type with free GPUs (at most ``G - 1`` GPUs on each, ``k``
    from the fewest such nodes to ``extra_nodes`` more; worth times its spread factor to the
    ``k - kbase``, :meth:`~optsched.model.Instance.spread_base`), and on each node the co-located single-node jobs re-choose their grid points in
    what its part leaves (their best mix, :func:`_remix`; :func:`squeeze_in`'s greedy
    :func:`_freeing_plan` is not used here). For each waiting job, most valuable per GPU first, over its types, node counts and grid
    points, the cheapest nodes (those with room first, then the ``max_nodes`` with the most room)
    give the admission with the largest net gain (its worth minus what the downgrades lose),
    applied when positive. Returns the number of jobs admitted."""
    placed = np.zeros(feats.n_jobs, dtype=bool)
    placed[list(st.where)] = True
    waiting = np.flatnonzero(~placed & (feats.gpus >= 2))
    if waiting.size == 0 or int(st.free_g.max(initial=0)) == 0:
        return 0
    residents = _single_node_jobs(st)
    mult = {j: _multiplier(instance, feats, j, w) for j, w in st.where.items()}
    ok_pts = feats.point_ok & feats.point_mask
    types = np.unique(feats.node_type)
    plans: dict[int, dict[tuple[int, int], tuple[float, dict[int, int]] | None]] = {}  # node -> (cores, GB) needed -> plan
    options: dict[tuple[int, int, int, int], list[tuple[float, int, int, dict[int, int]]]] = {}  # (type, GPUs, cores, GB) -> options
    big = np.iinfo(np.int64).max
    lean_c = np.where(ok_pts, feats.point_c, big).min(axis=1)  # each job's fewest cores and GB a GPU
    lean_m = np.where(ok_pts, feats.point_m, big).min(axis=1)

    def freeable(n: int, lean: np.ndarray) -> int:
        """What node ``n``'s single-node jobs free of one resource at their leanest points."""
        use = feats.point_c if lean is lean_c else feats.point_m
        return sum(int(feats.gpus[i]) * int(use[i, st.point[i]] - lean[i]) for i in residents.get(n, []))

    def option(n: int, h: int, c: int, m: int) -> tuple[float, int, int, dict[int, int]] | None:
        """(cost, free GPUs, node, downgrades) of ``h`` GPUs at ``c`` cores and ``m`` GB a GPU on node ``n``."""
        need_c, need_m = c * h - int(st.free_c[n]), m * h - int(st.free_m[n])
        if need_c <= 0 and need_m <= 0:
            return 0.0, int(st.free_g[n]), n, {}
        got = plans.setdefault(n, {})
        if (c * h, m * h) not in got:
            if need_c > freeable(n, lean_c) or need_m > freeable(n, lean_m):
                got[(c * h, m * h)] = None  # even every resident at its leanest point leaves too little
            else:
                got[(c * h, m * h)] = _remix(feats, st, n, c * h, m * h, residents.get(n, []), mult)
        pl = got[(c * h, m * h)]
        return None if pl is None else (pl[0], int(st.free_g[n]), n, pl[1])

    def options_for(t: int, h: int, c: int, m: int) -> list[tuple[float, int, int, dict[int, int]]]:
        """The options of the nodes of type ``t`` for ``h`` GPUs at ``c`` cores and ``m`` GB a GPU,
        cheapest first (then fewest free GPUs): every node with room, and of the others the
        ``max_nodes`` with the most room whose residents can move down far enough."""
        key = (t, h, c, m)
        if key not in options:
            cand = np.flatnonzero((feats.node_type == t) & (st.free_g >= h))
            room = (np.minimum(st.free_c[cand] - c * h, 0) / np.maximum(feats.node_cpus[cand], 1)
                    + np.minimum(st.free_m[cand] - m * h, 0) / np.maximum(feats.node_mem[cand], 1))
            short = room < 0
            picked = np.concatenate([cand[~short], cand[short][np.argsort(-room[short], kind="stable")[:max_nodes]]])
            opts = [o for o in (option(int(n), h, c, m) for n in picked) if o is not None]
            options[key] = sorted(opts, key=lambda o: o[:3])
        return options[key]

    top = _top_worth(feats, waiting)
    admitted = 0
    for j in waiting[np.argsort(-top / feats.gpus[waiting], kind="stable")]:
        if deadline is not None and time.perf_counter() > deadline:
            break
        j = int(j)
        g = int(feats.gpus[j])
        allowed = feats.speed[j] > 0
        if int(st.free_g[allowed].sum()) < g:
            continue
        pts = np.flatnonzero(ok_pts[j])
        pts = pts[np.argsort(-feats.point_value[j, pts], kind="stable")]
        sf = instance.jobs[j].spread_factor
        best: tuple[float, dict[int, int], int, list[dict[int, int]]] | None = None
        for t in types:
            on_t = allowed & (feats.node_type == t)
            G = int(feats.node_gpus[on_t].max(initial=0))
            if G < 2 or int(st.free_g[on_t].sum()) < g:
                continue
            top_t = float(feats.speed[j, on_t].max())
            kbase = instance.spread_base(instance.nodes[int(np.flatnonzero(on_t)[0])].gpu_type, g)
            k0 = max(2, -(-g // (G - 1)))
            for k in range(k0, min(k0 + extra_nodes, g) + 1):
                parts = _even_parts(g, k)
                for p in pts:
                    p = int(p)
                    if best is not None and float(feats.point_value[j, p]) * top_t * sf ** max(0, k - kbase) <= best[0]:
                        break  # points by worth: no later one can win
                    c, m = int(feats.point_c[j, p]), int(feats.point_m[j, p])
                    chosen: dict[int, int] = {}
                    freeing: list[dict[int, int]] = []
                    cost = 0.0
                    for h in sorted(set(parts), reverse=True):
                        need = parts.count(h)
                        for o in options_for(int(t), h, c, m):
                            if need == 0:
                                break
                            if o[2] not in chosen and allowed[o[2]]:
                                chosen[o[2]] = h
                                freeing.append(o[3])
                                cost += o[0]
                                need -= 1
                        if need:
                            break
                    else:
                        gain = float(feats.point_value[j, p]) * _multiplier(instance, feats, j, chosen) - cost
                        if gain > 1e-9 and (best is None or gain > best[0]):
                            best = (gain, chosen, p, freeing)
        if best is None:
            continue
        _, chosen, p, freeing = best
        for plan in freeing:
            for i, q in plan.items():
                _repoint(st, feats, i, q)
        _place_on(st, feats, j, chosen, p)
        for n in chosen:  # only the chosen nodes changed (other nodes' plans stay valid) ...
            plans.pop(n, None)
        t = int(feats.node_type[next(iter(chosen))])
        for key in [key for key in options if key[0] == t]:  # ... but which nodes have the most room may have too
            del options[key]
        admitted += 1
    return admitted


def relocate(instance: Instance, feats: RoundFeatures, st: _State, *, max_jobs: int = 400) -> int:
    """Move single-node jobs to another node where they are worth more (a faster GPU type, a
    better grid point the room there allows, or back to the node a running job holds now, which
    saves its restart), largest gain first, each re-checked against the room the earlier moves
    left; the ``max_jobs`` jobs with the most to gain are considered. Returns the moves made."""
    jobs = [j for j, w in st.where.items() if len(w) == 1]
    if not jobs:
        return 0
    ok_pts = feats.point_ok & feats.point_mask
    cur = np.array([feats.point_value[j, st.point[j]] * _multiplier(instance, feats, j, st.where[j]) for j in jobs])
    top = _top_worth(feats, np.array(jobs))
    order = np.argsort(-(top - cur), kind="stable")[:max_jobs]
    types = instance.gpu_types
    moved = 0
    for i in order:
        j, v0 = jobs[i], cur[i]
        if top[i] <= v0 + 1e-12:
            break
        (n0, g), = st.where[j].items()
        p0 = st.point[j]
        c0, m0 = int(feats.point_c[j, p0]), int(feats.point_m[j, p0])
        # room on each node with the job taken off its own
        fg, fc, fm = st.free_g.copy(), st.free_c.copy(), st.free_m.copy()
        fg[n0] += g
        fc[n0] += c0 * g
        fm[n0] += m0 * g
        nodes = np.flatnonzero((feats.speed[j] > 0) & (fg >= g))
        if nodes.size == 0:
            continue
        pts = np.flatnonzero(ok_pts[j])
        fit = (feats.point_c[j, pts][None, :] * g <= fc[nodes][:, None]) & (feats.point_m[j, pts][None, :] * g <= fm[nodes][:, None])
        job = instance.jobs[j]
        mult = np.array([job.speed(t) or 0.0 for t in types])[feats.node_type[nodes]]
        if job.placement is not None:  # anywhere but its current single node costs its restart
            home = dict(job.placement)
            stay = np.array([home == {instance.nodes[int(n)].id: g} for n in nodes]) if len(home) == 1 else np.zeros(nodes.size, dtype=bool)
            mult = np.where(stay, mult, mult * (1.0 - job.restart_s / instance.round.duration_s))
        worth = np.where(fit, mult[:, None] * feats.point_value[j, pts][None, :], -np.inf)
        k = int(np.argmax(worth))
        a, b = divmod(k, pts.size)
        if worth[a, b] <= v0 + 1e-9:
            continue
        n, p = int(nodes[a]), int(pts[b])
        st.free_g[n0] += g
        st.free_c[n0] += c0 * g
        st.free_m[n0] += m0 * g
        del st.where[j]
        _place_on(st, feats, j, {n: g}, p)
        moved += 1
    return moved


def move_to_faster(instance: Instance, feats: RoundFeatures, st: _State, *, max_jobs: int = 300, max_nodes: int = 8,
                   deadline: float | None = None) -> int:
    """Move single-node jobs to nodes of a faster GPU type that have free GPUs, where the
    destination's single-node jobs re-choose their grid points in what the job leaves them
    (:func:`_remix`) and the source's take their best mix with the room it frees; applied when the
    job's worth there plus the source's gain exceeds its worth now plus what the destination's jobs
    lose. :func:`relocate` only moves a job where it fits as things are; here the V100 nodes with
    idle GPUs whose memory two large jobs hold take P100 and K80 jobs at a small cost to those two.
    The ``max_jobs`` jobs with the most to gain (best worth on their fastest type less worth now)
    are tried, each over the ``max_nodes`` destinations with the most room. Returns the moves made."""
    jobs = np.array([j for j, w in st.where.items() if len(w) == 1], dtype=np.int64)
    if jobs.size == 0:
        return 0
    node = np.array([next(iter(st.where[int(j)])) for j in jobs], dtype=np.int64)
    faster = feats.speed[jobs].max(axis=1) > feats.speed[jobs, node]
    if not faster.any():
        return 0
    ok_pts = feats.point_ok & feats.point_mask
    residents: dict[int, list[int]] = {}
    for j, n in zip(jobs, node, strict=True):
        residents.setdefault(int(n), []).append(int(j))
    mult = {j: _multiplier(instance, feats, j, w) for j, w in st.where.items()}
    cur = np.array([feats.point_value[j, st.point[int(j)]] * mult[int(j)] for j in jobs])
    order = np.flatnonzero(faster)
    order = order[np.argsort(-(_top_worth(feats, jobs[order]) - cur[order]), kind="stable")][:max_jobs]
    plans: dict[int, dict[tuple[int, int], tuple[float, dict[int, int]] | None]] = {}

    def plan_of(n: int, c: int, m: int) -> tuple[float, dict[int, int]] | None:
        if st.free_c[n] >= c and st.free_m[n] >= m:
            return 0.0, {}
        got = plans.setdefault(n, {})
        if (c, m) not in got:
            got[(c, m)] = _remix(feats, st, n, c, m, residents.get(n, []), mult)
        return got[(c, m)]

    moved = 0
    for i in order:
        if deadline is not None and time.perf_counter() > deadline:
            break
        j = int(jobs[i])
        (a, g), = st.where[j].items()
        p0 = st.point[j]
        v0 = float(feats.point_value[j, p0]) * mult[j]
        dest = np.flatnonzero((feats.speed[j] > feats.speed[j, a]) & (st.free_g >= g))
        if dest.size == 0:
            continue
        room = st.free_c[dest] / np.maximum(feats.node_cpus[dest], 1) + st.free_m[dest] / np.maximum(feats.node_mem[dest], 1)
        pts = np.flatnonzero(ok_pts[j])
        pts = pts[np.argsort(-feats.point_value[j, pts], kind="stable")]
        best: tuple[float, int, int, dict[int, int]] | None = None
        for b in dest[np.argsort(-room, kind="stable")[:max_nodes]]:
            b = int(b)
            mu = _multiplier(instance, feats, j, {b: g})
            for p in pts:
                w = float(feats.point_value[j, p]) * mu
                if best is not None and w <= best[0]:
                    break  # points by worth: no later one can win here
                pl = plan_of(b, int(feats.point_c[j, p]) * g, int(feats.point_m[j, p]) * g)
                if pl is not None and (best is None or w - pl[0] > best[0]):
                    best = (w - pl[0], b, int(p), pl[1])
        if best is None:
            continue
        others = [r for r in residents[a] if r != j]
        most = sum(float(feats.point_value[r, ok_pts[r]].max() - feats.point_value[r, st.point[r]]) * mult[r] for r in others)
        if best[0] + most <= v0 + 1e-9:
            continue  # even every co-located job at its best point would not pay for the move
        gain_a, mix_a = 0.0, {}
        if others:  # their best mix with the job's cores and memory freed (negative need: room added)
            got = _remix(feats, st, a, -int(feats.point_c[j, p0]) * g, -int(feats.point_m[j, p0]) * g, others, mult)
            if got is not None:
                gain_a, mix_a = -got[0], got[1]
        if best[0] + gain_a <= v0 + 1e-9:
            continue
        _, b, p, plan = best
        st.free_g[a] += g
        st.free_c[a] += int(feats.point_c[j, p0]) * g
        st.free_m[a] += int(feats.point_m[j, p0]) * g
        del st.where[j]
        residents[a].remove(j)
        for r, q in {**mix_a, **plan}.items():
            _repoint(st, feats, r, q)
        _place_on(st, feats, j, {b: g}, p)
        residents.setdefault(b, []).append(j)
        mult[j] = _multiplier(instance, feats, j, {b: g})
        plans.pop(a, None)
        plans.pop(b, None)
        moved += 1
    return moved


#: :func:`polish` runs :func:`relocate` and the per-node mixes on rounds of at most this many
#: nodes x jobs (the simulator's and medium rounds: +1.6 % worth on 17 busy Alibaba rounds); on
#: larger ones :func:`improve` runs them once, on the state it keeps (0.04 s for relocate on the
#: 1,024 x 4,000 library rounds)
RELOCATE_CELLS = 16_384


def polish(instance: Instance, feats: RoundFeatures, st: _State, *, deadline: float | None = None, repoint: bool = True) -> None:
    """Local moves that never lower the objective: admit waiting jobs by squeezing co-located
    ones down the grid (:func:`squeeze_in`), move jobs to nodes where they are worth more
    (:func:`relocate`, up to :data:`RELOCATE_CELLS`), then per-node upgrades, the best mix of
    points per node (:func:`repoint_nodes`, with ``repoint``, up to :data:`RELOCATE_CELLS`; on
    larger rounds :func:`improve` runs it once, on the state it keeps) and the decoder's leftover
    pass."""
    small = feats.n_nodes * feats.n_jobs <= RELOCATE_CELLS
    squeeze_in(instance, feats, st, deadline=deadline)
    if small:
        relocate(instance, feats, st)
    upgrade_points(instance, feats, st)
    if small and repoint:
        repoint_nodes(instance, feats, st, deadline=deadline)
    redistribute_leftover(instance, feats, st)


def state_value(instance: Instance, feats: RoundFeatures, st: _State) -> float:
    """The objective of a state (as :func:`optsched.values.schedule_value` of its schedule)."""
    return float(sum(feats.point_value[j, st.point[j]] * _multiplier(instance, feats, j, w) for j, w in st.where.items()))


#: (pack_eff, fill_to) of the repacks :func:`improve` tries, in order, while time is left. The
#: first charges shared cores and memory 1/0.95 times (so fewer gangs take whole nodes) and fills
#: the pool to 93 %; the second prices packing as lossless and fills to 95 %. On the two
#: 1,024 x 4,000 library rounds (before the per-node mixes and leavers): 1.9 / 4.5 % and 2.3 / 4.6 %
#: from the plain pooled LP bound; with them the better of the two is 1.9 / 2.85 % from it, and
#: 1.6 / 2.0 % from the strengthened pooled LP (staying and whole-node variants; docs/results.md).
CONFIGS: tuple[tuple[float, float], ...] = ((0.95, 0.93), (1.0, 0.95))


def improve(
    instance: Instance,
    feats: RoundFeatures,
    base: _State | None,
    *,
    configs: tuple[tuple[float, float], ...] = CONFIGS,
    use_targets: bool = True,
    polish_base: bool | None = None,
    deadline: float | None = None,
    first_estimate: float = 0.0,
    stats: dict | None = None,
) -> tuple[_State | None, float]:
    """The best of ``base`` (a decoded state; ``None``: none) and the price-guided repacks of
    ``configs``: ``(state, value)``; the state is ``base`` itself when no repack beats it, so the
    objective never goes down. ``polish_base``: first improve ``base`` in place by :func:`polish`
    (moves that only raise its worth; default: up to :data:`RELOCATE_CELLS` nodes x jobs). ``use_targets``: the base's grid points are the repacks'
    preferred points. No repack starts that would end past ``deadline`` (a :func:`time.perf_counter` value),
    the first expected to take ``first_estimate`` seconds, the others as long as the one before.
    The state kept then gets :func:`squeeze_gangs`, :func:`move_to_faster` and, above
    :data:`RELOCATE_CELLS` (where :func:`polish` leaves them to here), the per-node mixes
    (:func:`repoint_nodes`) first and :func:`relocate`, then the mixes again on the nodes these
    moves touched; all only raise its worth.
    ``stats`` receives ``repair_base_objective``, ``repair_s``, ``repair_tried`` (per repack:
    parameters, objective, dual value, seconds), ``repair_used``, ``repair_repointed`` (the
    final pass's gain), ``repair_gangs_squeezed``, ``repair_relocated`` and ``repair_moved_faster``."""
    t0 = time.perf_counter()
    base_v = state_value(instance, feats, base) if base is not None else 0.0
    best, best_v = base, base_v
    tried: list[dict] = []
    if polish_base is None:
        polish_base = feats.n_nodes * feats.n_jobs <= RELOCATE_CELLS
    if base is not None and polish_base and feats.n_jobs and feats.n_nodes:
        polish(instance, feats, base, deadline=deadline)  # in place: only raises its worth
        best_v = state_value(instance, feats, base)
    polished_v = best_v
    if feats.n_jobs and feats.n_nodes:
        targets = dict(base.point) if (use_targets and base is not None) else None
        tables: dict[float, OptionTable] = {}
        last = first_estimate
        for pack_eff, fill_to in configs:
            t = time.perf_counter()
            if deadline is not None and t + last > deadline:
                break
            table = tables.get(pack_eff)
            if table is None:
                table = tables[pack_eff] = option_table(instance, feats, pack_eff=pack_eff)
            lam, dual = resource_prices(table)
            st = price_repack(instance, feats, table, lam, targets=targets, fill_to=fill_to)
            v = state_value(instance, feats, st)
            last = time.perf_counter() - t
            tried.append({"pack_eff": pack_eff, "fill_to": fill_to, "objective": v, "dual": dual, "s": last})
            if v > best_v + 1e-9:
                best, best_v = st, v
    repointed = 0.0
    gangs = moved = faster = 0
    if best is not None and feats.n_jobs and feats.n_nodes:  # on the state kept: moves that only raise its worth
        large = feats.n_nodes * feats.n_jobs > RELOCATE_CELLS
        before_v = best_v

        def live() -> bool:  # each step's set-up is O(jobs) (tens of ms at 1,024 x 4,000): none past the deadline
            return deadline is None or time.perf_counter() < deadline

        if large and live():  # polish() left the per-node mixes to here
            repointed = repoint_nodes(instance, feats, best, deadline=deadline)
        free = np.stack([best.free_g, best.free_c, best.free_m])
        if live():
            gangs = squeeze_gangs(instance, feats, best, deadline=deadline)
        if large and live():
            moved = relocate(instance, feats, best)
        if live():
            faster = move_to_faster(instance, feats, best, deadline=deadline)
        if gangs or moved or faster:  # the nodes these moves touched get their best mix again
            touched = np.flatnonzero((free != np.stack([best.free_g, best.free_c, best.free_m])).any(axis=0))
            repoint_nodes(instance, feats, best, nodes=touched, deadline=deadline)
            best_v = state_value(instance, feats, best)
        else:
            best_v += repointed
        repointed = best_v - before_v
        if best is base:  # the final pass changed the policy's own schedule in place
            polished_v = best_v
    if stats is not None:
        stats.update(repair_repointed=repointed, repair_gangs_squeezed=gangs, repair_relocated=moved, repair_moved_faster=faster)
        stats.update(repair_base_objective=base_v, repair_polished_objective=polished_v, repair_s=time.perf_counter() - t0, repair_tried=tried, repair_used=best is not base)
    return best, best_v


def price_schedule(instance: Instance, *, deadline: float | None = None) -> Schedule | None:
    """The best price-guided repack of ``instance`` built from scratch (:func:`improve` without a
    decoded base), as a schedule; ``None`` if none was built before ``deadline`` (a
    :func:`time.perf_counter` value). Needs no torch: ``lns`` starts from it (on the medium bench
    rounds 1.1-1.8 % from the configuration-LP bound in 0.02-0.07 s, about where the policy's
    decoded and repaired schedules are)."""
    from optsched.learned.decode import _schedule
    from optsched.learned.features import featurise

    feats = featurise(instance)
    state, _value = improve(instance, feats, None, deadline=deadline)
    return _schedule(instance, feats, state) if state is not None else None
