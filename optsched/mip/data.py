"""Per-job data that every linear formulation of a round shares (exact MIP and pooled LP bound).

Everything a coefficient is made of is computed here, once: the grid points a job may use
(fair filter, then Pareto reduction), the GPU types it may use, how many GPUs of it fit on a node
at each point, the least number of nodes it needs, and the value coefficients. The MIP
description (:mod:`optsched.mip.description`) and the pooled LP bound (:mod:`optsched.mip.bound`)
read these and nothing else, so they cannot disagree on what a job is worth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from optsched.model import Instance, Job, fair_floor
from optsched.values import spread_multiplier

__all__ = ["JobData", "NodeClasses", "RoundData", "pareto_points"]

#: stands in for "no limit" when a grid value is 0 (x // 0 is undefined; 0 per GPU never binds)
_NO_LIMIT = np.iinfo(np.int64).max // 4


def pareto_points(job: Job, fair: bool) -> list[tuple[int, int, float]]:
    """The grid points worth considering: ``(cpus_per_gpu, mem_per_gpu_gb, throughput)``.

    With ``fair``, points slower than the job's demand are dropped first (contract rule 5). Then a
    point is dropped when another one needs no more CPUs, no more memory and gives at least its
    throughput: any schedule using it can switch to that other point and stay feasible (per-node
    sums only shrink) without losing value (value grows with throughput), so the optimum is kept.
    The result is sorted by ``(cpus, mem)``; the demand point or a point dominating it is always in it.
    """
    pts = job.profile.allowed(fair_floor(job, fair))
    keep = []
    for i, (c, m, t) in enumerate(pts):
        dominated = any(
            (c2 <= c and m2 <= m and t2 >= t) and (c2, m2) != (c, m) for k, (c2, m2, t2) in enumerate(pts) if k != i
        )
        if not dominated:
            keep.append((c, m, t))
    return sorted(keep)


def _per_gpu_cap(capacity: np.ndarray, per_gpu: int) -> np.ndarray:
    return capacity // per_gpu if per_gpu > 0 else np.full_like(capacity, _NO_LIMIT)


@dataclass(frozen=True)
class NodeClasses:
    """Nodes grouped by ``(gpu_type, gpus, cpus, mem_gb)``: identical nodes form one class."""

    type_index: np.ndarray  #: per class, index into ``instance.gpu_types``
    gpus: np.ndarray
    cpus: np.ndarray
    mem: np.ndarray
    count: np.ndarray  #: nodes in the class
    members: tuple[tuple[int, ...], ...]  #: node indices of each class
    node_class: np.ndarray  #: per node, its class

    @classmethod
    def of(cls, instance: Instance) -> NodeClasses:
        types = {t: i for i, t in enumerate(instance.gpu_types)}
        keys: dict[tuple[int, int, int, int], list[int]] = {}
        for i, n in enumerate(instance.nodes):
            keys.setdefault((types[n.gpu_type], n.gpus, n.cpus, n.mem_gb), []).append(i)
        arr = np.array(list(keys), dtype=np.int64).reshape(-1, 4)
        node_class = np.zeros(len(instance.nodes), dtype=np.int64)
        for k, members in enumerate(keys.values()):
            node_class[members] = k
        return cls(
            type_index=arr[:, 0],
            gpus=arr[:, 1],
            cpus=arr[:, 2],
            mem=arr[:, 3],
            count=np.array([len(v) for v in keys.values()], dtype=np.int64),
            members=tuple(tuple(v) for v in keys.values()),
            node_class=node_class,
        )

    def __len__(self) -> int:
        return len(self.count)

    def cap(self, cpus_per_gpu: int, mem_per_gpu_gb: int, gpus: int) -> np.ndarray:
        """Per class: GPUs of a ``gpus``-GPU job that fit on one empty node of the class at a point."""
        return np.minimum.reduce(
            [self.gpus, _per_gpu_cap(self.cpus, cpus_per_gpu), _per_gpu_cap(self.mem, mem_per_gpu_gb), np.full_like(self.gpus, gpus)]
        )


@dataclass(frozen=True)
class JobData:
    """What the formulations need to know about one job.

    ``options[(t, p)]`` exists for every GPU type index ``t`` and point index ``p`` the job can
    really use (the type is allowed, enough GPUs fit on nodes of that type at that point, and some
    way of running there has positive worth); it holds ``(base, best, kmin)``:

    - ``base = weight * speed[t] * thr[p] / thr[demand]``: the worth before spreading and moving;
    - ``kmin``: the least number of nodes the job needs on type ``t`` at point ``p``;
    - ``best``: a valid upper bound on its worth at ``(t, p)``, ``base`` times the largest factor
      ``spread_factor^(k-kbase) * (1 - restart share if moved)`` over the ways it can run there
      (``kbase``: :meth:`optsched.model.Instance.spread_base`).
    """

    index: int
    job: Job
    points: tuple[tuple[int, int, float], ...]
    options: dict[tuple[int, int], tuple[float, float, int]]
    restart_share: float  #: restart_s / duration_s (0 when not running)
    stay_type: int | None  #: the type of the placement's nodes, when staying is possible at all
    stay_points: frozenset[int]  #: points at which the placement fits on its nodes (alone)

    @property
    def gpus(self) -> int:
        return self.job.gpus

    @property
    def can_move(self) -> bool:
        """Whether running somewhere other than the placement has positive worth."""
        return not self.job.running or self.restart_share < 1.0

    @cached_property
    def base_max(self) -> float:
        return max((o[0] for o in self.options.values()), default=0.0)

    @cached_property
    def kmin(self) -> int:
        return min((o[2] for o in self.options.values()), default=1)


class RoundData:
    """The shared preprocessing of one instance (cheap: numpy over node classes, not nodes)."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.types = instance.gpu_types
        self.classes = NodeClasses.of(instance)
        self.jobs = [self._job_data(i, j) for i, j in enumerate(instance.jobs)]

    def node_type(self, n: int) -> int:
        return int(self.classes.type_index[self.classes.node_class[n]])

    def spread(self, jd: JobData, t: int, k: int) -> float:
        """The spread factor of job ``jd`` on ``k`` nodes of type index ``t`` (:func:`optsched.values.spread_multiplier`)."""
        return spread_multiplier(self.instance, jd.job, self.types[t], k)

    def _job_data(self, index: int, job: Job) -> JobData:
        inst, cl = self.instance, self.classes
        points = tuple(pareto_points(job, inst.round.fair))
        share = job.restart_s / inst.round.duration_s if job.running else 0.0
        stay_type, stay_points = self._stay(job, points)
        movable = not job.running or share < 1.0
        options: dict[tuple[int, int], tuple[float, float, int]] = {}
        for t, tname in enumerate(self.types):
            speed = job.speed(tname)
            if speed is None:
                continue
            of_type = cl.type_index == t
            for p, (c, m, thr) in enumerate(points):
                cap = cl.cap(c, m, job.gpus)[of_type]
                if int((cap * cl.count[of_type]).sum()) < job.gpus:
                    continue
                kmin = math.ceil(job.gpus / int(cap.max()))
                base = job.weight * speed * thr / job.demand_throughput
                factors = []
                if movable:
                    factors.append(spread_multiplier(inst, job, tname, kmin) * (1.0 - share))
                if t == stay_type and p in stay_points:
                    factors.append(spread_multiplier(inst, job, tname, len(job.placement)))
                if not factors:
                    continue
                options[(t, p)] = (base, base * max(factors), kmin)
        return JobData(index, job, points, options, share, stay_type, stay_points)

    def _stay(self, job: Job, points: tuple[tuple[int, int, float], ...]) -> tuple[int | None, frozenset[int]]:
        """The placement's type and the points at which it fits on its own nodes, if staying is possible."""
        if job.placement is None:
            return None, frozenset()
        nodes = [self.instance.node(n) for n in job.placement]
        if len({n.gpu_type for n in nodes}) != 1:
            return None, frozenset()  # a placement across GPU types breaks rule 2: the job must move
        ok = frozenset(
            p
            for p, (c, m, _) in enumerate(points)
            if all(k <= n.gpus and c * k <= n.cpus and m * k <= n.mem_gb for n, k in zip(nodes, job.placement.values(), strict=True))
        )
        t = self.types.index(nodes[0].gpu_type)
        return (t, ok) if ok else (None, frozenset())

    def node_caps(self, jd: JobData, n: int) -> dict[int, int]:
        """Per point index with an option on node ``n``'s type: GPUs of the job that fit on ``n`` alone (>= 1)."""
        node = self.instance.nodes[n]
        t = self.node_type(n)
        caps = {}
        for (tt, p), _ in jd.options.items():
            if tt != t:
                continue
            c, m, _ = jd.points[p]
            cap = min(jd.gpus, node.gpus, node.cpus // c if c else node.gpus, node.mem_gb // m if m else node.gpus)
            if cap >= 1:
                caps[p] = cap
        return caps
