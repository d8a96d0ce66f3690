"""The options of ``cpsat`` (:class:`optsched.exact.cpsat.CpSatSolver`): their defaults and their check."""

from __future__ import annotations

import os
from typing import Any

from ortools.sat import sat_parameters_pb2

from optsched.errors import InputError

__all__ = ["DEFAULT_OPTIONS", "PORTFOLIOS"]

#: options :meth:`CpSatSolver.solve` accepts, with their defaults
DEFAULT_OPTIONS: dict[str, Any] = {
    "num_workers": None,  # None: min(8, os.cpu_count())
    "deterministic_time": None,  # CP-SAT deterministic-time limit (reproducible runs)
    "log": False,  # print CP-SAT's search log
    "node_symmetry": False,  # order identical nodes by use (measured: CP-SAT's own symmetry handling does better)
    "job_symmetry": True,  # order identical jobs by selection
    "type_cuts": False,  # aggregated capacity per GPU type (implied by the node rows)
    "greedy_hint": True,  # complete the search with the greedy schedule when no hint is given
    "lns_share": None,  # share of the time for an lns warm start (None: 0 up to LNS_FROM_CELLS cells, 0.7, 0.97 above LNS_MOSTLY_FROM_CELLS)
    "lifted_rows": True,  # lift node core/memory rows by the capacity GPU-heavy jobs strand (measured: faster proofs)
    "split_cuts": False,  # linear rows tying a split job's node count, modes and penalty (LP strength)
    "portfolio": "auto",  # "proof" (two LP workers), "default" (CP-SAT's), "auto": proof with 2 workers and no lns stage
    "cp_params": None,  # CP-SAT parameter overrides, e.g. {"symmetry_level": 4} (for experiments)
    "bound_worker": True,  # with an lns stage: the configuration-LP bound in a child process (optsched.mip.bound_worker); or one already started (start_bound_worker)
    "lp_fallback": True,  # when CP-SAT proves nothing, the LP bound (time kept for it); lns's sub-problems skip it
    "config_fixing": True,  # rounds without an lns stage: CP-SAT unproven after FIXING_AFTER_S -> reduced-cost fixing, re-solve
    "usage_floor": None,  # [(job ids, r, amount)]: those jobs hold >= amount of resource r (0 GPUs, 1 cores, 2 GB); lns under HUG
}

#: CP-SAT worker portfolios (``portfolio`` option). "proof": both workers search the full model
#: with LP relaxations (default_lp and max_lp) instead of CP-SAT's default of one LP worker plus
#: one worker for first-solution heuristics and LNS. Measured on the 12 small benchmark rounds (2
#: workers, same deterministic-time budget): the proof is reached with a median 0.5 instead of 2.8
#: deterministic seconds where both prove it (formulations/integrated.md, "Engineering experiments").
PORTFOLIOS: dict[str, dict[str, Any]] = {
    "default": {},
    "proof": {"num_full_subsolvers": 2, "subsolvers": ["default_lp", "max_lp"]},
    "auto": {},
}


def _check_options(options: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(DEFAULT_OPTIONS))
    if unknown:
        raise InputError("options", unknown, f"unknown cpsat option(s); known: {sorted(DEFAULT_OPTIONS)}")
    opts = {**DEFAULT_OPTIONS, **options}
    nw = opts["num_workers"]
    if nw is None:
        opts["num_workers"] = min(8, os.cpu_count() or 1)
    elif isinstance(nw, bool) or not isinstance(nw, int) or nw < 1:
        raise InputError("num_workers", nw, "must be a positive integer")
    share = opts["lns_share"]
    if share is not None and (isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < 1):
        raise InputError("lns_share", share, "must be a number in [0, 1)")
    bw = opts["bound_worker"]
    if not isinstance(bw, bool) and not callable(getattr(bw, "collect", None)):
        raise InputError("bound_worker", bw, "must be true, false or a started BoundWorker (cpsat.start_bound_worker)")
    dt = opts["deterministic_time"]
    if dt is not None and (isinstance(dt, bool) or not isinstance(dt, (int, float)) or dt <= 0):
        raise InputError("deterministic_time", dt, "must be a positive number")
    if opts["portfolio"] not in PORTFOLIOS:
        raise InputError("portfolio", opts["portfolio"], f"unknown portfolio; known: {sorted(PORTFOLIOS)}")
    floor = opts["usage_floor"]
    if floor is not None and (not isinstance(floor, (list, tuple)) or any(
            not isinstance(row, (list, tuple)) or len(row) != 3 or row[1] not in (0, 1, 2) or not isinstance(row[2], int) for row in floor)):
        raise InputError("usage_floor", floor, "must be a list of (job ids, resource 0/1/2, integer amount)")
    cp = opts["cp_params"]
    if cp is not None:
        if not isinstance(cp, dict):
            raise InputError("cp_params", cp, "must be a mapping of CP-SAT parameter names to values")
        fields = sat_parameters_pb2.SatParameters.DESCRIPTOR.fields_by_name
        for name in cp:
            if name not in fields:
                raise InputError("cp_params", name, "not a CP-SAT parameter (ortools.sat.SatParameters)")
    return opts
