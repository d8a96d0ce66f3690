"""What capacity a round has left once some jobs hold theirs.

- :class:`FreeCapacity`: free GPUs, cores and GB per node, taken and given back as placements
  come and go; the one tracker the greedy heuristics (:class:`optsched.heuristics.common.Cluster`),
  the policy repair and the learned policy's decoder
  (:class:`optsched.learned.decode.PlacementState`) build on.
- :func:`residual_round`: the round left after a schedule's jobs took their GPUs, cores and memory
  (smaller nodes, those jobs gone): the state the learned policy's DAgger labels and the policy's
  warm start solve.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from optsched.model import Instance
from optsched.schedule import Schedule

__all__ = ["FreeCapacity", "node_usage", "residual_round"]


class FreeCapacity:
    """Free GPUs (``free_g``), cores (``free_c``) and GB (``free_m``) per node, as int64 arrays
    indexed by the node's position in the round; placements are ``{node index: GPUs}`` at a
    per-GPU grid point ``(c, m)``."""

    def __init__(self, gpus: Sequence[int] | np.ndarray, cpus: Sequence[int] | np.ndarray, mem: Sequence[int] | np.ndarray) -> None:
        self.free_g = np.array(gpus, dtype=np.int64)
        self.free_c = np.array(cpus, dtype=np.int64)
        self.free_m = np.array(mem, dtype=np.int64)

    @classmethod
    def of(cls, instance: Instance) -> FreeCapacity:
        """The whole capacity of ``instance``'s nodes, nothing placed yet."""
        return cls([n.gpus for n in instance.nodes], [n.cpus for n in instance.nodes], [n.mem_gb for n in instance.nodes])

    def fits(self, nodes: Mapping[int, int], c: int, m: int) -> bool:
        """Whether ``nodes`` (node index -> GPUs) fit in the free capacity at grid point (c, m)."""
        for i, k in nodes.items():
            if self.free_g[i] < k or self.free_c[i] < c * k or self.free_m[i] < m * k:
                return False
        return True

    def reserve(self, nodes: Mapping[int, int], c: int, m: int, sign: int = 1) -> None:
        """Take (``sign=1``) or give back (``sign=-1``) the capacity of ``nodes`` at (c, m)."""
        for i, k in nodes.items():
            self.free_g[i] -= sign * k
            self.free_c[i] -= sign * c * k
            self.free_m[i] -= sign * m * k


def node_usage(schedule: Schedule) -> defaultdict[str, list[int]]:
    """Per node id: the ``[GPUs, cores, GB]`` the schedule's jobs hold there (``[0, 0, 0]`` for
    a node it does not use)."""
    used: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for a in schedule.jobs.values():
        for nid, k in a.nodes.items():
            u = used[nid]
            u[0] += k
            u[1] += k * a.cpus_per_gpu
            u[2] += k * a.mem_per_gpu_gb
    return used


def residual_round(instance: Instance, placed: Schedule, name: str | None = None) -> Instance:
    """The round left after ``placed``'s jobs took their resources: smaller nodes, fewer jobs."""
    used = node_usage(placed)
    nodes = tuple(
        replace(n, gpus=n.gpus - used[n.id][0], cpus=n.cpus - used[n.id][1], mem_gb=n.mem_gb - used[n.id][2]) for n in instance.nodes
    )
    jobs = tuple(j for j in instance.jobs if j.id not in placed.jobs)
    if name is None:
        digest = hashlib.sha256(json.dumps(placed.to_dict(), sort_keys=True).encode()).hexdigest()[:10]
        name = f"{instance.name}~{digest}"
    return instance.subround(name, nodes, jobs)
