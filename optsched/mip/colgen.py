"""A configuration-LP upper bound on a round's optimum, by column generation over node groups.

The math is in ``formulations/config-bound.md``. In short: a *configuration* is what one node
holds — a set of *pieces* (some of a job's GPUs on that node at one grid point), at most one
piece per job, within the node's GPUs, cores and memory. A piece declares how its job runs:
whole (``K = 1``), split over exactly ``K`` nodes (``2 <= K < TAIL``) or over ``K >= TAIL``
nodes; it is worth its share ``k / g`` of the job's worth run that way (for ``K >= TAIL``, of a
convex bound on it). Every feasible schedule gives every node one configuration whose pieces add
up, per job, to one whole job in one way or to nothing; so the LP

    max  sum_c v_c x_c
    s.t. sum_{c of group q} x_c <= |q|                       (nodes per group)
         sum_c a_{jc} x_c <= 1                                (a_{jc}: share of job j in c)
         sum_c (K a_{jKc} - n_{jKc}) x_c  = 0   per (j, K < TAIL)  (a K-node split has K pieces)
         sum_c (K a_{jKc} - n_{jKc}) x_c <= 0   per (j, K = TAIL)  (... at least TAIL pieces)
         x >= 0

is an upper bound on the optimum. Nodes are grouped (identical nodes share one group; a node on
which a running job sits is a group of its own, since only there is the job worth its unmoved
value). Column generation prices one *multiple-choice knapsack* per node class by dynamic
programming over (GPUs, core units, memory units) (:func:`price_class`).

The bound reported is never the master LP value itself but the Lagrangian bound of the duals
``pi, rho >= 0`` the master returns (:func:`lagrangian_bound`):

    L(pi, rho) = sum_j pi_j + sum_q |q| max(0, max_c reduced value of c),

valid for *any* duals (``pi``, and ``rho`` of the ``<=`` rows, non-negative) provided the inner max is computed exactly or over-estimated,
which the dynamic program does (it rounds item sizes down, so it optimises over a superset of
the real configurations). So the bound is proven whenever the loop stops (time limit or
convergence) and does not depend on the LP solver's accuracy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optsched.exact.prep import JobData, job_data, node_key
from optsched.model import Instance
from optsched.schedule import Schedule
from optsched.values import spread_multiplier

__all__ = ["ConfigBound", "NodeGroup", "Piece", "Prices", "config_bound", "lagrangian_bound", "node_groups", "supported"]

#: at most this many core (and memory) units per node in the dynamic program; sizes are rounded
#: down to units, which relaxes the node rows (the bound stays valid, a little weaker)
MAX_UNITS = 128
#: splits over this many nodes or more share one piece category (valued by a convex bound)
TAIL = 4
#: relative slack added to the final bound (floating-point sums over a few hundred terms)
SLACK = 1e-9
#: swap columns are generated around this many priced configurations (those of most reduced value)
SWAP_GROUPS = 4


@dataclass(frozen=True)
class Piece:
    """``gpus`` GPUs of job ``job`` on one node at point ``point``, worth at most ``value``."""

    job: int
    point: int
    gpus: int
    cpus: int  #: cores of the piece (gpus x cores per GPU)
    mem: int  #: GB of the piece
    value: float
    share: float  #: gpus / the job's gang size: its coefficient in the job's row
    nodes: int = 1  #: the declared split: 1 whole, K exactly K nodes, TAIL at least TAIL nodes
    stay: bool = False  #: valued unmoved because it is the job's current share of this very node

    @property
    def key(self) -> tuple[int, int, int, int, bool]:
        return self.job, self.point, self.gpus, self.nodes, self.stay


@dataclass
class NodeGroup:
    """Nodes that are interchangeable for the bound: same type and capacities, and either none
    of them hosts a running job that could stay (``home is None``) or it is one such node."""

    gpu_type: str
    gpus: int
    cpus: int
    mem: int
    nodes: list[int]
    home: int | None = None  #: the one node of a home group
    stays: list[Piece] = field(default_factory=list)  #: pieces only this home node can hold unmoved

    @property
    def cls(self) -> tuple[str, int, int, int]:
        return self.gpu_type, self.gpus, self.cpus, self.mem


def supported(instance: Instance) -> bool:
    """Whether the bound applies: rounds without policy fields or elastic gangs (either spread rule)."""
    return not instance.uses_policies


def _stay_factor(instance: Instance, d: JobData) -> float | None:
    """Worth factor of staying put (:func:`optsched.values.spread_multiplier` on its nodes), or
    ``None`` when staying differs in nothing from moving (not running, or no restart cost) or is impossible."""
    job = d.job
    if not job.placement or job.restart_s <= 0:
        return None
    types = {instance.node(n).gpu_type for n in job.placement}
    if len(types) != 1 or next(iter(types)) not in d.types:
        return None
    return spread_multiplier(instance, job, next(iter(types)), len(job.placement))


def _category(k: int) -> int:
    return min(k, TAIL)


def node_groups(instance: Instance, data: list[JobData]) -> list[NodeGroup]:
    """Identical nodes grouped; each node holding (part of) a running job with a restart cost
    forms a group of its own with the pieces that may stay there (see the module text)."""
    homes: dict[int, list[Piece]] = {}
    for d in data:
        f = _stay_factor(instance, d)
        if f is None:
            continue
        job = d.job
        t = instance.node(next(iter(job.placement))).gpu_type
        kk = _category(len(job.placement))
        for nid, k in job.placement.items():
            n = instance.node_idx(nid)
            node = instance.nodes[n]
            for p, pt in enumerate(d.points):
                if k * pt.cpus <= node.cpus and k * pt.mem <= node.mem_gb and k <= node.gpus:
                    v = d.base[(t, p)] * f * k / job.gpus
                    if v > 0:
                        homes.setdefault(n, []).append(Piece(d.index, p, k, k * pt.cpus, k * pt.mem, v, k / job.gpus, kk, True))
    groups: dict[tuple[str, int, int, int], NodeGroup] = {}
    out: list[NodeGroup] = []
    for n, node in enumerate(instance.nodes):
        if node.gpus <= 0:
            continue
        if n in homes:
            out.append(NodeGroup(*node_key(node), [n], n, homes[n]))
            continue
        key = node_key(node)
        if key not in groups:
            groups[key] = NodeGroup(*key, [])
            out.append(groups[key])
        groups[key].nodes.append(n)
    return out


def split_fraction(k: int, g: int, nodes: int, sigma: float, base: int = 1) -> float:
    """The share of a job's unsplit worth a piece of ``k`` of its ``g`` GPUs is credited with,
    the gang paying ``sigma`` per node beyond ``base`` (its spread base on the piece's GPU type,
    :meth:`optsched.model.Instance.spread_base`; every feasible split has ``K >= base`` nodes).

    ``nodes = K < TAIL``: the split is over exactly ``K`` nodes, worth ``sigma^max(0, K - base)``,
    shared pro rata. ``nodes = TAIL``: over ``K >= TAIL`` nodes;
    ``phi(x) = x sigma^(1/x - base)`` is convex on (0, 1] (``sigma^(1 - base)`` times
    ``x sigma^(1/x - 1)``, whose ``phi'' = b^2 e^b e^(-b/x) / x^3``, ``b = -ln sigma``), so for
    pieces ``x_i = k_i / g`` summing to 1, ``sum phi(x_i) >= K phi(1/K) = sigma^(K - base)``
    (Jensen): crediting ``phi(k / g)`` over-estimates the worth of every split over ``K >= base`` nodes.
    """
    if nodes < TAIL:
        return k / g * sigma ** max(0, nodes - base)
    return k / g * sigma ** (g / k - base)


def class_pieces(instance: Instance, data: list[JobData], cls: tuple[str, int, int, int]) -> dict[int, list[Piece]]:
    """Per job, every piece a node of class ``cls`` can hold, valued as if the node were not its home.

    A whole job (``k = g``, ``K = 1``) is worth ``base`` (times ``1 - restart share`` if running:
    it moves unless the node is its home, which :func:`node_groups` covers); a piece ``k < g`` of a
    split over ``K`` nodes is worth ``base * split_fraction(k, g, K, spread, kbase)`` (moved likewise),
    for the ``K`` that leave each other node at least one GPU and that the type's nodes can hold.
    """
    t, G, C, M = cls
    nodes_t = [n for n in instance.nodes if n.gpu_type == t and n.gpus > 0]
    out: dict[int, list[Piece]] = {}
    for d in data:
        if t not in d.types:
            continue
        job = d.job
        g = job.gpus
        moved = 1.0 - job.restart_s / instance.round.duration_s if job.placement else 1.0
        if moved <= 0:
            continue
        pieces = []
        for p, pt in enumerate(d.points):
            cap = min(g, G, C // pt.cpus if pt.cpus else G, M // pt.mem if pt.mem else G)
            if cap < 1:
                continue
            base = d.base[(t, p)] * moved
            if base <= 0:
                continue
            if cap == g:
                pieces.append(Piece(d.index, p, g, g * pt.cpus, g * pt.mem, base, 1.0))
            if g < 2:
                continue
            most = max(min(g - 1, n.gpus, n.cpus // pt.cpus if pt.cpus else g, n.mem_gb // pt.mem if pt.mem else g)
                       for n in nodes_t)
            kmin = max(2, math.ceil(g / most))
            kmax = min(g, len(nodes_t))
            kbase = instance.spread_base(t, g)
            for kk in range(kmin, min(kmax, TAIL) + 1):
                # the other K - 1 pieces hold between K - 1 and (K - 1) * most GPUs
                lo = max(1, g - (kk - 1) * most) if kk < TAIL else 1
                for k in range(lo, min(cap, g - kk + 1) + 1):
                    v = base * split_fraction(k, g, kk, job.spread_factor, kbase)
                    pieces.append(Piece(d.index, p, k, k * pt.cpus, k * pt.mem, v, k / g, kk))
        if pieces:
            out[d.index] = pieces
    return out


class PieceSet:
    """Pieces as arrays, for pricing: those of one node class, or the stay pieces of one home node.

    Sizes are in the class's units: cores // ``cu``, GB // ``mu`` (rounded down: a relaxation)."""

    def __init__(self, pieces: list[Piece], cu: int, mu: int) -> None:
        self.pieces = pieces
        self.job = np.array([pc.job for pc in pieces], dtype=np.int64)
        self.point = np.array([pc.point for pc in pieces], dtype=np.int64)
        self.gpus = np.array([pc.gpus for pc in pieces], dtype=np.int64)
        self.uc = np.array([pc.cpus // cu for pc in pieces], dtype=np.int64)
        self.um = np.array([pc.mem // mu for pc in pieces], dtype=np.int64)
        self.value = np.array([pc.value for pc in pieces], dtype=float)
        self.share = np.array([pc.share for pc in pieces], dtype=float)
        self.nodes = np.array([pc.nodes for pc in pieces], dtype=np.int64)
        #: coefficient in the piece-count row of its (job, declared split): K share - 1 (0 when whole)
        self.count = np.where(self.nodes >= 2, self.nodes * self.share - 1.0, 0.0)

    def __len__(self) -> int:
        return len(self.pieces)

    def reduced(self, duals: Duals) -> np.ndarray:
        """Reduced values: ``value - pi_j share - rho_{jK} (K share - 1)``."""
        pi, rho = duals
        if not len(self.pieces):
            return np.zeros(0)
        return self.value - pi[self.job] * self.share - rho[self.job, self.nodes] * self.count


#: duals: ``pi`` per job (>= 0) and ``rho[j, K]`` per job and declared split (column 0 and 1 unused, 0)
Duals = tuple[np.ndarray, np.ndarray]


@dataclass
class ClassTable:
    """The dynamic program of one node class for one dual vector: ``best[g, c, m]`` is the most
    reduced value of a configuration using at most ``g`` GPUs, ``c`` core units and ``m`` memory
    units (sizes rounded down to units: a relaxation); ``layers`` allow reading a configuration back."""

    best: np.ndarray
    pieces: PieceSet
    cu: int  #: cores per unit
    mu: int  #: GB per unit
    #: per job in order: its pieces in the table (indices into ``pieces``), their reduced values, the table before it
    layers: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    reads: dict[tuple[int, int, int], list[Piece]] = field(default_factory=dict)  #: :meth:`read_cached`

    def top(self) -> tuple[int, int, int]:
        g, c, m = self.best.shape
        return g - 1, c - 1, m - 1

    def units(self, pc: Piece) -> tuple[int, int, int]:
        return pc.gpus, pc.cpus // self.cu, pc.mem // self.mu

    def read_cached(self, g: int, c: int, m: int) -> list[Piece]:
        """:meth:`read`, remembered per state (home groups of a class mostly share the same rest)."""
        if (g, c, m) not in self.reads:
            self.reads[(g, c, m)] = self.read(g, c, m)
        return self.reads[(g, c, m)]

    def read(self, g: int, c: int, m: int) -> list[Piece]:
        """A configuration attaining ``best[g, c, m]`` (backtracking through the layers)."""
        ps = self.pieces
        out = []
        cur = self.best
        for idx, rv, before in reversed(self.layers):
            v = cur[g, c, m]
            if v > before[g, c, m] + 1e-12:
                dg, dc, dm = ps.gpus[idx], ps.uc[idx], ps.um[idx]
                ok = (dg <= g) & (dc <= c) & (dm <= m)
                cand = np.full(len(idx), -np.inf)
                cand[ok] = before[g - dg[ok], c - dc[ok], m - dm[ok]] + rv[ok]
                i = int(np.argmax(cand))
                out.append(ps.pieces[idx[i]])
                g, c, m = g - int(dg[i]), c - int(dc[i]), m - int(dm[i])
            cur = before
        return out


def units_of(cls: tuple[str, int, int, int]) -> tuple[int, int]:
    """Cores and GB per unit for the dynamic program of a node class (at most MAX_UNITS units each)."""
    _t, _G, C, M = cls
    return max(1, math.ceil(C / MAX_UNITS)), max(1, math.ceil(M / MAX_UNITS))


def price_class(cls: tuple[str, int, int, int], pieces: PieceSet, rv: np.ndarray, dtype: type = np.float64) -> ClassTable:
    """Multiple-choice knapsack of one node class: the most reduced value ``rv`` of a configuration.

    ``dtype`` float32 halves the work (used to generate columns; the bound itself is evaluated in
    float64)."""
    _t, G, C, M = cls
    cu, mu = units_of(cls)
    rv = rv.astype(dtype, copy=False)
    table = ClassTable(np.zeros((G + 1, C // cu + 1, M // mu + 1), dtype=dtype), pieces, cu, mu, [])
    shape = table.best.shape
    keep = prune(pieces, rv, G)
    if not len(keep):
        return table
    jobs = pieces.job[keep]
    cuts = np.flatnonzero(jobs[1:] != jobs[:-1]) + 1
    for idx in np.split(keep, cuts):
        old = table.best
        new = old.copy()
        for i in idx:
            dg, dc, dm = int(pieces.gpus[i]), int(pieces.uc[i]), int(pieces.um[i])
            if dg >= shape[0] or dc >= shape[1] or dm >= shape[2]:
                continue
            dst = new[dg:, dc:, dm:]
            np.maximum(dst, old[: shape[0] - dg, : shape[1] - dc, : shape[2] - dm] + rv[i], out=dst)
        table.layers.append((idx, rv[idx], old))
        table.best = new
    return table


def prune(pieces: PieceSet, rv: np.ndarray, gpus: int) -> np.ndarray:
    """Indices (sorted by job) of the pieces of positive reduced value a best configuration may need.

    Dropped: (1) of a job's pieces with the same point and size (different declared splits), all
    but the best; (2) a piece of ``k`` GPUs when at least ``gpus - k + 1`` *other* jobs each have a
    piece of ``k`` GPUs using no more core and memory units and of no less reduced value: a
    configuration holding it holds at most ``gpus - k`` other jobs, so one of those is absent and
    its piece can replace it (fits, is worth no less). Some best configuration survives both.
    """
    idx = np.flatnonzero(rv > 1e-12)
    if not len(idx):
        return idx
    ps = pieces
    order = np.lexsort((-rv[idx], ps.gpus[idx], ps.point[idx], ps.job[idx]))
    idx = idx[order]
    key = (ps.job[idx] * 1_000_003 + ps.point[idx]) * 4099 + ps.gpus[idx]
    first = np.ones(len(idx), dtype=bool)
    first[1:] = key[1:] != key[:-1]
    idx = idx[first]
    keep = np.ones(len(idx), dtype=bool)
    n_jobs = int(ps.job.max()) + 1
    for k in np.unique(ps.gpus[idx]):
        need = gpus - int(k) + 1  # other jobs that must dominate
        at = np.flatnonzero(ps.gpus[idx] == k)
        sub = idx[at]
        if len(np.unique(ps.job[sub])) <= need:
            continue
        uc, um, v, jb = ps.uc[sub], ps.um[sub], rv[sub], ps.job[sub]
        for c, m in set(zip(uc.tolist(), um.tolist(), strict=True)):
            inside = (uc <= c) & (um <= m)
            tops = np.full(n_jobs, -np.inf)
            np.maximum.at(tops, jb[inside], v[inside])
            tops = tops[np.isfinite(tops)]
            if len(tops) <= need:
                continue
            # the (need + 1)-th best job reaches `level`: `need` jobs other than any one job do too
            level = np.partition(tops, len(tops) - need - 1)[len(tops) - need - 1]
            keep[at[(uc == c) & (um == m) & (v < level)]] = False
    return idx[keep]


def _stay_combinations(table: ClassTable, stays: PieceSet, rv: np.ndarray) -> tuple[float, list[Piece]]:
    """Best ``sum of chosen stay pieces + table[rest of the node]`` over every non-empty choice of
    at most one stay piece per job, by a sparse dynamic program over the (few) stay pieces."""
    G, C, M = table.top()
    lg, lc, lm, lv = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(1)
    history: list[tuple[np.ndarray, np.ndarray]] = []  # per job: parent label, piece (-1: none)
    pos = np.flatnonzero(rv > 1e-12)
    for j in np.unique(stays.job[pos]):
        opts = pos[stays.job[pos] == j]
        parts = [(lg, lc, lm, lv, np.arange(len(lg)), np.full(len(lg), -1))]
        for i in opts:
            dg, dc, dm = stays.gpus[i], stays.uc[i], stays.um[i]
            ok = (lg + dg <= G) & (lc + dc <= C) & (lm + dm <= M)
            parts.append((lg[ok] + dg, lc[ok] + dc, lm[ok] + dm, lv[ok] + rv[i], np.flatnonzero(ok), np.full(int(ok.sum()), i)))
        g, c, m, v, par, pc = (np.concatenate(x) for x in zip(*parts, strict=True))
        key = (g * (C + 1) + c) * (M + 1) + m  # keep the best label per resource vector
        order = np.lexsort((-v, key))
        first = np.ones(len(order), dtype=bool)
        first[1:] = key[order][1:] != key[order][:-1]
        keep = order[first]
        lg, lc, lm, lv = g[keep], c[keep], m[keep], v[keep]
        history.append((par[keep], pc[keep]))
    if not history:
        return -math.inf, []
    total = lv + table.best[G - lg, C - lc, M - lm]
    total[(lg == 0) & (lc == 0) & (lm == 0)] = -math.inf  # the empty choice is the table's own
    i = int(np.argmax(total))
    best = float(total[i])
    chosen = []
    for par, pc in reversed(history):
        if pc[i] >= 0:
            chosen.append(stays.pieces[int(pc[i])])
        i = int(par[i])
    return best, chosen


def group_best(table: ClassTable, stays: PieceSet | None, stay_rv: np.ndarray | None) -> tuple[float, list[Piece]]:
    """The most reduced value of a configuration of a node group and one attaining it.

    A home node adds its stay pieces (each choice of them with the best rest from the class table,
    which may hold the same job again as a moved piece: a relaxation, still an over-estimate)."""
    G, C, M = table.top()
    best_v, extra = float(table.best[G, C, M]), []
    if stays is not None and len(stays):
        v, chosen = _stay_combinations(table, stays, stay_rv)
        if v > best_v:
            best_v, extra = v, chosen
    g, c, m = G, C, M
    for pc in extra:
        dg, dc, dm = table.units(pc)
        g, c, m = g - dg, c - dc, m - dm
    taken = {e.job for e in extra}
    return best_v, extra + [pc for pc in table.read_cached(g, c, m) if pc.job not in taken]


def swaps(config: list[Piece], table: ClassTable, rv_lp: np.ndarray, mu: float, limit: int,
          config_rv: list[float]) -> list[tuple[float, list[Piece]]]:
    """Up to ``limit`` configurations of reduced value above ``mu`` (with that value) that differ
    from ``config`` by one piece swapped for a piece of a job not in it (from the pieces the table
    priced), within the table's (relaxed) capacities: cheap extra columns per pricing.
    ``rv_lp``: reduced values of the table's pieces, ``config_rv``: of the configuration's."""
    if limit <= 0 or not config or not table.layers:
        return []
    G, C, M = table.top()
    ps = table.pieces
    cand = np.concatenate([idx for idx, _rv, _b in table.layers])
    cand = cand[~np.isin(ps.job[cand], [pc.job for pc in config]) & (rv_lp[cand] > 1e-12)]
    if not len(cand):
        return []
    cg_, cc, cm, cv = ps.gpus[cand], ps.uc[cand], ps.um[cand], rv_lp[cand]
    sizes = [table.units(pc) for pc in config]
    used = [sum(x[i] for x in sizes) for i in range(3)]
    total = sum(config_rv)
    out: list[tuple[float, int, int]] = []
    for i in range(len(config)):
        rg, rc, rm = G - used[0] + sizes[i][0], C - used[1] + sizes[i][1], M - used[2] + sizes[i][2]
        val = total - config_rv[i] + cv
        ok = np.flatnonzero((cg_ <= rg) & (cc <= rc) & (cm <= rm) & (val > mu + 1e-9))
        if len(ok) > limit:
            ok = ok[np.argpartition(-val[ok], limit)[:limit]]
        out += [(float(val[k]), i, int(cand[k])) for k in ok]
    out.sort(key=lambda x: -x[0])
    return [(v, [*config[:i], ps.pieces[k], *config[i + 1:]]) for v, i, k in out[:limit]]


def lagrangian_bound(pi: np.ndarray, values: list[tuple[int, float]]) -> float:
    """``sum_j pi_j + sum_q |q| max(0, best reduced value of q)`` for groups ``values = [(|q|, best)]``."""
    return float(np.maximum(pi, 0.0).sum()) + sum(n * max(0.0, b) for n, b in values)


class Master:
    """The restricted master LP (HiGHS, warm-started as columns arrive): rows per job (share <= 1),
    per node group (configurations <= nodes) and per (job, declared split) (piece counts)."""

    def __init__(self, n_jobs: int, group_sizes: list[int]) -> None:
        import highspy  # lazy: highspy loads only for the configuration LP

        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        # primal simplex: added columns keep the basis primal feasible (measured, 64 x 256: LP time
        # 17.6 s -> 5.6 s over 300 solves); one thread: deterministic, and the other core is the caller's
        self.h.setOptionValue("simplex_strategy", 4)
        self.h.setOptionValue("threads", 1)
        self.h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        self.inf = highspy.kHighsInf
        self.n_jobs = n_jobs
        self.group_row = [n_jobs + q for q in range(len(group_sizes))]
        lo = np.full(n_jobs + len(group_sizes), -self.inf)
        hi = np.concatenate([np.ones(n_jobs), np.asarray(group_sizes, dtype=float)])
        self.h.addRows(len(lo), lo, hi, 0, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0))
        self.count_row: dict[tuple[int, int], int] = {}
        self.rows = len(lo)
        self.columns = 0
        self.seen: set[tuple] = set()
        self.status: Any = None

    def _count_row(self, key: tuple[int, int]) -> int:
        """The row ``sum (K share - pieces) x = 0`` (``<= 0`` for the tail) of a job's declared split."""
        if key not in self.count_row:
            lo = -self.inf if key[1] >= TAIL else 0.0
            self.h.addRow(lo, 0.0, 0, np.zeros(0, dtype=np.int32), np.zeros(0))
            self.count_row[key] = self.rows
            self.rows += 1
        return self.count_row[key]

    def add(self, q: int, config: list[Piece]) -> bool:
        """Add configuration ``config`` of group ``q`` as a column (unless empty or already there)."""
        key = (q, tuple(sorted(pc.key for pc in config)))
        if not config or key in self.seen:
            return False
        self.seen.add(key)
        coef: dict[int, float] = {self.group_row[q]: 1.0}
        for pc in config:
            coef[pc.job] = coef.get(pc.job, 0.0) + pc.share
            if pc.nodes >= 2:
                r = self._count_row((pc.job, pc.nodes))
                coef[r] = coef.get(r, 0.0) + pc.nodes * pc.share - 1.0
        idx = np.fromiter(coef, dtype=np.int32)
        val = np.fromiter(coef.values(), dtype=float)
        self.h.addCol(sum(pc.value for pc in config), 0.0, self.inf, len(idx), idx, val)
        self.columns += 1
        return True

    def solve(self) -> tuple[float, Duals, list[float]] | None:
        """LP value, duals (job rows, count rows), group duals; None if HiGHS did not solve it.

        Job and tail duals are clipped at 0 (the Lagrangian bound needs them non-negative; an
        optimal LP has them so up to tolerances); equality rows keep their sign."""
        import highspy  # lazy: highspy loads only for the configuration LP

        self.h.run()
        self.status = self.h.getModelStatus()
        if self.status != highspy.HighsModelStatus.kOptimal:
            return None
        y = np.asarray(self.h.getSolution().row_dual)
        pi = np.maximum(y[: self.n_jobs], 0.0)
        rho = np.zeros((self.n_jobs, TAIL + 1))
        for (j, k), r in self.count_row.items():
            rho[j, k] = y[r] if k < TAIL else max(0.0, y[r])
        mu = [max(0.0, float(y[r])) for r in self.group_row]
        return float(self.h.getInfo().objective_function_value), (pi, rho), mu


def aggregated_duals(n_jobs: int, groups: list[NodeGroup], sets: dict[tuple[str, int, int, int], PieceSet],
                     stays: list[PieceSet | None]) -> np.ndarray:
    """Job prices from the LP that pools each node class: per job at most one unit of (class,
    point) options, each worth the most any of its pieces there credits per unit of share and
    using the whole job's GPUs, cores and memory; per class the total capacity.

    Used only to start the column generation near good prices (any prices give a valid bound)."""
    import highspy  # lazy: highspy loads only for the configuration LP

    counts: dict[tuple[str, int, int, int], int] = {}
    for g in groups:
        counts[g.cls] = counts.get(g.cls, 0) + len(g.nodes)
    classes = sorted(sets)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    inf = highspy.kHighsInf
    caps = np.array([[c[1] * counts[c], c[2] * counts[c], c[3] * counts[c]] for c in classes], dtype=float).ravel()
    h.addRows(n_jobs + len(caps), np.full(n_jobs + len(caps), -inf), np.concatenate([np.ones(n_jobs), caps]), 0,
              np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0))
    best: dict[tuple[int, int, int], tuple[float, float, float, float]] = {}  # (job, class, point) -> value, g, c, m
    for ci, cls in enumerate(classes):
        extra = [st for g, st in zip(groups, stays, strict=True) if st is not None and g.cls == cls]
        for ps in [sets[cls], *extra]:
            for pc in ps.pieces:
                per = pc.value / pc.share
                key = (pc.job, ci, pc.point)
                if key not in best or per > best[key][0]:
                    whole = 1.0 / pc.share
                    best[key] = (per, pc.gpus * whole, pc.cpus * whole, pc.mem * whole)
    for (j, ci, _p), (v, g, c, m) in best.items():
        r = n_jobs + 3 * ci
        h.addCol(v, 0.0, inf, 4, np.array([j, r, r + 1, r + 2], dtype=np.int32), np.array([1.0, g, c, m]))
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return np.zeros(n_jobs)
    return np.maximum(np.asarray(h.getSolution().row_dual)[:n_jobs], 0.0)


@dataclass
class ConfigBound:
    """What :func:`config_bound` found."""

    bound: float | None  #: the best proven bound (Lagrangian) over the iterations; None if none finished
    lp: float | None  #: the last master LP value (not itself a proven bound before convergence)
    converged: bool
    iterations: int
    columns: int
    seconds: float
    stats: dict[str, Any] = field(default_factory=dict)
    #: the duals ``(pi, rho)`` at which ``bound`` was evaluated (reduced-cost fixing reuses them:
    #: optsched.exact.fixing)
    duals: Duals | None = None
    #: the same duals by job and node id (lns aims its neighbourhoods with them)
    prices: Prices | None = None


@dataclass(frozen=True)
class Prices:
    """The duals of a bound, by id: what the bound credits each job with (``job``: ``pi``) and
    each node with (``node``: the best reduced value of a configuration there, ``max(0, .)``), so
    that ``bound = sum(job) + sum(node)`` (up to the split-count duals, left out). For a schedule,
    ``bound - worth`` splits into the prices of the jobs it leaves out and, per node, ``node[n]``
    less the reduced value of what the node holds: where the schedule loses against the bound."""

    job: dict[str, float]
    node: dict[str, float]


def config_bound(instance: Instance, *, time_limit: float = 5.0, schedules: list[Schedule] | None = None,
                 max_iterations: int = 10_000, smoothing: float = 0.9, gap: float = 1e-5, neighbours: int = 30,
                 warm_start: bool = True, on_prices: Callable[[Prices], None] | None = None) -> ConfigBound:
    """The configuration-LP bound by column generation, stopped at ``time_limit`` seconds (see the
    module text). ``schedules`` (feasible) seed the master with the configurations of their nodes.

    ``smoothing``: Wentges dual smoothing (price at ``a * best-bound duals + (1 - a) * LP duals``;
    0 prices at the LP duals); the loop stops when the bound is within ``gap`` (relative) of the
    master LP value, which is a lower bound on the configuration LP (so both are then final).
    ``neighbours``: extra columns per iteration, from one-piece swaps (:func:`swaps`).
    ``warm_start``: start the smoothing centre at the job prices of :func:`aggregated_duals`.
    ``on_prices``: called with the :class:`Prices` of each new best bound as the loop finds it
    (float32 pricing; the result's ``prices`` are the final, float64 ones).
    """
    start = time.perf_counter()
    deadline = start + time_limit
    data = job_data(instance)
    groups = node_groups(instance, data)
    classes = sorted({g.cls for g in groups})
    by_job = {cls: class_pieces(instance, data, cls) for cls in classes}
    sets = {cls: PieceSet([pc for pcs in by_job[cls].values() for pc in pcs], *units_of(cls)) for cls in classes}
    stays = [PieceSet(g.stays, *units_of(g.cls)) if g.stays else None for g in groups]
    master = Master(len(data), [len(g.nodes) for g in groups])

    # seed: the configurations of the given schedules' nodes, valued as the pricing values them
    for s in schedules or []:
        for q, grp in enumerate(groups):
            for n in grp.nodes:
                master.add(q, _node_config(instance, s, n, grp, by_job[grp.cls], data))

    best_bound: float | None = None
    lp_value: float | None = None
    converged = False
    it = 0
    stats: dict[str, Any] = {"groups": len(groups), "classes": len(classes), "price_s": 0.0, "lp_s": 0.0, "misprices": 0}
    duals: Duals = (np.zeros(len(data)), np.zeros((len(data), TAIL + 1)))
    center: Duals | None = None

    price_s = [0.0]  # the longest pricing so far: time kept for the final, exact one
    group_values: list[float] = []  # the last pricing's best reduced value per group

    def price(d: Duals, dtype: type = np.float32, until: float | None = None) -> tuple[float | None, list[tuple[int, list[Piece], ClassTable]]]:
        """The Lagrangian bound at duals ``d`` (None if past ``until``) and each group's best configuration."""
        t0 = time.perf_counter()
        values, configs = [], []
        for cls in classes:
            if until is not None and time.perf_counter() > until:
                return None, configs
            table = price_class(cls, sets[cls], sets[cls].reduced(d), dtype)
            for q, grp in enumerate(groups):
                if grp.cls == cls:
                    st = stays[q]
                    v, config = group_best(table, st, st.reduced(d) if st is not None else None)
                    values.append((len(grp.nodes), v))
                    configs.append((q, config, table))
        price_s[0] = max(price_s[0], time.perf_counter() - t0)
        group_values[:] = [0.0] * len(groups)
        for (q, _c, _t), (_n, v) in zip(configs, values, strict=True):
            group_values[q] = max(0.0, v)
        return lagrangian_bound(d[0], values), configs

    def prices_of(d: Duals) -> Prices:
        """The prices of duals ``d``, just priced (their groups' best values are the last pricing's)."""
        node_rv = {instance.nodes[n].id: group_values[q] for q, grp in enumerate(groups) for n in grp.nodes}
        return Prices({x.job.id: float(d[0][x.index]) for x in data}, node_rv)

    def until() -> float:
        return deadline - 1.5 * price_s[0]

    if warm_start and time.perf_counter() < deadline:
        # start from the job prices of the aggregated LP (its bound, or better, at once)
        center = (aggregated_duals(len(data), groups, sets, stays), np.zeros((len(data), TAIL + 1)))
        lb, configs = price(center, until=until())
        if lb is None:
            center = None
        else:
            best_bound = lb
            if on_prices is not None:
                on_prices(prices_of(center))
            for q, config, _table in configs:
                master.add(q, config)

    def reduced_of(pc: Piece, d: Duals) -> float:
        v = pc.value - d[0][pc.job] * pc.share
        return v - d[1][pc.job, pc.nodes] * (pc.nodes * pc.share - 1.0) if pc.nodes >= 2 else v

    while it < max_iterations and time.perf_counter() < until():
        it += 1
        t0 = time.perf_counter()
        mu = [0.0] * len(groups)
        if not master.columns:
            lp_value = 0.0
        else:
            solved = master.solve()
            if solved is None:
                stats["lp_status"] = str(master.status)
                break
            lp_value, duals, mu = solved
        stats["lp_s"] += time.perf_counter() - t0
        if best_bound is not None and lp_value is not None and best_bound - lp_value <= gap * max(1.0, abs(best_bound)):
            converged = True
            break
        t0 = time.perf_counter()
        # Wentges smoothing: price at a point between the best-bound duals and the LP's
        added = 0
        lb = None
        for a in ((smoothing, 0.0) if center is not None and smoothing > 0 else (0.0,)):
            d = duals if a == 0.0 else (a * center[0] + (1 - a) * duals[0], a * center[1] + (1 - a) * duals[1])
            lb, configs = price(d, until=until())
            if lb is not None and (best_bound is None or lb < best_bound):
                best_bound, center = lb, d
                if on_prices is not None:
                    on_prices(prices_of(center))
            extra: list[tuple[float, int, list[Piece]]] = []
            rv_cache: dict[int, np.ndarray] = {}
            priced = []
            for q, config, table in configs:
                crv = [reduced_of(pc, duals) for pc in config]
                if sum(crv) > mu[q] + 1e-9 and master.add(q, config):
                    added += 1
                priced.append((sum(crv) - mu[q], q, config, table, crv))
            # swaps around the few configurations of most reduced value
            for _v, q, config, table, crv in sorted(priced, key=lambda x: -x[0])[:SWAP_GROUPS]:
                key = id(table)
                if key not in rv_cache:
                    rv_cache[key] = table.pieces.reduced(duals)
                extra += [(v - mu[q], q, alt) for v, alt in swaps(config, table, rv_cache[key], mu[q], neighbours, crv)]
            # the swaps of most reduced value over all groups, `neighbours` in all
            extra.sort(key=lambda e: -e[0])
            for _v, q, alt in extra[:neighbours]:
                added += master.add(q, alt)
            if added or lb is None:
                break
            if a > 0:
                stats["misprices"] += 1
        stats["price_s"] += time.perf_counter() - t0
        if added == 0 and lb is not None:
            converged = True
            break
    # the bound: the Lagrangian function at the best duals seen, evaluated in float64
    stats["float32_bound"] = best_bound
    final = center if center is not None else duals
    best_bound, _configs = price(final, np.float64)
    if best_bound is not None:
        best_bound = best_bound * (1 + SLACK) + SLACK
    prices = prices_of(final) if best_bound is not None else None
    return ConfigBound(best_bound, lp_value, converged, it, master.columns, time.perf_counter() - start, stats,
                       final if best_bound is not None else None, prices)


def _node_config(instance: Instance, schedule: Schedule, n: int, group: NodeGroup, pieces: dict[int, list[Piece]],
                 data: list[JobData]) -> list[Piece]:
    """The configuration of node ``n`` in ``schedule``, as pieces of the most value that fit what runs there."""
    nid = instance.nodes[n].id
    out = []
    for jid, a in schedule.jobs.items():
        k = a.nodes.get(nid, 0)
        if not k:
            continue
        j = instance.job_idx(jid)
        kk = _category(len(a.nodes))
        cand = [pc for pc in group.stays if pc.job == j and pc.gpus == k]
        cand += [pc for pc in pieces.get(j, []) if pc.gpus == k and pc.nodes == kk]
        pts = data[j].points
        fit = [pc for pc in cand if pts[pc.point].cpus <= a.cpus_per_gpu and pts[pc.point].mem <= a.mem_per_gpu_gb]
        if fit:
            out.append(max(fit, key=lambda pc: pc.value))
    return out
