"""Solve methods that misbehave on purpose, for the HTTP service's tests (tests/test_service.py).

They live in their own module so that the service's worker processes (started with ``spawn``)
can import them by the ``module:Class`` target the test registers.
"""

from __future__ import annotations

import os
import time

from optsched.result import Result, Status
from optsched.schedule import Schedule


def _empty(instance, name: str, elapsed: float) -> Result:
    return Result(Schedule.empty(instance.name), Status.FEASIBLE, 0.0, None, name, "heuristic", elapsed)


class Boom:
    """Raises, as a buggy solver would."""

    def solve(self, instance, *, time_limit, seed, hint=None, **options):
        raise RuntimeError("boom: a deliberate failure in a test solver")


class Die:
    """Kills its own process, as a crash in native solver code would."""

    def solve(self, instance, *, time_limit, seed, hint=None, **options):
        os._exit(7)


class Hang:
    """Ignores its time limit (sleeps an hour)."""

    def solve(self, instance, *, time_limit, seed, hint=None, **options):
        time.sleep(3600)
        return _empty(instance, "test-hang", 3600.0)


class Sleepy:
    """Holds its worker for exactly its time limit, then returns the empty schedule."""

    def solve(self, instance, *, time_limit, seed, hint=None, **options):
        time.sleep(time_limit)
        return _empty(instance, "test-sleepy", time_limit)
