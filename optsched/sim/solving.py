"""Allocators: what the simulator calls each round (:data:`Allocator`), the one built on
:func:`optsched.solve_round` (:class:`SolveRoundAllocator`), and the error raised when an
allocator's answer is not a valid schedule for the round (:class:`SimulationError`)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from optsched.errors import InputError
from optsched.incremental import GAP_TARGET, RoundSolver
from optsched.model import Instance
from optsched.registry import get_method
from optsched.result import Result
from optsched.schedule import Schedule
from optsched.solve import solve_round

__all__ = ["Allocator", "SimulationError", "SolveRoundAllocator"]

#: An allocator: a round instance in, its schedule (or a full :class:`Result`) out.
Allocator = Callable[[Instance], "Schedule | Result"]


class SimulationError(RuntimeError):
    """An allocator returned a schedule the independent checker refuses (a bug, not bad input)."""


class SolveRoundAllocator:
    """Calls :func:`optsched.solve_round` with a registered ``solver`` (or a ``method`` family).

    ``time_limit`` is the per-round budget. For solvers that take hints, the previous round's
    schedule (restricted to jobs still present, which keeps it feasible) is the hint.

    ``validate=False`` calls the registered ``solver`` directly instead of through
    ``solve_round``, skipping its independent check of every result (and of the hint). That is
    for trusted solvers on long replays, where the check is a large share of a fast heuristic's
    time; the tests run every solver validated, and ``SimConfig(check=True)`` checks inside the
    engine whatever the allocator does. Rounds with contract-v2 policy rules are always validated.

    ``incremental=True`` solves the rounds as one chain (:class:`optsched.incremental.RoundSolver`:
    the previous schedule carried over, no search when it is proven within ``gap_target``);
    ``paths`` then counts how its rounds were answered (``stats["incremental"]``, a skipped
    round as ``skipped:`` and why, e.g. ``skipped:backoff``).
    """

    def __init__(self, solver: str | None = None, *, method: str = "auto", time_limit: float = 10.0, seed: int = 0,
                 hint: bool = True, validate: bool = True, incremental: bool = False, gap_target: float = GAP_TARGET,
                 **options: Any) -> None:
        if not validate and solver is None:
            raise InputError("validate", validate, "can be False only with a named solver")
        self.solver = solver
        self.method = method
        self.time_limit = time_limit
        self.seed = seed
        self.options = options
        self.validate = validate
        self.takes_hint = hint and solver is not None and get_method(solver).takes_hint
        self.name = solver or method
        self._previous: Schedule | None = None
        self._chain = RoundSolver(solver or "cpsat", time_limit=time_limit, seed=seed, gap_target=gap_target, options=options) \
            if incremental else None
        self.paths: Counter[str] = Counter()

    def __call__(self, instance: Instance) -> Result:
        if self._chain is not None:
            res = self._chain.solve(instance)
            path = res.stats.get("incremental", "cold")
            self.paths[f"{path}:{res.stats['skipped']}" if path == "skipped" and "skipped" in res.stats else path] += 1
            return res
        hint = None
        if self.takes_hint and self._previous is not None:
            present = {j.id for j in instance.jobs}
            hint = Schedule(instance.name, {j: a for j, a in self._previous.jobs.items() if j in present})
        if self.validate or instance.uses_policies:  # policy rounds always go through solve_round's checks
            res = solve_round(instance, self.method if self.solver is None else "auto", solver=self.solver,
                              time_limit=self.time_limit, seed=self.seed, hint=hint, **self.options)
        else:
            t0 = time.perf_counter()
            res = get_method(self.solver).load()().solve(instance, time_limit=float(self.time_limit), seed=self.seed, hint=hint, **self.options)
            res = replace(res, time_s=time.perf_counter() - t0)
        self._previous = res.schedule
        return res
