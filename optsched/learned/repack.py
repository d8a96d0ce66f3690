"""The price-guided repack of a round (:func:`price_repack`; :mod:`optsched.learned.repair`).

Running jobs stay where they are (no restart), except that on a node they fill, some may leave
when the node's best mix with leavers beats its best mix with all staying; gangs that fill whole
nodes take whole free nodes, and the other jobs fill the remaining nodes one node at a time, each
time the job whose target cores and memory best match what the node has left.
"""

from __future__ import annotations

import numpy as np

from optsched.learned.decode import (
    PlacementState,
    move_multiplier,
    place_job_on,
    repoint_job,
    split_job,
)
from optsched.learned.features import RoundFeatures
from optsched.learned.moves import (
    node_knapsack,
    polish,
)
from optsched.learned.prices import OptionTable, reduced_profit
from optsched.model import Instance

__all__ = ["price_repack"]




def _place_first_fit(st: PlacementState, feats: RoundFeatures, j: int, nodes: dict[int, int], points: np.ndarray) -> bool:
    """Place job ``j`` on ``nodes`` ({node: GPUs}) at the first of ``points`` they have room for;
    whether it was placed."""
    for p in points:
        p = int(p)
        c, m = int(feats.point_c[j, p]), int(feats.point_m[j, p])
        if all(st.free_g[n] >= k and st.free_c[n] >= c * k and st.free_m[n] >= m * k for n, k in nodes.items()):
            place_job_on(st, feats, j, nodes, p)
            return True
    return False


def _put(instance: Instance, feats: RoundFeatures, st: PlacementState, j: int, allowed: np.ndarray, points: np.ndarray, *,
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
            place_job_on(st, feats, j, {n: g}, p)
            return [n]
        if g > 1:
            types = np.unique(feats.node_type[allowed])
            sp = split_job(instance, j, g, np.array([p]), np.zeros(1), feats, allowed, np.zeros(feats.n_nodes), st, types)
            if sp is not None:
                place_job_on(st, feats, j, sp[0], p)
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


def _fill_nodes(feats: RoundFeatures, st: PlacementState, jobs: np.ndarray, targets: np.ndarray, value: np.ndarray, nodes: np.ndarray) -> np.ndarray:
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
            place_job_on(st, feats, int(jobs[i]), {n: int(g[i])}, p)
    return jobs[alive]


def _spread(feats: RoundFeatures, st: PlacementState, j: int, allowed: np.ndarray, points: np.ndarray, avoid: np.ndarray) -> list[int] | None:
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
        place_job_on(st, feats, j, nodes, p)
        return list(nodes)
    return None


def _evict_crowded(instance: Instance, feats: RoundFeatures, st: PlacementState, table: OptionTable, lam: np.ndarray, red: np.ndarray,
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
        mult = [move_multiplier(instance, feats, j, st.where[j]) for j in jobs]
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
                place_job_on(st, feats, j, {n: int(g[i])}, int(p[o]))
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
) -> PlacementState:
    """A new feasible state built around prices ``lam`` (steps 2-5 of the module text).
    ``targets`` (job index -> grid point index): preferred points (e.g. the policy's)."""
    J = feats.n_jobs
    P = feats.point_c.shape[1]
    T = table.n_types
    st = PlacementState(feats)
    if J == 0 or feats.n_nodes == 0:
        return st
    red = reduced_profit(table, lam)
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
                repoint_job(st, feats, int(j), int(p))
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
