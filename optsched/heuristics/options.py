"""The options of ``lns`` (:class:`~optsched.heuristics.lns.LargeNeighbourhoodSearch`), validated once.

``fixed-demand`` and ``fungible-greedy`` take no options (:class:`optsched.options.NoOptions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from optsched.errors import InputError
from optsched.limits import MAX_THREADS
from optsched.mip.colgen import Prices
from optsched.options import Check, MethodOptions, option

__all__ = ["LnsOptions"]


def _prices(name: str, value: Any) -> Prices:
    if not isinstance(value, Prices):
        raise InputError(name, value, "must be an optsched.mip.colgen.Prices or None")
    return value


def _share(help: str, default: float) -> Any:
    return option(default, help, Check.number(ge=0, le=1, problem="must be a share in [0, 1]"))


@dataclass(frozen=True)
class LnsOptions(MethodOptions):
    """Options of ``lns``; ``LargeNeighbourhoodSearch.solve`` reads them as the dict of :meth:`to_dict`."""

    method: ClassVar[str] = "lns"

    num_workers: int = option(1, "CP-SAT workers per sub-problem", Check.integer(ge=1, le=MAX_THREADS))
    nodes: int = option(4, "nodes freed per neighbourhood (it grows and shrinks from there)", Check.integer(ge=1))
    extra_jobs: int = option(16, "waiting jobs offered to a neighbourhood", Check.integer(ge=1))
    # measured: 0.25 s >= 0.5 s > 0.15 s (benchmarks/README.md)
    sub_time: float = option(0.25, "seconds per sub-problem at most",
                             Check.number(gt=0, problem="must be a positive number of seconds"))
    bound: bool | str = option(
        True, 'report a bound: true (the configuration LP in a child process where it applies, else the LP bound), '
        '"lp" (the LP bound only), false (none)', Check.one_of((True, False, "lp")))
    targeted: float = _share("share of the steps whose nodes are chosen by lost worth and slack", 0.5)
    linked: float = _share("share of the other steps whose nodes are chosen by split jobs (the rest at random)", 0.5)
    # measured, 8 medium rounds, 2 runs each, prices known: mean gap 0.398 % at 0.5, 0.325 % at
    # 0.75, 0.340 % at 0.9, 0.384 % at 1.0
    priced: float = _share("once the bound's prices are known, the share of the steps aimed with them", 0.75)
    deterministic_time: float | None = option(
        None, "CP-SAT deterministic seconds summed over the sub-problems, for reproducible runs (null: wall clock)",
        Check.number(gt=0, problem="must be a positive number").or_none())
    prices: Prices | None = option(
        None, "prices of a bound (optsched.mip.colgen.Prices) to aim the steps with from the start (Python only)",
        Check("Prices", _prices).or_none(), remote=False)
