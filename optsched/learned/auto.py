"""The learned policy inside ``method="auto"`` (:func:`optsched.solve.choose_auto`).

- :class:`WarmCpSat` (``cpsat+maifs``): CP-SAT warm-started with the policy's schedule (a complete
  hint; with a caller's hint, the better of the two). Exact: CP-SAT's bound is kept. The bound
  worker ``cpsat`` would start (configuration LP in a child process) starts before the policy,
  so the bound gets the whole time limit.

- :class:`TimedLearned` (``maifs``): the policy (its greedy decode, then the price-guided repair
of :mod:`optsched.learned.repair`), above the exact threshold. Seeding ``lns`` with the policy's
schedule for the rest of the time limit was measured and found nothing better (0 improvements
in 15 neighbourhoods at 256 x 1,000; none at 1,024 x 4,000 in 10 s, docs/results.md).

The policy runs in numpy (no torch); its modules load inside ``solve``, so loading counts against
the time limit like the rest of the work.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from optsched.exact.cpsat import CpSatSolver, start_bound_worker
from optsched.learned.solver import LearnedSolver
from optsched.model import Instance
from optsched.result import Result
from optsched.schedule import Schedule
from optsched.trajectory import current, recorded
from optsched.values import schedule_value

__all__ = ["TimedLearned", "WarmCpSat"]


def _policy(instance: Instance, deadline: float, weights: Any) -> tuple[Schedule, float]:
    """The ``maifs`` solver's schedule (its defaults: best of the greedy decode and 16 samples on
    small rounds, the greedy decode on larger ones; feasible, cut short at ``deadline``) and its value."""
    left = max(0.05, deadline - time.perf_counter())
    res = LearnedSolver().solve(instance, time_limit=left, seed=0, **({} if weights is None else {"weights": weights}))
    return res.schedule, res.objective


class WarmCpSat:
    """``cpsat+maifs``: CP-SAT with the policy's schedule as a complete hint. Options go to
    ``cpsat``, except ``weights`` (the policy's; default the shipped ones)."""

    name = "cpsat+maifs"

    @recorded
    def solve(self, instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None, **options: Any) -> Result:
        start = time.perf_counter()
        weights = options.pop("weights", None)
        if options.get("bound_worker", True) is True:
            # the configuration LP runs beside the policy too, not only after it (the policy takes
            # up to a quarter of the time, on one core)
            worker = start_bound_worker(instance, time_limit, [] if hint is None else [hint])
            if worker is not None:
                options["bound_worker"] = worker
        # the hint may use at most a quarter of the time (the decoder stops placing jobs past it)
        with current().nested():  # the trajectory: the policy's events, then CP-SAT's
            policy, value = _policy(instance, start + 0.25 * time_limit, weights)
        t_policy = time.perf_counter() - start
        best = policy
        if hint is not None and schedule_value(instance, hint) > value:
            best = hint
        with current().nested():
            res = CpSatSolver().solve(instance, time_limit=max(0.01, time_limit - t_policy), seed=seed, hint=best, **options)
        stats = dict(res.stats, policy_hint_objective=value, policy_hint_s=t_policy, auto="cpsat+maifs")
        return replace(res, solver=self.name, stats=stats, time_s=time.perf_counter() - start)


class TimedLearned:
    """``maifs`` as ``auto`` runs it: the policy's modules are imported inside ``solve``, so their
    import counts against the time limit (the registered ``maifs`` class is loaded before the clock starts)."""

    name = "maifs"

    @recorded
    def solve(self, instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None, **options: Any) -> Result:
        start = time.perf_counter()

        left = max(0.01, time_limit - (time.perf_counter() - start))
        with current().nested():
            res = LearnedSolver().solve(instance, time_limit=left, seed=seed, hint=hint, **options)
        return replace(res, stats={**res.stats, "auto": self.name}, time_s=time.perf_counter() - start)
