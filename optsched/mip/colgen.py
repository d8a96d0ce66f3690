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

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optsched.exact.prep import JobData, job_data
from optsched.mip.pricing import (
    SLACK,
    SWAP_GROUPS,
    TAIL,
    ClassTable,
    Duals,
    NodeGroup,
    Piece,
    PieceSet,
    class_pieces,
    group_best,
    lagrangian_bound,
    node_groups,
    price_class,
    split_category,
    supported,
    swaps,
    units_of,
)
from optsched.model import Instance
from optsched.schedule import Schedule

__all__ = ["ConfigBound", "NodeGroup", "Piece", "Prices", "config_bound", "lagrangian_bound", "node_groups", "supported"]


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
        kk = split_category(len(a.nodes))
        cand = [pc for pc in group.stays if pc.job == j and pc.gpus == k]
        cand += [pc for pc in pieces.get(j, []) if pc.gpus == k and pc.nodes == kk]
        pts = data[j].points
        fit = [pc for pc in cand if pts[pc.point].cpus <= a.cpus_per_gpu and pts[pc.point].mem <= a.mem_per_gpu_gb]
        if fit:
            out.append(max(fit, key=lambda pc: pc.value))
    return out
