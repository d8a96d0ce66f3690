"""What capacity a round has left once some jobs hold theirs.

:func:`residual_round`: the round left after a schedule's jobs took their GPUs, cores and memory
(smaller nodes, those jobs gone): the state the learned policy's DAgger labels and the policy's
warm start solve.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import replace

from optsched.model import Instance
from optsched.schedule import Schedule

__all__ = ["residual_round"]


def residual_round(instance: Instance, placed: Schedule, name: str | None = None) -> Instance:
    """The round left after ``placed``'s jobs took their resources: smaller nodes, fewer jobs."""
    used_g: dict[str, int] = defaultdict(int)
    used_c: dict[str, int] = defaultdict(int)
    used_m: dict[str, int] = defaultdict(int)
    for a in placed.jobs.values():
        for nid, k in a.nodes.items():
            used_g[nid] += k
            used_c[nid] += k * a.cpus_per_gpu
            used_m[nid] += k * a.mem_per_gpu_gb
    nodes = tuple(
        replace(n, gpus=n.gpus - used_g[n.id], cpus=n.cpus - used_c[n.id], mem_gb=n.mem_gb - used_m[n.id]) for n in instance.nodes
    )
    jobs = tuple(j for j in instance.jobs if j.id not in placed.jobs)
    if name is None:
        digest = hashlib.sha256(json.dumps(placed.to_dict(), sort_keys=True).encode()).hexdigest()[:10]
        name = f"{instance.name}~{digest}"
    return instance.subround(name, nodes, jobs)
