"""A job of the round contract: its throughput :class:`Profile`, its :class:`Elastic` range, the :class:`Job` itself.

Immutable and validated once, like every contract type (:mod:`optsched.model` re-exports them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from optsched.errors import InputError
from optsched.fields import _check_float, _check_int, _check_list, _check_mapping, _check_str, _frozen_map, _get

__all__ = ["Elastic", "Job", "Profile", "cheapest_point"]


@dataclass(frozen=True)
class Profile:
    """Throughput (samples/s on a speed-1.0 GPU, one node) on a CPU x memory grid per GPU.

    ``throughput[a][b]`` belongs to ``cpus_per_gpu[a]`` cores and ``mem_per_gpu_gb[b]`` GB.
    """

    cpus_per_gpu: tuple[int, ...]
    mem_per_gpu_gb: tuple[int, ...]
    throughput: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        for name in ("cpus_per_gpu", "mem_per_gpu_gb"):
            grid = tuple(_check_list(name, getattr(self, name)))
            if not grid:
                raise InputError(name, list(grid), "must not be empty")
            for i, v in enumerate(grid):
                _check_int(f"{name}[{i}]", v)
                if i and v <= grid[i - 1]:
                    raise InputError(f"{name}[{i}]", v, f"grid must be strictly increasing (after {grid[i - 1]})")
            object.__setattr__(self, name, grid)
        rows = _check_list("throughput", self.throughput)
        if len(rows) != len(self.cpus_per_gpu):
            raise InputError("throughput", f"{len(rows)} rows", f"must have {len(self.cpus_per_gpu)} rows (one per cpus_per_gpu level)")
        table = []
        for a, row in enumerate(rows):
            row = _check_list(f"throughput[{a}]", row)
            if len(row) != len(self.mem_per_gpu_gb):
                raise InputError(f"throughput[{a}]", f"{len(row)} values", f"must have {len(self.mem_per_gpu_gb)} values (one per mem_per_gpu_gb level)")
            table.append(tuple(_check_float(f"throughput[{a}][{b}]", v, positive=True) for b, v in enumerate(row)))
        object.__setattr__(self, "throughput", tuple(table))

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.cpus_per_gpu), len(self.mem_per_gpu_gb)

    def index(self, cpus_per_gpu: int, mem_per_gpu_gb: int) -> tuple[int, int]:
        """Grid indices of a point; ``KeyError`` when it is not on the grid."""
        try:
            return self.cpus_per_gpu.index(cpus_per_gpu), self.mem_per_gpu_gb.index(mem_per_gpu_gb)
        except ValueError:
            raise KeyError((cpus_per_gpu, mem_per_gpu_gb)) from None

    def at(self, cpus_per_gpu: int, mem_per_gpu_gb: int) -> float:
        a, b = self.index(cpus_per_gpu, mem_per_gpu_gb)
        return self.throughput[a][b]

    def points(self) -> list[tuple[int, int, float]]:
        """Every grid point as ``(cpus_per_gpu, mem_per_gpu_gb, throughput)``."""
        return [
            (c, m, self.throughput[a][b])
            for a, c in enumerate(self.cpus_per_gpu)
            for b, m in enumerate(self.mem_per_gpu_gb)
        ]

    @classmethod
    def from_dict(cls, d: Any) -> Profile:
        d = _check_mapping("", d)
        return cls(
            cpus_per_gpu=_get(d, "cpus_per_gpu"),
            mem_per_gpu_gb=_get(d, "mem_per_gpu_gb"),
            throughput=_get(d, "throughput"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpus_per_gpu": list(self.cpus_per_gpu),
            "mem_per_gpu_gb": list(self.mem_per_gpu_gb),
            "throughput": [list(r) for r in self.throughput],
        }


@dataclass(frozen=True)
class Elastic:
    """A version-2 elastic gang (Optimus, Pollux, Sia): the GPU counts a job may run with this
    round and its throughput at each, relative to its throughput at its nominal ``gpus``.

    ``gpus`` is strictly increasing; ``scaling[k]`` belongs to ``gpus[k]``, is > 0 and never
    decreases (a larger gang that is slower only wastes GPUs: leave that size out). The owning
    :class:`Job` checks that its nominal ``gpus`` is listed with the factor 1.0.
    """

    gpus: tuple[int, ...]
    scaling: tuple[float, ...]

    def __post_init__(self) -> None:
        sizes = tuple(_check_list("gpus", self.gpus))
        if not sizes:
            raise InputError("gpus", [], "must list at least one GPU count")
        for i, k in enumerate(sizes):
            _check_int(f"gpus[{i}]", k, lo=1)
            if i and k <= sizes[i - 1]:
                raise InputError(f"gpus[{i}]", k, f"GPU counts must be strictly increasing (after {sizes[i - 1]})")
        factors = _check_list("scaling", self.scaling)
        if len(factors) != len(sizes):
            raise InputError("scaling", list(factors), f"must have one factor per GPU count ({len(sizes)})")
        clean: list[float] = []
        for i, v in enumerate(factors):
            x = _check_float(f"scaling[{i}]", v, positive=True)
            if clean and x < clean[-1]:
                raise InputError(f"scaling[{i}]", v, f"must not decrease (after {clean[-1]:g} at {sizes[i - 1]} GPUs): "
                                                     "a larger gang that is slower is never worth its GPUs; leave that size out")
            clean.append(x)
        object.__setattr__(self, "gpus", sizes)
        object.__setattr__(self, "scaling", tuple(clean))

    def factor(self, gpus: int) -> float | None:
        """Throughput at ``gpus`` GPUs relative to the nominal size; ``None`` when not allowed."""
        try:
            return self.scaling[self.gpus.index(gpus)]
        except ValueError:
            return None

    @classmethod
    def from_dict(cls, d: Any) -> Elastic:
        d = _check_mapping("", d)
        unknown = sorted(set(d) - {"gpus", "scaling"})
        if unknown:
            raise InputError("", unknown, "unknown field(s); elastic has gpus and scaling")
        return cls(gpus=_get(d, "gpus"), scaling=_get(d, "scaling"))

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": list(self.gpus), "scaling": list(self.scaling)}


@dataclass(frozen=True)
class Job:
    """A gang of ``gpus`` GPUs to schedule this round, with its sensitivity profile.

    ``demand`` is the fixed per-GPU ``(cpus_per_gpu, mem_per_gpu_gb)`` a non-fungible scheduler
    would give. ``gpu_speed`` (``None``: every type at 1.0) lists the allowed GPU types.
    ``placement`` (``None``: not running) maps node ids to the GPUs the job holds there now.
    """

    id: str
    gpus: int
    profile: Profile
    demand: tuple[int, int]
    weight: float = 1.0
    model: str | None = None
    gpu_speed: Mapping[str, float] | None = None
    spread_factor: float = 1.0
    placement: Mapping[str, int] | None = None
    restart_s: float = 0.0
    #: version-2 policy fields (formulations/policies.md): quota owner, deadline and remaining work
    tenant: str | None = None
    deadline_s: float | None = None  #: seconds from the start of this round to the job's deadline
    remaining_s: float | None = None  #: run time left at the demand point on a speed-1.0 GPU, one node
    #: version-2 elastic gang: the GPU counts allowed and the throughput at each (``None``: exactly ``gpus``)
    elastic: Elastic | None = None
    #: version-2 queue semantics: ``False`` pins a running job (one with a ``placement``) to where
    #: it runs: every schedule keeps it there, at any grid point (formulations/policies.md, "Preemption")
    preemptible: bool = True

    def __post_init__(self) -> None:
        _check_str("id", self.id)
        _check_int("gpus", self.gpus, lo=1)
        if not isinstance(self.profile, Profile):
            raise InputError("profile", self.profile, "must be a Profile")
        object.__setattr__(self, "weight", _check_float("weight", self.weight, positive=True))
        if self.model is not None:
            _check_str("model", self.model)
        demand = _check_list("demand", self.demand)
        if len(demand) != 2:
            raise InputError("demand", self.demand, "must be (cpus_per_gpu, mem_per_gpu_gb)")
        c = _check_int("demand.cpus_per_gpu", demand[0])
        m = _check_int("demand.mem_per_gpu_gb", demand[1])
        if c not in self.profile.cpus_per_gpu:
            raise InputError("demand.cpus_per_gpu", c, f"is not on the profile grid {list(self.profile.cpus_per_gpu)}")
        if m not in self.profile.mem_per_gpu_gb:
            raise InputError("demand.mem_per_gpu_gb", m, f"is not on the profile grid {list(self.profile.mem_per_gpu_gb)}")
        object.__setattr__(self, "demand", (c, m))
        if self.gpu_speed is not None:
            speeds = _check_mapping("gpu_speed", self.gpu_speed)
            if not speeds:
                raise InputError("gpu_speed", dict(speeds), "must list at least one GPU type (omit it to allow all)")
            clean = {}
            for t, s in speeds.items():
                _check_str("gpu_speed", t)
                clean[t] = _check_float(f"gpu_speed.{t}", s, positive=True)
            object.__setattr__(self, "gpu_speed", _frozen_map(clean))
        sf = _check_float("spread_factor", self.spread_factor, positive=True)
        if sf > 1.0:
            raise InputError("spread_factor", self.spread_factor, "must be in (0, 1]")
        object.__setattr__(self, "spread_factor", sf)
        if self.elastic is not None:
            if not isinstance(self.elastic, Elastic):
                raise InputError("elastic", self.elastic, "must be an Elastic")
            if self.gpus not in self.elastic.gpus:
                raise InputError("elastic.gpus", list(self.elastic.gpus), f"must include the nominal gpus={self.gpus}")
            k = self.elastic.gpus.index(self.gpus)
            if self.elastic.scaling[k] != 1.0:
                raise InputError(f"elastic.scaling[{k}]", self.elastic.scaling[k],
                                 f"must be 1.0 at the nominal gpus={self.gpus} (factors are relative to it)")
        if self.placement is not None:
            place = _check_mapping("placement", self.placement)
            clean_p = {}
            for n, k in place.items():
                _check_str("placement", n)
                clean_p[n] = _check_int(f"placement.{n}", k, lo=1)
            if clean_p and sum(clean_p.values()) not in self.sizes:
                need = f"gpus={self.gpus}" if self.elastic is None else f"one of elastic.gpus {list(self.sizes)}"
                raise InputError("placement", dict(clean_p), f"must hold exactly {need} GPUs in total")
            object.__setattr__(self, "placement", _frozen_map(clean_p) if clean_p else None)
        object.__setattr__(self, "restart_s", _check_float("restart_s", self.restart_s, nonneg=True))
        if self.tenant is not None:
            _check_str("tenant", self.tenant)
        if self.deadline_s is not None:
            object.__setattr__(self, "deadline_s", _check_float("deadline_s", self.deadline_s, nonneg=True))
            if self.remaining_s is None:
                raise InputError("remaining_s", None, "is required with deadline_s (the work left decides whether the job must run now)")
        if self.remaining_s is not None:
            object.__setattr__(self, "remaining_s", _check_float("remaining_s", self.remaining_s, positive=True))
        if not isinstance(self.preemptible, bool):
            raise InputError("preemptible", self.preemptible, "must be true or false")
        if not self.preemptible and self.elastic is not None:
            raise InputError("preemptible", False, "cannot pin an elastic job (a size change is a restart); leave it preemptible")

    @property
    def uses_v2(self) -> bool:
        """Whether a version-2 field is set."""
        return (self.tenant is not None or self.deadline_s is not None or self.remaining_s is not None or self.elastic is not None
                or not self.preemptible)

    @property
    def pinned(self) -> bool:
        """A running job that may not be preempted or moved this round (``preemptible=False``)."""
        return not self.preemptible and self.placement is not None

    # --- derived quantities used everywhere ---

    @property
    def sizes(self) -> tuple[int, ...]:
        """The GPU counts the job may run with: ``elastic.gpus``, or just ``(gpus,)``."""
        return (self.gpus,) if self.elastic is None else self.elastic.gpus

    def scaling(self, gpus: int) -> float | None:
        """Throughput at ``gpus`` GPUs relative to the nominal ``gpus`` (1.0 there); ``None``
        when the job may not run with that many."""
        if self.elastic is None:
            return 1.0 if gpus == self.gpus else None
        return self.elastic.factor(gpus)

    @property
    def demand_throughput(self) -> float:
        return self.profile.at(*self.demand)

    @property
    def running(self) -> bool:
        return self.placement is not None

    def speed(self, gpu_type: str) -> float | None:
        """Speed factor on ``gpu_type``, or ``None`` when the job may not use that type."""
        if self.gpu_speed is None:
            return 1.0
        return self.gpu_speed.get(gpu_type)

    @classmethod
    def from_dict(cls, d: Any) -> Job:
        d = _check_mapping("", d)
        raw_profile = _get(d, "profile")
        try:
            profile = Profile.from_dict(raw_profile)
        except InputError as e:
            raise e.within("profile") from None
        demand = _check_mapping("demand", _get(d, "demand"))
        elastic = _get(d, "elastic", None)
        if elastic is not None:
            try:
                elastic = Elastic.from_dict(elastic)
            except InputError as e:
                raise e.within("elastic") from None
        return cls(
            id=_get(d, "id"),
            gpus=_get(d, "gpus"),
            profile=profile,
            demand=(_get(demand, "cpus_per_gpu"), _get(demand, "mem_per_gpu_gb")) if _has_both(demand) else _missing_demand(demand),
            weight=_get(d, "weight", 1.0),
            model=_get(d, "model", None),
            gpu_speed=_get(d, "gpu_speed", None),
            spread_factor=_get(d, "spread_factor", 1.0),
            placement=_get(d, "placement", None),
            restart_s=_get(d, "restart_s", 0.0),
            tenant=_get(d, "tenant", None),
            deadline_s=_get(d, "deadline_s", None),
            remaining_s=_get(d, "remaining_s", None),
            elastic=elastic,
            preemptible=_get(d, "preemptible", True),
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "gpus": self.gpus, "weight": self.weight}
        if self.model is not None:
            d["model"] = self.model
        d["profile"] = self.profile.to_dict()
        d["demand"] = {"cpus_per_gpu": self.demand[0], "mem_per_gpu_gb": self.demand[1]}
        if self.gpu_speed is not None:
            d["gpu_speed"] = dict(self.gpu_speed)
        if self.spread_factor != 1.0:
            d["spread_factor"] = self.spread_factor
        if self.placement is not None:
            d["placement"] = dict(self.placement)
        if self.restart_s:
            d["restart_s"] = self.restart_s
        for key in ("tenant", "deadline_s", "remaining_s"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        if self.elastic is not None:
            d["elastic"] = self.elastic.to_dict()
        if not self.preemptible:
            d["preemptible"] = False
        return d


def _has_both(demand: Mapping[str, Any]) -> bool:
    return "cpus_per_gpu" in demand and "mem_per_gpu_gb" in demand


def _missing_demand(demand: Mapping[str, Any]) -> tuple[int, int]:
    key = "cpus_per_gpu" if "cpus_per_gpu" not in demand else "mem_per_gpu_gb"
    raise InputError(f"demand.{key}", None, "is required")


def cheapest_point(job: Job, fair: bool) -> tuple[int, int]:
    """The grid point with the fewest cores, then the least memory (in a ``fair`` round, among
    the points at least as fast as the demand): where a pinned job can always be kept."""
    if not fair:
        return job.profile.cpus_per_gpu[0], job.profile.mem_per_gpu_gb[0]
    need = job.demand_throughput
    return min((c, m) for c, m, thr in job.profile.points() if thr >= need)
