"""The room a round's pinned jobs leave to the other jobs, and the fewest nodes that hold a job.

A pinned job (running, not preemptible) keeps its nodes and GPU counts and uses at least its
smallest cores and GB per GPU, so the other jobs of the round share at most what is left
(:func:`residual_nodes`). A job that cannot fit on few of those nodes pays the spread factor for
the nodes it must span (:func:`spread_caps`). The round's bounds (:mod:`optsched.knapsack_bound`,
:mod:`optsched.incremental_bound`) cap each job's worth with it: ``formulations/incremental.md``,
"The room pinned jobs leave".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from optsched.model import Instance

__all__ = ["fewest_holding", "residual_nodes", "spread_caps"]

Nodes = tuple[np.ndarray, np.ndarray, np.ndarray]


def fewest_holding(gpus_needed: int, c: np.ndarray, m: np.ndarray, nodes: Nodes
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Per grid point (``c`` cores and ``m`` GB per GPU, arrays of one shape), whether some set of
    ``nodes`` (their GPUs, cores and GB) holds a job of ``gpus_needed`` GPUs there, and the
    fewest nodes that do: node ``n`` holds at most ``min(gpus_n, cpus_n // c, mem_n // m)`` of its
    GPUs, the fullest first."""
    gpus, cpus, mem = nodes
    c = np.asarray(c, dtype=np.int64)[..., None]
    m = np.asarray(m, dtype=np.int64)[..., None]
    by_c = np.where(c > 0, cpus // np.maximum(c, 1), gpus)
    by_m = np.where(m > 0, mem // np.maximum(m, 1), gpus)
    q = np.minimum(np.minimum(gpus, by_c), np.maximum(by_m, 0))
    q = -np.sort(-np.maximum(q, 0), axis=-1).cumsum(axis=-1)
    if not q.shape[-1]:
        return np.zeros(q.shape[:-1], dtype=bool), np.ones(q.shape[:-1], dtype=np.int64)
    return q[..., -1] >= gpus_needed, (q < gpus_needed).sum(axis=-1) + 1


def spread_caps(instance: Instance, job: Any, gpu_type: str, nodes: Nodes,
                c: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Per grid point, the most spread multiplier ``job`` can have on ``nodes`` of ``gpu_type``
    (:func:`fewest_holding`): ``spread_factor ** (k - spread_base)`` for the fewest ``k`` nodes that
    hold it, 0 where none do."""
    fits, k = fewest_holding(job.gpus, c, m, nodes)
    base = instance.spread_base(gpu_type, job.gpus)
    return np.where(fits, job.spread_factor ** np.maximum(0, k - base), 0.0)


def residual_nodes(instance: Instance) -> dict[str, Nodes]:
    """Per GPU type, the room the pinned jobs leave to the others, by node with a GPU left: its
    GPUs left, and the cores and GB left with every pinned job at its smallest cores and GB per
    GPU (no feasible schedule leaves the others less there)."""
    held: dict[str, list[int]] = {}
    for j in instance.jobs:
        if j.pinned and j.placement:
            c0, m0 = min(j.profile.cpus_per_gpu), min(j.profile.mem_per_gpu_gb)
            for nid, k in j.placement.items():
                h = held.setdefault(nid, [0, 0, 0])
                h[0] += k
                h[1] += k * c0
                h[2] += k * m0
    out: dict[str, list[list[int]]] = {}
    for n in instance.nodes:
        g, c, m = held.get(n.id, (0, 0, 0))
        if n.gpus - g > 0:
            cols = out.setdefault(n.gpu_type, [[], [], []])
            cols[0].append(n.gpus - g)
            cols[1].append(max(0, n.cpus - c))
            cols[2].append(max(0, n.mem_gb - m))
    return {t: (np.array(a, dtype=np.int64), np.array(b, dtype=np.int64), np.array(d, dtype=np.int64)) for t, (a, b, d) in out.items()}
