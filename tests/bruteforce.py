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
            k = len(used)
            moved = job.placement is not None and dict(job.placement) != used
            for a, c in enumerate(prof.cpus_per_gpu):
                for b, m in enumerate(prof.mem_per_gpu_gb):
                    tp = prof.throughput[a][b]
                    if instance.round.fair and tp < base:
                        continue
                    if any(c * g > instance.node(nid).cpus or m * g > instance.node(nid).mem_gb
                           for nid, g in used.items()):
                        continue
                    value = job.weight * factor * speed * tp / base * job.spread_factor ** (k - 1)
                    if moved:
                        value *= 1.0 - job.restart_s / instance.round.duration_s
                    out.append((value, used, c, m))
    return out


def brute_force(instance) -> tuple[float, dict]:
    """Best objective and one optimal schedule {job_id: (nodes, c, m)} by full enumeration."""
    choices = [[None, *_options(instance, j)] for j in instance.jobs]
    best, best_sched = 0.0, {}
    for combo in itertools.product(*choices):
        load = {n.id: [0, 0, 0] for n in instance.nodes}
        ok, total = True, 0.0
        for opt in combo:
            if opt is None:
                continue
            value, used, c, m = opt
            total += value
            for nid, g in used.items():
                row = load[nid]
                row[0] += g
                row[1] += c * g
                row[2] += m * g
        for n in instance.nodes:
            g, c, m = load[n.id]
            if g > n.gpus or c > n.cpus or m > n.mem_gb:
                ok = False
                break
        if ok and total > best:
            best = total
            best_sched = {
                j.id: (opt[1], opt[2], opt[3])
                for j, opt in zip(instance.jobs, combo, strict=True) if opt is not None
            }
    return best, best_sched


def search_size(instance) -> int:
    """Number of combinations brute_force would visit (to assume() small)."""
    size = 1
    for j in instance.jobs:
        size *= 1 + len(_options(instance, j))
    return size
