"""Local moves on a placement state that never lower its worth (:mod:`optsched.learned.repair`).

Point upgrades per node (:func:`upgrade_points`), each node's best mix of grid points by an exact
small knapsack (:func:`repoint_nodes`, :func:`node_knapsack`), waiting jobs and gangs squeezed in
beside co-located jobs (:func:`squeeze_in`, :func:`squeeze_gangs`), and jobs moved to nodes where
they are worth more (:func:`relocate`) or to faster GPU types (:func:`move_to_faster`); the
polish also exchanges two jobs' nodes (:func:`optsched.learned.exchange.swap_nodes`).
"""

from __future__ import annotations

import time

import numpy as np

from optsched.learned.decode import (
    PlacementState,
    move_multiplier,
    place_job_on,
    redistribute_leftover,
    repoint_job,
)
from optsched.learned.exchange import SWAP_CELLS, swap_nodes
from optsched.learned.features import RoundFeatures
from optsched.model import Instance

__all__ = ["RELOCATE_CELLS", "move_to_faster", "node_knapsack", "polish", "relocate", "repoint_nodes", "squeeze_gangs", "squeeze_in",
           "upgrade_points"]


def upgrade_points(instance: Instance, feats: RoundFeatures, st: PlacementState, rounds: int = 500) -> None:
    """Per node, repeatedly apply the single-node job upgrade with the largest value gain per unit
    of the node's cores and memory it takes (one per node per round, all nodes at once)."""
    jobs = np.array([j for j, w in st.where.items() if len(w) == 1], dtype=np.int64)
    if jobs.size == 0:
        return
    node = np.array([next(iter(st.where[int(j)])) for j in jobs], dtype=np.int64)
    g = feats.gpus[jobs]
    mult = np.array([move_multiplier(instance, feats, int(j), st.where[int(j)]) for j in jobs])
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
            repoint_job(st, feats, int(jobs[r]), p)
            cur[r] = p


def _freeing_plan(feats: RoundFeatures, st: PlacementState, n: int, need_c: int, need_m: int, residents: list[int],
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


def _single_node_jobs(st: PlacementState) -> dict[int, list[int]]:
    """Node -> the jobs placed wholly on it, in placement order."""
    residents: dict[int, list[int]] = {}
    for j, w in st.where.items():
        if len(w) == 1:
            residents.setdefault(next(iter(w)), []).append(j)
    return residents


def repoint_nodes(instance: Instance, feats: RoundFeatures, st: PlacementState, *, nodes: np.ndarray | None = None,
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
        mult = [move_multiplier(instance, feats, j, st.where[j]) for j in jobs]
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
    return np.where(ok, feats.point_value[jobs], 0.0).max(axis=1, initial=0.0) * feats.speed[jobs].max(axis=1, initial=0.0)


def squeeze_in(instance: Instance, feats: RoundFeatures, st: PlacementState, *, max_nodes: int = 12, deadline: float | None = None) -> int:
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
    mult = {j: move_multiplier(instance, feats, j, w) for j, w in st.where.items()}
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
            worth = feats.point_value[j, pts] * move_multiplier(instance, feats, int(j), {n: g})
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
            repoint_job(st, feats, i, k)
        place_job_on(st, feats, int(j), {n: g}, p)
        residents.setdefault(n, []).append(int(j))
        mult[int(j)] = move_multiplier(instance, feats, int(j), {n: g})
        admitted += 1
    return admitted


def _remix(feats: RoundFeatures, st: PlacementState, n: int, c: int, m: int, residents: list[int],
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


def squeeze_gangs(instance: Instance, feats: RoundFeatures, st: PlacementState, *, max_nodes: int = 16, extra_nodes: int = 0,
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
    mult = {j: move_multiplier(instance, feats, j, w) for j, w in st.where.items()}
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
                        gain = float(feats.point_value[j, p]) * move_multiplier(instance, feats, j, chosen) - cost
                        if gain > 1e-9 and (best is None or gain > best[0]):
                            best = (gain, chosen, p, freeing)
        if best is None:
            continue
        _, chosen, p, freeing = best
        for plan in freeing:
            for i, q in plan.items():
                repoint_job(st, feats, i, q)
        place_job_on(st, feats, j, chosen, p)
        for n in chosen:  # only the chosen nodes changed (other nodes' plans stay valid) ...
            plans.pop(n, None)
        t = int(feats.node_type[next(iter(chosen))])
        for key in [key for key in options if key[0] == t]:  # ... but which nodes have the most room may have too
            del options[key]
        admitted += 1
    return admitted


def relocate(instance: Instance, feats: RoundFeatures, st: PlacementState, *, max_jobs: int = 400) -> int:
    """Move single-node jobs to another node where they are worth more (a faster GPU type, a
    better grid point the room there allows, or back to the node a running job holds now, which
    saves its restart), largest gain first, each re-checked against the room the earlier moves
    left; the ``max_jobs`` jobs with the most to gain are considered. Returns the moves made."""
    jobs = [j for j, w in st.where.items() if len(w) == 1]
    if not jobs:
        return 0
    ok_pts = feats.point_ok & feats.point_mask
    cur = np.array([feats.point_value[j, st.point[j]] * move_multiplier(instance, feats, j, st.where[j]) for j in jobs])
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
        place_job_on(st, feats, j, {n: g}, p)
        moved += 1
    return moved


def move_to_faster(instance: Instance, feats: RoundFeatures, st: PlacementState, *, max_jobs: int = 300, max_nodes: int = 8,
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
    mult = {j: move_multiplier(instance, feats, j, w) for j, w in st.where.items()}
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
            mu = move_multiplier(instance, feats, j, {b: g})
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
            repoint_job(st, feats, r, q)
        place_job_on(st, feats, j, {b: g}, p)
        residents.setdefault(b, []).append(j)
        mult[j] = move_multiplier(instance, feats, j, {b: g})
        plans.pop(a, None)
        plans.pop(b, None)
        moved += 1
    return moved


#: :func:`polish` runs :func:`relocate` and the per-node mixes on rounds of at most this many
#: nodes x jobs (the simulator's and medium rounds: +1.6 % worth on 17 busy Alibaba rounds); on
#: larger ones :func:`improve` runs them once, on the state it keeps (0.04 s for relocate on the
#: 1,024 x 4,000 library rounds)
RELOCATE_CELLS = 16_384


def polish(instance: Instance, feats: RoundFeatures, st: PlacementState, *, deadline: float | None = None, repoint: bool = True) -> None:
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
    if feats.n_nodes * feats.n_jobs <= SWAP_CELLS:
        swap_nodes(instance, feats, st, deadline=deadline)
    upgrade_points(instance, feats, st)
    if small and repoint:
        repoint_nodes(instance, feats, st, deadline=deadline)
    redistribute_leftover(instance, feats, st)
