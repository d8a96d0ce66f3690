"""The round's policy families (contract version 2): tenant quotas, bounded moves, deadlines.

``formulations/policies.md`` states the rules; this module holds what solvers share about them:
which families a round uses (:func:`policy_families`), which jobs must run now to make their
deadline (:func:`urgent_jobs`), whether a schedule keeps the hard rules
(:func:`policy_feasible`; :func:`optsched.policy_repair.repair` turns any contract-feasible
schedule into one that keeps them). The independent checker re-derives the same rules without
this module.

* **quotas** (``round.tenants``, job ``tenant``): while a tenant below its guaranteed GPU quota
  has a job waiting that would fit in what is left of its quota, nobody borrows (no tenant above
  its quota, no job without a tenant). Borrowing is allowed otherwise (HiveD-style reclaim).
* **max_moves** (``round.max_moves``): at most this many running jobs change node -> GPU map
  (Gandiva-style bounded migration); a preemption is not a move.
* **deadlines** (job ``deadline_s``, ``remaining_s``): a job is *urgent* when it can still meet
  its deadline at its best rate but not if it waits a round. Urgent jobs are forced in when the
  round can hold them (exact solvers prove it) and reported otherwise (``deadline_misses``).
* **drf** (``round.fairness = "drf"``): dominant resource fairness across tenants. A tenant's
  dominant share is the largest, over GPUs, cores and memory, of what its scheduled jobs use *at
  their fixed demand* over the cluster's capacity (:func:`dominant_shares`); the round maximises
  the smallest dominant share of the tenants that can run anything (:func:`drf_level`, in units
  of ``1 / drf_scale``), then worth. A lexicographic objective, not a feasibility rule.
* **hug** (``round.fairness = "hug"``): HUG-style progress fairness (Chowdhury et al., NSDI'16)
  over the *actual* allocation. A tenant's correlated demand vector is the fixed demand of its
  runnable jobs over the cluster's capacities, normalised to a largest component of 1; its
  progress is the least, over the resources it demands, of what it got (GPUs, and cores and GB
  at the chosen grid points) over capacity divided by that component (:func:`hug_level`, in
  units of ``1 / hug_scale``; the coefficients: :func:`hug_coefficients`). The round maximises
  the smallest progress, then worth, as for drf.
* **packing** (``round.packing = "consolidate"``): Gandiva-style consolidation. Among the
  schedules whose worth is within ``packing_tolerance`` of the best and which run no fewer GPUs,
  keep the most GPUs on wholly idle nodes (:func:`whole_free_gpus`), so later large gangs find
  whole nodes; then worth. Also a
  lexicographic objective; heuristics run :func:`consolidate` (a worth-preserving pass that empties
  lightly used nodes) and keep the guarantee of :func:`packing_choice`.
* **elastic** (job ``elastic``): the job may run with any listed GPU count, worth its value times
  the count's scaling factor (:mod:`optsched.elastic`). Quotas and DRF count the GPUs a job got;
  a waiting elastic job "fits its quota" at its smallest count; urgency uses its best factor.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from fractions import Fraction

import numpy as np

from optsched.model import Elastic, Instance, Job, Profile, fair_floor
from optsched.schedule import Assignment, Schedule
from optsched.values import assignment_value, is_move, schedule_value

__all__ = ["DRF_NO_TENANT", "FAMILIES", "HUG_PRECISION", "best_speedup", "consolidate", "dominant_shares", "drf_capacity", "drf_level", "drf_runnable", "gpu_room",
           "drf_scale", "drf_tenants", "drf_usage", "deadline_misses", "fair_level", "fair_scale", "hug_coefficients", "hug_demand",
           "hug_level", "hug_levels", "hug_scale", "hug_usage", "packing_choice", "peak_rate", "packing_tolerance", "policy_families",
           "pinned_misses", "policy_feasible", "urgent", "urgent_jobs", "whole_free_gpus", "borrowers", "moved_jobs", "owner_waiting", "quota_of",
           "tenant_gpus"]

#: the families, in the order the docs list them
FAMILIES = ("quotas", "max_moves", "deadlines", "drf", "hug", "elastic", "packing", "preemption")

#: the DRF tenant of jobs without a ``tenant`` (not a valid tenant name, so it cannot clash)
DRF_NO_TENANT = ""
#: DRF levels are exact multiples of ``1 / lcm(capacities)`` while that lcm is at most this ...
DRF_EXACT_MAX = 10**9
#: ... else shares are rounded down to multiples of ``1 / DRF_SCALE``
DRF_SCALE = 10**6
#: HUG coefficients past ``DRF_EXACT_MAX`` are rounded down to multiples of ``1 / 2**k`` with at
#: least this many units (:func:`hug_coefficients`)
HUG_PRECISION = 2**20


def policy_families(instance: Instance) -> frozenset[str]:
    """The policy families this round uses."""
    out = set()
    if instance.round.tenants is not None:
        out.add("quotas")
    if instance.round.max_moves is not None:
        out.add("max_moves")
    if any(j.deadline_s is not None for j in instance.jobs):
        out.add("deadlines")
    if instance.round.fairness in ("drf", "hug"):
        out.add(instance.round.fairness)
    if any(j.elastic is not None for j in instance.jobs):
        out.add("elastic")
    if instance.round.packing is not None:
        out.add("packing")
    if any(j.pinned for j in instance.jobs):
        out.add("preemption")
    return frozenset(out)


def pinned_misses(instance: Instance, jobs: Mapping[str, Assignment]) -> list[str]:
    """Pinned jobs (``preemptible=False``, running) that ``jobs`` leaves out or moves."""
    return [j.id for j in instance.jobs if j.pinned and (j.id not in jobs or is_move(j, jobs[j.id].nodes))]


# --- DRF ---------------------------------------------------------------------------------------


def drf_usage(job: Job, gpus: int | None = None) -> tuple[int, int, int]:
    """What a job counts for DRF: GPUs, cores and GB at its fixed demand (``gpus x`` per-GPU demand;
    ``gpus``: the count it got, an elastic job's chosen size; default its nominal ``gpus``)."""
    g = job.gpus if gpus is None else gpus
    return g, g * job.demand[0], g * job.demand[1]


def _got(instance: Instance, jobs: Iterable[str] | Mapping[str, Assignment]) -> dict[str, int]:
    """Scheduled job id -> GPUs it got: from the assignments when given, else the nominal ``gpus``."""
    if isinstance(jobs, Mapping):
        return {j: a.gpus for j, a in jobs.items()}
    return {j: instance.job(j).gpus for j in jobs}


def drf_capacity(instance: Instance) -> tuple[int, int, int]:
    """The cluster's GPUs, cores and GB (a resource of capacity 0 is left out of every share)."""
    return (sum(n.gpus for n in instance.nodes), sum(n.cpus for n in instance.nodes), sum(n.mem_gb for n in instance.nodes))


def drf_scale(instance: Instance) -> int:
    """``S``: DRF levels are ``floor(S x share)``; ``S = lcm`` of the non-zero capacities (so levels
    are exact) when that is at most ``DRF_EXACT_MAX``, else ``DRF_SCALE``."""
    caps = [c for c in drf_capacity(instance) if c > 0]
    s = math.lcm(*caps) if caps else 1
    return s if s <= DRF_EXACT_MAX else DRF_SCALE


def gpu_room(instance: Instance, gpu_type: str, c: int, m: int, memo: dict[tuple[str, int, int], int] | None = None) -> int:
    """GPUs of ``gpu_type`` the empty cluster holds at ``c`` cores and ``m`` GB per GPU (``memo``:
    the room per (type, cores, GB), shared across calls)."""
    room = None if memo is None else memo.get((gpu_type, c, m))
    if room is None:
        room = sum(min(n.gpus, n.cpus // c if c else n.gpus, n.mem_gb // m if m else n.gpus)
                   for n in instance.nodes if n.gpu_type == gpu_type)
        if memo is not None:
            memo[(gpu_type, c, m)] = room
    return room


def drf_runnable(instance: Instance, job: Job, memo: dict[tuple[str, int, int], int] | None = None) -> bool:
    """Whether the job fits the empty cluster at some allowed (fair-eligible) grid point, on one
    GPU type over any nodes of it (``memo``: the room per (type, cores, GB), shared across calls)."""
    points = [(c, m) for c, m, _ in job.profile.allowed(fair_floor(job, instance.round.fair))]
    return any(gpu_room(instance, t, c, m, memo) >= min(job.sizes)
               for t in instance.gpu_types if job.speed(t) is not None for c, m in points)


def drf_tenants(instance: Instance) -> dict[str, list[int]]:
    """Tenant -> indices of its jobs, for the tenants with a runnable job (the others can get
    nothing, so they would pin the minimum at 0); jobs without a tenant form ``DRF_NO_TENANT``."""
    out: dict[str, list[int]] = {}
    for i, job in enumerate(instance.jobs):
        out.setdefault(job.tenant if job.tenant is not None else DRF_NO_TENANT, []).append(i)
    return {t: js for t, js in out.items() if any(drf_runnable(instance, instance.jobs[j]) for j in js)}


def _tenant_usage(instance: Instance, job_ids: Iterable[str] | Mapping[str, Assignment]) -> dict[str, list[int]]:
    """Per tenant with a job in the round, the :func:`drf_usage` summed over its scheduled jobs."""
    scheduled = _got(instance, job_ids)
    used: dict[str, list[int]] = {}
    for job in instance.jobs:
        row = used.setdefault(job.tenant if job.tenant is not None else DRF_NO_TENANT, [0, 0, 0])
        if job.id in scheduled:
            for r, a in enumerate(drf_usage(job, scheduled[job.id])):
                row[r] += a
    return used


def dominant_shares(instance: Instance, job_ids: Iterable[str] | Mapping[str, Assignment]) -> dict[str, float]:
    """Per tenant with a job in the round, its dominant share under the scheduled ``job_ids`` (a
    schedule's ``jobs`` mapping counts the GPUs each job got, which an elastic job chooses)."""
    caps = drf_capacity(instance)
    used = _tenant_usage(instance, job_ids)
    return {t: max((u / c for u, c in zip(row, caps, strict=True) if c > 0), default=0.0) for t, row in used.items()}


def drf_level(instance: Instance, job_ids: Iterable[str] | Mapping[str, Assignment]) -> int:
    """``min over drf_tenants of max over resources of floor(S x used / capacity)``: the scaled
    smallest dominant share, exactly what the CP-SAT model's ``drf_min`` measures (0 without tenants)."""
    caps, s = drf_capacity(instance), drf_scale(instance)
    used = _tenant_usage(instance, job_ids)
    return min((max((s * u // c for u, c in zip(used[t], caps, strict=True) if c > 0), default=0) for t in drf_tenants(instance)),
               default=0)


# --- HUG-style progress fairness -----------------------------------------------------------------


def hug_usage(a: Assignment) -> tuple[int, int, int]:
    """What a scheduled job counts for HUG: the GPUs it got, and cores and GB at its chosen point."""
    g = a.gpus
    return g, g * a.cpus_per_gpu, g * a.mem_per_gpu_gb


def hug_demand(instance: Instance) -> dict[str, tuple[int, int, int]]:
    """Per :func:`drf_tenants` tenant, the fixed demand of its runnable jobs summed
    (:func:`drf_usage` at the nominal ``gpus``): the direction of its correlated demand vector."""
    out = {}
    memo: dict[tuple[str, int, int], int] = {}
    for t, js in drf_tenants(instance).items():
        row = [0, 0, 0]
        for j in js:
            job = instance.jobs[j]
            if drf_runnable(instance, job, memo):
                for r, a in enumerate(drf_usage(job)):
                    row[r] += a
        out[t] = (row[0], row[1], row[2])
    return out


def _hug_ratios(instance: Instance) -> dict[str, list[tuple[int, Fraction]]]:
    """Per tenant, ``(r, M_t / D[t,r])`` over the resources with ``cap_r > 0`` and ``D[t,r] > 0``,
    where ``D`` is :func:`hug_demand` and ``M_t = max_r D[t,r] / cap_r``: progress is
    ``P_t = min_r (U[t,r] / cap_r) / delta[t,r] = min_r U[t,r] x M_t / D[t,r]`` (``delta[t,r] =
    (D[t,r] / cap_r) / M_t``; the capacities cancel)."""
    caps = drf_capacity(instance)
    out = {}
    for t, dem in hug_demand(instance).items():
        rs = [r for r in range(3) if caps[r] > 0 and dem[r] > 0]
        if not rs:
            out[t] = []
            continue
        top = max(Fraction(dem[r], caps[r]) for r in rs)
        out[t] = [(r, top / dem[r]) for r in rs]
    return out


#: id(instance) -> (instance, hug_coefficients(instance))
_HUG_CACHE: dict[int, tuple[Instance, tuple[int, dict[str, list[tuple[int, int, int]]]]]] = {}


def hug_scale(instance: Instance) -> int:
    """``S``: HUG levels are ``floor(S x progress)``; the lcm of the denominators of every
    ``M_t / D[t,r]`` (so levels are exact) when that is at most ``DRF_EXACT_MAX``, else ``DRF_SCALE``."""
    dens = [k.denominator for rows in _hug_ratios(instance).values() for _r, k in rows]
    s = math.lcm(*dens) if dens else 1
    return s if s <= DRF_EXACT_MAX else DRF_SCALE


def hug_coefficients(instance: Instance) -> tuple[int, dict[str, list[tuple[int, int, int]]]]:
    """The one place the correlated demand vectors become integers: ``(S, {t: [(r, num, den)]})``
    with ``S = hug_scale``, so that a tenant's level is ``min_r floor(num x U[t,r] / den)``.

    Exactly ``num / den = S x M_t / D[t,r]`` (``den = 1``) when ``S`` is the lcm of
    :func:`hug_scale`; otherwise ``num / den`` is that ratio rounded *down* to a multiple of
    ``1 / den``, ``den`` the smallest power of two with ``num >= HUG_PRECISION`` (1 when the
    ratio is that large): conservative, a level is never overstated (relative error below
    ``2**-20``). The heuristics' :func:`hug_level` and CP-SAT's ``add_hug`` both use these.
    Cached per instance object (the heuristics ask for every candidate schedule)."""
    hit = _HUG_CACHE.get(id(instance))
    if hit is not None and hit[0] is instance:
        return hit[1]
    s = hug_scale(instance)
    out: dict[str, list[tuple[int, int, int]]] = {}
    for t, rows in _hug_ratios(instance).items():
        coef = []
        for r, k in rows:
            x = s * k
            if x.denominator == 1:
                coef.append((r, x.numerator, 1))
                continue
            den = 1
            while x * den < HUG_PRECISION:
                den *= 2
            coef.append((r, math.floor(x * den), den))
        out[t] = coef
    if len(_HUG_CACHE) >= 8:
        _HUG_CACHE.clear()
    _HUG_CACHE[id(instance)] = (instance, (s, out))  # holds the instance, so its id is not reused meanwhile
    return s, out


def hug_levels(instance: Instance, jobs: Mapping[str, Assignment]) -> dict[str, int]:
    """Per :func:`drf_tenants` tenant, its scaled progress ``min_r floor(num x U[t,r] / den)``
    (:func:`hug_coefficients`; ``U``: :func:`hug_usage` summed over its scheduled jobs)."""
    _s, coef = hug_coefficients(instance)
    used = {t: [0, 0, 0] for t in coef}
    for jid, a in jobs.items():
        job = instance.job(jid)
        row = used.get(job.tenant if job.tenant is not None else DRF_NO_TENANT)
        if row is not None:
            for r, x in enumerate(hug_usage(a)):
                row[r] += x
    return {t: min((num * used[t][r] // den for r, num, den in rows), default=0) for t, rows in coef.items()}


def hug_level(instance: Instance, jobs: Mapping[str, Assignment]) -> int:
    """The smallest :func:`hug_levels` entry (0 without tenants): exactly what the CP-SAT model's
    level variable measures."""
    return min(hug_levels(instance, jobs).values(), default=0)


def fair_level(instance: Instance, jobs: Mapping[str, Assignment]) -> int:
    """The round's fairness level: :func:`drf_level` or :func:`hug_level` (0 without ``round.fairness``)."""
    if instance.round.fairness == "drf":
        return drf_level(instance, jobs)
    if instance.round.fairness == "hug":
        return hug_level(instance, jobs)
    return 0


def fair_scale(instance: Instance) -> int:
    """The scale of :func:`fair_level`: :func:`hug_scale` in a HUG round, else :func:`drf_scale`."""
    return hug_coefficients(instance)[0] if instance.round.fairness == "hug" else drf_scale(instance)


def best_speedup(instance: Instance, job: Job) -> float:
    """The job's best rate relative to its demand on a speed-1.0 GPU: max over the allowed GPU
    types present and the (fair-eligible) grid points of ``speed x throughput / throughput[demand]``,
    times an elastic job's largest scaling factor; 0 when it may use no GPU type of the cluster."""
    speeds = [job.speed(t) for t in instance.gpu_types]
    best_speed = max((s for s in speeds if s is not None), default=0.0)
    return peak_rate(job.profile, job.demand, best_speed, instance.round.fair, job.elastic)


def peak_rate(profile: Profile, demand: tuple[int, int], speed: float, fair: bool, elastic: Elastic | None) -> float:
    """``speed x`` the best (fair-eligible) grid point's throughput relative to the demand point's,
    times an elastic job's largest scaling factor: :func:`best_speedup` for a given best speed."""
    base = profile.at(*demand)
    top = max(tp for _c, _m, tp in profile.allowed(base if fair else -math.inf))
    return speed * top / base * (1.0 if elastic is None else max(elastic.scaling))


def urgent(instance: Instance, job: Job) -> bool:
    """Attainable (``remaining / best <= deadline``) but not after waiting one round
    (``duration + remaining / best > deadline``)."""
    if job.deadline_s is None or job.remaining_s is None:
        return False
    best = best_speedup(instance, job)
    if best <= 0:
        return False
    need = job.remaining_s / best
    return need <= job.deadline_s < instance.round.duration_s + need


def urgent_jobs(instance: Instance) -> list[str]:
    """Ids of the urgent jobs, in instance order."""
    return [j.id for j in instance.jobs if urgent(instance, j)]


def deadline_misses(instance: Instance, schedule: Schedule) -> list[str]:
    """Urgent jobs the schedule leaves out."""
    return [j for j in urgent_jobs(instance) if j not in schedule.jobs]


def tenant_gpus(instance: Instance, jobs: Mapping[str, Assignment]) -> dict[str | None, int]:
    """GPUs each tenant (``None``: jobs without one) holds in ``jobs``."""
    used: dict[str | None, int] = {}
    for jid, a in jobs.items():
        job = instance.job(jid)
        used[job.tenant] = used.get(job.tenant, 0) + a.gpus
    return used


def quota_of(instance: Instance, tenant: str | None) -> int:
    """``tenant``'s guaranteed GPUs (0 for no tenant or one without a quota)."""
    tenants = instance.round.tenants or {}
    return tenants.get(tenant, 0) if tenant is not None else 0


def owner_waiting(instance: Instance, jobs: Mapping[str, Assignment], used: dict[str | None, int]) -> bool:
    """Some tenant below its quota has an unscheduled job that fits in the rest of its quota (an
    elastic job at its smallest size)."""
    tenants = instance.round.tenants or {}
    for job in instance.jobs:
        if job.tenant in tenants and job.id not in jobs and used.get(job.tenant, 0) + min(job.sizes) <= tenants[job.tenant]:
            return True
    return False


def borrowers(instance: Instance, used: dict[str | None, int]) -> list[str | None]:
    """The tenants holding more than their quota (``used``: :func:`tenant_gpus`)."""
    return [t for t, g in used.items() if g > quota_of(instance, t)]


def moved_jobs(instance: Instance, jobs: Mapping[str, Assignment]) -> list[str]:
    """The running jobs ``jobs`` moves (their node -> GPU map changes; rule 7)."""
    return [jid for jid, a in jobs.items() if is_move(instance.job(jid), a.nodes)]


def policy_feasible(instance: Instance, schedule: Schedule) -> bool:
    """Whether ``schedule`` keeps the quota, max_moves and pinned-job rules (deadlines are not a feasibility rule)."""
    jobs = schedule.jobs
    if pinned_misses(instance, jobs):
        return False
    if instance.round.max_moves is not None and len(moved_jobs(instance, jobs)) > instance.round.max_moves:
        return False
    if instance.round.tenants is not None:
        used = tenant_gpus(instance, jobs)
        if borrowers(instance, used) and owner_waiting(instance, jobs, used):
            return False
    return True


# --- packing (Gandiva consolidation) -------------------------------------------------------------


def packing_tolerance(instance: Instance) -> float:
    """``round.packing_tolerance`` (0 when unset): the share of worth packing may give up."""
    return instance.round.packing_tolerance or 0.0


def whole_free_gpus(instance: Instance, jobs: Mapping[str, Assignment]) -> int:
    """The packing metric: GPUs on nodes where ``jobs`` place no GPU at all (wholly idle nodes)."""
    used = {nid for a in jobs.values() for nid, g in a.nodes.items() if g > 0}
    return sum(n.gpus for n in instance.nodes if n.id not in used)


def packing_choice(instance: Instance, plain: Schedule, candidates: Iterable[Schedule]) -> Schedule:
    """What a heuristic returns in a packing round, given its schedule without packing (``plain``)
    and packed ``candidates``: among ``consolidate(plain)`` and the candidates whose worth is at
    least ``(1 - tolerance) x worth(plain)`` and which run at least as many GPUs as ``plain``, the
    most whole free GPUs, then the most worth. So the result never has fewer whole free GPUs nor
    fewer GPUs in use than ``plain``, nor less than ``1 - tolerance`` of its worth
    (``consolidate`` keeps the jobs and may migrate running ones for up to ``tolerance x worth(plain)``)."""
    worth = schedule_value(instance, plain)
    floor = (1.0 - packing_tolerance(instance)) * worth
    in_use = sum(a.gpus for a in plain.jobs.values())
    best = consolidate(instance, plain, packing_tolerance(instance) * worth)
    best_key = (whole_free_gpus(instance, best.jobs), schedule_value(instance, best))
    for s in candidates:
        v = schedule_value(instance, s)
        if v < floor - 1e-9 * max(1.0, abs(floor)) or sum(a.gpus for a in s.jobs.values()) < in_use:
            continue
        k = (whole_free_gpus(instance, s.jobs), v)
        if k > best_key:
            best, best_key = s, k
    return best


def _movable(job: Job, nodes: Mapping[str, int]) -> bool:
    """A job on one node that may be put on another without changing its worth: it is not running,
    or it already moves this round (its restart is paid wherever it lands)."""
    return len(nodes) == 1 and (job.placement is None or dict(job.placement) != dict(nodes))


def consolidate(instance: Instance, schedule: Schedule, budget: float = 0.0) -> Schedule:
    """Empty lightly used nodes, giving up at most ``budget`` of worth (Gandiva's migration).

    Nodes in use are visited from the least used (GPUs, then id). A node is emptied when every job
    on it is on that node alone and each fits, at its own grid point, on another node of the same
    GPU type that is already in use (best fit: fewest GPUs left, then cores, memory, index).
    Movable jobs (:func:`_movable`: not running, or moving anyway) keep their value (same type,
    point, one node; landing home only raises it). A running job at home may be migrated too when
    its loss (its value x ``restart_s / duration_s``) fits in what is left of ``budget`` and the
    moves stay within ``round.max_moves``; a node holding a pinned job (running, ``preemptible``
    false) is never emptied. The set of scheduled jobs and the tenants' GPUs never
    change, so quotas, deadlines and DRF keep what they had, and max_moves is kept. Each emptied
    node frees all its GPUs and uses no new node, so the pass never lowers
    :func:`whole_free_gpus`; it repeats until a sweep empties nothing. With ``budget = 0`` the
    worth never falls.
    """
    jobs = dict(schedule.jobs)
    left_budget = budget
    max_moves = instance.round.max_moves
    moves = len(moved_jobs(instance, jobs)) if max_moves is not None else 0
    nodes = instance.nodes
    n_nodes = len(nodes)
    free = np.array([[n.gpus, n.cpus, n.mem_gb] for n in nodes], dtype=np.int64).reshape(n_nodes, 3)
    on: dict[int, list[str]] = {}
    for jid, a in jobs.items():
        for nid, g in a.nodes.items():
            i = instance.node_idx(nid)
            free[i] -= (g, g * a.cpus_per_gpu, g * a.mem_per_gpu_gb)
            on.setdefault(i, []).append(jid)
    types = np.array([n.gpu_type for n in nodes], dtype=object)
    changed = True
    while changed:
        changed = False
        order = sorted(on, key=lambda i: (nodes[i].gpus - int(free[i, 0]), i))
        for i in order:
            here = on.get(i)
            if not here or any(len(jobs[j].nodes) != 1 or instance.job(j).pinned for j in here):
                continue  # a pinned running job (preemptible false) keeps its node: this one stays
            # running jobs at home: emptying the node migrates them, at their restart's cost
            at_home = [j for j in here if not _movable(instance.job(j), jobs[j].nodes)]
            cost = 0.0
            for j in at_home:
                job = instance.job(j)
                cost += assignment_value(instance, job, jobs[j]) * min(1.0, job.restart_s / instance.round.duration_s)
            if at_home and (cost > left_budget + 1e-12 or (max_moves is not None and moves + len(at_home) > max_moves)
                            or any(instance.job(j).restart_s >= instance.round.duration_s for j in at_home)):
                continue
            used = np.array([bool(on.get(k)) for k in range(n_nodes)]) & (types == nodes[i].gpu_type)
            used[i] = False
            if not used.any():
                continue
            trial = free.copy()
            for jid in here:  # movable jobs sit on this node alone: take them off it
                a = jobs[jid]
                trial[i] += (a.gpus, a.gpus * a.cpus_per_gpu, a.gpus * a.mem_per_gpu_gb)
            dest: dict[str, int] = {}
            for jid in sorted(here, key=lambda j: (-jobs[j].gpus, j)):
                a = jobs[jid]
                need = np.array([a.gpus, a.gpus * a.cpus_per_gpu, a.gpus * a.mem_per_gpu_gb])
                ok = used & np.all(trial >= need, axis=1)
                if not ok.any():
                    dest = {}
                    break
                cand = np.flatnonzero(ok)
                left = trial[cand] - need
                k = int(cand[np.lexsort((cand, left[:, 2], left[:, 1], left[:, 0]))[0]])
                trial[k] -= need
                dest[jid] = k
            if len(dest) != len(here):
                continue
            free = trial
            del on[i]
            left_budget -= cost
            moves += len(at_home)
            for jid, k in dest.items():
                a = jobs[jid]
                jobs[jid] = Assignment({nodes[k].id: a.gpus}, a.cpus_per_gpu, a.mem_per_gpu_gb)
                on.setdefault(k, []).append(jid)
            changed = True
    return Schedule(schedule.instance, jobs)
