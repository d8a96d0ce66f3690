"""A round between the engine and the allocator: the contract instance built from the engine's
state (:func:`build_instance`), and the schedule applied back to it (:func:`apply_schedule`,
with each assignment's rate, :func:`assignment_rate`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from optsched.errors import InputError
from optsched.limits import MAX_VALUE_SPAN, job_value_range, present_types
from optsched.model import Instance, Job, Node, Profile, Round
from optsched.schedule import Assignment, Schedule
from optsched.sim.solving import SimulationError
from optsched.sim.workload import SimJob

__all__ = ["MIN_START_SPREAD", "VALUE_SPAN", "apply_schedule", "assignment_rate", "build_instance", "node_shapes", "start_job", "start_limits", "within_value_span"]


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
    start_limits: Sequence[tuple[frozenset[str] | None, Profile | None]] | None = None,
) -> Instance:
    """The round's contract instance: the offered jobs ``sel`` (indices into ``jobs``) with their
    weights ``w``, current placements (``assign``) and, for admitted deadline jobs, ``slo_live``
    (index -> deadline and run time left); ``pin`` pins the running ones, and then a waiting job
    carries its spread factor to the power ``start_spread`` and may start only within its
    ``start_limits`` (index -> GPU types and grid, ``None`` each: all it allows; :func:`start_job`). ``base``
    caches each job's validated contract :class:`~optsched.model.Job` across rounds
    (``start_base`` the waiting one), ``speeds`` the interned ``gpu_speed`` mappings."""
    out = []
    for k, j in enumerate(sel):
        b = base[j]
        if b is None:
            s = jobs[j]
            tenant = _round_tenant(rnd, s.tenant)
            b = base[j] = _interned(Job(id=s.id, gpus=s.gpus, profile=s.profile, demand=s.demand, model=s.model, tenant=tenant, elastic=s.elastic,
                                        gpu_speed=s.gpu_speed, spread_factor=s.spread_factor, restart_s=s.restart_s), speeds)
        a = assign[j]
        types, grid = (None, None) if start_limits is None else start_limits[j]
        if pin and a is None and b.elastic is None and ((start_spread > 1.0 and b.spread_factor < 1.0) or types is not None or grid is not None):
            if start_base is None:
                b = start_job(b, start_spread, types, grid, speeds)
            else:
                b = start_base[j] = start_base[j] or start_job(b, start_spread, types, grid, speeds)
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


def start_job(job: Job, exponent: float, types: frozenset[str] | None = None, profile: Profile | None = None,
              speeds: dict[Any, Mapping[str, float]] | None = None) -> Job:
    """``job`` as a waiting job of a round that pins running jobs carries it: a start there keeps
    its nodes until the job ends, so its spread beyond the fewest nodes is charged as over
    ``exponent`` rounds, ``spread_factor ** exponent`` per extra node (at least
    :data:`MIN_START_SPREAD`); ``types`` (``None``: all) are the GPU types it may start on and
    ``profile`` (``None``: its own) the grid it may start at (:func:`start_limits`; ``speeds``
    interns the shortened ``gpu_speed``). The values are valid already (a cut profile keeps the
    demand's levels), so the copy is not re-validated."""
    out = object.__new__(Job)
    out.__dict__.update(job.__dict__)
    if exponent > 1.0:
        out.__dict__["spread_factor"] = max(MIN_START_SPREAD, job.spread_factor ** exponent)
    if profile is not None:
        out.__dict__["profile"] = profile
    if types is not None:
        allowed = job.gpu_speed if job.gpu_speed is not None else dict.fromkeys(types, 1.0)
        out.__dict__["gpu_speed"] = MappingProxyType({t: s for t, s in allowed.items() if t in types})
        if speeds is not None:
            out = _interned(out, speeds)
    return out


#: each GPU type's node shapes, ``(gpus, cpus, mem_gb) -> count`` (:func:`node_shapes`)
NodeShapes = Mapping[str, Mapping[tuple[int, int, int], int]]


def node_shapes(nodes: Sequence[Node]) -> dict[str, dict[tuple[int, int, int], int]]:
    """Each GPU type's node shapes, ``(gpus, cpus, mem_gb)``, and how many nodes have it."""
    out: dict[str, dict[tuple[int, int, int], int]] = {}
    for nd in nodes:
        by = out.setdefault(nd.gpu_type, {})
        by[(nd.gpus, nd.cpus, nd.mem_gb)] = by.get((nd.gpus, nd.cpus, nd.mem_gb), 0) + 1
    return out


def start_limits(job: Job | SimJob, allowed: Sequence[str], shapes: NodeShapes, share: float,
                 ) -> tuple[frozenset[str] | None, Profile | None]:
    """Where a waiting ``job`` may start in a round that pins running jobs, so that its nodes feed
    it: a grid point is *fed* when its throughput is at least ``share`` of its demand's (or of the
    best any placement on the cluster reaches, if that is less), and on ``k`` of a node's GPUs
    the job gets at most ``c / k`` of its ``c`` cores and ``m / k`` of its ``m`` GB per GPU.
    Returns the GPU types (of ``allowed``) on
    whose nodes some placement reaches a fed point (``None``: all of them) and, when the fewest
    nodes of some node shape feed it and either those of another cannot or the job is a gang
    larger than any node, the job's profile cut to the cores and memory levels that reach a fed
    point (``None``: the whole profile).

    A start there keeps its nodes until the job ends, and nodes short of memory per GPU (48 GB
    where an image model caches 62) leave it at a tenth of its speed for good: better to spread it
    over more nodes, or wait for nodes that can feed it. A gang larger than any node runs at one
    grid point on all of its nodes, so the most crowded of them sets it, and where the jobs
    sharing that node are older (the rounds' weights favour them) a lean start does not grow
    later: on a gang-heavy stream under FIFO a 40-GPU image gang started at 21 GB a GPU beside an
    older job holding its nodes' memory ran at a tenth of its speed for 51 hours. A job that
    fits on one node is left its lean starts where the fewest nodes feed it (its cores and memory
    grow on the same node as its neighbours end; cutting them too, and holding running jobs to
    the fed levels, made a month of Philly, mostly one-GPU jobs, 5-8 % slower). Where no node shape's fewest nodes feed it, a starved start is
    all the cluster offers without spreading, and waiting would not end (measured: on 22 nodes of
    32 GB per GPU, cutting the profile doubled the chain's mean JCT): its profile is kept whole.
    A slow GPU type is not refused: it is capacity, and the round's worth counts its speed."""
    pts = sorted(job.profile.points(), key=lambda p: -p[2])
    fits = {t: [_best_fit(pts, job.gpus, shape, count) for shape, count in shapes.get(t, {}).items()] for t in allowed}
    ref = max((top for tops in fits.values() for top, _ in tops), default=0.0)
    if ref <= 0.0:
        return None, None
    floor = share * min(ref, job.profile.at(*job.demand))
    types = frozenset(t for t, tops in fits.items() if any(top >= floor for top, _ in tops))
    compact = [c for tops in fits.values() for _, c in tops if c is not None]
    spans = all(job.gpus > shape[0] for t in allowed for shape in shapes.get(t, {}))  # larger than any node
    cut = any(c >= floor for c in compact) and (spans or any(c < floor for c in compact))
    return (None if len(types) == len(fits) else types), (_fed_profile(job, floor) if cut else None)


def _best_fit(pts: list[tuple[int, int, float]], gpus: int, shape: tuple[int, int, int], count: int) -> tuple[float, float | None]:
    """The best throughput a gang of ``gpus`` reaches on ``count`` nodes of ``shape``
    ``(gpus, cpus, mem_gb)``, with at most ``k`` of its GPUs on each of ``ceil(gpus / k)`` of
    them, and on its fewest such nodes (``None`` where too few nodes hold it; ``pts``: its grid
    points, best first)."""
    g, c, m = shape
    top, compact = 0.0, None
    for k in range(min(gpus, g), 0, -1):
        if -(-gpus // k) > count:
            break
        thr = next((thr for pc, pm, thr in pts if pc * k <= c and pm * k <= m), 0.0)
        if k == min(gpus, g):
            compact = thr
        top = max(top, thr)
    return top, compact


def _fed_profile(job: Job | SimJob, floor: float) -> Profile | None:
    """``job``'s profile without the cores levels and memory levels at which it never reaches
    ``floor`` (at most its demand's throughput, so the demand's levels stay); ``None`` when
    nothing is cut."""
    p = job.profile
    rows = [a for a in range(len(p.cpus_per_gpu)) if max(p.throughput[a]) >= floor]
    cols = [b for b in range(len(p.mem_per_gpu_gb)) if max(r[b] for r in p.throughput) >= floor]
    if len(rows) == len(p.cpus_per_gpu) and len(cols) == len(p.mem_per_gpu_gb):
        return None
    return Profile(cpus_per_gpu=tuple(p.cpus_per_gpu[a] for a in rows), mem_per_gpu_gb=tuple(p.mem_per_gpu_gb[b] for b in cols),
                   throughput=tuple(tuple(p.throughput[a][b] for b in cols) for a in rows))


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
