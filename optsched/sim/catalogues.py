"""The model catalogue a simulation uses: what the simulator needs of one (:class:`Catalogue`),
the library's (:func:`default_catalogue`, :mod:`optsched.catalogue`), and matching the model
names a trace spells against the catalogue in use (:class:`ModelNames`).

The trace loaders (:mod:`optsched.sim.traces`) and :func:`optsched.sim.workload.build_workload`
match names the same way, against the catalogue they are given, so a custom catalogue's models
can be named in a trace file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from optsched import catalogue as library_catalogue
from optsched.model import Profile

__all__ = ["Catalogue", "ModelNames", "default_catalogue"]


class Catalogue(Protocol):
    """What the simulator needs from a model catalogue (``optsched.catalogue`` provides it).

    ``MODELS`` holds the model names (a collection, or a mapping keyed by them); a catalogue may
    also have ``ALIASES``, other names for its models (``{"res18": "resnet18"}``)."""

    MODELS: Any

    def profile(self, model: str, gpus: int) -> Profile: ...

    def demand(self, model: str, gpus: int) -> tuple[int, int]: ...

    def gpu_speeds(self, model: str, gpu_types: Sequence[str]) -> Mapping[str, float]: ...

    def sample_models(self, rng: np.random.Generator, n: int, mix: Any = None) -> Sequence[str]: ...


def default_catalogue() -> Catalogue:
    """The library's model catalogue (:mod:`optsched.catalogue`)."""
    return library_catalogue


class ModelNames:
    """The model names of ``catalogue`` (default: :func:`default_catalogue`) and how a name is
    matched to one: :func:`optsched.catalogue.match_model` with the catalogue's ``ALIASES`` (where
    it has them) and ``aliases``, other names whose targets are the catalogue's names (a
    :class:`~optsched.sim.csv_schema.CsvSchema`'s ``models``, consulted first). A catalogue that
    lists no models takes every name as it is. Each name is matched once (a trace names few
    models, many times)."""

    def __init__(self, catalogue: Catalogue | None = None, aliases: Mapping[str, str] | None = None) -> None:
        cat = catalogue if catalogue is not None else default_catalogue()
        self.models: frozenset[str] = frozenset(getattr(cat, "MODELS", None) or ())
        self.aliases: dict[str, str] = {**(getattr(cat, "ALIASES", None) or {}), **(aliases or {})}
        self._matched: dict[str, str] = {}

    def match(self, name: str) -> str:
        """The catalogue's name for ``name``; one that matches no model, or several, raises
        :class:`~optsched.errors.InputError` (field ``model``) listing the close names and the known ones."""
        if name not in self._matched:
            self._matched[name] = library_catalogue.match_model(name, self.models, self.aliases) if self.models else name
        return self._matched[name]
