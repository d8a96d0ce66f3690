"""The cluster and the round: :class:`Node`, the round settings :class:`Round`, and the :class:`Instance`.

Immutable and validated once, like every contract type (:mod:`optsched.model` re-exports them).
``Instance.from_dict`` also checks the numeric range of :mod:`optsched.limits`.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from optsched.errors import InputError
from optsched.fields import (
    CONTRACT_VERSION,
    FAIRNESS,
    PACKING,
    SPREAD_FROM,
    _check_float,
    _check_int,
    _check_keys,
    _check_list,
    _check_mapping,
    _check_str,
    _check_version,
    _frozen_map,
    _get,
    gc_paused,
)
from optsched.job import Job, cheapest_point
from optsched.limits import check_ranges

__all__ = ["Instance", "Node", "Round"]


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
        _check_keys(d, _NODE_KEYS, "a node")
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
        _check_keys(d, _ROUND_KEYS, "the round")
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


#: the fields of a round file, its round settings and a node (:func:`optsched.fields._check_keys`)
_INSTANCE_KEYS = frozenset({"version", "name", "round", "nodes", "jobs"})
_ROUND_KEYS = frozenset({"duration_s", "fair", "tenants", "max_moves", "fairness", "packing", "packing_tolerance", "spread_from"})
_NODE_KEYS = frozenset({"id", "gpu_type", "gpus", "cpus", "mem_gb", "rack"})


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
    _gpu_types: tuple[str, ...] = field(init=False, repr=False, compare=False)

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
        # found once: callers ask per job (a 100,000-GPU round has 12,500 nodes and 50,000 jobs)
        object.__setattr__(self, "_gpu_types", tuple(dict.fromkeys(n.gpu_type for n in self.nodes)))
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
        return self._gpu_types

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
        with gc_paused():  # many objects, no reference cycles (fields.gc_paused)
            return cls._from_dict(d)

    @classmethod
    def _from_dict(cls, d: Any) -> Instance:
        d = _check_mapping("instance", d)
        _check_keys(d, _INSTANCE_KEYS, "a round file")
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
        check_ranges(inst)
        return inst

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "name": self.name,
            "round": self.round.to_dict(),
            "nodes": [n.to_dict() for n in self.nodes],
            "jobs": [j.to_dict() for j in self.jobs],
        }


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
