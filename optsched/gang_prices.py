"""A Lagrangian bound on a component of pinned jobs: every gang cut into per-node copies whose
agreement is priced.

The pinned jobs' bound (:mod:`optsched.incremental_bound`) enumerates the grid points of a
component's most valuable gangs together and cuts the rest into one copy per node, each free to
pick its own point. On large components (dozens of gangs linking most of a cluster's nodes) the
cut copies disagree, and the bound sits up to 1 % above the optimum. Here every gang ``g`` is cut,
and the copy on node ``n`` at point ``p`` is worth its share ``k_gn / g_g`` of the gang's worth
there plus a price ``mu[g, n, p]``, with ``sum_n mu[g, n, p] = 0`` for every point. In a feasible
schedule every copy of a gang takes the gang's point, so the prices cancel: for **any** such
prices the sum over nodes of each node's best is an upper bound on the component's optimum (the
same relaxation as the cut, plus zero). Each node's best is exact and cheap: its own jobs' ways
(:func:`~optsched.incremental_bound.node_ways`) against every joint point of the copies on it, with
the fill bound's table for the cores and memory they leave where the node has free GPUs.

The prices are moved by subgradient steps towards agreement (a copy's point minus the mean over
the gang's copies, Polyak steps), and a :class:`GangPrices` keeps them from one round to the
next: a chain's components persist from round to round and only the weights drift.
``formulations/incremental.md`` has the statement and the proof.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from optsched.incremental_bound import _units, node_ways

if TYPE_CHECKING:
    from optsched.incremental_bound import _Pinned
    from optsched.model import Instance

__all__ = ["COPY_COMBOS", "GangPrices", "NODE_CELLS"]

#: most joint points of the gang copies on one node (beyond: the component keeps its other bound)
COPY_COMBOS = 65_536
#: most (joint points of the copies) x (ways of the node's own jobs) compared on one node
NODE_CELLS = 4_000_000
#: most prices kept between rounds (cleared when full)
PRICES_KEPT = 4096


class _Node:
    """One node's programme: ``base[i]``, the most the node is worth with its gang copies at
    joint point ``i`` (their shares, plus the best of its own jobs and its fill table in what
    they leave; ``-inf`` where nothing fits), and per copy (gang number, its position among the
    gang's nodes, its point at each joint point)."""

    __slots__ = ("base", "copies")

    def __init__(self, base: np.ndarray, copies: list[tuple[int, int, np.ndarray]]) -> None:
        self.base = base
        self.copies = copies


def _node(instance: Instance, n: int, jobs: Sequence[_Pinned], on: Sequence[int], gangs: Mapping[int, int],
          positions: Mapping[tuple[int, int], int], start: np.ndarray | None, cells: int) -> _Node | None:
    """Node ``n``'s programme (:class:`_Node`); ``on``: the indices of the ``jobs`` on it, in order."""
    node = instance.nodes[n]
    singles = []
    copies = []  # (gang number, job)
    for i in on:
        p = jobs[i]
        k = p.nodes[n]  # a pinned job's GPUs on a node of its placement: at least 1
        if i in gangs:
            copies.append((gangs[i], p))
        else:
            singles.append((k * p.c, k * p.m, p.f * (k / p.gpus)))
    sizes = [p.f.size for _, p in copies]
    combos = math.prod(sizes)
    if combos > COPY_COMBOS:
        return None
    points = np.indices(sizes).reshape(len(sizes), -1) if copies else np.zeros((0, 1), dtype=np.int64)
    use_c = np.zeros(points.shape[1], dtype=np.int64)
    use_m = np.zeros(points.shape[1], dtype=np.int64)
    share = np.zeros(points.shape[1])
    for (_, p), at in zip(copies, points, strict=True):
        k = p.nodes[n]
        use_c += k * p.c[at]
        use_m += k * p.m[at]
        share += p.f[at] * (k / p.gpus)
    ways = node_ways(singles, node.cpus, NODE_CELLS // max(1, combos))
    if ways is None:
        return None
    wc, wm, wv, _ = ways
    rest_c = node.cpus - use_c[:, None] - wc[None, :]
    rest_m = node.mem_gb - use_m[:, None] - wm[None, :]
    fits = (rest_c >= 0) & (rest_m >= 0)
    worth = np.broadcast_to(wv[None, :], fits.shape)
    if start is not None:  # the fill table for what is left (sizes rounded down: still a bound)
        uc, um = _units(node.cpus, node.mem_gb, cells)
        worth = worth + start[np.maximum(rest_c, 0) // uc, np.maximum(rest_m, 0) // um]
    best = np.where(fits, worth, -np.inf).max(axis=1)
    return _Node(share + best, [(g, positions[(g, n)], at) for (g, _), at in zip(copies, points, strict=True)])


class GangPrices:
    """Prices on the agreement of pinned gangs' per-node copies, kept between rounds, and the
    bound they give (the module text). Called as the ``refine`` hook of
    :func:`optsched.incremental_bound.fill_bound`: ``prices(instance, jobs, starts, cells,
    regular)`` is the smaller of ``regular`` (the component's term without prices) and the priced
    bound on it (``inf`` where a node's programme would be too large). ``gain`` adds up how much
    lower the terms came out since it was last set to 0: the bound without prices is the bound
    with them plus ``gain``.

    ``steps`` subgradient steps at most per component and call; they stop earlier once the copies
    agree (the bound is then the relaxation's optimum) or the bound has not fallen by
    ``1e-5`` of itself in 10 steps."""

    def __init__(self, steps: int = 15) -> None:
        self.steps = steps
        self.gain = 0.0
        self._mu: dict[tuple[Any, ...], np.ndarray] = {}

    def clear(self) -> None:
        self._mu.clear()

    def __call__(self, instance: Instance, jobs: Sequence[_Pinned], starts: Mapping[int, np.ndarray] | None, cells: int,
                 regular: float) -> float:
        priced = self._priced(instance, jobs, starts, cells)
        if priced < regular:
            self.gain += regular - priced
            return priced
        return regular

    def _priced(self, instance: Instance, jobs: Sequence[_Pinned], starts: Mapping[int, np.ndarray] | None, cells: int) -> float:
        gang_jobs = [i for i, p in enumerate(jobs) if len(p.nodes) > 1 and p.f.size > 1]
        if not gang_jobs:
            return math.inf
        gangs = {i: g for g, i in enumerate(gang_jobs)}
        node_lists = [sorted(jobs[i].nodes) for i in gang_jobs]
        positions = {(g, n): pos for g, ns in enumerate(node_lists) for pos, n in enumerate(ns)}
        on: dict[int, list[int]] = {}  # node -> the jobs on it, by index
        for i, p in enumerate(jobs):
            for n in p.nodes:
                on.setdefault(n, []).append(i)
        problems = []
        for n in sorted(on):
            prob = _node(instance, n, jobs, on[n], gangs, positions, (starts or {}).get(n), cells)
            if prob is None:
                return math.inf
            problems.append(prob)
        keys = [self._key(instance, jobs[i], ns) for i, ns in zip(gang_jobs, node_lists, strict=True)]
        mu = [self._start(key, len(ns), jobs[i].f.size) for key, i, ns in zip(keys, gang_jobs, node_lists, strict=True)]
        best = self._descend(problems, mu, [len(ns) for ns in node_lists])
        if len(self._mu) > PRICES_KEPT:
            self._mu.clear()
        for key, m in zip(keys, mu, strict=True):
            self._mu[key] = m
        return best

    @staticmethod
    def _key(instance: Instance, job: _Pinned, nodes: list[int]) -> tuple[Any, ...]:
        """What a gang's prices are kept under: its nodes (by id), GPUs on each and its points."""
        return (tuple((instance.nodes[n].id, job.nodes[n]) for n in nodes), job.c.tobytes(), job.m.tobytes())

    def _start(self, key: tuple[Any, ...], copies: int, points: int) -> np.ndarray:
        """The gang's last prices (their mean over its copies taken out, so that they sum to 0 over
        the copies whatever was stored), or zeros."""
        mu = self._mu.get(key)
        if mu is None or mu.shape != (copies, points):
            return np.zeros((copies, points))
        return mu - mu.mean(axis=0)

    def _descend(self, problems: list[_Node], mu: list[np.ndarray], copies: list[int]) -> float:
        """The least bound over subgradient steps from prices ``mu`` (updated in place), all
        nodes at once: each node's joint points are a segment of one flat array."""
        sizes = np.array([prob.base.size for prob in problems])
        offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        base = np.concatenate([prob.base for prob in problems])
        points = [m.shape[1] for m in mu]
        gang_off = np.concatenate(([0], np.cumsum([c * k for c, k in zip(copies, points, strict=True)])[:-1])).astype(np.int64)
        gp_off = np.concatenate(([0], np.cumsum(points)[:-1])).astype(np.int64)
        flat = np.concatenate([m.ravel() for m in mu])
        # per price: its gang's (gang, point) slot and the gang's number of copies
        gp_of = np.concatenate([gp_off[g] + np.tile(np.arange(k), c) for g, (c, k) in enumerate(zip(copies, points, strict=True))])
        copies_of = np.concatenate([np.full(c * k, c, dtype=np.float64) for c, k in zip(copies, points, strict=True)])
        # per (node, copy) entry: where its segment starts, and the price index at each joint point
        seg_node, seg_start, seg_len, at_all, price_all, owner = [], [], [], [], [], []
        cursor = 0
        for i, prob in enumerate(problems):
            for g, pos, at in prob.copies:
                seg_node.append(i)
                seg_start.append(cursor)
                seg_len.append(at.size)
                at_all.append(at)
                price_all.append(gang_off[g] + pos * points[g] + at)
                owner.append(gang_off[g] + pos * points[g])
                cursor += at.size
        if not seg_node:
            return float(sum(float(prob.base.max()) for prob in problems))
        seg_node_a = np.array(seg_node)
        seg_start_a = np.array(seg_start)
        at_flat = np.concatenate(at_all)
        price_flat = np.concatenate(price_all)
        owner_a = np.array(owner, dtype=np.int64)
        into = np.concatenate([offsets[i] + np.arange(n) for i, n in zip(seg_node, seg_len, strict=True)])
        best, history, theta = math.inf, [], 1.0
        for step in range(self.steps):
            values = base + np.bincount(into, weights=flat[price_flat], minlength=base.size)
            tops = np.maximum.reduceat(values, offsets)
            total = float(tops.sum())
            if not math.isfinite(total):
                return math.inf
            best = min(best, total)
            history.append(best)
            hit = np.flatnonzero(values >= np.repeat(tops, sizes))
            chosen = hit[np.searchsorted(hit, offsets)] - offsets  # each node's first best joint point
            picked = at_flat[seg_start_a + chosen[seg_node_a]]
            onehot = np.zeros_like(flat)
            onehot[owner_a + picked] = 1.0
            count = np.bincount(gp_of, weights=onehot, minlength=int(gp_off[-1] + points[-1]))
            move = onehot - count[gp_of] / copies_of  # sums to 0 over each gang's copies
            norm = float(move @ move)
            if norm == 0.0:  # every gang's copies agree: the relaxation's optimum is reached
                break
            if len(history) > 10 and history[-11] - best <= 1e-5 * abs(best):
                break
            flat -= theta * (total - best * (1 - 0.005)) / norm * move
            if step % 10 == 9:
                theta *= 0.7
        for g, m in enumerate(mu):
            m[...] = flat[gang_off[g]: gang_off[g] + m.size].reshape(m.shape)
        return best
