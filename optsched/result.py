"""What every method returns: :class:`Result`, with one :class:`Status` enum for all backends."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from optsched.schedule import Schedule
from optsched.trajectory import TrajectoryPoint

__all__ = ["Result", "Status", "gap", "reaches"]


class Status(enum.StrEnum):
    """How a solve ended. Every status carries a feasible schedule (possibly empty)."""

    OPTIMAL = "optimal"  #: proven optimal (bound == objective up to scaling tolerance)
    FEASIBLE = "feasible"  #: finished normally without a proof (heuristics, learned policy)
    TIME_LIMIT = "time_limit"  #: stopped by the time limit; the best incumbent is returned

    def __str__(self) -> str:
        return self.value


def gap(objective: float, bound: float | None) -> float | None:
    """Relative gap ``(bound - objective) / max(bound, 1e-9)`` of the contract; ``None`` without a bound."""
    if bound is None or not math.isfinite(bound):
        return None
    return max(0.0, (bound - objective) / max(abs(bound), 1e-9))


#: how close to its bound (relative, at least absolute 1e-6) a worth counts as reaching it
REACH_TOL = 1e-6


def reaches(objective: float, bound: float) -> bool:
    """Whether ``objective`` reaches the proven ``bound`` up to rounding (:data:`REACH_TOL`
    relative, or absolute below 1): a schedule that does is optimal."""
    return objective >= bound - REACH_TOL * max(1.0, bound)


@dataclass(frozen=True)
class Result:
    """A solve's outcome: the schedule, its objective, a proven bound when one is known, and more.

    ``objective`` is recomputed in floating point from the schedule (never the solver's scaled
    integer value). ``bound`` is a proven upper bound on the optimum or ``None``. ``stats`` holds
    backend details (model size, hint value, nodes explored, ...). ``trajectory`` lists the
    incumbents and bounds as they came (:mod:`optsched.trajectory`): monotone, ending at
    ``objective`` and ``bound``; empty when the method records none.
    """

    schedule: Schedule
    status: Status
    objective: float
    bound: float | None
    solver: str
    method: str
    time_s: float
    stats: Mapping[str, Any] = field(default_factory=dict)
    trajectory: tuple[TrajectoryPoint, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "stats", MappingProxyType(dict(self.stats)))
        object.__setattr__(self, "trajectory", tuple(TrajectoryPoint(*p) for p in self.trajectory))

    @property
    def gap(self) -> float | None:
        return gap(self.objective, self.bound)

    def to_dict(self) -> dict[str, Any]:
        """The contract's schedule JSON: the decision plus its reports."""
        d = self.schedule.to_dict()
        d.update(
            objective=self.objective,
            bound=self.bound,
            gap=self.gap,
            status=self.status.value,
            solver=self.solver,
            method=self.method,
            time_s=round(self.time_s, 6),
        )
        if self.stats:
            d["stats"] = {k: v for k, v in self.stats.items() if _is_json(v)}
        if self.trajectory:
            d["trajectory"] = [[round(p.t_s, 6), p.objective, p.bound] for p in self.trajectory]
        return d

    def summary(self) -> str:
        """One line for humans: status, objective, bound, gap, jobs scheduled, time."""
        b = "-" if self.bound is None else f"{self.bound:.6g}"
        g = "-" if self.gap is None else f"{100 * self.gap:.3f}%"
        return (
            f"{self.schedule.instance}: {self.status.value} objective={self.objective:.6g} bound={b} gap={g} "
            f"jobs={len(self.schedule)} solver={self.solver} time={self.time_s:.3f}s"
        )


def _is_json(v: Any) -> bool:
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    if isinstance(v, (list, tuple)):
        return all(_is_json(x) for x in v)
    if isinstance(v, Mapping):
        return all(isinstance(k, str) and _is_json(x) for k, x in v.items())
    return False
