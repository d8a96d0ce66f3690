"""The ``optsched`` command line: a thin dispatcher over one module per verb.

Each verb lives in ``optsched/commands/<verb>.py`` with ``add_arguments(parser)`` and
``run(args) -> int``; modules are imported only when their verb runs, so ``optsched check`` does
not load torch. Exit codes: 0 success, 1 infeasible / violations, 2 bad input (an unreadable or
unwritable file included), 3 a solver bug.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from optsched.errors import InputError
from optsched.extras import MissingExtra

#: verb -> (module, one-line help). Add a verb by adding its module and one line here.
VERBS: dict[str, tuple[str, str]] = {
    "solve": ("optsched.commands.solve", "solve one round and write its schedule JSON"),
    "check": ("optsched.commands.check", "check a schedule against an instance (independent checker)"),
    "gen": ("optsched.commands.gen", "write random valid round instances"),
    "methods": ("optsched.commands.methods", "list the registered solve methods"),
    "bench": ("optsched.commands.bench", "run solvers over instance sets: results table, summary, plots"),
    "train": ("optsched.commands.train", "distil exact solutions into the learned policy (behaviour cloning, DAgger)"),
    "validate": ("optsched.commands.validate", "judge a schedule another scheduler made: violations, gap to a reference solve, jobs placed differently"),
    "simulate": ("optsched.commands.simulate", "replay a trace on a cluster: JCT, makespan, utilisation per policy x allocator"),
    "workload": ("optsched.commands.workload", "write a synthetic trace CSV (Poisson arrivals, parametric sizes and durations)"),
    "export": ("optsched.commands.export", "write a round's MIP as an MPS or LP file (the model scip/cbc/pulp solve)"),
    "serve": ("optsched.commands.serve", "serve the HTTP API: solve, check and validate rounds (docs/service.md)"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # bad options are bad input: exit 2 with the message
        self.print_usage(sys.stderr)
        print(f"optsched: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="optsched", description="Integrated, fungible GPU-cluster round scheduling.")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True, parser_class=_Parser)
    for verb, (module, help_) in VERBS.items():
        p = sub.add_parser(verb, help=help_, description=help_)
        p.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except InputError as e:
        print(f"optsched: bad input: {e}", file=sys.stderr)
        return 2
    except MissingExtra as e:
        print(f"optsched: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("optsched: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of stdout stopped early (`optsched gen ... | head`): not an error of ours;
        # stdout goes to devnull so that the interpreter's final flush does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # the disk or the file system refused: no traceback, nothing half-written (write_json)
        print(f"optsched: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
