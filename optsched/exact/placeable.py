"""Whether a job can run at all this round: the proof behind a bound of 0.

A job can run when some GPU type it may use has nodes that, together, hold one of its gang sizes
at one of its admissible grid points (in a ``fair`` round, throughput at least its demand's):
node ``n`` holds ``min(gpus, cpus // c, mem // m)`` of its GPUs at point ``(c, m)``, and a gang
may span nodes. Other jobs, quotas and move budgets only take capacity away, so when no job can
run alone, every feasible schedule is empty and 0 is a proven bound.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from optsched.model import Instance, Job, fair_floor

__all__ = ["can_run", "node_arrays", "nothing_can_run"]


def node_arrays(instance: Instance) -> dict[str, np.ndarray]:
    """Per GPU type, the ``(gpus, cpus, mem_gb)`` rows of its nodes that have GPUs."""
    rows: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for n in instance.nodes:
        if n.gpus > 0:
            rows[n.gpu_type].append((n.gpus, n.cpus, n.mem_gb))
    return {t: np.asarray(r, dtype=np.int64) for t, r in rows.items()}


def can_run(instance: Instance, job: Job, nodes: dict[str, np.ndarray] | None = None) -> bool:
    """Whether ``job`` alone fits on the round's nodes (``nodes``: :func:`node_arrays`'s arrays)."""
    nodes = node_arrays(instance) if nodes is None else nodes
    need = min(job.sizes)
    points = [(c, m) for c, m, _ in job.profile.allowed(fair_floor(job, instance.round.fair))]
    for t, arr in nodes.items():
        if job.speed(t) is None or int(arr[:, 0].sum()) < need:
            continue
        for c, m in points:
            held = arr[:, 0]
            if c > 0:
                held = np.minimum(held, arr[:, 1] // c)
            if m > 0:
                held = np.minimum(held, arr[:, 2] // m)
            if int(held.sum()) >= need:
                return True
    return False


def nothing_can_run(instance: Instance) -> bool:
    """Whether no job of the round can run (so the empty schedule is optimal, worth 0)."""
    nodes = node_arrays(instance)
    return not any(can_run(instance, j, nodes) for j in instance.jobs)
