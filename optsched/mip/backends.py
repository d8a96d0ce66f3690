"""Translations of a :class:`~optsched.mip.linear.LinearModel` to solver APIs and files, coefficient for coefficient.

- :func:`to_mpsolver`: OR-Tools ``pywraplp.Solver`` (SCIP, CBC, GLOP, ...), column ``i`` is ``vars[i]``;
- :func:`to_pulp`: a ``pulp.LpProblem``; two-sided rows become two rows (PuLP has no ranges);
- :func:`export_text`: MPS (free format) or CPLEX-LP text at full precision (:mod:`optsched.mip.files`);
- :func:`solve_lp_sparse`: an LP through OR-Tools' model builder (GLOP behind MPSolver's proto API),
  filled from the sparse matrix in one call: the fast path for big LP relaxations.

None of these changes a bound, a coefficient or a name: what the backends solve is the description.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from optsched.extras import require_extra
from optsched.mip.files import to_lp, to_mps
from optsched.mip.linear import LinearModel

__all__ = ["export_text", "solve_lp_cvxpy", "solve_lp_sparse", "to_mpsolver", "to_pulp"]

#: MPSolver problem types by the names optsched uses
MPSOLVER_IDS = {"scip": "SCIP", "cbc": "CBC", "glop": "GLOP", "pdlp": "PDLP", "clp": "CLP"}


def to_mpsolver(model: LinearModel, backend: str) -> tuple[Any, list[Any]]:
    """A ready-to-solve ``pywraplp.Solver`` for ``backend`` (``scip``, ``cbc``, ``glop``, ...) and its variables."""
    from ortools.linear_solver import pywraplp  # lazy: MPSolver loads only when a MIP is solved

    solver = pywraplp.Solver.CreateSolver(MPSOLVER_IDS.get(backend, backend))
    if solver is None:
        raise RuntimeError(f"OR-Tools MPSolver backend {backend!r} is not available in this build")
    inf = solver.infinity()
    is_lp = not solver.IsMip()
    xs = [
        solver.Var(_f(lb, inf), _f(ub, inf), bool(integer) and not is_lp, name)
        for name, lb, ub, integer in zip(model.col_names, model.col_lb, model.col_ub, model.col_int, strict=True)
    ]
    if is_lp and model.num_integer:
        raise ValueError(f"{backend} solves LPs only; pass model.relaxed()")
    for name, lb, ub, cols, vals in zip(model.row_names, model.row_lb, model.row_ub, model.row_cols, model.row_vals, strict=True):
        ct = solver.Constraint(_f(lb, inf), _f(ub, inf), name)
        for c, v in zip(cols, vals, strict=True):
            ct.SetCoefficient(xs[c], v)
    obj = solver.Objective()
    for c, v in enumerate(model.obj):
        if v:
            obj.SetCoefficient(xs[c], v)
    obj.SetOffset(model.obj_offset)
    obj.SetMaximization()
    return solver, xs


def to_pulp(model: LinearModel) -> tuple[Any, list[Any]]:
    """A ``pulp.LpProblem`` (maximise) and its variables, column for column."""
    import pulp  # lazy: PuLP loads only for the pulp method

    prob = pulp.LpProblem(model.name, pulp.LpMaximize)
    xs = [
        prob.add_variable(name, _none(lb), _none(ub), pulp.LpInteger if integer else pulp.LpContinuous)
        for name, lb, ub, integer in zip(model.col_names, model.col_lb, model.col_ub, model.col_int, strict=True)
    ]
    prob.setObjective(pulp.LpAffineExpression([(xs[c], v) for c, v in enumerate(model.obj) if v], constant=model.obj_offset))
    for name, lb, ub, cols, vals in zip(model.row_names, model.row_lb, model.row_ub, model.row_cols, model.row_vals, strict=True):
        expr = pulp.LpAffineExpression([(xs[c], v) for c, v in zip(cols, vals, strict=True)])
        if lb == ub:
            prob.addConstraint(pulp.LpConstraint(expr, pulp.LpConstraintEQ, name, lb))
            continue
        if math.isfinite(ub):
            prob.addConstraint(pulp.LpConstraint(expr, pulp.LpConstraintLE, name if not math.isfinite(lb) else name + "_ub", ub))
        if math.isfinite(lb):
            prob.addConstraint(pulp.LpConstraint(expr, pulp.LpConstraintGE, name if not math.isfinite(ub) else name + "_lb", lb))
    return prob, xs


def export_text(model: LinearModel, fmt: str) -> str:
    """The model as free-format MPS (``fmt="mps"``) or CPLEX LP (``fmt="lp"``) text.

    Written by :mod:`optsched.mip.files` at full double precision: MPSolver's own exporter
    (``ExportModelAsMpsFormat``) rounds coefficients to six significant digits.
    """
    if fmt == "mps":
        return to_mps(model)
    if fmt == "lp":
        return to_lp(model)
    raise ValueError(f"unknown export format {fmt!r}; use 'mps' or 'lp'")


def solve_lp_sparse(model: LinearModel, backend: str = "glop", time_limit: float | None = None) -> tuple[str, float | None]:
    """Solve an LP (no integer columns) through OR-Tools' model builder; ``(status, objective)``.

    The model is handed over as a sparse matrix in one call, which is what makes LP bounds of
    rounds with millions of non-zeros take seconds instead of minutes of per-coefficient calls.
    """
    from ortools.linear_solver.python import model_builder_helper as mbh  # lazy: the MPS/LP writer loads only on export

    if model.num_integer:
        raise ValueError("solve_lp_sparse solves LPs only; pass model.relaxed()")
    helper = mbh.ModelBuilderHelper()
    helper.fill_model_from_sparse_data(
        np.asarray(model.col_lb, dtype=np.float64),
        np.asarray(model.col_ub, dtype=np.float64),
        np.asarray(model.obj, dtype=np.float64),
        np.asarray(model.row_lb, dtype=np.float64),
        np.asarray(model.row_ub, dtype=np.float64),
        model.matrix(),
    )
    helper.set_maximize(True)
    helper.set_objective_offset(model.obj_offset)
    solver = mbh.ModelSolverHelper(backend)
    if not solver.solver_is_supported():
        raise RuntimeError(f"OR-Tools model builder backend {backend!r} is not available in this build")
    if time_limit is not None:
        solver.set_time_limit_in_seconds(time_limit)
    solver.solve(helper)
    status = solver.status()
    name = getattr(status, "name", str(status)).lower()
    return name, (solver.objective_value() if solver.has_solution() else None)


def solve_lp_cvxpy(model: LinearModel) -> tuple[str, float | None]:
    """Solve an LP with cvxpy (its default LP solver; the ``cvxpy`` extra); ``(status, objective)``."""
    cp = require_extra("cvxpy", "cvxpy", "lp_bound(backend='cvxpy')")
    if model.num_integer:
        raise ValueError("solve_lp_cvxpy solves LPs only; pass model.relaxed()")
    a = model.matrix()
    x = cp.Variable(model.num_vars)
    lb, ub = np.asarray(model.col_lb), np.asarray(model.col_ub)
    rlb, rub = np.asarray(model.row_lb), np.asarray(model.row_ub)
    cons = []
    for mask, side, sign in ((np.isfinite(lb), lb, 1), (np.isfinite(ub), ub, -1)):
        if mask.any():
            cons.append(sign * x[np.flatnonzero(mask)] >= sign * side[mask])
    for mask, side, sign in ((np.isfinite(rlb), rlb, 1), (np.isfinite(rub), rub, -1)):
        if mask.any():
            cons.append(sign * (a[np.flatnonzero(mask)] @ x) >= sign * side[mask])
    prob = cp.Problem(cp.Maximize(np.asarray(model.obj) @ x + model.obj_offset), cons)
    prob.solve()
    return str(prob.status), (float(prob.value) if prob.status == cp.OPTIMAL else None)


def _f(v: float, inf: float) -> float:
    return inf if v == math.inf else (-inf if v == -math.inf else v)


def _none(v: float) -> float | None:
    return v if math.isfinite(v) else None
