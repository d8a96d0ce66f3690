"""``fixed-demand``: the two-stage baseline (weight order, fixed demand per GPU, best fit).

See ``formulations/heuristics.md``. Running jobs keep their placement when it still fits at their
demand; otherwise each job goes to the fastest allowed GPU type where it fits, best fit on one
node, split over the fewest nodes only when no single node fits.
"""

from __future__ import annotations

import time
from typing import Any

from optsched.heuristics.common import Cluster, job_order, place
from optsched.model import Instance
from optsched.result import Result, Status
from optsched.round_policies import packing_choice, policy_families, repair, whole_free_gpus
from optsched.schedule import Assignment, Schedule
from optsched.values import schedule_value

__all__ = ["FixedDemand", "fixed_demand_schedule"]


def fixed_demand_schedule(instance: Instance, *, pack: bool = True) -> Schedule:
    """The fixed-demand baseline's schedule (deterministic, always feasible; on a policy round
    repaired to keep its rules: :func:`optsched.round_policies.repair`; in a packing round, unless
    ``pack`` is false, consolidated: :func:`optsched.round_policies.consolidate`, worth unchanged)."""
    cl = Cluster(instance)
    out: dict[str, Assignment] = {}
    for job in job_order(instance):
        c, m = job.demand
        nodes = place(instance, cl, job, c, m)
        if nodes is None:
            continue
        out[job.id] = Assignment(nodes=nodes, cpus_per_gpu=c, mem_per_gpu_gb=m)
    s = Schedule(instance=instance.name, jobs=out)
    s = repair(instance, s) if policy_families(instance) else s
    return packing_choice(instance, s, ()) if pack and instance.round.packing is not None else s


class FixedDemand:
    """Registered as ``fixed-demand``."""

    def solve(self, instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None,
              **options: Any) -> Result:
        t0 = time.perf_counter()
        s = fixed_demand_schedule(instance)
        return Result(schedule=s, status=Status.FEASIBLE, objective=schedule_value(instance, s), bound=None,
                      solver="fixed-demand", method="heuristic", time_s=time.perf_counter() - t0,
                      stats={"jobs_placed": len(s.jobs), **({"whole_free_gpus": whole_free_gpus(instance, s.jobs)} if instance.round.packing else {})})
