"""``optsched check INSTANCE.json SCHEDULE.json``: the independent checker on the command line
(either file may be ``-``: read from stdin).

Prints ``feasible <objective>`` and exits 0, or prints one violation per line and exits 1.
The schedule's own report fields (objective, bound, ...) are not trusted; the objective printed
is recomputed from the contract. ``--json`` prints the full report instead.
"""

from __future__ import annotations

import argparse
import json
import sys

from optsched.checker import check_schedule
from optsched.errors import InputError
from optsched.io import load_instance, load_json
from optsched.schedule import instance_name


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("instance", help="round instance JSON (.json or .json.gz); - reads it from stdin")
    p.add_argument("schedule", help="schedule JSON (the contract's format); - reads it from stdin")
    p.add_argument("--json", action="store_true", help="print the report as JSON: feasible, objective, violations")


def run(args: argparse.Namespace) -> int:
    if args.instance == "-" and args.schedule == "-":
        raise InputError("schedule", "-", "stdin holds the instance already; give one of the two as a file")
    instance = load_instance(args.instance)
    try:
        raw = load_json(args.schedule)
        named = instance_name(raw) if isinstance(raw, dict) else None  # refused, as the HTTP service refuses it
    except InputError as e:
        raise e.within("schedule") from None
    report = check_schedule(instance, raw)
    if named not in (None, "", instance.name):
        print(f"optsched: warning: the schedule names instance {named!r}, checking it against {instance.name!r}",
              file=sys.stderr)
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif report.feasible:
        print(f"feasible {report.objective:.12g}")
    else:
        print(f"infeasible: {len(report)} violation{'s' if len(report) != 1 else ''}")
        for v in report:
            print(f"  {v}")
    return 0 if report.feasible else 1
