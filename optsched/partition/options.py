"""The options of ``partitioned`` (:class:`~optsched.partition.solver.PartitionedSolver`), validated once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from optsched.errors import InputError
from optsched.limits import MAX_THREADS
from optsched.options import Check, MethodOptions, option
from optsched.partition.prices import MODES
from optsched.partition.split import BY

#: the most solve passes (each re-balances prices between the parts once)
MAX_PASSES = 64

__all__ = ["PartitionedOptions"]


def _address(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(name, value, "must be a Ray cluster address (e.g. auto, ray://head:10001)")
    return value


@dataclass(frozen=True)
class PartitionedOptions(MethodOptions):
    """Options of ``partitioned``; ``PartitionedSolver.solve`` reads them as the dict of :meth:`to_dict`."""

    method: ClassVar[str] = "partitioned"

    parts: int | None = option(
        None, "parts (null: the workers, times enough to keep parts at about 512 nodes)", Check.integer(ge=1).or_none())
    by: str = option("random", "how nodes are cut into parts: random (POP-style), rack or type", Check.one_of(BY))
    backend: str = option("local", "where parts run: local (process pool), serial or ray", Check.one_of(("local", "serial", "ray")))
    workers: int | None = option(None, "parts solved at once (null: the CPU count, at most the parts)", Check.integer(ge=1, le=MAX_THREADS).or_none())
    address: str | None = option(
        None, "Ray cluster address with backend ray (null: a local Ray instance)", Check("address", _address).or_none())
    passes: int = option(2, "solve passes; 1: no re-balancing between parts", Check.integer(ge=1, le=MAX_PASSES))
    rebalance: str = option("prices", "how left-out jobs move between passes: prices, or leftover (room only)", Check.one_of(MODES))
    work: float | None = option(
        None, "CP-SAT deterministic seconds per part in pass 1, for worker-independent runs (null: from the time limit)",
        Check.number(gt=0, problem="must be a positive number of seconds").or_none())
    sub_time: float = option(
        0.03, "deterministic seconds per lns sub-problem at most", Check.number(gt=0, problem="must be a positive number of seconds"))
