"""The round instance: immutable, validated-once types for nodes, jobs, profiles and rounds.

Each type validates itself at construction and refuses bad values with an
:class:`~optsched.errors.InputError` naming the field. ``from_dict`` parses the contract's JSON
(``docs/contract.md``) and prefixes errors with the JSON path (``jobs[3].demand``); ``to_dict``
writes it back. Use :func:`dataclasses.replace` to derive a modified, re-validated copy.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from optsched.errors import InputError

__all__ = ["CONTRACT_VERSION", "CONTRACT_VERSIONS", "FAIRNESS", "PACKING", "SPREAD_FROM", "Elastic", "cheapest_point", "Instance", "Job", "Node", "Profile",
           "Round"]

#: the version of the rounds built in Python (``Round()`` counts spread from the fewest nodes)
CONTRACT_VERSION = 3
#: every version this optsched reads; version 2 adds the optional policy fields (job ``tenant``,
#: ``deadline_s``, ``remaining_s``, ``elastic``; round ``tenants``, ``max_moves``, ``fairness``, ``packing``: formulations/policies.md)
#: and is written exactly when one of them is present; version 3 is version 2 with the spread
#: factor paid per node beyond the fewest a gang needs (``round.spread_from = "fewest"``)
CONTRACT_VERSIONS = (1, 2, 3)
#: the values of ``round.spread_from``: the spread factor is paid per node beyond the fewest nodes
#: of the type that hold the gang (``"fewest"``, version 3) or per node beyond one (``"one"``, versions 1 and 2)
SPREAD_FROM = ("fewest", "one")
#: the values of the version-2 field ``round.fairness``: dominant resource fairness across tenants
#: (``"drf"``) and HUG-style progress fairness over the actual, elastic allocation (``"hug"``)
FAIRNESS = ("drf", "hug")
#: the values of the version-2 field ``round.packing`` (Gandiva-style consolidation: formulations/policies.md)
PACKING = ("consolidate",)


# --- small readers shared by every from_dict: one place that decides what a valid field is ----


def _get(d: Mapping[str, Any], key: str, default: Any = ...) -> Any:
    if key in d:
        return d[key]
    if default is ...:
        raise InputError(key, None, "is required")
    return default


def _check_int(name: str, v: Any, lo: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(name, v, "must be an integer")
    if v < lo:
        raise InputError(name, v, f"must be >= {lo}")
    return v


def _check_float(name: str, v: Any, *, positive: bool = False, nonneg: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(name, v, "must be a number")
    x = float(v)
    if not math.isfinite(x):
        raise InputError(name, v, "must be finite")
    if positive and x <= 0:
        raise InputError(name, v, "must be > 0")
    if nonneg and x < 0:
        raise InputError(name, v, "must be >= 0")
    return x


def _check_str(name: str, v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise InputError(name, v, "must be a non-empty string")
    return v


def _check_mapping(name: str, v: Any) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise InputError(name, v, "must be an object")
    return v


def _check_list(name: str, v: Any) -> list[Any]:
    if not isinstance(v, (list, tuple)):
        raise InputError(name, v, "must be a list")
    return list(v)


def _check_version(v: Any) -> int:
    # the integer 1 exactly: true == 1 and 1.0 == 1 in Python, but neither is the JSON number 1
    if isinstance(v, bool) or not isinstance(v, int) or v not in CONTRACT_VERSIONS:
        raise InputError("version", v, f"unknown contract version (this optsched reads versions {list(CONTRACT_VERSIONS)})")
    return v


def _frozen_map(m: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return None if m is None else MappingProxyType(dict(m))


# --- types -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """A machine: ``gpus`` GPUs of one ``gpu_type``, ``cpus`` cores and ``mem_gb`` GB of memory."""

    id: str
    gpu_type: str
    gpus: int
    cpus: int
    mem_gb: int
    rack: str | None = None

    def __post_init__(self) -> None:
        _check_str("id", self.id)
        _check_str("gpu_type", self.gpu_type)
        _check_int("gpus", self.gpus)
        _check_int("cpus", self.cpus)
        _check_int("mem_gb", self.mem_gb)
        if self.rack is not None:
            _check_str("rack", self.rack)

    @classmethod
    def from_dict(cls, d: Any) -> Node:
        d = _check_mapping("", d)
        return cls(
            id=_get(d, "id"),
            gpu_type=_get(d, "gpu_type"),
            gpus=_get(d, "gpus"),
            cpus=_get(d, "cpus"),
            mem_gb=_get(d, "mem_gb"),
            rack=_get(d, "rack", None),
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "gpu_type": self.gpu_type,
            "gpus": self.gpus,
            "cpus": self.cpus,
            "mem_gb": self.mem_gb,
        }
        if self.rack is not None:
            d["rack"] = self.rack
        return d


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
        clean = []
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


@dataclass(frozen=True)
class Round:
    """Round settings: its length (restart costs are a share of it) and Synergy-style fairness.

    Version 2 adds ``tenants`` (tenant name -> guaranteed GPU quota), ``max_moves`` (at most
    this many running jobs change placement this round), ``fairness`` (``"drf"``: maximise the
    smallest dominant share across tenants first, then worth; ``"hug"``: the same with each
    tenant's progress along its correlated demand vector, counting the cores and GB it actually
    got) and ``packing`` (``"consolidate"``:
    among schedules within ``packing_tolerance`` of the best worth, keep the most GPUs on wholly
    idle nodes); see formulations/policies.md.

    ``spread_from`` says where a gang's spread factor starts: ``"fewest"`` (version 3, the
    default) pays it per node beyond the fewest nodes of the GPU type that can hold the gang,
    ``"one"`` (the meaning of versions 1 and 2) per node beyond one.
    """

    duration_s: float = 300.0
    fair: bool = False
    tenants: Mapping[str, int] | None = None
    max_moves: int | None = None
    fairness: str | None = None
    packing: str | None = None
    packing_tolerance: float | None = None  #: share of worth packing may give up, in [0, 1) (None: 0)
    spread_from: str = "fewest"  #: ``"fewest"`` (version 3) or ``"one"`` (versions 1 and 2): :data:`SPREAD_FROM`

    def __post_init__(self) -> None:
        object.__setattr__(self, "duration_s", _check_float("duration_s", self.duration_s, positive=True))
        if not isinstance(self.spread_from, str) or self.spread_from not in SPREAD_FROM:
            raise InputError("spread_from", self.spread_from, f"unknown spread rule; known: {list(SPREAD_FROM)}")
        if not isinstance(self.fair, bool):
            raise InputError("fair", self.fair, "must be true or false")
        if self.tenants is not None:
            ten = _check_mapping("tenants", self.tenants)
            clean = {}
            for name, q in ten.items():
                _check_str("tenants", name)
                clean[name] = _check_int(f"tenants.{name}.quota_gpus", q)
            object.__setattr__(self, "tenants", _frozen_map(clean))
        if self.max_moves is not None:
            _check_int("max_moves", self.max_moves)
        if self.fairness is not None and (not isinstance(self.fairness, str) or self.fairness not in FAIRNESS):
            raise InputError("fairness", self.fairness, f"unknown fairness policy; known: {list(FAIRNESS)}")
        if self.packing is not None and (not isinstance(self.packing, str) or self.packing not in PACKING):
            raise InputError("packing", self.packing, f"unknown packing policy; known: {list(PACKING)}")
        if self.packing_tolerance is not None:
            if self.packing is None:
                raise InputError("packing_tolerance", self.packing_tolerance, "applies only with round.packing")
            tol = _check_float("packing_tolerance", self.packing_tolerance, nonneg=True)
            if tol >= 1.0:
                raise InputError("packing_tolerance", self.packing_tolerance, "must be in [0, 1): the share of worth packing may give up")
            object.__setattr__(self, "packing_tolerance", tol)

    @property
    def uses_v2(self) -> bool:
        """Whether a version-2 field is set."""
        return self.tenants is not None or self.max_moves is not None or self.fairness is not None or self.packing is not None

    @classmethod
    def from_dict(cls, d: Any, version: int = CONTRACT_VERSION) -> Round:
        """The round of a ``version`` file: ``spread_from`` defaults to that version's meaning
        (``"one"`` for versions 1 and 2, ``"fewest"`` for version 3)."""
        d = _check_mapping("", d)
        tenants = _get(d, "tenants", None)
        if tenants is not None:
            tenants = dict(_check_mapping("tenants", tenants))
            for name, spec in tenants.items():
                spec = _check_mapping(f"tenants.{name}", spec)
                unknown = sorted(set(spec) - {"quota_gpus"})
                if unknown:
                    raise InputError(f"tenants.{name}", unknown, "unknown field(s); a tenant has quota_gpus")
                tenants[name] = _get(spec, "quota_gpus") if "quota_gpus" in spec else _missing(f"tenants.{name}.quota_gpus")
        return cls(duration_s=_get(d, "duration_s", 300.0), fair=_get(d, "fair", False), tenants=tenants,
                   max_moves=_get(d, "max_moves", None), fairness=_get(d, "fairness", None),
                   packing=_get(d, "packing", None), packing_tolerance=_get(d, "packing_tolerance", None),
                   spread_from=_get(d, "spread_from", "fewest" if version >= 3 else "one"))

    def to_dict(self) -> dict[str, Any]:
        """The round's JSON; ``spread_from`` is left out: the file's version says it."""
        d: dict[str, Any] = {"duration_s": self.duration_s, "fair": self.fair}
        if self.tenants is not None:
            d["tenants"] = {name: {"quota_gpus": q} for name, q in self.tenants.items()}
        if self.max_moves is not None:
            d["max_moves"] = self.max_moves
        if self.fairness is not None:
            d["fairness"] = self.fairness
        if self.packing is not None:
            d["packing"] = self.packing
        if self.packing_tolerance is not None:
            d["packing_tolerance"] = self.packing_tolerance
        return d


def _check_ranges(inst: Instance) -> None:
    """The numeric range every method computes with (:mod:`optsched.limits`), checked on read."""
    from optsched.limits import check_ranges

    check_ranges(inst)


def _missing(field_name: str) -> Any:
    raise InputError(field_name, None, "is required")


@dataclass(frozen=True)
class Instance:
    """One scheduling round: the cluster's nodes, the jobs to consider and the round settings."""

    name: str
    nodes: tuple[Node, ...]
    jobs: tuple[Job, ...]
    round: Round = field(default_factory=Round)
    version: int = CONTRACT_VERSION
    #: per GPU type, the running sums of node GPU counts (largest first) that kmin is taken over:
    #: ``None`` (the default) for this round's own nodes; a sub-round carries its parent's
    #: (:meth:`subround`), so that a gang is worth there what it is worth in the whole round
    _spread_over: Mapping[str, tuple[int, ...]] | None = field(default=None, repr=False, compare=False)
    _node_index: Mapping[str, int] = field(init=False, repr=False, compare=False)
    _job_index: Mapping[str, int] = field(init=False, repr=False, compare=False)
    _fewest_gpus: Mapping[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_version(self.version)
        _check_str("name", self.name)

        object.__setattr__(self, "nodes", tuple(_check_list("nodes", self.nodes)))
        object.__setattr__(self, "jobs", tuple(_check_list("jobs", self.jobs)))
        if not isinstance(self.round, Round):
            raise InputError("round", self.round, "must be a Round")
        node_index: dict[str, int] = {}
        for i, n in enumerate(self.nodes):
            if not isinstance(n, Node):
                raise InputError(f"nodes[{i}]", n, "must be a Node")
            if n.id in node_index:
                raise InputError(f"nodes[{i}].id", n.id, "duplicate node id")
            node_index[n.id] = i
        job_index: dict[str, int] = {}
        for i, j in enumerate(self.jobs):
            if not isinstance(j, Job):
                raise InputError(f"jobs[{i}]", j, "must be a Job")
            if j.id in job_index:
                raise InputError(f"jobs[{i}].id", j.id, "duplicate job id")
            job_index[j.id] = i
            for nid in (j.placement or {}):
                if nid not in node_index:
                    raise InputError(f"jobs[{i}].placement", nid, "names an unknown node id")
                t = self.nodes[node_index[nid]].gpu_type
                if j.speed(t) is None:
                    raise InputError(f"jobs[{i}].placement", nid, f"is a {t} node, which the job's gpu_speed does not allow")
            types = sorted({self.nodes[node_index[nid]].gpu_type for nid in (j.placement or {})})
            if len(types) > 1:  # no feasible schedule (rule 2) leaves a gang running like this
                raise InputError(f"jobs[{i}].placement", dict(j.placement or {}), f"spans GPU types {types}; a job runs on one type")
            if self.round.tenants is not None and j.tenant is not None and j.tenant not in self.round.tenants:
                raise InputError(f"jobs[{i}].tenant", j.tenant, f"is not one of round.tenants {sorted(self.round.tenants)}")
        _check_pinned_fit(self)
        if self.round.tenants is not None:
            if any(j.pinned for j in self.jobs):
                raise InputError("jobs.preemptible", False, "pinned jobs cannot be combined with round.tenants (reclaiming a quota preempts borrowers)")
            quota, gpus = sum(self.round.tenants.values()), sum(n.gpus for n in self.nodes)
            if quota > gpus:
                raise InputError("round.tenants", dict(self.round.tenants), f"guarantee {quota} GPUs in all; the cluster has {gpus}")
        # the version follows the content: 3 with the version-3 spread rule, else 2 exactly when a
        # version-2 field is set
        version = 3 if self.round.spread_from == "fewest" else 2 if self.uses_policies else 1
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "_node_index", MappingProxyType(node_index))
        object.__setattr__(self, "_job_index", MappingProxyType(job_index))
        if self._spread_over is None:
            per_type: dict[str, list[int]] = {}
            for n in self.nodes:
                per_type.setdefault(n.gpu_type, []).append(n.gpus)
            sums = {t: tuple(itertools.accumulate(sorted(g, reverse=True))) for t, g in per_type.items()}
        else:
            sums = {t: tuple(c) for t, c in self._spread_over.items()}
        object.__setattr__(self, "_fewest_gpus", MappingProxyType(sums))

    # --- lookups ---

    def node(self, node_id: str) -> Node:
        return self.nodes[self._node_index[node_id]]

    def job(self, job_id: str) -> Job:
        return self.jobs[self._job_index[job_id]]

    def node_idx(self, node_id: str) -> int:
        return self._node_index[node_id]

    def job_idx(self, job_id: str) -> int:
        return self._job_index[job_id]

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """The GPU types present, in order of first appearance."""
        return tuple(dict.fromkeys(n.gpu_type for n in self.nodes))

    @property
    def size(self) -> tuple[int, int]:
        """``(nodes, jobs)``."""
        return len(self.nodes), len(self.jobs)

    @property
    def uses_policies(self) -> bool:
        """Whether a version-2 field (a round policy, a job's policy field or an elastic gang) is set."""
        return self.round.uses_v2 or any(j.uses_v2 for j in self.jobs)

    # --- the spread rule (contract, "Worth") ---

    def fewest_nodes(self, gpu_type: str, gpus: int) -> int:
        """``kmin(t, g)``: the fewest nodes of ``gpu_type`` in the round whose GPU counts (largest
        first) add up to at least ``gpus``; 1 when one node holds them.

        It depends on the round's nodes, not on their free room. When the type's nodes cannot hold
        ``gpus`` at all (no placement exists) it is their number plus one.
        """
        return bisect_left(self._fewest_gpus.get(gpu_type, ()), gpus) + 1

    def spread_base(self, gpu_type: str, gpus: int) -> int:
        """The node count from which a gang of ``gpus`` GPUs of ``gpu_type`` pays its spread
        factor: its worth has ``spread_factor ** (k - spread_base)`` on ``k`` nodes. That is
        :meth:`fewest_nodes` under ``round.spread_from = "fewest"`` and 1 under ``"one"``."""
        return self.fewest_nodes(gpu_type, gpus) if self.round.spread_from == "fewest" else 1

    def subround(self, name: str, nodes: tuple[Node, ...], jobs: tuple[Job, ...], round: Round | None = None) -> Instance:
        """A round on (part of) this round's nodes and room that values every assignment as this
        round does: ``kmin`` stays taken over this round's nodes (LNS neighbourhoods, residual rounds)."""
        return Instance(name, nodes, jobs, self.round if round is None else round, _spread_over=self._fewest_gpus)

    # --- JSON ---

    @classmethod
    def from_dict(cls, d: Any) -> Instance:
        d = _check_mapping("instance", d)
        version = _check_version(_get(d, "version"))
        try:
            rnd = Round.from_dict(_get(d, "round", {}), version)
        except InputError as e:
            raise e.within("round") from None
        nodes = []
        for i, nd in enumerate(_check_list("nodes", _get(d, "nodes"))):
            try:
                nodes.append(Node.from_dict(nd))
            except InputError as e:
                raise e.within(f"nodes[{i}]") from None
        jobs = []
        for i, jd in enumerate(_check_list("jobs", _get(d, "jobs"))):
            try:
                jobs.append(Job.from_dict(jd))
            except InputError as e:
                raise e.within(f"jobs[{i}]") from None
        inst = cls(name=_get(d, "name"), nodes=tuple(nodes), jobs=tuple(jobs), round=rnd, version=version)
        if rnd.spread_from != ("fewest" if version >= 3 else "one"):
            why = ("version 3 counts spread from the fewest nodes; a round that counts it from one node is version 1 or 2" if version >= 3
                   else f"version {version} counts spread from one node; a round that counts it from the fewest nodes is version 3")
            raise InputError("round.spread_from", rnd.spread_from, why)
        if inst.version != version:
            why = "uses version-2 fields (tenant, deadline_s, remaining_s, elastic, preemptible, round.tenants, round.max_moves, round.fairness, round.packing)" if inst.version == 2 \
                else "declares version 2 but uses no version-2 field; write version 1"
            raise InputError("version", version, why)
        _check_ranges(inst)
        return inst

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "name": self.name,
            "round": self.round.to_dict(),
            "nodes": [n.to_dict() for n in self.nodes],
            "jobs": [j.to_dict() for j in self.jobs],
        }


def cheapest_point(job: Job, fair: bool) -> tuple[int, int]:
    """The grid point with the fewest cores, then the least memory (in a ``fair`` round, among
    the points at least as fast as the demand): where a pinned job can always be kept."""
    if not fair:
        return job.profile.cpus_per_gpu[0], job.profile.mem_per_gpu_gb[0]
    need = job.demand_throughput
    return min((c, m) for c, m, thr in job.profile.points() if thr >= need)


def _check_pinned_fit(inst: Instance) -> None:
    """The pinned jobs (``preemptible=False`` and running) must fit where they run at their
    cheapest points, so that the schedule keeping only them is feasible (the contract's promise
    that a feasible schedule always exists)."""
    used: dict[str, list[int]] = {}
    nodes = {n.id: n for n in inst.nodes}
    for j in inst.jobs:
        if not j.pinned:
            continue
        c, m = cheapest_point(j, inst.round.fair)
        for nid, k in (j.placement or {}).items():
            u = used.setdefault(nid, [0, 0, 0])
            u[0] += k
            u[1] += k * c
            u[2] += k * m
    for nid, (g, c, m) in used.items():
        node = nodes[nid]
        if g > node.gpus or c > node.cpus or m > node.mem_gb:
            raise InputError("jobs.preemptible", nid, f"the pinned jobs on node {nid} need {g} GPUs, {c} cores and {m} GB at their "
                             f"cheapest points; it has {node.gpus}, {node.cpus} and {node.mem_gb}")
