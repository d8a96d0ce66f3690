"""Shared test fixtures: the bundled instance library and a valid, feature-complete base round.

``library(name)`` loads ``instances/<class>/<name>.json[.gz]`` by name; ``base_round()`` is a
small valid round dict that uses every optional field of the contract, so that a test can break
exactly one thing in a fresh copy of it.

Property tests draw the same examples on every run (the ``repeatable`` hypothesis profile), so
that a run here and a run on a fresh clone agree. ``pytest --hypothesis-profile fuzz`` draws new
ones each run and keeps the failures it finds in ``.hypothesis/`` to replay them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from optsched.io import load_instance
from optsched.model import Instance

settings.register_profile("repeatable", derandomize=True, database=None, print_blob=True)
settings.register_profile("fuzz", derandomize=False, print_blob=True)
settings.load_profile("repeatable")

REPO = Path(__file__).parents[1]
INSTANCES = REPO / "instances"

#: two GPU types, a rack, a running split-able job with restart cost, speeds and a spread factor
BASE_ROUND: dict[str, Any] = {
    "version": 1,
    "name": "base",
    "round": {"duration_s": 300, "fair": False},
    "nodes": [
        {"id": "n0", "gpu_type": "V100", "gpus": 4, "cpus": 24, "mem_gb": 250, "rack": "r0"},
        {"id": "n1", "gpu_type": "V100", "gpus": 4, "cpus": 24, "mem_gb": 250, "rack": "r0"},
        {"id": "n2", "gpu_type": "P100", "gpus": 4, "cpus": 16, "mem_gb": 128},
    ],
    "jobs": [
        {"id": "j0", "gpus": 1,
         "profile": {"cpus_per_gpu": [1, 2], "mem_per_gpu_gb": [8], "throughput": [[1.0], [1.5]]},
         "demand": {"cpus_per_gpu": 1, "mem_per_gpu_gb": 8}},
        {"id": "j1", "gpus": 2, "weight": 0.5, "model": "resnet50",
         "profile": {"cpus_per_gpu": [1, 3, 6], "mem_per_gpu_gb": [16, 32],
                     "throughput": [[10.0, 11.0], [20.0, 22.0], [25.0, 26.0]]},
         "demand": {"cpus_per_gpu": 3, "mem_per_gpu_gb": 32}},
        {"id": "j2", "gpus": 4, "weight": 2.0, "model": "bert",
         "profile": {"cpus_per_gpu": [2, 4], "mem_per_gpu_gb": [16, 32],
                     "throughput": [[3.0, 4.0], [5.0, 6.0]]},
         "demand": {"cpus_per_gpu": 2, "mem_per_gpu_gb": 32},
         "gpu_speed": {"V100": 1.0, "P100": 0.55}, "spread_factor": 0.9,
         "placement": {"n0": 2, "n1": 2}, "restart_s": 60},
    ],
}


def base_round() -> dict[str, Any]:
    """A fresh deep copy of :data:`BASE_ROUND` (valid; tests mutate their copy)."""
    return copy.deepcopy(BASE_ROUND)


#: a mutation to this value deletes the key (:func:`mutated`)
MISSING = object()


def mutated(d: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A deep copy of the round ``d`` with the value at ``path`` replaced by ``value`` (deleted
    where ``value`` is :data:`MISSING`)."""
    d = copy.deepcopy(d)
    target = d
    for key in path[:-1]:
        target = target[key]
    if value is MISSING:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return d


@pytest.fixture
def base() -> dict[str, Any]:
    return base_round()


@pytest.fixture(scope="session")
def library() -> Callable[[str], Instance]:
    """``library("s-4n-12j-01")``: a bundled instance by name, from any size class."""

    def load(name: str) -> Instance:
        for path in sorted(INSTANCES.glob(f"*/{name}.json*")):
            return load_instance(path)
        raise FileNotFoundError(f"no bundled instance named {name!r} under {INSTANCES}")

    return load
