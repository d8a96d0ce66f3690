"""A job of the round contract: its throughput :class:`Profile`, its :class:`Elastic` range, the :class:`Job` itself.

Immutable and validated once, like every contract type (:mod:`optsched.model` re-exports them).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from optsched.errors import InputError
from optsched.fields import (
    _check_float,
    _check_int,
    _check_keys,
    _check_list,
    _check_mapping,
    _check_str,
    _frozen_map,
    _get,
)

__all__ = ["Elastic", "Job", "Profile", "cheapest_point", "fair_floor"]


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

    def __hash__(self) -> int:
        """The fields' hash, computed once (profiles key many per-round caches)."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.cpus_per_gpu, self.mem_per_gpu_gb, self.throughput))
            object.__setattr__(self, "_hash", h)
        return h

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
        """Every grid point as ``(cpus_per_gpu, mem_per_gpu_gb, throughput)`` (a new list; the
        points are built once per profile)."""
        pts = self.__dict__.get("_points")
        if pts is None:
            pts = tuple((c, m, self.throughput[a][b]) for a, c in enumerate(self.cpus_per_gpu)
                        for b, m in enumerate(self.mem_per_gpu_gb))
            object.__setattr__(self, "_points", pts)
        return list(pts)

    def allowed(self, floor: float) -> list[tuple[int, int, float]]:
        """The grid points at least ``floor`` fast (:func:`fair_floor`), as :meth:`points` lists them."""
        return [p for p in self.points() if p[2] >= floor]

    def frontier(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The grid points no other point dominates, as read-only arrays of cores per GPU, GB per
        GPU and throughput: of positive throughput, and no other point needs no more of either
        resource and is at least as fast (one of equal points is kept). Built once per profile."""
        out = self.__dict__.get("_frontier")
        if out is None:
            pts = self.points()
            c = np.array([p[0] for p in pts], dtype=np.int64)
            m = np.array([p[1] for p in pts], dtype=np.int64)
            thr = np.array([p[2] for p in pts], dtype=np.float64)
            positive = thr > 0
            c, m, thr = c[positive], m[positive], thr[positive]
            no_more = (c[None, :] <= c[:, None]) & (m[None, :] <= m[:, None]) & (thr[None, :] >= thr[:, None])
            better = (c[None, :] < c[:, None]) | (m[None, :] < m[:, None]) | (thr[None, :] > thr[:, None])
            front = np.logical_not((no_more & better).any(axis=1))
            out = (c[front], m[front], thr[front])
            for a in out:
                a.setflags(write=False)
            object.__setattr__(self, "_frontier", out)
        return out

    def best_within(self, cpus_per_gpu: float, mem_per_gpu_gb: float) -> float:
        """The highest throughput over the grid points of at most ``cpus_per_gpu`` cores and
        ``mem_per_gpu_gb`` GB per GPU; 0.0 when no point is that small. A lookup in a table of
        prefix maxima built once per profile (the grids are increasing, so the points that fit
        are a rectangle at the grid's origin)."""
        table = self.__dict__.get("_prefix_max")
        if table is None:
            rows: list[tuple[float, ...]] = []
            for a, row in enumerate(self.throughput):
                run = list(itertools.accumulate(row, max))
                rows.append(tuple(run) if not a else tuple(max(x, y) for x, y in zip(run, rows[-1], strict=True)))
            table = tuple(rows)
            object.__setattr__(self, "_prefix_max", table)
        a = bisect.bisect_right(self.cpus_per_gpu, cpus_per_gpu)
        b = bisect.bisect_right(self.mem_per_gpu_gb, mem_per_gpu_gb)
        return table[a - 1][b - 1] if a and b else 0.0

    @classmethod
    def from_dict(cls, d: Any) -> Profile:
        """The profile of a JSON object; one equal to an object read before is that same, already
        validated :class:`Profile` (:func:`_profile_key`), so jobs of one model share theirs."""
        key = _profile_key(d)
        if key is not None:
            known = _PROFILES.get(key)
            if known is not None:
                return known
        d = _check_mapping("", d)
        _check_keys(d, _PROFILE_KEYS, "a profile")
        profile = cls(
            cpus_per_gpu=_get(d, "cpus_per_gpu"),
            mem_per_gpu_gb=_get(d, "mem_per_gpu_gb"),
            throughput=_get(d, "throughput"),
        )
        if key is not None:
            if len(_PROFILES) >= _PROFILES_MAX:
                _PROFILES.clear()
            _PROFILES[key] = profile
        return profile

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpus_per_gpu": list(self.cpus_per_gpu),
            "mem_per_gpu_gb": list(self.mem_per_gpu_gb),
            "throughput": [list(r) for r in self.throughput],
        }


#: the profiles read so far, by :func:`_profile_key`: a round repeats a few dozen profiles (one
#: per model and gang size) over thousands of jobs, and each is validated and stored once
_PROFILES: dict[tuple[Any, ...], Profile] = {}
#: the cache is emptied when it holds this many profiles
_PROFILES_MAX = 4096
_LIST, _INT, _NUMBER, _STR = frozenset({list}), frozenset({int}), frozenset({int, float}), frozenset({str})


def _profile_key(d: Any) -> tuple[Any, ...] | None:
    """A hashable key for a profile object of plain JSON: a dict whose grids are lists of exact
    ``int`` and whose ``throughput`` is a list of lists of exact ``int`` or ``float``; ``None`` for
    any other object (a bool, a string, a missing field: it is validated afresh).

    Two objects with the same key are valid or invalid together and give equal profiles: Python
    compares ``int`` and ``float`` exactly, a throughput is stored as its ``float`` either way, and
    the grids hold integers only (``True == 1`` is what the exact types keep out).
    """
    if type(d) is not dict or len(d) != 3:  # a field missing or one too many: read (and refused) in full
        return None
    cpus, mems, rows = d.get("cpus_per_gpu"), d.get("mem_per_gpu_gb"), d.get("throughput")
    if type(cpus) is not list or type(mems) is not list or type(rows) is not list or not _LIST.issuperset(map(type, rows)):
        return None
    if not (_INT.issuperset(map(type, cpus)) and _INT.issuperset(map(type, mems))
            and _NUMBER.issuperset(map(type, itertools.chain.from_iterable(rows)))):
        return None
    return tuple(cpus), tuple(mems), tuple(map(tuple, rows))


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
    _factor: Mapping[int, float] = field(init=False, repr=False, compare=False)  #: size -> factor

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
        object.__setattr__(self, "_factor", dict(zip(sizes, clean, strict=True)))

    def factor(self, gpus: int) -> float | None:
        """Throughput at ``gpus`` GPUs relative to the nominal size; ``None`` when not allowed."""
        return self._factor.get(gpus)

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
            object.__setattr__(self, "gpu_speed", _shared_speeds(clean))
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
        """The profile's throughput at the job's demand (looked up once per job)."""
        value = self.__dict__.get("_demand_throughput")
        if value is None:
            value = self.profile.at(*self.demand)
            object.__setattr__(self, "_demand_throughput", value)
        return value

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
        """The job of a JSON object. A plain one (:func:`_plain_job`) is read without the
        field-by-field checks it passes anyway; any other is checked field by field, and the first
        bad field is named."""
        plain = _plain_job(d) if cls is Job else None
        if plain is not None:
            return plain
        d = _check_mapping("", d)
        _check_keys(d, _JOB_KEYS, "a job")
        raw_profile = _get(d, "profile")
        try:
            profile = Profile.from_dict(raw_profile)
        except InputError as e:
            raise e.within("profile") from None
        demand = _check_mapping("demand", _get(d, "demand"))
        try:
            _check_keys(demand, _DEMAND_KEYS, "a demand")
        except InputError as e:
            raise e.within("demand") from None
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


#: the fields of a job, its profile and its demand (:func:`optsched.fields._check_keys`)
_JOB_KEYS = frozenset({"id", "gpus", "weight", "model", "profile", "demand", "gpu_speed", "spread_factor", "placement", "restart_s",
                       "tenant", "deadline_s", "remaining_s", "elastic", "preemptible"})
_PROFILE_KEYS = frozenset({"cpus_per_gpu", "mem_per_gpu_gb", "throughput"})
_DEMAND_KEYS = frozenset({"cpus_per_gpu", "mem_per_gpu_gb"})
#: the fields a plain job object may have (the version-2 fields take the full reading)
_PLAIN_KEYS = frozenset({"id", "gpus", "weight", "model", "profile", "demand", "gpu_speed", "spread_factor", "placement", "restart_s"})


def _plain_float(v: Any) -> float | None:
    """``float(v)`` for an ``int`` or a finite ``float`` (not a bool), else ``None``."""
    if type(v) is float:
        return v if math.isfinite(v) else None
    if type(v) is int:
        try:
            return float(v)
        except OverflowError:
            return None
    return None


def _plain_job(d: Any) -> Job | None:
    """The :class:`Job` of a JSON object that is plainly valid, built without re-checking it;
    ``None`` for any other object, which :meth:`Job.from_dict` reads field by field.

    Plain: a dict with no field beyond :data:`_PLAIN_KEYS`, whose profile was read before
    (:func:`_profile_key`), whose every field is of its exact JSON type (``int``, ``float``,
    ``str``, ``dict``; never a bool where a number is due) and passes the checks of
    :meth:`Job.__post_init__` (which stay the one statement of the rules: whatever this function
    cannot vouch for goes there, and a job it builds equals the one ``__post_init__`` would, field
    by field and type by type; tests/test_read_path.py holds it to both).
    """
    if type(d) is not dict or not _PLAIN_KEYS.issuperset(d):
        return None
    jid, gpus, demand, model = d.get("id"), d.get("gpus"), d.get("demand"), d.get("model")
    if type(jid) is not str or not jid or type(gpus) is not int or gpus < 1 or type(demand) is not dict or len(demand) != 2:
        return None
    if model is not None and (type(model) is not str or not model):
        return None
    key = _profile_key(d.get("profile"))
    profile = None if key is None else _PROFILES.get(key)
    if profile is None:  # the first job with this profile takes the full reading, which keeps it
        return None
    c, m = demand.get("cpus_per_gpu"), demand.get("mem_per_gpu_gb")
    if type(c) is not int or type(m) is not int or c not in profile.cpus_per_gpu or m not in profile.mem_per_gpu_gb:
        return None
    weight, spread, restart = _plain_float(d.get("weight", 1.0)), _plain_float(d.get("spread_factor", 1.0)), _plain_float(d.get("restart_s", 0.0))
    if weight is None or weight <= 0.0 or spread is None or not 0.0 < spread <= 1.0 or restart is None or restart < 0.0:
        return None
    speeds = d.get("gpu_speed")
    if speeds is not None:
        if type(speeds) is not dict or not speeds:
            return None
        clean = {}
        for t, v in speeds.items():
            x = _plain_float(v)
            if type(t) is not str or not t or x is None or x <= 0.0:
                return None
            clean[t] = x
        speeds = _shared_speeds(clean)
    place = d.get("placement")
    if place is not None:
        if type(place) is not dict or not place or not _STR.issuperset(map(type, place)) or not _INT.issuperset(map(type, place.values())):
            return None
        if not all(place) or min(place.values()) < 1 or sum(place.values()) != gpus:
            return None
        place = MappingProxyType(dict(place))
    job = object.__new__(Job)
    vars(job).update(id=jid, gpus=gpus, profile=profile, demand=(c, m), weight=weight, model=model, gpu_speed=speeds,
                     spread_factor=spread, placement=place, restart_s=restart, tenant=None, deadline_s=None,
                     remaining_s=None, elastic=None, preemptible=True)
    return job


#: the ``gpu_speed`` maps read so far, by content: jobs of one model share one (callers memoise
#: per map object: :meth:`optsched.heuristics.common.Cluster.allowed_types`)
_SPEEDS: dict[tuple[tuple[str, float], ...], Mapping[str, float]] = {}


def _shared_speeds(clean: dict[str, float]) -> Mapping[str, float]:
    """The read-only map of validated speeds ``clean`` (type -> float), shared with every equal one."""
    key = tuple(clean.items())
    known = _SPEEDS.get(key)
    if known is None:
        if len(_SPEEDS) >= _PROFILES_MAX:
            _SPEEDS.clear()
        known = _SPEEDS[key] = MappingProxyType(clean)
    return known


def _has_both(demand: Mapping[str, Any]) -> bool:
    return "cpus_per_gpu" in demand and "mem_per_gpu_gb" in demand


def _missing_demand(demand: Mapping[str, Any]) -> tuple[int, int]:
    key = "cpus_per_gpu" if "cpus_per_gpu" not in demand else "mem_per_gpu_gb"
    raise InputError(f"demand.{key}", None, "is required")


def fair_floor(job: Job, fair: bool) -> float:
    """The least throughput a grid point of ``job`` may have in a round (contract rule 5): in a
    ``fair`` round its demand's, else ``-inf``. Every method compares ``throughput >= floor`` as
    the checker does, with no tolerance: a point slower by a rounding error is not allowed."""
    return job.demand_throughput if fair else -math.inf


def cheapest_point(job: Job, fair: bool) -> tuple[int, int]:
    """The grid point with the fewest cores, then the least memory (in a ``fair`` round, among
    the points at least as fast as the demand): where a pinned job can always be kept."""
    if not fair:
        return job.profile.cpus_per_gpu[0], job.profile.mem_per_gpu_gb[0]
    return min((c, m) for c, m, _ in job.profile.allowed(fair_floor(job, fair)))
