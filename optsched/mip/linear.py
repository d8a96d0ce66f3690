"""A solver-neutral linear (mixed-integer) model: columns, two-sided rows, a linear objective.

:class:`LinearModel` is the one place where the round's MIP exists as data. The description
builders (:mod:`optsched.mip.description`, :mod:`optsched.mip.bound`) append to it; the backends
(:mod:`optsched.mip.backends`) translate it, unchanged, to OR-Tools MPSolver, PuLP or an MPS/LP
file. Nothing here knows about scheduling; everything here is cheap to build (plain lists), so a
backend never re-derives a coefficient and the solvers cannot drift apart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["INF", "LinearModel", "RowViolation"]

#: infinity as every backend understands it (MPSolver and PuLP map it to "no bound")
INF = math.inf


@dataclass(frozen=True)
class RowViolation:
    """A row (or column bound / integrality) that a vector of column values breaks."""

    name: str
    activity: float
    lb: float
    ub: float

    def __str__(self) -> str:
        return f"{self.name}: {self.lb} <= {self.activity} <= {self.ub} fails"


@dataclass
class LinearModel:
    """Maximise ``obj . x`` subject to ``row_lb <= A x <= row_ub``, ``col_lb <= x <= col_ub``.

    Columns flagged in ``col_int`` are integer. Rows are stored as sparse ``(cols, vals)`` pairs.
    Names are unique and valid in MPS/LP files (letters, digits, ``_``, ``.``, ``[``, ``]``).
    """

    name: str
    col_names: list[str] = field(default_factory=list)
    col_lb: list[float] = field(default_factory=list)
    col_ub: list[float] = field(default_factory=list)
    col_int: list[bool] = field(default_factory=list)
    obj: list[float] = field(default_factory=list)
    row_names: list[str] = field(default_factory=list)
    row_lb: list[float] = field(default_factory=list)
    row_ub: list[float] = field(default_factory=list)
    row_cols: list[list[int]] = field(default_factory=list)
    row_vals: list[list[float]] = field(default_factory=list)
    obj_offset: float = 0.0

    # --- building ---

    def add_var(self, name: str, lb: float = 0.0, ub: float = INF, *, integer: bool = False, obj: float = 0.0) -> int:
        """Append a column and return its index."""
        if lb > ub:
            raise ValueError(f"column {name}: lower bound {lb} above upper bound {ub}")
        self.col_names.append(name)
        self.col_lb.append(float(lb))
        self.col_ub.append(float(ub))
        self.col_int.append(bool(integer))
        self.obj.append(float(obj))
        return len(self.col_names) - 1

    def add_binary(self, name: str, *, obj: float = 0.0) -> int:
        return self.add_var(name, 0.0, 1.0, integer=True, obj=obj)

    def add_row(self, name: str, terms: Iterable[tuple[int, float]], lb: float = -INF, ub: float = INF) -> int:
        """Append ``lb <= sum(coef * x[col]) <= ub``; repeated columns are merged, zeros dropped."""
        acc: dict[int, float] = {}
        for col, coef in terms:
            acc[col] = acc.get(col, 0.0) + float(coef)
        cols = [c for c, v in acc.items() if v != 0.0]
        self.row_names.append(name)
        self.row_lb.append(float(lb))
        self.row_ub.append(float(ub))
        self.row_cols.append(cols)
        self.row_vals.append([acc[c] for c in cols])
        return len(self.row_names) - 1

    def le(self, name: str, terms: Iterable[tuple[int, float]], rhs: float) -> int:
        return self.add_row(name, terms, -INF, rhs)

    def ge(self, name: str, terms: Iterable[tuple[int, float]], rhs: float) -> int:
        return self.add_row(name, terms, rhs, INF)

    def eq(self, name: str, terms: Iterable[tuple[int, float]], rhs: float) -> int:
        return self.add_row(name, terms, rhs, rhs)

    # --- views ---

    @property
    def num_vars(self) -> int:
        return len(self.col_names)

    @property
    def num_rows(self) -> int:
        return len(self.row_names)

    @property
    def num_nonzeros(self) -> int:
        return sum(len(c) for c in self.row_cols)

    @property
    def num_integer(self) -> int:
        return sum(self.col_int)

    def stats(self) -> dict[str, int]:
        return {"vars": self.num_vars, "integer_vars": self.num_integer, "rows": self.num_rows, "nonzeros": self.num_nonzeros}

    def relaxed(self) -> LinearModel:
        """The LP relaxation: the same model with every integrality requirement dropped."""
        return LinearModel(
            name=self.name + "_lp",
            col_names=list(self.col_names),
            col_lb=list(self.col_lb),
            col_ub=list(self.col_ub),
            col_int=[False] * self.num_vars,
            obj=list(self.obj),
            row_names=list(self.row_names),
            row_lb=list(self.row_lb),
            row_ub=list(self.row_ub),
            row_cols=self.row_cols,
            row_vals=self.row_vals,
            obj_offset=self.obj_offset,
        )

    def matrix(self):  # -> scipy.sparse.csr_matrix (imported lazily: scipy is heavy)
        """The constraint matrix as a ``scipy.sparse.csr_matrix`` (rows x columns)."""
        from scipy.sparse import csr_matrix  # lazy: scipy loads only for a sparse LP

        indptr = np.zeros(self.num_rows + 1, dtype=np.int64)
        indptr[1:] = np.cumsum([len(c) for c in self.row_cols])
        indices = np.fromiter((c for cols in self.row_cols for c in cols), dtype=np.int64, count=int(indptr[-1]))
        data = np.fromiter((v for vals in self.row_vals for v in vals), dtype=np.float64, count=int(indptr[-1]))
        return csr_matrix((data, indices, indptr), shape=(self.num_rows, self.num_vars))

    # --- evaluation (tests and self-checks) ---

    def objective_value(self, x: Sequence[float]) -> float:
        return self.obj_offset + float(np.dot(self.obj, x)) if self.num_vars else self.obj_offset

    def violations(self, x: Sequence[float], tol: float = 1e-6) -> list[RowViolation]:
        """Every column bound, integrality requirement and row that ``x`` breaks by more than ``tol``."""
        if len(x) != self.num_vars:
            raise ValueError(f"expected {self.num_vars} values, got {len(x)}")
        out = []
        for i, v in enumerate(x):
            if v < self.col_lb[i] - tol or v > self.col_ub[i] + tol:
                out.append(RowViolation(f"bound:{self.col_names[i]}", v, self.col_lb[i], self.col_ub[i]))
            if self.col_int[i] and abs(v - round(v)) > tol:
                out.append(RowViolation(f"integrality:{self.col_names[i]}", v, round(v), round(v)))
        for r in range(self.num_rows):
            act = sum(v * x[c] for c, v in zip(self.row_cols[r], self.row_vals[r], strict=True))
            if act < self.row_lb[r] - tol or act > self.row_ub[r] + tol:
                out.append(RowViolation(self.row_names[r], act, self.row_lb[r], self.row_ub[r]))
        return out
