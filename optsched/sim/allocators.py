"""Allocator wrappers for ablations.

:class:`AtDemand` runs any allocator on a view of the round in which every job's profile is cut
down to its fixed-demand point: the same placement machinery (exact or heuristic) without
fungibility. ``cpsat`` vs ``AtDemand(cpsat)`` isolates what fungible CPU/memory buys from what
better packing buys.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from optsched.model import Instance, Job, Profile
from optsched.result import Result
from optsched.schedule import Schedule

__all__ = ["AtDemand", "at_demand_instance"]


def _at_demand(job: Job, cache: dict[int, Profile]) -> Job:
    key = id(job.profile) * 1_000_003 + hash(job.demand)
    prof = cache.get(key)
    if prof is None:
        c, m = job.demand
        prof = cache[key] = Profile((c,), (m,), ((job.profile.at(c, m),),))
    return replace(job, profile=prof)


def at_demand_instance(instance: Instance, cache: dict[int, Profile] | None = None) -> Instance:
    """``instance`` with every job's profile reduced to its single demand point (same worth)."""
    cache = {} if cache is None else cache
    return replace(instance, jobs=tuple(_at_demand(j, cache) for j in instance.jobs))


class AtDemand:
    """Run ``inner`` on the at-demand view; its schedule is valid for the full round too (the
    demand is a point of every job's grid, and the worth of each assignment is unchanged)."""

    def __init__(self, inner: Any, name: str | None = None) -> None:
        self.inner = inner
        self.name = name or f"{getattr(inner, 'name', type(inner).__name__)}@demand"
        self._cache: dict[int, Profile] = {}

    def __call__(self, instance: Instance) -> Schedule | Result:
        out = self.inner(at_demand_instance(instance, self._cache))
        sched = out.schedule if isinstance(out, Result) else out
        sched = Schedule(instance.name, dict(sched.jobs))
        return replace(out, schedule=sched) if isinstance(out, Result) else sched
