"""``optsched solve INSTANCE.json``: solve one round and write its schedule JSON (``-``: the round from stdin).

The schedule (the contract's schedule JSON with the solve's reports: objective, bound, gap,
status, solver, method, time, stats) goes to stdout, or to ``-o FILE`` (``.json.gz``
compresses); a one-line summary goes to stderr. Exit status 0, 2 on bad input, and 3 when the
independent checker refuses what a solver returned (a bug in that solver: nothing is written).
``-v`` prints each incumbent and bound on stderr as they come; ``--solver-log`` sends the
solver's own search log (CP-SAT's, SCIP's, CBC's) to stderr. ``--write-first`` writes the
method's first incumbent to ``-o`` as soon as it exists (checked by the independent checker),
for a long solve of a large round; the final schedule replaces it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from optsched.checker import check_schedule
from optsched.errors import InputError
from optsched.io import check_writable, load_instance, load_schedule, parse_json, write_json
from optsched.model import Instance
from optsched.result import Result, Status, gap
from optsched.round_policies import drf_runnable
from optsched.schedule import Schedule
from optsched.solve import SolverBug, _resolve, solve_round


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("instance", help="round instance JSON (.json or .json.gz); - reads it from stdin")
    p.add_argument("--method", default="auto", help="auto (default), exact, heuristic or learned")
    p.add_argument("--solver", help="a registered solver by name (see `optsched methods`); overrides the family default")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="SEC", help="wall-clock limit in seconds (default 10)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--hint", metavar="SCHEDULE.json", help="a feasible schedule to warm-start solvers that take hints")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="solver option (VALUE parsed as JSON when it can be, else a string); repeatable")
    p.add_argument("-o", "--out", metavar="SCHEDULE.json", help="write the schedule here instead of stdout")
    p.add_argument("-v", "--verbose", action="store_true", help="print each incumbent and bound on stderr as they come")
    p.add_argument("--write-first", action="store_true",
                   help="with -o: write the first incumbent that the method records with its schedule (partitioned: as its "
                        "first parts answer) to the output file as soon as it exists, checked by the independent checker; "
                        "the final schedule replaces it")
    p.add_argument("--solver-log", action="store_true",
                   help="the solver's own search log on stderr (cpsat, scip, cbc, pulp; auto when it runs CP-SAT)")


def parse_options(items: list[str]) -> dict[str, Any]:
    """``["num_workers=2", "log=true"]`` -> ``{"num_workers": 2, "log": True}``."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError("--option", item, "must be KEY=VALUE")
        try:
            out[key.strip()] = parse_json(value)
        except InputError as e:
            if not e.problem.startswith("is not valid JSON"):  # JSON the strict reader refuses, saying why
                raise InputError("--option", item, e.problem) from None
            out[key.strip()] = value  # not JSON at all: the text itself
    return out


def run(args: argparse.Namespace) -> int:
    if args.write_first and not args.out:
        raise InputError("--write-first", True, "needs -o FILE: the file the first incumbent is written to")
    if args.instance == "-" and args.hint == "-":
        raise InputError("--hint", "-", "stdin holds the round already; give the hint as a file")
    if args.out:
        check_writable(args.out)
    t0 = time.perf_counter()
    instance = load_instance(args.instance)
    if args.verbose:
        print(f"optsched: read {args.instance} in {time.perf_counter() - t0:.2f}s ({len(instance.nodes):,} nodes, "
              f"{len(instance.jobs):,} jobs)", file=sys.stderr, flush=True)
    hint = None
    if args.hint:
        try:
            hint = load_schedule(args.hint)
        except InputError as e:
            raise e.within("--hint") from None
    options = parse_options(args.option)
    log: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if args.solver_log:
        name = _resolve(instance, args.method, args.solver, args.time_limit)[0].name
        if name in SEARCH_LOGS:
            options["log"], log = True, _stdout_to_stderr()
        else:
            print(f"optsched: {name} has no search log of its own (--solver-log ignored; -v shows its progress)", file=sys.stderr)
    first = _FirstWriter(instance, args.out, _resolve(instance, args.method, args.solver, args.time_limit)[0], args.verbose) \
        if args.write_first else None
    try:
        with log:
            result = solve_round(instance, args.method, solver=args.solver, time_limit=args.time_limit, seed=args.seed,
                                 hint=hint, progress=_print_progress if args.verbose else None, incumbent=first, **options)
    except SolverBug as e:
        print(f"optsched: solver bug (please report it): {e}", file=sys.stderr)
        return 3
    doc = result.to_dict()
    if args.out:
        write_json(doc, args.out)
    else:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    print(result.summary(), file=sys.stderr)
    _note_unplaceable(instance)
    return 0


def _note_unplaceable(instance: Instance) -> None:
    """Name the jobs that no schedule of the round can run: each, at every allowed grid point,
    needs more GPUs than its allowed types' empty nodes hold (a gang larger than the type, a
    demand no node shape feeds). Valid input, so a note, not an error."""
    memo: dict[tuple[str, int, int], int] = {}
    never = [j.id for j in instance.jobs if not drf_runnable(instance, j, memo)]
    if never:
        shown = ", ".join(never[:10]) + (f" and {len(never) - 10} more" if len(never) > 10 else "")
        print(f"optsched: note: {len(never)} job(s) fit no allowed GPU type even on the empty cluster and can never be scheduled: "
              f"{shown}", file=sys.stderr)


#: methods with a search log of their own (their option ``log``; the backends print it on stdout)
SEARCH_LOGS = frozenset({"cpsat", "cpsat+maifs", "scip", "cbc", "pulp"})


def _print_progress(t_s: float, objective: float | None, bound: float | None) -> None:
    """One ``-v`` line: time, incumbent, bound and their gap."""
    g = gap(objective, bound) if objective is not None else None
    fmt = lambda x: "-" if x is None else f"{x:.6g}"  # noqa: E731
    print(f"optsched: {t_s:8.3f}s incumbent={fmt(objective)} bound={fmt(bound)} gap={'-' if g is None else f'{100 * g:.3f}%'}",
          file=sys.stderr, flush=True)


class _FirstWriter:
    """``solve_round``'s ``incumbent`` callback for ``--write-first``: the first incumbent, checked
    by the independent checker, written to ``path`` as a schedule JSON (``status`` feasible,
    ``stats.first_incumbent`` true, ``time_s`` the solve's seconds when it was recorded); later
    ones are not built."""

    def __init__(self, instance: Instance, path: str, info: Any, verbose: bool) -> None:
        self.instance, self.path, self.info, self.verbose = instance, path, info, verbose
        self.written = False

    def __call__(self, t_s: float, objective: float, schedule: Callable[[], Schedule]) -> None:
        if self.written:
            return
        t0 = time.perf_counter()
        sched = schedule()
        report = check_schedule(self.instance, sched)
        if report:
            raise SolverBug(f"{self.info.name} recorded an infeasible incumbent for {self.instance.name}: {report[:3]}")
        result = Result(sched, Status.FEASIBLE, report.objective, None, self.info.name, self.info.family, t_s, {"first_incumbent": True})
        write_json(result.to_dict(), self.path)
        self.written = True
        if self.verbose:
            print(f"optsched: {t_s:8.3f}s first incumbent worth {report.objective:.6g} ({len(sched)} jobs) checked and written to "
                  f"{self.path} in {time.perf_counter() - t0:.2f}s", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 points at stderr inside the block: a solver's log (written on stdout by
    its C++ code) cannot mix with the schedule JSON."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
