"""``fixed-demand``: the two-stage baseline (weight order, fixed demand per GPU, best fit).

See ``formulations/heuristics.md``. Running jobs keep their placement when it still fits at their
demand; otherwise each job goes to the fastest allowed GPU type where it fits, best fit on one
node, split over the fewest nodes only when no single node fits. In a DRF round progressive
filling across tenants decides the admission order (:mod:`optsched.heuristics.drf`); in a HUG
round too, by progress (every job runs at its demand point, so it counts its fixed demand).
"""

from __future__ import annotations

import time
from typing import Any

from optsched.heuristics.common import Cluster, job_order, place
from optsched.heuristics.drf import best_by_drf, fair_round, fair_stats, progressive_fill
from optsched.model import Instance, Job
from optsched.options import NoOptions
from optsched.policy_repair import repair
from optsched.result import Result, Status
from optsched.round_policies import packing_choice, policy_families, whole_free_gpus
from optsched.schedule import Assignment, Schedule
from optsched.trajectory import recorded
from optsched.values import schedule_value

__all__ = ["FixedDemand", "fixed_demand_schedule"]


def fixed_demand_schedule(instance: Instance, *, pack: bool = True) -> Schedule:
    """The fixed-demand baseline's schedule (deterministic, always feasible; on a policy round
    repaired to keep its rules: :func:`optsched.policy_repair.repair`; in a packing round, unless
    ``pack`` is false, consolidated: :func:`optsched.round_policies.consolidate`, worth unchanged).
    In a DRF (HUG) round the best by (smallest dominant share (progress), worth) of the
    weight-order schedule and the two progressive-filling ones (:mod:`optsched.heuristics.drf`)."""
    cands = [("worth", _at_demand(instance))]
    if fair_round(instance):
        info: dict[str, int] = {}
        cands.append(("drf-fill", _at_demand(instance, drf=True, info=info)))
        cands.append(("drf-then-worth", _at_demand(instance, drf=True, target=info["drf_level"])))
    s = best_by_drf(instance, cands)[1]
    return packing_choice(instance, s, ()) if pack and instance.round.packing is not None else s


def _at_demand(instance: Instance, drf: bool = False, target: int | None = None, info: dict[str, int] | None = None) -> Schedule:
    """Every job at its demand point, best fit in job order (with ``drf``: DRF progressive
    filling first, up to ``target``; its level goes to ``info["drf_level"]``), then the policy repair."""
    cl = Cluster(instance)
    cl.claim_running(lambda job: job.demand)
    out: dict[str, Assignment] = {}

    def admit(job: Job) -> int | None:
        c, m = job.demand
        nodes = place(instance, cl, job, c, m)
        if nodes is None:
            return None
        out[job.id] = Assignment(nodes=nodes, cpus_per_gpu=c, mem_per_gpu_gb=m)
        return sum(nodes.values())

    order = job_order(instance)
    if drf:
        order, level = progressive_fill(instance, order, admit, target=target)
        if info is not None:
            info["drf_level"] = level
    for job in order:
        admit(job)
    s = Schedule(instance=instance.name, jobs=out)
    return repair(instance, s, lean=False) if policy_families(instance) else s


class FixedDemand:
    """Registered as ``fixed-demand``."""

    @recorded
    def solve(self, instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None,
              **options: Any) -> Result:
        NoOptions.from_mapping(options, method="fixed-demand")  # it takes none: refuse any by name
        t0 = time.perf_counter()
        s = fixed_demand_schedule(instance)
        return Result(schedule=s, status=Status.FEASIBLE, objective=schedule_value(instance, s), bound=None,
                      solver="fixed-demand", method="heuristic", time_s=time.perf_counter() - t0,
                      stats={"jobs_placed": len(s.jobs), **({"whole_free_gpus": whole_free_gpus(instance, s.jobs)} if instance.round.packing else {}),
                             **fair_stats(instance, s)})
