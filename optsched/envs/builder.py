"""One round decided job by job: the state machine behind every environment in :mod:`optsched.envs`.

:class:`RoundBuilder` holds a round (a contract :class:`~optsched.model.Instance`) and the
decisions made so far. Jobs are decided one at a time, in the instance's order. For the current
job an action is either *queue* (the job waits this round) or a *(grid point, node)* pair: the
job gets that CPU/memory grid point and as many of its GPUs on that node as the node can hold
at that point (free GPUs, cores and memory). A gang that does not fit on one node stays current:
its next actions must name further nodes of the same GPU type at the same point until all its
GPUs are placed. The action mask allows exactly the actions after which the gang can still be
completed, so every episode ends with a schedule the checker accepts. A job's reward is its
worth (:func:`optsched.values.assignment_value`) once its gang is complete, so the rewards of an
episode sum to the round's objective.

Actions are flattened: ``((a * G_mem + b) * max_nodes + n)`` for CPU level ``a``, memory level
``b`` and node ``n`` (indices into the job's own grids and the instance's node list), and
``n_actions - 1`` for *queue*. The observation arrays are documented in ``docs/envs.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from optsched.errors import InputError
from optsched.model import Instance, fair_floor
from optsched.schedule import Assignment, Schedule
from optsched.values import assignment_value

__all__ = ["JOB_FEATURES", "NODE_FEATURES", "EnvSizes", "RoundBuilder", "allowed"]

#: columns of ``obs["nodes"]``
NODE_FEATURES = ("gpus", "gpus_free", "cpus", "cpus_free", "mem_gb", "mem_free_gb", "gpu_type")
#: columns of ``obs["jobs"]``
JOB_FEATURES = ("gpus", "weight", "spread_factor", "restart_frac", "running", "decided", "scheduled", "current", "value")

_BIG = np.iinfo(np.int64).max // 4


@dataclass(frozen=True)
class EnvSizes:
    """The padded sizes of observations and actions: rounds must fit in them."""

    max_jobs: int = 16
    max_nodes: int = 8
    #: (CPU levels, memory levels) of the largest profile grid; the catalogue's "full" grid is 9 x 5
    max_grid: tuple[int, int] = (9, 5)

    def __post_init__(self) -> None:
        for name in ("max_jobs", "max_nodes"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(name, v, "must be an integer >= 1")
        g = tuple(self.max_grid) if isinstance(self.max_grid, (tuple, list)) else None
        if g is None or len(g) != 2 or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in g):
            raise InputError("max_grid", self.max_grid, "must be (CPU levels, memory levels), two integers >= 1")
        object.__setattr__(self, "max_grid", g)

    @property
    def n_actions(self) -> int:
        return self.max_grid[0] * self.max_grid[1] * self.max_nodes + 1

    @property
    def queue_action(self) -> int:
        """The action that leaves the current job waiting this round."""
        return self.n_actions - 1

    def encode(self, a: int, b: int, node: int) -> int:
        """The action for CPU level ``a``, memory level ``b`` and node index ``node``."""
        return (a * self.max_grid[1] + b) * self.max_nodes + node

    def decode(self, action: int) -> tuple[int, int, int] | None:
        """``(a, b, node)`` of an action, ``None`` for *queue*."""
        if action == self.queue_action:
            return None
        point, node = divmod(int(action), self.max_nodes)
        a, b = divmod(point, self.max_grid[1])
        return a, b, node

    def check_fits(self, instance: Instance) -> None:
        """Refuse a round larger than these sizes, naming the size to raise."""
        if len(instance.nodes) > self.max_nodes:
            raise InputError("max_nodes", self.max_nodes, f"round {instance.name} has {len(instance.nodes)} nodes")
        if len(instance.jobs) > self.max_jobs:
            raise InputError("max_jobs", self.max_jobs, f"round {instance.name} has {len(instance.jobs)} jobs")
        for name in ("tenants", "max_moves"):  # round-wide policy constraints the mask does not model yet
            if getattr(instance.round, name, None) is not None:
                raise InputError(f"round.{name}", getattr(instance.round, name), "is not supported by the environments yet")
        for j in instance.jobs:
            if j.profile.shape[0] > self.max_grid[0] or j.profile.shape[1] > self.max_grid[1]:
                raise InputError("max_grid", self.max_grid, f"job {j.id} of round {instance.name} has a {j.profile.shape} grid")


class RoundBuilder:
    """A round being decided job by job (see the module docstring)."""

    def __init__(self, instance: Instance, sizes: EnvSizes) -> None:
        sizes.check_fits(instance)
        self.instance = instance
        self.sizes = sizes
        nodes, jobs = instance.nodes, instance.jobs
        self.n_nodes, self.n_jobs = len(nodes), len(jobs)
        self.types = sorted({n.gpu_type for n in nodes})
        self.node_type = np.array([self.types.index(n.gpu_type) for n in nodes], dtype=np.int64)
        self.node_cap = np.array([[n.gpus, n.cpus, n.mem_gb] for n in nodes], dtype=np.int64).reshape(-1, 3)
        self.free = self.node_cap.copy()
        Gc, Gm = sizes.max_grid
        self.cgrid = np.zeros((self.n_jobs, Gc), dtype=np.int64)
        self.mgrid = np.zeros((self.n_jobs, Gm), dtype=np.int64)
        self.thr_rel = np.zeros((self.n_jobs, Gc, Gm))
        self.point_ok = np.zeros((self.n_jobs, Gc, Gm), dtype=bool)
        self.speed = np.zeros((self.n_jobs, self.n_nodes))
        self.placement = np.zeros((self.n_jobs, self.n_nodes), dtype=np.int64)
        node_index = {n.id: i for i, n in enumerate(nodes)}
        for k, j in enumerate(jobs):
            gc, gm = j.profile.shape
            self.cgrid[k, :gc] = j.profile.cpus_per_gpu
            self.mgrid[k, :gm] = j.profile.mem_per_gpu_gb
            thr = np.asarray(j.profile.throughput, dtype=np.float64)
            self.thr_rel[k, :gc, :gm] = thr / j.demand_throughput
            self.point_ok[k, :gc, :gm] = thr >= fair_floor(j, instance.round.fair)
            for i, n in enumerate(nodes):
                self.speed[k, i] = j.speed(n.gpu_type) or 0.0
            for nid, g in (j.placement or {}).items():
                self.placement[k, node_index[nid]] = g
        self.assigned = np.zeros((self.n_jobs, self.n_nodes), dtype=np.int64)
        self.decided = np.zeros(self.n_jobs, dtype=bool)
        self.value = np.zeros(self.n_jobs)
        self.points: dict[int, tuple[int, int]] = {}
        self.current = 0  #: index of the job being decided (== n_jobs when done)
        self._partial: tuple[int, int, int] | None = None  # (a, b, gpu type) of a gang being placed
        self._mask: np.ndarray | None = None

    # --- state ------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.current >= self.n_jobs

    @property
    def objective(self) -> float:
        """The worth of the jobs completed so far (the sum of rewards)."""
        return float(self.value.sum())

    @property
    def current_job_id(self) -> str | None:
        return None if self.done else self.instance.jobs[self.current].id

    def _caps(self, k: int, need: int) -> np.ndarray:
        """GPUs of job ``k`` each node could take at each grid point now, capped at ``need``."""
        c, m = self.cgrid[k], self.mgrid[k]
        capc = np.where(c[:, None] > 0, self.free[None, :, 1] // np.maximum(c[:, None], 1), _BIG)
        capm = np.where(m[:, None] > 0, self.free[None, :, 2] // np.maximum(m[:, None], 1), _BIG)
        cap = np.minimum(np.minimum(capc[:, None, :], capm[None, :, :]), self.free[None, None, :, 0])
        cap = np.minimum(cap, need)
        ok = self.point_ok[k][:, :, None] & (self.speed[k] > 0)[None, None, :]
        return np.where(ok, cap, 0)

    def mask(self) -> np.ndarray:
        """Allowed actions now (``int8``, ``n_actions`` long); all zeros once the round is decided."""
        if self._mask is not None:
            return self._mask
        s = self.sizes
        out = np.zeros(s.n_actions, dtype=np.int8)
        if not self.done:
            k = self.current
            need = self.instance.jobs[k].gpus - int(self.assigned[k].sum())
            cap = self._caps(k, need)
            if self._partial is None:
                onehot = np.eye(len(self.types), dtype=np.int64)[self.node_type]  # (N, T)
                per_type = cap @ onehot  # (Gc, Gm, T)
                allowed = (cap > 0) & (per_type[:, :, self.node_type] >= need)
                out[s.queue_action] = 1
            else:
                a0, b0, t0 = self._partial
                allowed = np.zeros_like(cap, dtype=bool)
                allowed[a0, b0] = (cap[a0, b0] > 0) & (self.node_type == t0) & (self.assigned[k] == 0)
            full = np.zeros((*s.max_grid, s.max_nodes), dtype=np.int8)
            full[:, :, : self.n_nodes] = allowed
            out[: s.queue_action] = full.reshape(-1)
        self._mask = out
        return out

    # --- transitions ------------------------------------------------------------------------

    def step(self, action: int) -> tuple[float, int | None]:
        """Apply an allowed action; returns (reward, index of the job it completed or queued, else ``None``)."""
        if self.done:
            raise RuntimeError("the round is decided: reset the environment")
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)) or not 0 <= action < self.sizes.n_actions:
            raise InputError("action", action, f"must be an integer in [0, {self.sizes.n_actions})")
        if not self.mask()[action]:
            raise InputError("action", int(action), f"is masked out for job {self.current_job_id} (see the action mask)")
        self._mask = None
        k = self.current
        job = self.instance.jobs[k]
        dec = self.sizes.decode(int(action))
        if dec is None:
            self._finish(k)
            return 0.0, k
        a, b, n = dec
        need = job.gpus - int(self.assigned[k].sum())
        put = int(self._caps(k, need)[a, b, n])
        c, m = int(self.cgrid[k, a]), int(self.mgrid[k, b])
        self.assigned[k, n] += put
        self.free[n] -= (put, put * c, put * m)
        if put < need:
            self._partial = (a, b, int(self.node_type[n]))
            return 0.0, None
        self.points[k] = (a, b)
        self.value[k] = assignment_value(self.instance, job, self._assignment(k))
        self._finish(k)
        return float(self.value[k]), k

    def _finish(self, k: int) -> None:
        self.decided[k] = True
        self._partial = None
        self.current = k + 1

    def _assignment(self, k: int) -> Assignment:
        a, b = self.points[k]
        nodes = {self.instance.nodes[i].id: int(g) for i, g in enumerate(self.assigned[k]) if g}
        return Assignment(nodes, int(self.cgrid[k, a]), int(self.mgrid[k, b]))

    def schedule(self) -> Schedule:
        """The jobs whose gangs are complete, as a contract schedule."""
        return Schedule(self.instance.name, {self.instance.jobs[k].id: self._assignment(k) for k in sorted(self.points)})

    # --- observation ------------------------------------------------------------------------

    def observation(self) -> dict[str, Any]:
        """Fixed-size arrays (padding is zero; see ``docs/envs.md``)."""
        s = self.sizes
        J, N, (Gc, Gm) = s.max_jobs, s.max_nodes, s.max_grid
        nj, nn = self.n_jobs, self.n_nodes
        f32 = np.float32
        nodes = np.zeros((N, len(NODE_FEATURES)), dtype=f32)
        nodes[:nn] = np.column_stack([self.node_cap[:, 0], self.free[:, 0], self.node_cap[:, 1], self.free[:, 1],
                                      self.node_cap[:, 2], self.free[:, 2], self.node_type]) if nn else 0
        jobs = np.zeros((J, len(JOB_FEATURES)), dtype=f32)
        dur = self.instance.round.duration_s
        for k, j in enumerate(self.instance.jobs):
            jobs[k] = (j.gpus, j.weight, j.spread_factor, min(1.0, j.restart_s / dur) if j.placement else 0.0,
                       j.placement is not None, self.decided[k], k in self.points, k == self.current, self.value[k])
        pad2 = lambda x, shape, dtype=f32: _pad(x, shape, dtype)  # noqa: E731
        mask_n = np.zeros(N, dtype=np.int8)
        mask_n[:nn] = 1
        mask_j = np.zeros(J, dtype=np.int8)
        mask_j[:nj] = 1
        return {
            "nodes": nodes,
            "node_mask": mask_n,
            "jobs": jobs,
            "job_mask": mask_j,
            "speed": pad2(self.speed, (J, N)),
            "placement": pad2(self.placement, (J, N)),
            "assigned": pad2(self.assigned, (J, N)),
            "throughput": pad2(self.thr_rel, (J, Gc, Gm)),
            "point_mask": pad2(self.point_ok, (J, Gc, Gm), np.int8),
            "cpus_grid": pad2(self.cgrid, (J, Gc)),
            "mem_grid": pad2(self.mgrid, (J, Gm)),
            "action_mask": self.mask().copy(),
        }

    def render(self) -> str:
        lines = [f"round {self.instance.name}: objective {self.objective:.4f}"]
        for k, j in enumerate(self.instance.jobs):
            if k in self.points:
                a = self._assignment(k)
                state = f"{dict(a.nodes)} at ({a.cpus_per_gpu} cores, {a.mem_per_gpu_gb} GB)/GPU, worth {self.value[k]:.4f}"
            elif self.decided[k]:
                state = "queued"
            elif k == self.current:
                state = f"<- deciding ({int(self.assigned[k].sum())}/{j.gpus} GPUs placed)"
            else:
                state = "undecided"
            lines.append(f"  {j.id} ({j.gpus} GPUs): {state}")
        return "\n".join(lines)


def allowed(builder: RoundBuilder, action: Any, policy: str = "noop") -> bool:
    """Whether ``action`` is allowed now; with ``policy="raise"`` a masked one is an ``InputError``.
    (Actions outside the action space are always an error.)"""
    n = builder.sizes.n_actions
    if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)) or not 0 <= action < n:
        raise InputError("action", action, f"must be an integer in [0, {n})")
    if builder.done:
        raise RuntimeError("the round is decided: reset the environment")
    ok = bool(builder.mask()[action])
    if not ok and policy == "raise":
        raise InputError("action", int(action), f"is masked out for job {builder.current_job_id} (see the action mask)")
    return ok


def _pad(x: np.ndarray, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    out = np.zeros(shape, dtype=dtype)
    out[tuple(slice(0, d) for d in x.shape)] = x
    return out
