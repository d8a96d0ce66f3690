"""cvxpy and OR-Tools (CP-SAT, GLOP) coexist in one process in either import order (pin guard)."""

from __future__ import annotations

import subprocess
import sys

import pytest

_CVXPY = "import cvxpy\nassert cvxpy.installed_solvers(), 'cvxpy lists no solvers'\n"
_ORTOOLS = """
from ortools.sat.python import cp_model
from ortools.linear_solver import pywraplp
m = cp_model.CpModel(); x = m.new_int_var(0, 3, "x"); m.maximize(x)
s = cp_model.CpSolver(); assert s.solve(m) == cp_model.OPTIMAL and s.value(x) == 3
lp = pywraplp.Solver.CreateSolver("GLOP"); y = lp.NumVar(0, 2, "y"); lp.Maximize(y)
assert lp.Solve() == pywraplp.Solver.OPTIMAL and abs(y.solution_value() - 2) < 1e-9
"""


@pytest.mark.parametrize("order", [(_CVXPY, _ORTOOLS, _CVXPY), (_ORTOOLS, _CVXPY, _ORTOOLS)],
                         ids=["cvxpy-first", "ortools-first"])
def test_cvxpy_and_ortools_coexist(order):
    proc = subprocess.run([sys.executable, "-c", "\n".join(order)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
