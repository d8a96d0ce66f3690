"""MPS and LP writers for a :class:`~optsched.mip.linear.LinearModel`, at full double precision.

OR-Tools' exporter (``ExportModelAsMpsFormat``) prints six significant digits, which moves an
optimum by up to 1e-6 relative and breaks exact cross-solver agreement; these writers print every
number as the shortest decimal that reads back to the same double (``repr``), so the file *is*
the model. Both formats state the objective sense (maximise) and explicit bounds on every
integer column (old MPS readers take a bare integer column as binary).

- MPS: free format with ``OBJSENSE MAX``, ``MARKER INTORG/INTEND`` integer blocks, ``RANGES`` for
  two-sided rows. Read by HiGHS, Gurobi, CPLEX, SCIP, CBC and ``pulp.LpProblem.fromMPS``.
- LP: CPLEX LP format (``Maximize``/``Subject To``/``Bounds``/``Generals``); a two-sided row is
  written as two rows, ``NAME_lo`` and ``NAME_hi``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from optsched.mip.linear import LinearModel

__all__ = ["to_lp", "to_mps"]

_OBJ = "OBJ"


def _num(v: float) -> str:
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


def _check(model: LinearModel) -> None:
    if model.obj_offset:
        raise ValueError("MPS/LP export of an objective constant is not supported (no model here has one)")
    names = set(model.col_names) | set(model.row_names)
    if len(names) != model.num_vars + model.num_rows or _OBJ in names:
        raise ValueError("column and row names must be unique (and not 'OBJ') to export")


def _columns(model: LinearModel) -> list[list[tuple[str, float]]]:
    """Column-wise entries ``(row name, coefficient)``, objective first."""
    cols: list[list[tuple[str, float]]] = [[(_OBJ, v)] if v else [] for v in model.obj]
    for name, rc, rv in zip(model.row_names, model.row_cols, model.row_vals, strict=True):
        for c, v in zip(rc, rv, strict=True):
            cols[c].append((name, v))
    return cols


def to_mps(model: LinearModel) -> str:
    """Free-format MPS text of ``model``."""
    _check(model)
    out = [
        f"* {model.name}: written by optsched.mip.files at full double precision",
        f"* {model.num_vars} columns ({model.num_integer} integer), {model.num_rows} rows, {model.num_nonzeros} non-zeros",
        f"NAME {model.name}",
        "OBJSENSE",
        "    MAX",
        "ROWS",
        f" N  {_OBJ}",
    ]
    rhs, ranges = [], []
    for name, lb, ub in zip(model.row_names, model.row_lb, model.row_ub, strict=True):
        if lb == ub:
            out.append(f" E  {name}")
            rhs.append((name, lb))
        elif math.isfinite(lb) and math.isfinite(ub):
            out.append(f" G  {name}")
            rhs.append((name, lb))
            ranges.append((name, ub - lb))
        elif math.isfinite(ub):
            out.append(f" L  {name}")
            rhs.append((name, ub))
        elif math.isfinite(lb):
            out.append(f" G  {name}")
            rhs.append((name, lb))
        else:
            raise ValueError(f"row {name} has no finite side")
    out.append("COLUMNS")
    in_int = False
    for c, entries in enumerate(_columns(model)):
        if model.col_int[c] != in_int:
            in_int = model.col_int[c]
            out.append(f"    MARKER 'MARKER' '{'INTORG' if in_int else 'INTEND'}'")
        name = model.col_names[c]
        if not entries:
            entries = [(_OBJ, 0.0)]  # a column must appear to exist
        out.extend(f"    {name} {row} {_num(v)}" for row, v in entries)
    if in_int:
        out.append("    MARKER 'MARKER' 'INTEND'")
    out.append("RHS")
    out.extend(f"    RHS {name} {_num(v)}" for name, v in rhs if v)
    if ranges:
        out.append("RANGES")
        out.extend(f"    RNG {name} {_num(v)}" for name, v in ranges)
    out.append("BOUNDS")
    for c, name in enumerate(model.col_names):
        out.extend(_mps_bounds(name, model.col_lb[c], model.col_ub[c], model.col_int[c]))
    out.append("ENDATA")
    return "\n".join(out) + "\n"


def _mps_bounds(name: str, lb: float, ub: float, integer: bool) -> Iterator[str]:
    if lb == ub:
        yield f" FX BND {name} {_num(lb)}"
        return
    if lb == -math.inf:
        yield f" MI BND {name}"
    elif lb != 0.0 or integer:
        yield f" LO BND {name} {_num(lb)}"
    if math.isfinite(ub):
        yield f" UP BND {name} {_num(ub)}"
    elif integer:
        yield f" PL BND {name}"


def to_lp(model: LinearModel) -> str:
    """CPLEX-LP text of ``model``."""
    _check(model)
    out = [
        f"\\ {model.name}: written by optsched.mip.files at full double precision",
        f"\\ {model.num_vars} columns ({model.num_integer} integer), {model.num_rows} rows, {model.num_nonzeros} non-zeros",
        "Maximize",
    ]
    out.extend(_lp_expr(f" {_OBJ}:", [(model.col_names[c], v) for c, v in enumerate(model.obj) if v] or [(model.col_names[0], 0.0)] if model.num_vars else []))
    out.append("Subject To")
    for name, lb, ub, rc, rv in zip(model.row_names, model.row_lb, model.row_ub, model.row_cols, model.row_vals, strict=True):
        terms = [(model.col_names[c], v) for c, v in zip(rc, rv, strict=True)] or ([(model.col_names[0], 0.0)] if model.num_vars else [])
        sides = []
        if lb == ub:
            sides.append((name, "=", lb))
        else:
            both = math.isfinite(lb) and math.isfinite(ub)
            if math.isfinite(lb):
                sides.append((name + ("_lo" if both else ""), ">=", lb))
            if math.isfinite(ub):
                sides.append((name + ("_hi" if both else ""), "<=", ub))
        for rname, sense, v in sides:
            lines = _lp_expr(f" {rname}:", terms)
            lines[-1] += f" {sense} {_num(v)}"
            out.extend(lines)
    out.append("Bounds")
    for c, name in enumerate(model.col_names):
        lb, ub = model.col_lb[c], model.col_ub[c]
        if lb == ub:
            out.append(f" {name} = {_num(lb)}")
        elif lb == -math.inf and ub == math.inf:
            out.append(f" {name} free")
        else:
            lo = "-inf" if lb == -math.inf else _num(lb)
            hi = "+inf" if ub == math.inf else _num(ub)
            out.append(f" {lo} <= {name} <= {hi}")
    ints = [name for name, i in zip(model.col_names, model.col_int, strict=True) if i]
    if ints:
        out.append("Generals")
        out.extend(" " + " ".join(ints[k : k + 8]) for k in range(0, len(ints), 8))
    out.append("End")
    return "\n".join(out) + "\n"


def _lp_expr(head: str, terms: list[tuple[str, float]], per_line: int = 6) -> list[str]:
    """``head`` and ``+ a x - b y ...``, wrapped so that no line gets long (LP readers limit lines)."""
    lines, cur = [], head
    for k, (name, v) in enumerate(terms):
        if k and k % per_line == 0:
            lines.append(cur)
            cur = "   "
        cur += f" {'-' if v < 0 else '+'} {_num(abs(v))} {name}"
    lines.append(cur)
    return lines
