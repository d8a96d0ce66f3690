"""The single registry of solve methods: name -> family, summary, and where the class lives.

A method is a class with one method, ``solve(instance, *, time_limit, seed, hint, **options)
-> Result``, and its options are a typed class (:class:`optsched.options.MethodOptions`;
:class:`~optsched.options.NoOptions` for a method that takes none), through which
``solve_round`` validates them before the method runs. Built-in methods and their options are
listed here by import path so that importing optsched stays cheap (OR-Tools, PuLP and torch load
only when a method that needs them runs). Unknown names
raise :class:`~optsched.errors.InputError` listing the known ones; nothing falls back silently.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol

from optsched.errors import InputError
from optsched.model import Instance
from optsched.options import MethodOptions
from optsched.result import Result
from optsched.schedule import Schedule

__all__ = ["FAMILIES", "MethodInfo", "Solver", "get_method", "methods", "register_method"]

#: method families accepted by ``solve_round(method=...)``, besides ``"auto"``
FAMILIES = ("exact", "heuristic", "learned")


class Solver(Protocol):
    def solve(
        self, instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None, **options: Any
    ) -> Result: ...


@dataclass(frozen=True)
class MethodInfo:
    name: str
    family: str
    summary: str
    target: str  #: "module:Class"
    takes_hint: bool = False
    default: bool = False  #: the family's default solver
    #: the contract-v2 policy families it honours (round_policies.FAMILIES); solve_round refuses others
    policies: tuple[str, ...] = ()
    #: its options class, "module:Class" (a subclass of optsched.options.MethodOptions)
    options: str = "optsched.options:NoOptions"

    def load(self) -> type[Solver]:
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def options_class(self) -> type[MethodOptions]:
        """The method's options class (imports its module, which imports no solver backend)."""
        module, _, attr = self.options.partition(":")
        cls = getattr(importlib.import_module(module), attr)
        if not (isinstance(cls, type) and issubclass(cls, MethodOptions)):
            raise InputError("options", self.options, f"the options of {self.name} are not a MethodOptions class")
        return cls

    def to_dict(self) -> dict[str, Any]:
        """Name, family, summary, flags, policies, and its options (:meth:`MethodOptions.describe`)."""
        return {"name": self.name, "family": self.family, "summary": self.summary, "takes_hint": self.takes_hint, "default": self.default,
                "policies": list(self.policies), "options": [o.to_dict() for o in self.options_class().describe()]}


_METHODS: dict[str, MethodInfo] = {}


def register_method(
    name: str, family: str, summary: str, target: str, *, takes_hint: bool = False, default: bool = False,
    policies: tuple[str, ...] = (), options: str = "optsched.options:NoOptions",
) -> MethodInfo:
    """Add a method (``target`` = ``"module:Class"``; ``options`` = ``"module:Class"`` of its
    :class:`~optsched.options.MethodOptions`, default none). Names are unique; families are fixed."""
    if family not in FAMILIES:
        raise InputError("family", family, f"must be one of {list(FAMILIES)}")
    if name in _METHODS or name in FAMILIES or name == "auto":
        raise InputError("name", name, "is already registered")
    if default and any(m.default and m.family == family for m in _METHODS.values()):
        raise InputError("default", name, f"family {family!r} already has a default solver")
    info = MethodInfo(name, family, summary, target, takes_hint, default, tuple(policies), options)
    _METHODS[name] = info
    return info


def get_method(name: str) -> MethodInfo:
    try:
        return _METHODS[name]
    except (KeyError, TypeError):
        raise InputError("solver", name, f"unknown solver; known: {sorted(_METHODS)}") from None


def family_default(family: str) -> MethodInfo:
    for m in _METHODS.values():
        if m.family == family and m.default:
            return m
    raise InputError("method", family, f"no solver of this family is available; known methods: {['auto', *FAMILIES]}")


def methods(family: str | None = None) -> list[MethodInfo]:
    return [m for m in _METHODS.values() if family is None or m.family == family]


# --- built-in methods ----------------------------------------------------------------------------
#: the families the shared MIP description models (optsched.mip.description.MIP_FAMILIES; checked by a test)
_MIP_POLICIES = ("elastic", "max_moves", "quotas")
_ALL_POLICIES = ("quotas", "max_moves", "deadlines", "elastic", "packing", "drf", "hug", "preemption")
register_method(
    "cpsat", "exact", "Integrated formulation solved by OR-Tools CP-SAT (proven bounds)",
    "optsched.exact.cpsat:CpSatSolver", takes_hint=True, default=True, policies=_ALL_POLICIES,
    options="optsched.exact.options:CpsatOptions",
)
register_method(
    "fixed-demand", "heuristic", "Two-stage baseline: weight order, fixed per-GPU demand, best fit",
    "optsched.heuristics.fixed_demand:FixedDemand", policies=_ALL_POLICIES,
)
register_method(
    "fungible-greedy", "heuristic", "Synergy-TUNE style: place, then give leftover CPU/memory by marginal gain",
    "optsched.heuristics.fungible_greedy:FungibleGreedy", policies=_ALL_POLICIES,
)
register_method(
    "lns", "heuristic", "CP-SAT large-neighbourhood search from greedy and price-guided starts",
    "optsched.heuristics.lns:LargeNeighbourhoodSearch", takes_hint=True, default=True, policies=_ALL_POLICIES,
    options="optsched.heuristics.options:LnsOptions",
)
register_method(
    "partitioned", "heuristic", "POP-style parts solved in parallel by lns, re-balanced by prices, repaired across parts",
    "optsched.partition.solver:PartitionedSolver", takes_hint=True, policies=("preemption",),
    options="optsched.partition.options:PartitionedOptions",
)
register_method(
    "scip", "exact", "The shared MIP description solved by OR-Tools MPSolver with SCIP",
    "optsched.mip.solvers:ScipSolver", takes_hint=True, policies=_MIP_POLICIES,
    options="optsched.mip.options:MipOptions",
)
register_method(
    "cbc", "exact", "The shared MIP description solved by OR-Tools MPSolver with CBC (ignores hints)",
    "optsched.mip.solvers:CbcSolver", policies=_MIP_POLICIES,
    options="optsched.mip.options:MipOptions",
)
register_method(
    "pulp", "exact", "The shared MIP description solved by PuLP's bundled CBC",
    "optsched.mip.solvers:PulpSolver", policies=_MIP_POLICIES,
    options="optsched.mip.options:MipOptions",
)
register_method(
    "maifs", "learned", "MAIFS-style attention policy distilled from exact solutions, repaired to feasibility",
    "optsched.learned.solver:LearnedSolver", takes_hint=True, default=True,
    options="optsched.learned.options:MaifsOptions",
)
