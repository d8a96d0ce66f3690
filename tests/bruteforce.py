"""Exact optimum of a tiny round by exhaustive enumeration, written from CONTRACT.md alone.

Shares no code with optsched solvers or optsched.values; it only reads the Instance dataclasses.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator


def _splits(total: int, caps: list[int]) -> Iterator[tuple[int, ...]]:
    """Every way to put `total` GPUs on nodes with free GPU counts `caps`."""
    if not caps:
        if total == 0:
            yield ()
        return
    for here in range(min(total, caps[0]) + 1):
        for rest in _splits(total - here, caps[1:]):
            yield (here, *rest)


def _spread_base(instance, nodes, gpus):
    """The node count a gang of ``gpus`` GPUs on ``nodes`` (one type) pays spread beyond: the
    fewest of them holding ``gpus`` (largest first) under ``spread_from = "fewest"``, else 1."""
    if instance.round.spread_from != "fewest":
        return 1
    held = 0
    for k, size in enumerate(sorted((n.gpus for n in nodes), reverse=True), start=1):
        held += size
        if held >= gpus:
            return k
    return len(nodes)


def _options(instance, job):
    """(value, {node_id: gpus}, c, m) for every feasible-in-isolation choice of one job."""
    prof = job.profile
    base = prof.throughput[prof.cpus_per_gpu.index(job.demand[0])][
        prof.mem_per_gpu_gb.index(job.demand[1])
    ]
    out = []
    for gpu_type in sorted({n.gpu_type for n in instance.nodes}):
        speed = 1.0 if job.gpu_speed is None else job.gpu_speed.get(gpu_type)
        if speed is None:
            continue
        nodes = [n for n in instance.nodes if n.gpu_type == gpu_type]
        # an elastic job (contract v2) may take any listed count, worth its scaling factor
        sizes = [(job.gpus, 1.0)] if job.elastic is None else list(zip(job.elastic.gpus, job.elastic.scaling, strict=True))
        splits = [(split, f) for g, f in sizes for split in _splits(g, [n.gpus for n in nodes])]
        for split, factor in splits:
            used = {n.id: g for n, g in zip(nodes, split, strict=True) if g > 0}
            beyond = len(used) - _spread_base(instance, nodes, sum(split))  # nodes that pay the spread factor
            moved = job.placement is not None and dict(job.placement) != used
            for a, c in enumerate(prof.cpus_per_gpu):
                for b, m in enumerate(prof.mem_per_gpu_gb):
                    tp = prof.throughput[a][b]
                    if instance.round.fair and tp < base:
                        continue
                    if any(c * g > instance.node(nid).cpus or m * g > instance.node(nid).mem_gb
                           for nid, g in used.items()):
                        continue
                    value = job.weight * factor * speed * tp / base * job.spread_factor ** beyond
                    if moved:
                        value *= 1.0 - job.restart_s / instance.round.duration_s
                    out.append((value, used, c, m))
    return out


def feasible_schedules(instance) -> Iterator[tuple[float, dict, dict]]:
    """(worth, schedule {job_id: (nodes, c, m)}, load {node_id: [gpus, cores, GB]}) of every
    schedule whose jobs fit the nodes together, by full enumeration (the empty schedule first)."""
    choices = [[None, *_options(instance, j)] for j in instance.jobs]
    for combo in itertools.product(*choices):
        load = {n.id: [0, 0, 0] for n in instance.nodes}
        sched, total = {}, 0.0
        for j, opt in zip(instance.jobs, combo, strict=True):
            if opt is None:
                continue
            value, used, c, m = opt
            total += value
            sched[j.id] = (used, c, m)
            for nid, g in used.items():
                row = load[nid]
                row[0] += g
                row[1] += c * g
                row[2] += m * g
        if all(load[n.id][0] <= n.gpus and load[n.id][1] <= n.cpus and load[n.id][2] <= n.mem_gb for n in instance.nodes):
            yield total, sched, load


def brute_force(instance) -> tuple[float, dict]:
    """Best objective and one optimal schedule {job_id: (nodes, c, m)} by full enumeration."""
    best, best_sched = 0.0, {}
    for total, sched, _load in feasible_schedules(instance):
        if total > best:
            best, best_sched = total, sched
    return best, best_sched


def rules_hold(instance, sched) -> bool:
    """Rules 6 (quotas), 7 (max_moves) and 8 (pinned jobs) for ``sched`` {job_id: (nodes, c, m)}, restated from the
    contract: a tenant's GPUs are those its jobs got, and a waiting elastic job fits the rest of
    its quota at its smallest size."""
    quotas = instance.round.tenants
    if quotas is not None:
        held = {}
        for j in instance.jobs:
            if j.id in sched:
                held[j.tenant] = held.get(j.tenant, 0) + sum(sched[j.id][0].values())
        smallest = {j.id: (j.elastic.gpus[0] if j.elastic is not None else j.gpus) for j in instance.jobs}
        waits = any(j.id not in sched and j.tenant in quotas and held.get(j.tenant, 0) + smallest[j.id] <= quotas[j.tenant]
                    for j in instance.jobs)
        if waits and any(g > (quotas.get(t, 0) if t is not None else 0) for t, g in held.items()):
            return False
    for j in instance.jobs:  # rule 8: a running job that may not be preempted stays exactly where it runs
        if not j.preemptible and j.placement is not None and (j.id not in sched or sched[j.id][0] != dict(j.placement)):
            return False
    if instance.round.max_moves is not None:
        moves = sum(1 for j in instance.jobs if j.id in sched and j.placement is not None and dict(j.placement) != sched[j.id][0])
        if moves > instance.round.max_moves:
            return False
    return True


def search_size(instance) -> int:
    """Number of combinations brute_force would visit (to assume() small)."""
    size = 1
    for j in instance.jobs:
        size *= 1 + len(_options(instance, j))
    return size


def best_with_rules(instance) -> float:
    """The brute-force optimum over the schedules that also keep the quota, move and pinned-job rules."""
    return max((total for total, sched, _load in feasible_schedules(instance) if rules_hold(instance, sched)), default=0.0)
