"""The round's worth (contract section "Worth"), as the solvers compute it.

The independent checker (:mod:`optsched.checker`) recomputes the same quantity from the
contract's text without using this module, so the two cross-check each other.
"""

from __future__ import annotations

from collections.abc import Mapping

from optsched.model import Instance, Job
from optsched.schedule import Assignment, Schedule

__all__ = ["assignment_value", "is_move", "job_value", "schedule_value", "spread_multiplier"]


def is_move(job: Job, nodes: Mapping[str, int]) -> bool:
    """Whether a running job's node -> GPU map changes (which costs its restart)."""
    return job.placement is not None and dict(job.placement) != {n: k for n, k in nodes.items() if k}


def spread_multiplier(instance: Instance, job: Job, gpu_type: str, n_nodes: int, gpus: int | None = None) -> float:
    """``spread_factor ** (k - kbase)`` of ``job`` on ``n_nodes`` nodes of ``gpu_type`` with ``gpus``
    GPUs in all (``None``: its nominal count), ``kbase = instance.spread_base(gpu_type, gpus)``.

    A feasible placement has ``k >= kbase``; for fewer nodes (which formulations enumerate while
    bounding) the exponent is taken as 0, so the result never exceeds 1.
    """
    if n_nodes <= 1:  # kbase >= 1: one node never pays (and needs no kbase)
        return 1.0
    g = job.gpus if gpus is None else gpus
    return job.spread_factor ** max(0, n_nodes - instance.spread_base(gpu_type, g))


def job_value(
    instance: Instance,
    job: Job,
    gpu_type: str,
    cpus_per_gpu: int,
    mem_per_gpu_gb: int,
    n_nodes: int,
    moved: bool,
    gpus: int | None = None,
) -> float:
    """Worth of running ``job`` on ``n_nodes`` nodes of ``gpu_type`` at the given grid point, with
    ``gpus`` GPUs in all (``None``: its nominal ``gpus``; another count is allowed only for an
    elastic job, whose value is scaled by ``job.scaling(gpus)``), spread paid as
    :func:`spread_multiplier` says."""
    speed = job.speed(gpu_type)
    if speed is None:
        raise ValueError(f"job {job.id} may not run on {gpu_type}")
    v = job.weight * speed * job.profile.at(cpus_per_gpu, mem_per_gpu_gb) / job.demand_throughput
    if gpus is not None and gpus != job.gpus:
        factor = job.scaling(gpus)
        if factor is None:
            raise ValueError(f"job {job.id} may not run with {gpus} GPUs (allowed: {list(job.sizes)})")
        v *= factor
    v *= spread_multiplier(instance, job, gpu_type, n_nodes, gpus)
    if moved:
        v *= 1.0 - job.restart_s / instance.round.duration_s
    return v


def assignment_value(instance: Instance, job: Job, a: Assignment) -> float:
    gpu_type = instance.node(next(iter(a.nodes))).gpu_type
    return job_value(instance, job, gpu_type, a.cpus_per_gpu, a.mem_per_gpu_gb, len(a.nodes), is_move(job, a.nodes), a.gpus)


def schedule_value(instance: Instance, schedule: Schedule) -> float:
    """Objective of a schedule assumed feasible (see :func:`optsched.check_schedule`)."""
    return sum(assignment_value(instance, instance.job(j), a) for j, a in schedule.jobs.items())
