"""The options of the MIP solvers ``scip``, ``cbc`` and ``pulp`` (:mod:`optsched.mip.solvers`), validated once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from optsched.limits import MAX_THREADS
from optsched.options import Check, MethodOptions, option

__all__ = ["MipOptions"]


@dataclass(frozen=True)
class MipOptions(MethodOptions):
    """Options of ``scip``, ``cbc`` and ``pulp``."""

    method: ClassVar[str] = "the MIP solvers"

    num_threads: int = option(1, "the MIP solver's threads", Check.integer(ge=1, le=MAX_THREADS))
    log: bool = option(False, "print the MIP solver's search log (on stdout)", Check.boolean(), remote=False)
    greedy: bool = option(True, "start from the greedy schedule (a fallback and, for scip, a hint)", Check.boolean())
