"""LP upper bounds on a round's optimum: the relaxation of the exact description, or a pooled one for big rounds.

:func:`lp_bound` solves one of these relaxations, each a valid upper bound on the optimum
(the math and the validity argument: ``formulations/mip.md``, "LP bounds"):

``full``
    The LP relaxation of the exact MIP (:func:`optsched.mip.description.build`, integrality dropped):
    every feasible schedule is an integer point of it, so its LP optimum bounds the MIP optimum.
``pooled-plain``
    The nodes of each GPU type are partitioned into *pools* (identical nodes always share one;
    :func:`node_pools`); the variables are ``u[j,t,p]`` in [0, 1] and ``w[j,P,p] >= 0`` (GPUs of
    job j in pool P at point p), with ``sum_P w[j,P,p] = gpus_j u[j,t,p]``,
    ``w[j,P,p] <= (sum_{n in P} cap_n(j,p)) u[j,t,p]`` and the pool totals of GPUs, cores and
    memory. Summing any feasible schedule's per-node GPUs over each pool gives a feasible point of
    this LP (every row is a sum of rows that schedule satisfies) with objective
    ``sum best[j,t,p] u[j,t,p]`` >= its worth (``best`` bounds the worth of every way to run at
    (t, p): :class:`optsched.mip.data.JobData`). Hence LP optimum >= MIP optimum, for any partition.
    One pool per node class; :func:`node_pools` can also merge alike classes. Pooled models also
    get the threshold rows of :func:`add_threshold_rows`.
``pooled``
    The same, with each job's ``u`` split by how it runs (:func:`pooled_model`): a running job
    *staying* on its placement (its exact GPUs on its own nodes, rows per node for the stayers:
    :func:`add_stay_rows`; no restart paid) or moved (restart paid); a gang of ``kmin * G`` GPUs on
    nodes of ``G`` GPUs either fills every node it uses (*whole*: it takes those nodes' cores and
    memory, no other job can be there) or leaves one part-used (then it spans ``kmin + 1`` nodes
    and pays one more spread factor). Never above ``pooled-plain``.
``type``, ``type-plain``
    The same with one pool per GPU type, which leaves only ``u`` and three knapsack rows per type
    (the rows of :func:`optsched.mip.description.add_type_capacity_cuts`) plus threshold rows: smallest, weakest.

``auto`` takes the smaller of ``full`` and ``pooled`` while the exact model stays small (at most
:data:`FULL_LIMIT` GPU-split columns; the strengthened pooled LP is below ``full`` on most library
rounds), else ``pooled`` while it stays within :data:`POOLED_LIMIT` split columns, else ``type``.
(Measured: merging classes into a few pools per type cost seconds and gained nothing on generator
rounds; only the per-class model tightened, by ~1 %, at minutes of GLOP time on 72 classes.)

LP solvers answer within their feasibility tolerances (1e-7 relative for GLOP): the bound is
proven up to those.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import numpy as np

from optsched.elastic import expand
from optsched.errors import InputError
from optsched.knapsack_bound import worth_bound
from optsched.mip.backends import solve_lp_cvxpy, solve_lp_sparse
from optsched.mip.data import RoundData
from optsched.mip.description import build
from optsched.mip.linear import LinearModel
from optsched.model import Instance

__all__ = ["BACKENDS", "LP_SLACK", "RELAXATIONS", "bound_model", "choose_relaxation", "lp_bound", "lp_bound_within"]

RELAXATIONS = ("auto", "full", "pooled", "type", "pooled-plain", "type-plain")
BACKENDS = ("glop", "pdlp", "cvxpy")
#: ``auto`` relaxes the exact model up to this many (job, node, point) columns ...
FULL_LIMIT = 60_000
#: ... and the per-class pooled model to this many (job, class, point) columns (GLOP: ~1.5 s at 100k, minutes at 1M)
POOLED_LIMIT = 150_000
#: relative slack added to an LP bound (GLOP answers within 1e-7 relative feasibility tolerances)
LP_SLACK = 1e-6


def lp_bound(instance: Instance, *, backend: str = "glop", relaxation: str = "auto", time_limit: float | None = None) -> float:
    """A proven upper bound on the round's optimum from an LP relaxation (see the module text).

    ``backend``: ``glop`` (default; OR-Tools' simplex behind MPSolver), ``pdlp`` (first-order, for
    huge LPs; its answer is only as exact as its tolerances) or ``cvxpy`` (its default LP solver).
    ``time_limit`` (seconds) counts from the call: building the LP takes from it (seconds at
    100,000 GPUs), and where nothing is left once it is built the solve is not started
    (``RuntimeError``, as when the solver stops at the limit).
    """
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    if backend not in BACKENDS:
        raise InputError("backend", backend, f"unknown LP backend; known: {list(BACKENDS)}")
    if relaxation not in RELAXATIONS:
        raise InputError("relaxation", relaxation, f"unknown relaxation; known: {list(RELAXATIONS)}")
    if any(j.elastic is not None for j in instance.jobs):
        # elastic jobs (contract v2): their size variants as independent rigid jobs (no "at most one
        # variant" row) relax the round, so that round's LP bound is valid here (optsched.elastic)

        instance = expand(instance).instance
    data = RoundData(instance)
    if relaxation == "auto":
        relaxation = choose_relaxation(instance, data)
        if relaxation == "full":  # each bounds the optimum, so their minimum does; the pooled LP is the cheap one
            pooled = _solve_bound(bound_model(instance, "pooled", data), backend, deadline, instance.name)
            return min(pooled, _solve_bound(bound_model(instance, "full", data), backend, deadline, instance.name, start=True))
    return _solve_bound(bound_model(instance, relaxation, data), backend, deadline, instance.name)


def _solve_bound(model: LinearModel, backend: str, deadline: float | None, name: str, start: bool = False) -> float:
    """The optimum of one bound LP (0 for an empty one), solved before ``deadline``
    (``time.perf_counter`` time): with at least 10 ms once it is built, unless no time is left
    then (``RuntimeError``; with ``start``, it gets the 10 ms anyway)."""
    if model.num_vars == 0:
        return 0.0
    time_limit = None
    if deadline is not None:
        time_limit = deadline - time.perf_counter()
        if time_limit <= 0.0 and not start:
            raise RuntimeError(f"lp_bound: no time left to solve the LP of {name} once it was built")
        time_limit = max(0.01, time_limit)
    if backend == "cvxpy":
        status, value = solve_lp_cvxpy(model)
    else:
        status, value = solve_lp_sparse(model, backend, time_limit)
    if value is None or status not in ("optimal", "optimal_inaccurate"):
        raise RuntimeError(f"lp_bound: {backend} ended with status {status!r} on {name} (the LP is feasible and bounded)")
    return max(0.0, float(value))


def lp_bound_within(instance: Instance, until: float, stats: dict[str, Any]) -> float | None:
    """The LP-relaxation bound plus :data:`LP_SLACK` if it can be had before ``until``
    (``time.perf_counter`` time); else the knapsack bound where it holds
    (:func:`optsched.knapsack_bound.worth_bound`: no LP, under a second at 100,000 GPUs), else
    ``None`` (the time taken, or why not, go in ``stats``)."""
    left = until - time.perf_counter()
    if left <= 0.05:
        return _knapsack_instead(instance, stats)
    t0 = time.perf_counter()
    try:
        b = lp_bound(instance, time_limit=left)
    except RuntimeError as e:  # the LP hit its time limit: no LP bound this time
        stats["bound_note"] = str(e)
        return _knapsack_instead(instance, stats)
    stats["bound_s"] = time.perf_counter() - t0
    return b * (1 + LP_SLACK) + LP_SLACK


def _knapsack_instead(instance: Instance, stats: dict[str, Any]) -> float | None:
    """The knapsack bound where the LP bound could not be had (``stats["bound_from"]`` says so)."""
    t0 = time.perf_counter()
    b = worth_bound(instance)
    if b is not None:
        stats["bound_from"] = "knapsack"
        stats["knapsack_bound_s"] = time.perf_counter() - t0
    return b


def choose_relaxation(instance: Instance, data: RoundData) -> str:
    """What ``relaxation="auto"`` picks for this round (by the number of split columns each model would have)."""
    cl = data.classes
    nodes_of_type = np.bincount(cl.type_index, weights=cl.count, minlength=len(data.types))
    classes_of_type = np.bincount(cl.type_index, minlength=len(data.types))
    full = sum(nodes_of_type[t] for jd in data.jobs for t, _ in jd.options)
    if full <= FULL_LIMIT:
        return "full"
    pooled = sum(classes_of_type[t] for jd in data.jobs for t, _ in jd.options)
    return "pooled" if pooled <= POOLED_LIMIT and classes_of_type.max(initial=0) > 1 else "type"


def bound_model(instance: Instance, relaxation: str = "auto", data: RoundData | None = None) -> LinearModel:
    """The LP whose optimum :func:`lp_bound` returns (no integer columns)."""
    data = data or RoundData(instance)
    if relaxation == "auto":
        relaxation = choose_relaxation(instance, data)
    if relaxation == "full":
        return build(instance, data).model.relaxed()
    if relaxation in ("pooled", "pooled-plain"):
        return pooled_model(data, len(data.classes), strengthen=relaxation == "pooled")
    if relaxation in ("type", "type-plain"):
        return pooled_model(data, 1, strengthen=relaxation == "type")
    raise InputError("relaxation", relaxation, f"unknown relaxation; known: {list(RELAXATIONS)}")


def node_pools(data: RoundData, per_type: int) -> list[np.ndarray]:
    """A partition of the node classes into at most ``per_type`` pools per GPU type.

    Classes of a type are ordered by cores and memory per GPU and cut into contiguous runs of
    about equal node counts, so that pooled nodes are alike. Any partition gives a valid bound
    (see the module text); finer partitions give tighter ones.
    """
    cl = data.classes
    pools = []
    for t in range(len(data.types)):
        members = np.flatnonzero(cl.type_index == t)
        if len(members) == 0:
            continue
        k = min(per_type, len(members))
        if k == len(members):
            pools.extend(np.array([c]) for c in members)
            continue
        order = members[np.lexsort((cl.mem[members] / np.maximum(cl.gpus[members], 1), cl.cpus[members] / np.maximum(cl.gpus[members], 1)))]
        share = np.cumsum(cl.count[order]) / cl.count[order].sum()
        cut = np.minimum((share * k - 1e-9).astype(int), k - 1)
        pools.extend(order[cut == q] for q in range(k) if (cut == q).any())
    return pools


def pooled_model(data: RoundData, per_type: int, strengthen: bool = True) -> LinearModel:
    """The pooled relaxation with at most ``per_type`` pools per GPU type; see the module text for why it bounds.

    ``strengthen`` (default) adds what ``formulations/mip.md`` ("LP bounds") calls the staying and
    whole-node variants: a running job that stays occupies exactly its placement (its own rows on
    those nodes), and a gang that fills every node it uses takes the whole nodes' cores and memory,
    while one that leaves a node part-used needs one node more than its least (one more spread
    factor). ``strengthen=False`` is the plain model (relaxations ``pooled-plain``, ``type-plain``).
    """
    cl = data.classes
    inst = data.instance
    model = LinearModel(f"pooled_{per_type}" + ("" if strengthen else "_plain"))
    by_type = per_type == 1
    pools = node_pools(data, per_type)
    pool_type = [int(cl.type_index[p[0]]) for p in pools]
    pool_of_class = np.zeros(len(cl), dtype=np.int64)
    for q, members in enumerate(pools):
        pool_of_class[members] = q
    pools_of_type: dict[int, list[int]] = defaultdict(list)
    for q, t in enumerate(pool_type):
        pools_of_type[t].append(q)
    gmax_of_type = {t: int(cl.gpus[cl.type_index == t].max()) for t in pools_of_type}
    gpus_row: dict[int, list[tuple[int, float]]] = defaultdict(list)
    cpus_row: dict[int, list[tuple[int, float]]] = defaultdict(list)
    mem_row: dict[int, list[tuple[int, float]]] = defaultdict(list)
    points_of: dict[int, list[tuple[int, int]]] = defaultdict(list)  # per pool, (cpus, mem) of each gpus_row entry
    stayers: dict[int, list[tuple[int, int, int, int]]] = defaultdict(list)  # node -> (column, job, gpus, point) of staying variants

    def book(q: int, col: int, gpus: float, cpus: float, mem: float, c: int, m: int) -> None:
        gpus_row[q].append((col, gpus))
        cpus_row[q].append((col, cpus))
        mem_row[q].append((col, mem))
        points_of[q].append((c, m))

    def split(name: str, uc: int, g: int, t: int, c: int, m: int, node_cap: np.ndarray, whole: bool) -> None:
        """The GPUs of variant column ``uc`` over the pools of type ``t`` (``whole``: on nodes it fills)."""
        if whole:
            fits = (node_cap == cl.gpus) & (cl.gpus > 0)  # classes whose nodes the job can fill at this point
            class_cap = np.where(fits, cl.gpus * cl.count, 0)
        else:
            fits = node_cap > 0
            class_cap = node_cap * cl.count
        if whole and int(class_cap[cl.type_index == t].sum()) < g:
            model.col_ub[uc] = 0.0  # not enough nodes it can fill
            return
        used = []
        for q in pools_of_type[t]:
            members = pools[q][fits[pools[q]]]
            cap = int(class_cap[members].sum())
            if cap >= 1:
                # per GPU: a filled node's cores and memory are the job's alone (every job holds a GPU on each
                # node it uses), at least the least ratio over the pool's classes it can fill
                per_c = float((cl.cpus[members] / cl.gpus[members]).min()) if whole else float(c)
                per_m = float((cl.mem[members] / cl.gpus[members]).min()) if whole else float(m)
                used.append((q, cap, per_c, per_m))
        if by_type:  # one pool per type: its split column equals gpus * u, so it is substituted away
            for q, _, per_c, per_m in used:
                book(q, uc, g, per_c * g, per_m * g, c, m)
            return
        gang = [(uc, -float(g))]
        for q, cap, per_c, per_m in used:
            wc = model.add_var(f"w{name}_{q}", 0.0, float(min(g, cap)))
            gang.append((wc, 1.0))
            if cap < g:
                model.le(f"wcap{name}_{q}", [(wc, 1.0), (uc, -float(cap))], 0.0)
            book(q, wc, 1.0, per_c, per_m, c, m)
        model.eq(f"gang{name}", gang, 0.0)

    node_index = {n.id: i for i, n in enumerate(inst.nodes)}
    for jd in data.jobs:
        if not jd.options:
            continue
        j, g, job = jd.index, jd.gpus, jd.job
        cols = []
        caps_by_point: dict[int, np.ndarray] = {}
        for (t, p), (base, best, kmin) in sorted(jd.options.items()):
            c, m, _ = jd.points[p]
            if p not in caps_by_point:
                caps_by_point[p] = cl.cap(c, m, g)
            node_cap = caps_by_point[p]
            if not strengthen:
                cols.append(uc := model.add_var(f"u_{j}_{t}_{p}", 0.0, 1.0, obj=best))
                split(f"_{j}_{t}_{p}", uc, g, t, c, m, node_cap, whole=False)
                continue
            if t == jd.stay_type and p in jd.stay_points:  # staying: exactly the placement's GPUs on its nodes
                cols.append(us := model.add_var(f"s_{j}_{p}", 0.0, 1.0, obj=base * data.spread(jd, t, len(job.placement))))
                per_pool: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
                for nid, k in job.placement.items():
                    n = node_index[nid]
                    node = inst.nodes[n]
                    whole = k == node.gpus
                    acc = per_pool[int(pool_of_class[cl.node_class[n]])]
                    acc[0] += k
                    acc[1] += node.cpus if whole else c * k
                    acc[2] += node.mem_gb if whole else m * k
                    stayers[n].append((us, j, k, p))
                for q, (gq, cq, mq) in per_pool.items():
                    book(q, us, gq, cq, mq, c, m)
            if not jd.can_move:
                continue
            factor = data.spread(jd, t, kmin) * (1.0 - jd.restart_share)
            gmax = gmax_of_type[t]
            if g % gmax == 0 and kmin == g // gmax:
                # on kmin nodes every node is full (kmin * gmax GPUs); leaving one part-used takes kmin + 1 nodes
                cols.append(uf := model.add_var(f"f_{j}_{t}_{p}", 0.0, 1.0, obj=base * factor))
                split(f"f_{j}_{t}_{p}", uf, g, t, c, m, node_cap, whole=True)
                cols.append(up := model.add_var(f"u_{j}_{t}_{p}", 0.0, 1.0, obj=base * data.spread(jd, t, kmin + 1) * (1.0 - jd.restart_share)))
                split(f"_{j}_{t}_{p}", up, g, t, c, m, node_cap, whole=False)
            else:
                cols.append(uc := model.add_var(f"u_{j}_{t}_{p}", 0.0, 1.0, obj=base * factor))
                split(f"_{j}_{t}_{p}", uc, g, t, c, m, node_cap, whole=False)
        model.le(f"one_{j}", [(uc, 1.0) for uc in cols], 1.0)

    add_stay_rows(model, data, stayers)
    for q, members in enumerate(pools):
        if q not in gpus_row:
            continue
        model.le(f"gpus_{q}", gpus_row[q], float((cl.gpus[members] * cl.count[members]).sum()))
        model.le(f"cpus_{q}", cpus_row[q], float((cl.cpus[members] * cl.count[members]).sum()))
        model.le(f"mem_{q}", mem_row[q], float((cl.mem[members] * cl.count[members]).sum()))
        add_threshold_rows(model, q, members, cl, gpus_row[q], points_of[q])
    return model


def add_stay_rows(model: LinearModel, data: RoundData, stayers: dict[int, list[tuple[int, int, int, int]]]) -> None:
    """Per node holding running jobs: the GPUs, cores and memory of the jobs that stay on it fit the node.

    Valid: in any schedule the jobs that keep their placement hold exactly those GPUs at their
    point on this node, and every other job only adds to the node's sums. A row is added only when
    it can cut (the stayers' largest use, one point per job, exceeds the node).
    """
    inst = data.instance
    for n, entries in stayers.items():
        node = inst.nodes[n]
        rows = ([], [], [])
        most: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
        for col, j, k, p in entries:
            c, m, _ = data.jobs[j].points[p]
            use = (k, c * k, m * k)
            for r, v in enumerate(use):
                rows[r].append((col, float(v)))
                most[j][r] = max(most[j][r], v)
        for r, (name, cap) in enumerate((("sg", node.gpus), ("sc", node.cpus), ("sm", node.mem_gb))):
            if sum(v[r] for v in most.values()) > cap:
                model.le(f"{name}_{n}", rows[r], float(cap))


def add_threshold_rows(model: LinearModel, q: int, members: np.ndarray, cl, gpus_row: list[tuple[int, float]], points: list[tuple[int, int]]) -> None:
    """Valid inequalities per pool and threshold ``(c*, m*)``: GPUs at points with ``c >= c*`` and ``m >= m*``.

    On one node, each such GPU takes at least ``c*`` cores and ``m*`` GB, so at most
    ``min(gpus, cpus // c*, mem // m*)`` of them fit (a Chvatal-Gomory rounding of the node's rows);
    summed over the pool's nodes this bounds their total. The per-pool GPU/core/memory sums lose
    exactly this per-node rounding, which these rows restore (only those that cut are added).
    """
    cols = np.array([c for c, _ in gpus_row], dtype=np.int64)
    coefs = np.array([v for _, v in gpus_row], dtype=np.float64)
    pc = np.array([c for c, _ in points], dtype=np.int64)
    pm = np.array([m for _, m in points], dtype=np.int64)
    total = float((cl.gpus[members] * cl.count[members]).sum())
    thresholds = sorted({(int(c), 0) for c in pc} | {(0, int(m)) for m in pm} | set(zip(pc.tolist(), pm.tolist(), strict=True)))
    for c_star, m_star in thresholds:
        if c_star == 0 and m_star == 0:
            continue
        rhs = float((cl.cap(c_star, m_star, np.iinfo(np.int64).max // 4)[members] * cl.count[members]).sum())
        if rhs >= total:
            continue  # implied by the pool's GPU row
        mask = (pc >= c_star) & (pm >= m_star)
        if mask.any():
            model.le(f"thr_{q}_{c_star}_{m_star}", zip(cols[mask].tolist(), coefs[mask].tolist(), strict=True), rhs)
