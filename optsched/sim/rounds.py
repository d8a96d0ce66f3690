"""A round between the engine and the allocator: the contract instance built from the engine's
state (:func:`build_instance`), and the schedule applied back to it (:func:`apply_schedule`,
with each assignment's rate, :func:`assignment_rate`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from optsched.errors import InputError
from optsched.limits import MAX_VALUE_SPAN, job_value_range, present_types
from optsched.model import Instance, Job, Node, Round
from optsched.schedule import Assignment, Schedule
from optsched.sim.solving import SimulationError
from optsched.sim.workload import SimJob

__all__ = ["MIN_START_SPREAD", "VALUE_SPAN", "apply_schedule", "assignment_rate", "build_instance", "start_job", "within_value_span"]


def assignment_rate(job: SimJob, a: Assignment, cluster: Instance) -> float:
    """Samples/s of ``job`` run as ``a``; ``cluster``: the simulated nodes under the rounds' spread
    rule, so the spread factor is paid from the node count the worth pays it from (its spread base)."""
    t = cluster.node(next(iter(a.nodes))).gpu_type
    speed = 1.0 if job.gpu_speed is None else job.gpu_speed[t]
    spread = job.spread_factor ** max(0, len(a.nodes) - cluster.spread_base(t, a.gpus))
    rate = speed * job.profile.at(a.cpus_per_gpu, a.mem_per_gpu_gb) * spread
    if job.elastic is not None:  # an elastic job's throughput at the size it got, relative to its gpus
        factor = job.elastic.factor(a.gpus)
        if factor is None:
            raise SimulationError(f"job {job.id} got {a.gpus} GPUs, not one of {list(job.elastic.gpus)}")
        rate *= factor
    return rate


def build_instance(
    name: str, nodes: tuple[Node, ...], rnd: Round, jobs: tuple[SimJob, ...], sel: np.ndarray, w: np.ndarray,
    assign: list[Assignment | None], base: list[Job | None], speeds: dict[Any, Mapping[str, float]],
    slo_live: Mapping[int, tuple[float, float]] | None = None, pin: bool = False,
    start_spread: float = 1.0, start_base: list[Job | None] | None = None,
) -> Instance:
    """The round's contract instance: the offered jobs ``sel`` (indices into ``jobs``) with their
    weights ``w``, current placements (``assign``) and, for admitted deadline jobs, ``slo_live``
    (index -> deadline and run time left); ``pin`` pins the running ones, and then a waiting job
    carries its spread factor to the power ``start_spread`` (:func:`start_job`). ``base`` caches
    each job's validated contract :class:`~optsched.model.Job` across rounds (``start_base`` the
    waiting one), ``speeds`` the interned ``gpu_speed`` mappings."""
    out = []
    for k, j in enumerate(sel):
        b = base[j]
        if b is None:
            s = jobs[j]
            tenant = _round_tenant(rnd, s.tenant)
            b = base[j] = _interned(Job(id=s.id, gpus=s.gpus, profile=s.profile, demand=s.demand, model=s.model, tenant=tenant, elastic=s.elastic,
                                        gpu_speed=s.gpu_speed, spread_factor=s.spread_factor, restart_s=s.restart_s), speeds)
        a = assign[j]
        if pin and a is None and start_spread > 1.0 and b.spread_factor < 1.0 and b.elastic is None:
            if start_base is None:
                b = start_job(b, start_spread)
            else:
                b = start_base[j] = start_base[j] or start_job(b, start_spread)
        out.append(_with_state(b, float(w[k]), None if a is None else a.nodes, (slo_live or {}).get(int(j)),
                               pinned=pin and a is not None and b.elastic is None))
    try:
        return Instance(name=name, nodes=nodes, jobs=tuple(out), round=rnd)
    except InputError as e:
        # a fair round whose pinned jobs' cheapest fair points outgrow their nodes (their
        # current points fit, but the round does not carry them): no pins this round
        if not pin or not str(e.field).startswith("jobs.preemptible"):
            raise
        return Instance(name=name, nodes=nodes, jobs=tuple(_with_state(j, j.weight, j.placement, None, pinned=False) for j in out),
                        round=rnd)


#: the smallest spread factor :func:`start_job` gives (the contract's factors stay well inside
#: what the solvers keep apart)
MIN_START_SPREAD = 1e-6


def start_job(job: Job, exponent: float) -> Job:
    """``job`` as a waiting job of a round that pins running jobs carries it: a start there keeps
    its nodes until the job ends, so its spread beyond the fewest nodes is charged as over
    ``exponent`` rounds, ``spread_factor ** exponent`` per extra node (at least
    :data:`MIN_START_SPREAD`). The values are valid already, so the copy is not re-validated."""
    out = object.__new__(Job)
    out.__dict__.update(job.__dict__)
    out.__dict__["spread_factor"] = max(MIN_START_SPREAD, job.spread_factor ** exponent)
    return out


#: the widest span of job values (largest over smallest) the simulator lets a round have: just
#: inside what every method accepts (:data:`optsched.limits.MAX_VALUE_SPAN`)
VALUE_SPAN = 0.99 * MAX_VALUE_SPAN


def within_value_span(cluster: Instance, inst: Instance, sel: np.ndarray, w: np.ndarray, per_weight: np.ndarray) -> np.ndarray | None:
    """``None`` when the values of the round ``inst`` (jobs ``sel`` with weights ``w``) span at
    most :data:`VALUE_SPAN`; otherwise the weights with every job whose smallest value falls below
    ``largest / VALUE_SPAN`` raised just to that. A lifted head of the queue (4 x the weights of
    as many other jobs as its GPUs) over a young job at its slowest GPU type and grid point can
    span more than the solvers keep apart; raising only the jobs whose smallest value is too small
    keeps the head's lift and every other weight. ``per_weight`` (jobs x 2, ``nan`` until known)
    caches each job's smallest and largest value per unit weight (:func:`optsched.limits.job_value_range`
    over ``cluster``'s GPU types)."""
    missing = np.isnan(per_weight[sel, 0])
    if missing.any():
        present = present_types(cluster)
        for k in np.flatnonzero(missing):
            job = inst.jobs[int(k)]
            r = job_value_range(cluster, job, present=present)
            per_weight[sel[k]] = (0.0, 0.0) if r is None else (r[0] / job.weight, r[1] / job.weight)
    lo_w, hi_w = per_weight[sel, 0], per_weight[sel, 1]
    has = lo_w > 0
    if not has.any():
        return None
    hi = float((w[has] * hi_w[has]).max())
    floor = hi / VALUE_SPAN
    low = has & (w * lo_w < floor)
    if not low.any():
        return None
    out = w.copy()
    out[low] = floor / lo_w[low]
    return out


def _round_tenant(rnd: Round, tenant: str) -> str | None:
    """The ``tenant`` a job carries into the round: its trace tenant when quotas name it, or under
    DRF (without quotas) any non-empty one; ``None`` otherwise."""
    if rnd.tenants is not None:
        return tenant if tenant in rnd.tenants else None
    return tenant or None if rnd.fairness is not None else None


def _interned(job: Job, speeds: dict[tuple[tuple[str, float], ...], Mapping[str, float]]) -> Job:
    """``job`` sharing its (validated, read-only) ``gpu_speed`` mapping with every other job of
    the run with equal speeds (``speeds`` holds them), so that allocators can memoise
    per-mapping work (allowed GPU types by speed) across the jobs of one model."""
    if job.gpu_speed is not None:
        key = tuple(sorted(job.gpu_speed.items()))
        job.__dict__["gpu_speed"] = speeds.setdefault(key, job.gpu_speed)
    return job


def _with_state(base: Job, weight: float, placement: Mapping[str, int] | None,
                deadline: tuple[float, float] | None = None, pinned: bool = False) -> Job:
    """``replace(base, weight=..., placement=...)`` (and ``deadline_s``, ``remaining_s`` from
    ``deadline``) without re-validating the profile, which is most of a round's build time. Safe
    because the values are already valid: the engine has checked the weight (finite, > 0), the
    placement is a checked schedule's read-only node map for this very job, and a deadline is
    passed only for an admitted job that can still make it (deadline >= 0, remaining > 0)."""
    job = object.__new__(Job)
    job.__dict__.update(base.__dict__)
    job.__dict__["weight"] = weight
    job.__dict__["placement"] = placement
    job.__dict__["preemptible"] = not pinned
    if deadline is not None:
        job.__dict__["deadline_s"] = max(0.0, deadline[0])
        job.__dict__["remaining_s"] = max(deadline[1], 1e-9)
    return job


def apply_schedule(
    schedule: Schedule, sel: np.ndarray, jobs: tuple[SimJob, ...], assign: list[Assignment | None], rate: np.ndarray,
    delay_left: np.ndarray, restart: np.ndarray, ever_ran: np.ndarray, start: np.ndarray, preempt: np.ndarray,
    moves: np.ndarray, alloc: np.ndarray, t: float, cluster: Instance,
) -> None:
    """Apply the round's ``schedule`` to the engine's per-job state in place: an offered running
    job left out is preempted, one whose node map changes is moved (and pays its restart), a new
    one starts; ``rate`` and ``alloc`` take the new assignments' values."""
    offered = {jobs[j].id: int(j) for j in sel}
    unknown = [jid for jid in schedule.jobs if jid not in offered]
    if unknown:
        raise SimulationError(f"schedule names jobs that were not offered: {unknown[:3]}")
    for jid, j in offered.items():
        new = schedule.jobs.get(jid)
        old = assign[j]
        if new is None:
            if old is not None:
                preempt[j] += 1
                assign[j] = None
                rate[j] = 0.0
                alloc[j] = 0.0
            continue
        if old is not None and old == new:  # same nodes and grid point: nothing changes
            continue
        if old is None or old.nodes != new.nodes:
            if old is not None:
                moves[j] += 1
            delay_left[j] = restart[j] if ever_ran[j] else 0.0
            if not ever_ran[j]:
                start[j] = t
                ever_ran[j] = True
        assign[j] = new
        rate[j] = assignment_rate(jobs[j], new, cluster)
        g = new.gpus
        alloc[j] = (g, g * new.cpus_per_gpu, g * new.mem_per_gpu_gb)
