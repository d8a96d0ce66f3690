"""``cpsat``: the integrated round formulation solved exactly by OR-Tools CP-SAT.

The math is in ``formulations/integrated.md``. The staged solve: the greedy hints (and the
caller's), on larger rounds an ``lns`` warm start (:mod:`optsched.heuristics.lns`), then CP-SAT on
the round model (:mod:`optsched.exact.model`) with the best of them as a complete hint, and an
LP-relaxation bound when CP-SAT proves nothing (:mod:`optsched.exact.core`). Options:
:mod:`optsched.exact.options`.

The solver never exceeds its time limit: building checks the clock and, if the budget runs out,
returns the best hint schedule with status ``TIME_LIMIT``.
"""

from __future__ import annotations

from typing import Any

from optsched.exact.core import LNS_FROM_CELLS, LNS_MOSTLY_FROM_CELLS, solve_cpsat, start_bound_worker
from optsched.exact.model import OutOfTime, RoundModel, build_model
from optsched.heuristics.lns import LargeNeighbourhoodSearch
from optsched.model import Instance
from optsched.result import Result
from optsched.schedule import Schedule
from optsched.trajectory import recorded

__all__ = ["LNS_FROM_CELLS", "LNS_MOSTLY_FROM_CELLS", "CpSatSolver", "OutOfTime", "RoundModel", "build_model",
           "start_bound_worker"]


class CpSatSolver:
    """``cpsat``: the integrated formulation, solved exactly by CP-SAT with a complete greedy hint.

    Options: ``num_workers`` (default ``min(8, cpu_count)``), ``deterministic_time`` (a budget
    of CP-SAT deterministic seconds: same seed and budget give the same schedule as long as the
    wall limit does not cut in first; the lns stage gets ``lns_share`` of it, summed over its
    sub-problems, and the CP-SAT stage the rest; the bound is still computed by wall clock), ``log`` (CP-SAT's search
    log on stdout), and switches for the engineering (``node_symmetry``, ``job_symmetry``, ``type_cuts``, ``greedy_hint``).
    """

    name = "cpsat"

    @recorded
    def solve(self, instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None, **options: Any) -> Result:
        return solve_cpsat(instance, time_limit=time_limit, seed=seed, hint=hint,
                           warm_start=LargeNeighbourhoodSearch().solve, **options)
