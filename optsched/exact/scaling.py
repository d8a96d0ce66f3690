"""Integer scaling of job values for CP-SAT: the ONE place where floats become integers.

CP-SAT optimises integer objectives. Every job value (``optsched.values.job_value``) is
multiplied by one scale ``S`` and rounded to the nearest integer. Three facts follow and are
used by the solver:

* each scaled value differs from ``S * value`` by at most 1/2, so a schedule of ``k`` jobs has
  ``|S * objective - scaled objective| <= k / 2``;
* a proven bound ``B`` on the scaled objective is turned into a proven bound on the true
  objective by :meth:`ValueScale.bound`, which adds the worst-case rounding error;
* the reported objective is never the scaled one: it is recomputed in floating point.

A round with no positive value (no job, or none on a GPU type the cluster has) gets ``max_terms
= 0`` and a bound of exactly 0. Rounds whose values span more than
:data:`optsched.limits.MAX_VALUE_SPAN` are refused before any method runs
(:func:`optsched.limits.check_value_span`), so the scale below always exists.

The scale is chosen so that the smallest positive value is represented with relative
resolution :data:`RESOLUTION` (so two schedules whose worths differ by more than
``jobs * smallest_value * RESOLUTION`` keep their order) while the largest possible objective
stays below :data:`MAX_OBJECTIVE` (well inside int64 and exactly representable in doubles).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from optsched.errors import InputError

__all__ = ["MAX_OBJECTIVE", "RESOLUTION", "ValueScale"]

#: relative resolution of the smallest positive job value
RESOLUTION = 1e-5
#: the scaled objective of any schedule must stay below this (2**50: int64 and doubles are exact)
MAX_OBJECTIVE = 2**50


@dataclass(frozen=True)
class ValueScale:
    """Multiply-and-round job values by ``scale``; ``max_terms`` values at most enter one objective."""

    scale: float
    max_terms: int

    @classmethod
    def for_values(cls, values: Iterable[float], max_total: float, max_terms: int) -> ValueScale:
        """Pick the scale for these (positive) mode values.

        ``max_total`` is an upper bound on any schedule's objective (e.g. the sum of each job's
        best value); ``max_terms`` the most jobs one schedule can hold. Raises
        :class:`~optsched.errors.InputError` when the values span too many orders of magnitude
        to be scaled without overflow.
        """
        positive = [v for v in values if v > 0]
        if not positive:  # no job is worth anything: every schedule is worth 0, exactly
            return cls(1.0, 0)
        smallest = min(positive)
        scale = 1.0 / (smallest * RESOLUTION)
        # round the scale to a power of two: scaling by it is exact in binary floating point
        scale = 2.0 ** math.floor(math.log2(scale))
        limit = MAX_OBJECTIVE / max(max_total, 1e-300)
        if scale > limit:
            scale = 2.0 ** math.floor(math.log2(limit))
        if smallest * scale < 100:
            # unreachable after optsched.limits.check_value_span (solve_round runs it first): kept
            # for callers that build a scale from values of their own
            raise InputError(
                "jobs",
                f"values from {smallest:.3g} to {max_total:.3g}",
                "job values (weight x speed x relative throughput) span too many orders of magnitude "
                "to scale to 64-bit integers for CP-SAT; rescale the weights",
            )
        return cls(scale, max(0, max_terms))

    def to_int(self, value: float) -> int:
        """The scaled, rounded value (never negative: non-positive values are never scheduled)."""
        return max(0, round(value * self.scale))

    def to_float(self, scaled: float) -> float:
        return scaled / self.scale

    @property
    def max_error(self) -> float:
        """Worst-case ``|true objective - scaled objective / scale|`` over all schedules."""
        return 0.5 * self.max_terms / self.scale

    def bound(self, scaled_bound: float) -> float:
        """A proven upper bound on the true objective from a proven bound on the scaled one."""
        if self.max_terms == 0:  # no job can enter a schedule: 0 is the bound, not 0 plus slack
            return max(0.0, scaled_bound / self.scale)
        b = scaled_bound / self.scale + self.max_error
        return b * (1 + 1e-12) + 1e-12  # absorb the floating-point error of this very conversion
