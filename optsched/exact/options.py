"""The options of ``cpsat`` (:class:`~optsched.exact.cpsat.CpSatSolver`), validated once."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from optsched.errors import InputError
from optsched.limits import MAX_THREADS
from optsched.options import Check, MethodOptions, option
from optsched.schedule import Schedule

__all__ = ["PORTFOLIOS", "CpsatOptions"]

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


def _bound_worker(name: str, value: Any) -> Any:
    if not isinstance(value, bool) and not callable(getattr(value, "collect", None)):
        raise InputError(name, value, "must be true, false or a started BoundWorker (cpsat.start_bound_worker)")
    return value


def _usage_floor(name: str, value: Any) -> tuple[tuple[Any, int, int], ...]:
    if not isinstance(value, (list, tuple)) or any(
            not isinstance(row, (list, tuple)) or len(row) != 3 or isinstance(row[1], bool) or row[1] not in (0, 1, 2)
            or isinstance(row[2], bool) or not isinstance(row[2], int) for row in value):
        raise InputError(name, value, "must be a list of (job ids, resource 0/1/2, integer amount)")
    return tuple((ids, r, amount) for ids, r, amount in value)


def _greedy_starts(name: str, value: Any) -> tuple[tuple[str, Any], ...]:
    if not isinstance(value, (list, tuple)) or not value or any(
            not isinstance(row, (list, tuple)) or len(row) != 2 or not isinstance(row[0], str) or not isinstance(row[1], Schedule)
            for row in value):
        raise InputError(name, value, "must be a non-empty list of (name, Schedule): exact.core.greedy_starts of the round")
    return tuple((n, s) for n, s in value)


def _cp_params(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(name, value, "must be a mapping of CP-SAT parameter names to values")
    from ortools.sat import sat_parameters_pb2  # lazy: OR-Tools loads only when a caller sets CP-SAT parameters

    known = sat_parameters_pb2.SatParameters.DESCRIPTOR.fields_by_name
    for key in value:
        if key not in known:
            raise InputError(name, key, "not a CP-SAT parameter (ortools.sat.SatParameters)")
    return dict(value)


@dataclass(frozen=True)
class CpsatOptions(MethodOptions):
    """Options of ``cpsat``. ``CpSatSolver.solve`` reads them as the dict of :meth:`to_dict`,
    with ``num_workers=None`` resolved to ``min(8, os.cpu_count())``."""

    method: ClassVar[str] = "cpsat"

    num_workers: int | None = option(None, "CP-SAT workers (null: min(8, CPU count))", Check.integer(ge=1, le=MAX_THREADS).or_none())
    deterministic_time: float | None = option(
        None, "CP-SAT deterministic-time limit, for reproducible runs (null: wall clock only); a search that a wall "
              "limit under 1 s + 4 s per deterministic second may cut runs on one worker",
        Check.number(gt=0, problem="must be a positive number").or_none())
    log: bool = option(False, "print CP-SAT's search log (on stdout)", Check.boolean(), remote=False)
    node_symmetry: bool = option(
        False, "order identical nodes by use (measured: CP-SAT's own symmetry handling does better)", Check.boolean())
    job_symmetry: bool = option(True, "order identical jobs by selection", Check.boolean())
    type_cuts: bool = option(False, "aggregated capacity rows per GPU type (implied by the node rows)", Check.boolean())
    greedy_hint: bool = option(True, "complete the search with the greedy schedule when no hint is given", Check.boolean())
    lns_share: float | None = option(
        None, "share of the time for an lns warm start (null: 0 up to 1,024 cells, 0.7, and 0.97 above 2,048)",
        Check.number(ge=0, lt=1).or_none())
    lifted_rows: bool = option(
        True, "lift node core/memory rows by the capacity GPU-heavy jobs strand (measured: faster proofs)", Check.boolean())
    split_cuts: bool = option(False, "linear rows tying a split job's node count, modes and penalty", Check.boolean())
    portfolio: str = option(
        "auto", "CP-SAT workers: proof (two LP workers), default (CP-SAT's), auto (proof with 2 workers and no lns stage)",
        Check.one_of(tuple(PORTFOLIOS)))
    cp_params: dict[str, Any] | None = option(
        None, 'CP-SAT parameter overrides, e.g. {"symmetry_level": 4} (for experiments)',
        Check("mapping", _cp_params).or_none(), remote=False)
    bound_worker: Any = option(
        True, "with an lns stage: the configuration-LP bound in a child process (or a started BoundWorker, from Python)",
        Check("bool | BoundWorker", _bound_worker))
    lp_fallback: bool = option(True, "when CP-SAT proves nothing, report the LP bound (time is kept for it)", Check.boolean())
    config_fixing: bool = option(
        True, "without an lns stage: reduced-cost fixing and a re-solve when CP-SAT is unproven after 2 s", Check.boolean())
    greedy_starts: tuple[tuple[str, Any], ...] | None = option(
        None, "the round's greedy starts, built by the caller with exact.core.greedy_starts (null: cpsat builds them)",
        Check("list", _greedy_starts).or_none(), remote=False)
    usage_floor: tuple[tuple[Any, int, int], ...] | None = option(
        None, "[(job ids, resource 0/1/2, amount)]: those jobs hold at least amount of GPUs/cores/GB (used by lns under HUG)",
        Check("list", _usage_floor).or_none(), remote=False)


def _check_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` validated (:class:`CpsatOptions`), as a dict with every default and
    ``num_workers`` resolved."""
    opts = CpsatOptions.from_mapping(options).to_dict()
    if opts["num_workers"] is None:
        opts["num_workers"] = min(8, os.cpu_count() or 1)
    return opts
