"""The pricing side of the configuration LP (:mod:`optsched.mip.colgen`): pieces, node groups, and
one multiple-choice knapsack per node class solved by dynamic programming.

The math is in ``formulations/config-bound.md``. A *piece* is some of a job's GPUs on one node at
one grid point, declaring how its job runs (whole, split over ``K`` nodes, or over at least
``TAIL``); nodes are grouped (identical nodes share one group, a node a running job sits on is a
group of its own); :func:`price_class` finds a class's best configurations for given duals over
(GPUs, core units, memory units), rounding item sizes down so it optimises over a superset of the
real configurations (which keeps the bound valid).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from optsched.exact.prep import JobData, node_key
from optsched.model import Instance
from optsched.values import spread_multiplier

__all__ = ["ClassTable", "Duals", "NodeGroup", "Piece", "PieceSet", "class_pieces", "group_best", "lagrangian_bound", "node_groups",
           "price_class", "prune", "split_category", "split_fraction", "supported", "swaps", "units_of"]


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


def split_category(k: int) -> int:
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
        kk = split_category(len(job.placement))
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
            # declared splits: exactly K nodes for K < TAIL, and TAIL for every split over TAIL
            # or more nodes, among them a gang that needs more than TAIL nodes (kmin > TAIL)
            for kk in range(min(kmin, TAIL), min(kmax, TAIL) + 1) if kmin <= kmax else ():
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
