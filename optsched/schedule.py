"""A round's decision: which jobs run, on which nodes, at which CPU/memory grid point.

:class:`Schedule` holds the decision only; the reports a solver adds (objective, bound,
status, ...) live on :class:`~optsched.result.Result`, whose ``to_dict`` writes the contract's
full schedule JSON. Parsing is structural (types and signs); whether a schedule is *feasible*
for an instance is the independent checker's job (:mod:`optsched.checker`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from optsched.errors import InputError
from optsched.fields import _check_keys

__all__ = ["ASSIGNMENT_KEYS", "SCHEDULE_KEYS", "Assignment", "Schedule", "instance_name"]

#: an assignment's fields
ASSIGNMENT_KEYS = frozenset({"nodes", "cpus_per_gpu", "mem_per_gpu_gb"})
#: a schedule's fields: the decision and the reports ``Result.to_dict`` and the HTTP service's
#: answers write beside it (read past: the checker recomputes what it needs)
SCHEDULE_KEYS = frozenset({"instance", "jobs", "objective", "bound", "gap", "status", "solver", "method", "time_s", "stats",
                           "trajectory", "time_limit", "session_id", "incremental"})


def instance_name(d: Mapping[str, Any]) -> str:
    """A schedule object's ``instance`` (``""`` when absent); :class:`InputError` naming the field
    when it is not a string (``null`` included), as the HTTP service's schema refuses it."""
    name = d.get("instance", "")
    if not isinstance(name, str):
        raise InputError("instance", name, "must be a string: the name of the round the schedule is for")
    return name


def _int(name: str, v: Any, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise InputError(name, v, f"must be an integer >= {lo}")
    return v


@dataclass(frozen=True)
class Assignment:
    """Where one job runs (node id -> GPUs there) and its per-GPU CPU cores and memory."""

    nodes: Mapping[str, int]
    cpus_per_gpu: int
    mem_per_gpu_gb: int

    def __post_init__(self) -> None:
        if not isinstance(self.nodes, Mapping) or not self.nodes:
            raise InputError("nodes", self.nodes, "must map at least one node id to a GPU count")
        clean = {}
        for n, k in self.nodes.items():
            if not isinstance(n, str) or not n:
                raise InputError("nodes", n, "node ids must be non-empty strings")
            clean[n] = _int(f"nodes.{n}", k, 1)
        object.__setattr__(self, "nodes", MappingProxyType(dict(sorted(clean.items()))))
        _int("cpus_per_gpu", self.cpus_per_gpu, 0)
        _int("mem_per_gpu_gb", self.mem_per_gpu_gb, 0)

    @property
    def gpus(self) -> int:
        return sum(self.nodes.values())

    @property
    def point(self) -> tuple[int, int]:
        return self.cpus_per_gpu, self.mem_per_gpu_gb

    @classmethod
    def from_dict(cls, d: Any) -> Assignment:
        if not isinstance(d, Mapping):
            raise InputError("", d, "must be an object")
        _check_keys(d, ASSIGNMENT_KEYS, "an assignment")
        for key in ("nodes", "cpus_per_gpu", "mem_per_gpu_gb"):
            if key not in d:
                raise InputError(key, None, "is required")
        return cls(nodes=d["nodes"], cpus_per_gpu=d["cpus_per_gpu"], mem_per_gpu_gb=d["mem_per_gpu_gb"])

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": dict(self.nodes), "cpus_per_gpu": self.cpus_per_gpu, "mem_per_gpu_gb": self.mem_per_gpu_gb}


@dataclass(frozen=True)
class Schedule:
    """The jobs scheduled this round (job id -> :class:`Assignment`); absent jobs wait."""

    instance: str
    jobs: Mapping[str, Assignment]

    def __post_init__(self) -> None:
        if not isinstance(self.instance, str):
            raise InputError("instance", self.instance, "must be a string")
        if not isinstance(self.jobs, Mapping):
            raise InputError("jobs", self.jobs, "must be an object")
        for j, a in self.jobs.items():
            if not isinstance(a, Assignment):
                raise InputError(f"jobs.{j}", a, "must be an Assignment")
        object.__setattr__(self, "jobs", MappingProxyType(dict(self.jobs)))

    @classmethod
    def empty(cls, instance: str) -> Schedule:
        return cls(instance, {})

    def __len__(self) -> int:
        return len(self.jobs)

    def gpus_on(self, node_id: str) -> int:
        return sum(a.nodes.get(node_id, 0) for a in self.jobs.values())

    @classmethod
    def from_dict(cls, d: Any) -> Schedule:
        """Parse the contract's schedule JSON; report fields (objective, ...) are read past, a
        field the contract does not have is refused (naming the closest one), and ``jobs`` is
        required (``{}``: nothing runs)."""
        if not isinstance(d, Mapping):
            raise InputError("schedule", d, "must be an object")
        _check_keys(d, SCHEDULE_KEYS, "a schedule")
        if "jobs" not in d:
            raise InputError("jobs", None, "is required: an object mapping job ids to assignments ({} when nothing runs)")
        jobs_in = d["jobs"]
        if not isinstance(jobs_in, Mapping):
            raise InputError("jobs", jobs_in, "must be an object mapping job ids to assignments")
        jobs = {}
        for j, a in jobs_in.items():
            if a is None:
                continue
            try:
                jobs[j] = Assignment.from_dict(a)
            except InputError as e:
                raise e.within(f"jobs.{j}") from None
        return cls(instance=instance_name(d), jobs=jobs)

    def to_dict(self) -> dict[str, Any]:
        return {"instance": self.instance, "jobs": {j: a.to_dict() for j, a in sorted(self.jobs.items())}}
