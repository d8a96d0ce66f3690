"""Cluster state and packing helpers shared by the fast heuristics.

:class:`Cluster` holds the free GPUs, CPUs and memory of every node as numpy arrays, so a best-fit
query over all nodes of a GPU type is one vectorised pass (O(nodes of that type)) instead of a
Python loop.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np

from optsched.capacity import FreeCapacity
from optsched.model import Instance, Job
from optsched.round_policies import urgent

__all__ = ["Cluster", "job_order", "place", "types_by_speed"]


def job_order(instance: Instance) -> list[Job]:
    """Jobs by weight (descending); ties: running jobs first, then by id (deterministic). Pinned
    jobs (``preemptible=False``), then urgent deadline jobs (contract v2,
    :func:`optsched.round_policies.urgent`) come before all others."""
    if any(j.deadline_s is not None for j in instance.jobs):
        return sorted(instance.jobs, key=lambda j: (not j.pinned, not urgent(instance, j), -j.weight, not j.running, j.id))
    return sorted(instance.jobs, key=lambda j: (not j.pinned, -j.weight, not j.running, j.id))


def types_by_speed(instance: Instance, job: Job) -> list[str]:
    """The GPU types present in the cluster that ``job`` may use, fastest first (ties by name)."""
    out = [(job.speed(t), t) for t in sorted(instance.gpu_types) if job.speed(t) is not None]
    return [t for _, t in sorted(out, key=lambda p: (-p[0], p[1]))]


class Cluster(FreeCapacity):
    """Free capacity per node (:class:`optsched.capacity.FreeCapacity`) with placements keyed by
    node id, and the greedy's best fit."""

    def __init__(self, instance: Instance) -> None:
        super().__init__([n.gpus for n in instance.nodes], [n.cpus for n in instance.nodes], [n.mem_gb for n in instance.nodes])
        self.instance = instance
        self.ids = [n.id for n in instance.nodes]
        types = [n.gpu_type for n in instance.nodes]
        self.by_type = {t: np.array([i for i, x in enumerate(types) if x == t], dtype=np.int64) for t in set(types)}
        self.types = sorted(self.by_type)
        self._allowed: dict[int, list[str]] = {}
        #: running jobs not placed yet -> (node index -> GPUs, c, m): the room they hold now
        self._claims: dict[str, tuple[dict[int, int], int, int]] = {}
        self._claimed: np.ndarray | None = None  # (3, nodes): claimed GPUs, cores, GB

    def claim_running(self, point: Callable[[Job], tuple[int, int]], skip: Collection[str] = ()) -> None:
        """Mark the room every running job holds now (its GPUs at ``point(job)`` per GPU) as
        claimed until the job itself is placed (:func:`place` releases it): best fit then puts
        the jobs placed before it in free room first, so that a running job is not moved off
        nodes a younger job could have done without (the round starts from an empty cluster).
        Jobs in ``skip`` (placed already) claim nothing."""
        claimed = np.zeros((3, self.free_g.size), dtype=np.int64)
        for job in self.instance.jobs:
            if job.placement is not None and job.id not in skip:
                c, m = point(job)
                where = {self.instance.node_idx(n): k for n, k in job.placement.items()}
                self._claims[job.id] = (where, c, m)
                for i, k in where.items():
                    claimed[:, i] += (k, c * k, m * k)
        self._claimed = claimed if self._claims else None

    def release(self, job: Job) -> None:
        """Give back ``job``'s claim (:meth:`claim_running`), if it holds one."""
        claim = self._claims.pop(job.id, None)
        if claim is not None and self._claimed is not None:
            where, c, m = claim
            for i, k in where.items():
                self._claimed[:, i] -= (k, c * k, m * k)

    def allowed_types(self, job: Job) -> list[str]:
        """:func:`types_by_speed` for ``job``, memoised per ``gpu_speed`` mapping object (jobs
        that share one, as the simulator's jobs of one model do, sort once per round)."""
        key = id(job.gpu_speed)
        out = self._allowed.get(key)
        if out is None:
            pairs = [(s, t) for t in self.types if (s := job.speed(t)) is not None]
            out = self._allowed[key] = [t for _, t in sorted(pairs, key=lambda p: (-p[0], p[1]))]
        return out

    def fits_at(self, nodes: Mapping[str, int], c: int, m: int) -> bool:
        """Whether the node id -> GPUs map fits in the free capacity at grid point (c, m)."""
        return self.fits({self.instance.node_idx(nid): k for nid, k in nodes.items()}, c, m)

    def take(self, nodes: Mapping[str, int], c: int, m: int, sign: int = 1) -> None:
        """Reserve (sign=1) or release (sign=-1) the capacity of a placement (node id -> GPUs) at (c, m)."""
        self.reserve({self.instance.node_idx(nid): k for nid, k in nodes.items()}, c, m, sign)

    def best_fit(self, gpu_type: str, g: int, c: int, m: int) -> dict[str, int] | None:
        """Place a gang of ``g`` GPUs at (c, m) on nodes of ``gpu_type``.

        One node when any fits: the one with fewest leftover GPUs, then CPUs, then memory, then
        lowest index. Otherwise split over the fewest nodes (largest per-node capacities first).
        ``None`` when the type's total capacity is too small. Room claimed by running jobs not
        placed yet (:meth:`claim_running`) is used only where the unclaimed room cannot hold the gang
        or would spread it over more nodes than the whole room does.
        """
        idx = self.by_type.get(gpu_type)
        if idx is None or idx.size == 0:
            return None
        fg, fc, fm = self.free_g[idx], self.free_c[idx], self.free_m[idx]
        if self._claimed is not None and self._claimed[0, idx].any():
            cg, cc, cm = self._claimed[:, idx]
            out = self._fit(idx, g, c, m, np.maximum(fg - cg, 0), np.maximum(fc - cc, 0), np.maximum(fm - cm, 0))
            if out is not None and len(out) > 1:  # a spread the claimed room may spare the gang
                whole_room = self._fit(idx, g, c, m, fg, fc, fm)
                if whole_room is not None and len(whole_room) < len(out):
                    return whole_room
            if out is not None:
                return out
        return self._fit(idx, g, c, m, fg, fc, fm)

    def _fit(self, idx: np.ndarray, g: int, c: int, m: int, fg: np.ndarray, fc: np.ndarray, fm: np.ndarray) -> dict[str, int] | None:
        """:meth:`best_fit` within the room ``fg, fc, fm`` of the nodes ``idx``."""
        cap = fg.copy()
        if c > 0:
            cap = np.minimum(cap, fc // c)
        if m > 0:
            cap = np.minimum(cap, fm // m)
        whole = np.nonzero(cap >= g)[0]
        if whole.size:
            key = np.lexsort((whole, fm[whole] - m * g, fc[whole] - c * g, fg[whole] - g))
            return {self.ids[int(idx[whole[key[0]]])]: g}
        if int(cap.sum()) < g:
            return None
        order = [int(o) for o in np.lexsort((np.arange(cap.size), -cap))]
        out: dict[str, int] = {}
        left = g
        for pos, o in enumerate(order):
            rest = order[pos:]
            fit = [r for r in rest if cap[r] >= left]
            if fit:  # the last chunk: best fit (smallest sufficient capacity) among the rest
                last = min(fit, key=lambda r: (int(cap[r]), r))
                out[self.ids[int(idx[last])]] = left
                return out
            out[self.ids[int(idx[o])]] = int(cap[o])
            left -= int(cap[o])
        return None  # unreachable: the total capacity was checked above


def place(instance: Instance, cl: Cluster, job: Job, cpus_per_gpu: int, mem_per_gpu_gb: int,
          sizes: Sequence[int] | None = None) -> dict[str, int] | None:
    """Where ``job`` goes at the given per-GPU point, taking the room from ``cl``; ``None``: nowhere.

    A running job keeps its current nodes when they still hold it on an allowed type (no restart);
    otherwise best fit with each of ``sizes`` GPUs in turn (default: its ``gpus``), on its allowed
    GPU types, fastest type first."""
    cl.release(job)
    allowed = cl.allowed_types(job)
    nodes = None
    if job.placement is not None:
        ptypes = {instance.node(n).gpu_type for n in job.placement}
        if len(ptypes) == 1 and next(iter(ptypes)) in allowed and cl.fits_at(job.placement, cpus_per_gpu, mem_per_gpu_gb):
            nodes = dict(job.placement)
    for k in (job.gpus,) if sizes is None else sizes:
        if nodes is not None:
            break
        for t in allowed:
            nodes = cl.best_fit(t, k, cpus_per_gpu, mem_per_gpu_gb)
            if nodes is not None:
                break
    if nodes is not None:
        cl.take(nodes, cpus_per_gpu, mem_per_gpu_gb)
    return nodes
