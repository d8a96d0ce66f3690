"""``optsched export``: write a round's MIP as an MPS or LP file, for Gurobi, CPLEX, HiGHS or any MIP solver.

The file holds the very model that the ``scip``, ``cbc`` and ``pulp`` methods solve (the shared
description of :mod:`optsched.mip.description`, written at full double precision by
:mod:`optsched.mip.files`), so an outside solver reaches the same optimum. Column names encode indices: ``x_J_N`` is the number of
GPUs of the J-th job on the N-th node, ``u_J_T_P`` says the J-th job runs on the T-th GPU type at
its P-th Pareto grid point, ``v_J`` is its worth; ``formulations/mip.md`` lists every family.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from optsched.errors import InputError
from optsched.io import check_writable, load_instance
from optsched.mip.backends import export_text
from optsched.mip.description import MIP_FAMILIES, build
from optsched.round_policies import policy_families


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("instance", help="round instance JSON (.json or .json.gz)")
    p.add_argument("--format", choices=("mps", "lp"), default="mps", help="free-format MPS (default) or CPLEX LP")
    p.add_argument("--relax", action="store_true", help="write the LP relaxation (integrality dropped) instead of the MIP")
    p.add_argument("-o", "--out", help="output file (default: stdout)")


def run(args: argparse.Namespace) -> int:
    if args.out:
        check_writable(args.out)
    instance = load_instance(args.instance)
    fams = sorted(policy_families(instance) - set(MIP_FAMILIES))
    if fams:  # the shared MIP description does not model them: refuse rather than drop them
        raise InputError("instance", args.instance, f"uses the policy families {fams}, which the exported MIP does not model")
    model = build(instance).model
    if args.relax:
        model = model.relaxed()
    text = export_text(model, args.format)
    if args.out:
        try:
            Path(args.out).write_text(text)
        except OSError as e:
            raise InputError("-o", args.out, f"cannot be written: {e.strerror or e}") from None
    else:
        sys.stdout.write(text)
    s = model.stats()
    print(
        f"{instance.name}: {args.format} {'LP relaxation' if args.relax else 'MIP'} with {s['vars']} columns "
        f"({s['integer_vars']} integer), {s['rows']} rows, {s['nonzeros']} non-zeros" + (f" -> {args.out}" if args.out else ""),
        file=sys.stderr,
    )
    return 0
