"""The independent checker: feasibility and worth of a schedule, written from the contract alone.

It shares no code with any formulation, heuristic or with :mod:`optsched.values`: it reads the
instance's data and the schedule's raw JSON and re-derives every rule of the contract's
"Feasible" section and the "Worth" formula. It trusts none of the schedule's report fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from optsched.errors import InputError
from optsched.fields import unknown_field
from optsched.model import Instance
from optsched.schedule import ASSIGNMENT_KEYS, SCHEDULE_KEYS, Schedule, instance_name

__all__ = ["CheckReport", "Violation", "check_schedule"]


@dataclass(frozen=True)
class Violation:
    """One broken rule (numbered as in the contract's "Feasible" list)."""

    rule: int
    message: str
    job: str | None = None
    node: str | None = None

    def __str__(self) -> str:
        return f"rule {self.rule}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message, "job": self.job, "node": self.node}


class CheckReport(list):
    """The list of violations (empty when feasible), with the recomputed ``objective``.

    The objective counts every job whose own assignment is readable, so it is meaningful
    only when the list is empty. ``deadline_misses`` lists the urgent deadline jobs left out; in a
    ``round.fairness = "drf"`` round, ``dominant_shares`` maps each tenant (``""`` for jobs without
    one) to its dominant share; in a ``round.fairness = "hug"`` round, ``hug_progress`` maps each
    tenant with a runnable job to its progress along its correlated demand vector (GPUs, cores and
    GB it got at the chosen points; see :func:`_hug_progress`); in a ``round.packing`` round, ``packing`` holds ``whole_free_gpus``
    (GPUs on nodes the schedule leaves wholly idle), ``free_nodes`` (those nodes), ``free_gpus``
    (every GPU left free) and ``fragmentation`` (the share of free GPUs on partly used nodes; 0
    when none is free). Contract version 2: reports, not violations.
    """

    def __init__(self, violations: list[Violation], objective: float, deadline_misses: list[str] | None = None,
                 dominant_shares: dict[str, float] | None = None, packing: dict[str, float] | None = None,
                 hug_progress: dict[str, float] | None = None) -> None:
        super().__init__(violations)
        self.objective = objective
        self.deadline_misses = list(deadline_misses or [])
        self.dominant_shares = dominant_shares
        self.packing = packing
        self.hug_progress = hug_progress

    @property
    def feasible(self) -> bool:
        return not self

    def to_dict(self) -> dict[str, Any]:
        d = {"feasible": self.feasible, "objective": self.objective, "violations": [v.to_dict() for v in self]}
        if self.deadline_misses:
            d["deadline_misses"] = list(self.deadline_misses)
        if self.dominant_shares is not None:
            d["dominant_shares"] = dict(self.dominant_shares)
        if self.packing is not None:
            d["packing"] = dict(self.packing)
        if self.hug_progress is not None:
            d["hug_progress"] = dict(self.hug_progress)
        return d


def _is_int(v: Any) -> bool:
    return type(v) is int or isinstance(v, int) and not isinstance(v, bool)


def _is_pos_int(v: Any) -> bool:
    return _is_int(v) and v >= 1


def _is_map(v: Any) -> bool:
    return type(v) is dict or isinstance(v, Mapping)


def check_schedule(instance: Instance, schedule: Schedule | Mapping[str, Any]) -> CheckReport:
    """Every violation of the contract's feasibility rules, and the schedule's recomputed worth."""
    raw = schedule.to_dict() if isinstance(schedule, Schedule) else schedule
    out: list[Violation] = []
    if isinstance(raw, Mapping) and (bad := unknown_field(raw, SCHEDULE_KEYS, "a schedule")) is not None:
        out.append(Violation(1, str(bad)))
    if isinstance(raw, Mapping):
        try:
            instance_name(raw)
        except InputError as e:
            out.append(Violation(1, str(e)))
    if not isinstance(raw, Mapping) or not isinstance(raw.get("jobs"), Mapping):
        return CheckReport([*out, Violation(1, "the schedule must be an object whose 'jobs' maps job ids to assignments ({} when nothing runs)")], 0.0)
    nodes = {n.id: n for n in instance.nodes}
    jobs = {j.id: j for j in instance.jobs}
    used_gpu = {n: 0 for n in nodes}
    used_cpu = {n: 0 for n in nodes}
    used_mem = {n: 0 for n in nodes}
    total = 0.0
    spread_from = _SpreadFrom(instance)
    readable: dict[str, dict[str, int]] = {}  # scheduled job -> its node map, for rules 6 and 7
    got: dict[str, tuple[int, int, int]] = {}  # scheduled job on its grid -> GPUs, cores, GB (HUG progress)
    grids: dict[int, tuple[dict[int, int], dict[int, int]]] = {}  # per profile: grid value -> index, both axes
    for jid, a in raw.get("jobs", {}).items():
        if a is None:
            continue
        if jid not in jobs:
            out.append(Violation(1, f"job {jid!r} does not exist", job=jid))
            continue
        job = jobs[jid]
        if not _is_map(a) or not _is_map(a.get("nodes")) or not a.get("nodes"):
            out.append(Violation(1, f"job {jid}: assignment must have a non-empty 'nodes' object", job=jid))
            continue
        if (bad := unknown_field(a, ASSIGNMENT_KEYS, "an assignment")) is not None:
            out.append(Violation(1, f"job {jid}: {bad}", job=jid))
            continue
        ok = True
        where: dict[str, int] = {}
        for nid, k in a["nodes"].items():
            if nid not in nodes:
                out.append(Violation(1, f"job {jid}: node {nid!r} does not exist", job=jid, node=nid))
                ok = False
            elif not _is_pos_int(k):
                out.append(Violation(1, f"job {jid}: GPU count on {nid} must be a positive integer, got {k!r}", job=jid, node=nid))
                ok = False
            else:
                where[nid] = k
        if not ok:
            continue
        readable[jid] = where
        # rule 2: the whole gang, on one allowed GPU type
        n_gpus = sum(where.values())
        # an elastic job (contract v2) may get any listed count; its value scales with the count's factor
        sizes = list(job.elastic.gpus) if job.elastic is not None else [job.gpus]
        size_factor = job.elastic.scaling[sizes.index(n_gpus)] if job.elastic is not None and n_gpus in sizes else 1.0
        if n_gpus not in sizes:
            need = f"exactly {job.gpus}" if job.elastic is None else f"one of {sizes} (elastic)"
            out.append(Violation(2, f"job {jid}: gets {n_gpus} GPUs, needs {need}", job=jid))
        types = {nodes[n].gpu_type for n in where}
        if len(types) > 1:
            out.append(Violation(2, f"job {jid}: spans GPU types {sorted(types)}", job=jid))
        gpu_type = min(types)
        allowed = job.gpu_speed is None or gpu_type in job.gpu_speed
        if not allowed:
            out.append(Violation(2, f"job {jid}: GPU type {gpu_type} is not in its gpu_speed", job=jid))
        # rule 3: a point of the profile grid
        raw_c, raw_m = a.get("cpus_per_gpu"), a.get("mem_per_gpu_gb")
        grid = grids.get(id(job.profile))
        if grid is None:
            grid = grids[id(job.profile)] = ({v: i for i, v in enumerate(job.profile.cpus_per_gpu)},
                                             {v: i for i, v in enumerate(job.profile.mem_per_gpu_gb)})
        grid_c, grid_m = grid
        c = raw_c if _is_int(raw_c) and raw_c in grid_c else None
        m = raw_m if _is_int(raw_m) and raw_m in grid_m else None
        if c is None or m is None:
            out.append(Violation(3, f"job {jid}: ({raw_c!r}, {raw_m!r}) is not a point of its profile grid", job=jid))
        for nid, k in where.items():
            used_gpu[nid] += k
            if c is not None and m is not None:
                used_cpu[nid] += c * k
                used_mem[nid] += m * k
        if c is None or m is None:
            continue
        got[jid] = (n_gpus, c * n_gpus, m * n_gpus)
        tp = job.profile.throughput[grid_c[c]][grid_m[m]]
        tp_demand = job.profile.throughput[grid_c[job.demand[0]]][grid_m[job.demand[1]]]
        # rule 5: fairness
        if instance.round.fair and tp < tp_demand:
            a, b = f"{tp:g}", f"{tp_demand:g}"
            if a == b:  # slower by less than 6 digits show: every digit
                a, b = repr(tp), repr(tp_demand)
            out.append(Violation(5, f"job {jid}: throughput {a} at ({c}, {m}) is below {b} at its demand (fair round)", job=jid))
        if not allowed or len(types) > 1:
            continue
        speed = 1.0 if job.gpu_speed is None else job.gpu_speed[gpu_type]
        value = job.weight * size_factor * speed * tp / tp_demand * job.spread_factor ** (len(where) - spread_from[(gpu_type, n_gpus)])
        if job.placement is not None and dict(job.placement) != where:
            value *= 1.0 - job.restart_s / instance.round.duration_s
        total += value
    # rule 4: node capacities
    for nid, node in nodes.items():
        for what, used, cap in (("GPUs", used_gpu, node.gpus), ("CPU cores", used_cpu, node.cpus), ("GB of memory", used_mem, node.mem_gb)):
            if used[nid] > cap:
                out.append(Violation(4, f"node {nid}: {used[nid]} {what} used, {cap} available", node=nid))
    out += _quota_rule(instance, readable) + _moves_rule(instance, readable) + _pinned_rule(instance, readable)
    return CheckReport(out, total if math.isfinite(total) else 0.0, _deadline_misses(instance, readable), _dominant_shares(instance, readable),
                       _packing(instance, used_gpu), _hug_progress(instance, got))


class _SpreadFrom(dict):
    """(GPU type, GPUs) -> the node count the spread factor is paid beyond (contract, "Worth"):
    version 3 (``round.spread_from = "fewest"``): kmin, the fewest nodes of that type in the round
    whose GPU counts, largest first, add up to the GPUs; versions 1 and 2 (``"one"``): 1."""

    def __init__(self, instance: Instance) -> None:
        super().__init__()
        self.fewest = instance.round.spread_from == "fewest"
        self.sizes: dict[str, list[int]] = {}
        for node in instance.nodes:
            self.sizes.setdefault(node.gpu_type, []).append(node.gpus)

    def __missing__(self, key: tuple[str, int]) -> int:
        gpu_type, gpus = key
        k = 1
        if self.fewest:
            k, held = 0, 0
            for size in sorted(self.sizes.get(gpu_type, []), reverse=True):
                k, held = k + 1, held + size
                if held >= gpus:
                    break
            k = max(k, 1)
        self[key] = k
        return k


def _packing(instance: Instance, used_gpu: Mapping[str, int]) -> dict[str, float] | None:
    """round.packing: GPUs on nodes with GPUs where nothing is scheduled, how many such nodes, all
    free GPUs, and the share of free GPUs stranded on partly used nodes."""
    if instance.round.packing is None:
        return None
    idle = [n for n in instance.nodes if n.gpus > 0 and used_gpu.get(n.id, 0) == 0]
    whole = sum(n.gpus for n in idle)
    free = sum(max(0, n.gpus - used_gpu.get(n.id, 0)) for n in instance.nodes)
    return {"whole_free_gpus": whole, "free_nodes": len(idle), "free_gpus": free,
            "fragmentation": 1.0 - whole / free if free else 0.0}


def _dominant_shares(instance: Instance, scheduled: Mapping[str, Mapping[str, int]]) -> dict[str, float] | None:
    """round.fairness = "drf": per tenant, max over GPUs, cores and GB (clusters totals > 0) of the
    fixed demand (GPUs it got x per-GPU demand) of its scheduled jobs over the cluster total."""
    if instance.round.fairness != "drf":
        return None
    totals = [sum(n.gpus for n in instance.nodes), sum(n.cpus for n in instance.nodes), sum(n.mem_gb for n in instance.nodes)]
    held: dict[str, list[int]] = {}
    for job in instance.jobs:
        row = held.setdefault(job.tenant or "", [0, 0, 0])
        if job.id in scheduled:
            g = sum(scheduled[job.id].values())  # the count it got (an elastic job's may differ from gpus)
            row[0] += g
            row[1] += g * job.demand[0]
            row[2] += g * job.demand[1]
    return {t: max([u / c for u, c in zip(row, totals, strict=True) if c > 0] or [0.0]) for t, row in held.items()}


def _room(instance: Instance, memo: dict[tuple[str, int, int], int], gpu_type: str, c: int, m: int) -> int:
    """GPUs of ``gpu_type`` the empty cluster holds at ``c`` cores and ``m`` GB per GPU (memoised)."""
    if (gpu_type, c, m) not in memo:
        memo[(gpu_type, c, m)] = sum(min(n.gpus, n.cpus // c if c else n.gpus, n.mem_gb // m if m else n.gpus)
                                     for n in instance.nodes if n.gpu_type == gpu_type)
    return memo[(gpu_type, c, m)]


def _hug_progress(instance: Instance, got: Mapping[str, tuple[int, int, int]]) -> dict[str, float] | None:
    """round.fairness = "hug": per tenant with a runnable job, its progress
    ``min over r (used_r / total_r) / delta_r`` over the resources with ``delta_r > 0``, where
    ``used`` sums the GPUs, cores and GB its scheduled jobs got (cores and GB at their points) and
    ``delta`` is the fixed demand of its runnable jobs (nominal GPUs x per-GPU demand) over the
    cluster totals, divided by its largest component. A job is runnable when on some allowed GPU
    type the nodes hold at least its smallest size at some (fair-eligible) grid point."""
    if instance.round.fairness != "hug":
        return None
    totals = [sum(n.gpus for n in instance.nodes), sum(n.cpus for n in instance.nodes), sum(n.mem_gb for n in instance.nodes)]
    demand: dict[str, list[int]] = {}
    used: dict[str, list[int]] = {}
    room: dict[tuple[str, int, int], int] = {}  # GPUs the empty cluster holds per (type, cores, GB per GPU)
    for job in instance.jobs:
        t = job.tenant or ""
        if job.id in got:
            row = used.setdefault(t, [0, 0, 0])
            for r in range(3):
                row[r] += got[job.id][r]
        prof = job.profile
        base = prof.throughput[prof.cpus_per_gpu.index(job.demand[0])][prof.mem_per_gpu_gb.index(job.demand[1])]
        smallest = min(job.elastic.gpus) if job.elastic is not None else job.gpus
        fits = [_room(instance, room, gpu_type, c, m)
                for gpu_type in sorted({n.gpu_type for n in instance.nodes}) if job.gpu_speed is None or gpu_type in job.gpu_speed
                for a, c in enumerate(prof.cpus_per_gpu) for b, m in enumerate(prof.mem_per_gpu_gb)
                if not instance.round.fair or prof.throughput[a][b] >= base]
        if any(k >= smallest for k in fits):
            row = demand.setdefault(t, [0, 0, 0])
            row[0] += job.gpus
            row[1] += job.gpus * job.demand[0]
            row[2] += job.gpus * job.demand[1]
    out = {}
    for t, dem in demand.items():
        share = [dem[r] / totals[r] if totals[r] > 0 else 0.0 for r in range(3)]
        top = max(share)
        u = used.get(t, [0, 0, 0])
        out[t] = min((u[r] / totals[r]) / (share[r] / top) for r in range(3) if share[r] > 0) if top > 0 else 0.0
    return out


def _quota_rule(instance: Instance, scheduled: Mapping[str, Mapping[str, int]]) -> list[Violation]:
    """Rule 6 (round.tenants): while a tenant below its quota has a job left out that fits in the
    rest of its quota (an elastic job at its smallest count), no tenant holds more GPUs than its
    quota and no job without a tenant runs."""
    quotas = instance.round.tenants
    if quotas is None:
        return []
    held: dict[str | None, int] = {}
    for job in instance.jobs:
        if job.id in scheduled:
            held[job.tenant] = held.get(job.tenant, 0) + sum(scheduled[job.id].values())
    waiting = [job for job in instance.jobs if job.id not in scheduled and job.tenant is not None and job.tenant in quotas
               and held.get(job.tenant, 0) + (job.gpus if job.elastic is None else job.elastic.gpus[0]) <= quotas[job.tenant]]
    if not waiting:
        return []
    out = []
    for tenant, gpus in sorted(held.items(), key=lambda kv: str(kv[0])):
        limit = 0 if tenant is None else quotas.get(tenant, 0)
        if gpus > limit:
            who = "jobs without a tenant hold" if tenant is None else f"tenant {tenant} holds"
            out.append(Violation(6, f"{who} {gpus} GPUs over its quota of {limit} while job {waiting[0].id} of tenant "
                                    f"{waiting[0].tenant} waits within its quota", job=waiting[0].id))
    return out


def _moves_rule(instance: Instance, scheduled: Mapping[str, Mapping[str, int]]) -> list[Violation]:
    """Rule 7 (round.max_moves): running jobs whose node -> GPU map changes number at most max_moves."""
    cap = instance.round.max_moves
    if cap is None:
        return []
    moved = [jid for jid, where in scheduled.items()
             if (placement := instance.job(jid).placement) is not None and dict(placement) != dict(where)]
    if len(moved) <= cap:
        return []
    return [Violation(7, f"{len(moved)} running jobs move ({', '.join(sorted(moved)[:5])}...), at most {cap} may")]


def _pinned_rule(instance: Instance, scheduled: Mapping[str, Mapping[str, int]]) -> list[Violation]:
    """Rule 8 (job preemptible = false): a job that runs now and may not be preempted is scheduled
    on exactly the nodes and GPU counts it holds now (its grid point may change)."""
    out = []
    for job in instance.jobs:
        if job.preemptible or job.placement is None:
            continue
        where = scheduled.get(job.id)
        if where is None:
            out.append(Violation(8, f"job {job.id} may not be preempted but is left out", job=job.id))
        elif dict(where) != dict(job.placement):
            out.append(Violation(8, f"job {job.id} may not be moved: it holds {dict(job.placement)}, the schedule gives {dict(where)}",
                                 job=job.id))
    return out


def _deadline_misses(instance: Instance, scheduled: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Jobs with a deadline that can still make it at their best rate but not after waiting this
    round, and are not scheduled."""
    out = []
    types = {n.gpu_type for n in instance.nodes}
    for job in instance.jobs:
        if job.deadline_s is None or job.remaining_s is None or job.id in scheduled:
            continue
        fastest = max([1.0 if job.gpu_speed is None else job.gpu_speed.get(t, 0.0) for t in types] or [0.0])
        demand_tp = job.profile.throughput[job.profile.cpus_per_gpu.index(job.demand[0])][job.profile.mem_per_gpu_gb.index(job.demand[1])]
        top = max(tp for row in job.profile.throughput for tp in row if not instance.round.fair or tp >= demand_tp)
        rate = fastest * top / demand_tp * (1.0 if job.elastic is None else max(job.elastic.scaling))
        if rate <= 0:
            continue
        alone = job.remaining_s / rate
        if alone <= job.deadline_s and instance.round.duration_s + alone > job.deadline_s:
            out.append(job.id)
    return out
