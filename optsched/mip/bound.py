"""LP upper bounds on a round's optimum: the relaxation of the exact description, or a pooled one for big rounds.

:func:`lp_bound` solves one of three relaxations, each a valid upper bound on the optimum:

``full``
    The LP relaxation of the exact MIP (:func:`optsched.mip.description.build`, integrality dropped):
    every feasible schedule is an integer point of it, so its LP optimum bounds the MIP optimum.
``pooled``
    Identical nodes (same GPU type, GPUs, cores, memory) are pooled into one *class*; the variables
    are ``u[j,t,p]`` in [0, 1] and ``w[j,C,p] >= 0`` (GPUs of job j on class C at point p), with
    ``sum_C w[j,C,p] = gpus_j u[j,t,p]``, ``w[j,C,p] <= count_C * cap_C(j,p) * u[j,t,p]`` and the
    class totals of GPUs, cores and memory. Summing any feasible schedule's per-node GPUs over each
    class gives a feasible point of this LP (every row is a sum of rows that schedule satisfies)
    with objective ``sum best[j,t,p] u[j,t,p]`` >= its worth (``best`` bounds the worth of every
    way to run at (t, p): :class:`optsched.mip.data.JobData`). Hence LP optimum >= MIP optimum.
``type``
    The same with one pool per GPU type, which leaves only ``u`` and three knapsack rows per type
    (the rows of :func:`optsched.mip.description.add_type_capacity_cuts`): smallest, weakest.

``auto`` takes ``full`` while the exact model stays small (at most :data:`FULL_LIMIT` GPU-split
columns), ``pooled`` while the class model does (:data:`POOLED_LIMIT`), else ``type``.

LP solvers answer within their feasibility tolerances (1e-7 relative for GLOP): the bound is
proven up to those.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from optsched.errors import InputError
from optsched.mip.backends import solve_lp_cvxpy, solve_lp_sparse
from optsched.mip.data import RoundData
from optsched.mip.description import build
from optsched.mip.linear import LinearModel
from optsched.model import Instance

__all__ = ["BACKENDS", "RELAXATIONS", "bound_model", "choose_relaxation", "lp_bound"]

RELAXATIONS = ("auto", "full", "pooled", "type")
BACKENDS = ("glop", "pdlp", "cvxpy")
#: ``auto`` relaxes the exact model up to this many (job, node, point) columns ...
FULL_LIMIT = 60_000
#: ... and the class-pooled model up to this many (job, class, point) columns
POOLED_LIMIT = 2_000_000


def lp_bound(instance: Instance, *, backend: str = "glop", relaxation: str = "auto", time_limit: float | None = None) -> float:
    """A proven upper bound on the round's optimum from an LP relaxation (see the module text).

    ``backend``: ``glop`` (default; OR-Tools' simplex behind MPSolver), ``pdlp`` (first-order, for
    huge LPs; its answer is only as exact as its tolerances) or ``cvxpy`` (its default LP solver).
    """
    if backend not in BACKENDS:
        raise InputError("backend", backend, f"unknown LP backend; known: {list(BACKENDS)}")
    if relaxation not in RELAXATIONS:
        raise InputError("relaxation", relaxation, f"unknown relaxation; known: {list(RELAXATIONS)}")
    data = RoundData(instance)
    model = bound_model(instance, relaxation, data)
    if model.num_vars == 0:
        return 0.0
    if backend == "cvxpy":
        status, value = solve_lp_cvxpy(model)
    else:
        status, value = solve_lp_sparse(model, backend, time_limit)
    if value is None or status not in ("optimal", "optimal_inaccurate"):
        raise RuntimeError(f"lp_bound: {backend} ended with status {status!r} on {instance.name} (the LP is feasible and bounded)")
    return max(0.0, float(value))


def choose_relaxation(instance: Instance, data: RoundData) -> str:
    """What ``relaxation="auto"`` picks for this round (by the number of split columns each model would have)."""
    cl = data.classes
    nodes_of_type = np.bincount(cl.type_index, weights=cl.count, minlength=len(data.types))
    classes_of_type = np.bincount(cl.type_index, minlength=len(data.types))
    full = sum(nodes_of_type[t] for jd in data.jobs for t, _ in jd.options)
    if full <= FULL_LIMIT:
        return "full"
    pooled = sum(classes_of_type[t] for jd in data.jobs for t, _ in jd.options)
    return "pooled" if pooled <= POOLED_LIMIT else "type"


def bound_model(instance: Instance, relaxation: str = "auto", data: RoundData | None = None) -> LinearModel:
    """The LP whose optimum :func:`lp_bound` returns (no integer columns)."""
    data = data or RoundData(instance)
    if relaxation == "auto":
        relaxation = choose_relaxation(instance, data)
    if relaxation == "full":
        return build(instance, data).model.relaxed()
    if relaxation in ("pooled", "type"):
        return pooled_model(data, by_type=relaxation == "type")
    raise InputError("relaxation", relaxation, f"unknown relaxation; known: {list(RELAXATIONS)}")


def pooled_model(data: RoundData, *, by_type: bool = False) -> LinearModel:
    """The class-pooled relaxation (``by_type``: one pool per GPU type); see the module text for why it bounds."""
    cl = data.classes
    model = LinearModel(f"pooled_{'type' if by_type else 'class'}")
    n_types = len(data.types)
    pools: list[np.ndarray] = (
        [np.flatnonzero(cl.type_index == t) for t in range(n_types)] if by_type else [np.array([k]) for k in range(len(cl))]
    )
    pool_type = [int(cl.type_index[p[0]]) for p in pools]
    pools_of_type: dict[int, list[int]] = defaultdict(list)
    for q, t in enumerate(pool_type):
        pools_of_type[t].append(q)
    gpus_row: dict[int, list[tuple[int, float]]] = defaultdict(list)
    cpus_row: dict[int, list[tuple[int, float]]] = defaultdict(list)
    mem_row: dict[int, list[tuple[int, float]]] = defaultdict(list)

    for jd in data.jobs:
        if not jd.options:
            continue
        j, g = jd.index, jd.gpus
        ucols = {}
        caps_by_point: dict[int, np.ndarray] = {}
        for (t, p), (_, best, _) in sorted(jd.options.items()):
            ucols[(t, p)] = uc = model.add_var(f"u_{j}_{t}_{p}", 0.0, 1.0, obj=best)
            c, m, _ = jd.points[p]
            if p not in caps_by_point:
                caps_by_point[p] = cl.cap(c, m, g) * cl.count
            class_cap = caps_by_point[p]
            if by_type:  # one pool: its split column equals gpus * u, so it is substituted away
                q = pools_of_type[t][0]
                gpus_row[q].append((uc, g))
                cpus_row[q].append((uc, c * g))
                mem_row[q].append((uc, m * g))
                continue
            gang = [(uc, -float(g))]
            for q in pools_of_type[t]:
                cap = int(class_cap[pools[q]].sum())
                if cap < 1:
                    continue
                wc = model.add_var(f"w_{j}_{q}_{p}", 0.0, float(min(g, cap)))
                gang.append((wc, 1.0))
                if cap < g:
                    model.le(f"wcap_{j}_{q}_{p}", [(wc, 1.0), (uc, -float(cap))], 0.0)
                gpus_row[q].append((wc, 1.0))
                cpus_row[q].append((wc, c))
                mem_row[q].append((wc, m))
            model.eq(f"gang_{j}_{t}_{p}", gang, 0.0)
        model.le(f"one_{j}", [(uc, 1.0) for uc in ucols.values()], 1.0)

    for q, members in enumerate(pools):
        if q not in gpus_row:
            continue
        model.le(f"gpus_{q}", gpus_row[q], float((cl.gpus[members] * cl.count[members]).sum()))
        model.le(f"cpus_{q}", cpus_row[q], float((cl.cpus[members] * cl.count[members]).sum()))
        model.le(f"mem_{q}", mem_row[q], float((cl.mem[members] * cl.count[members]).sum()))
    return model
