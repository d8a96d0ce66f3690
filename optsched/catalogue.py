"""The model catalogue: resource-sensitivity profiles of twelve DNN training jobs.

Each model has a small *parametric* throughput shape, calibrated to the profiles that
Synergy's profiler measured (Mohan et al., "Looking Beyond GPUs for DNN Scheduling on
Multi-Tenant Clusters", OSDI'22; the measurements ship with Synergy's simulator,
github.com/msr-fiddle/synergy, MIT License, Copyright Microsoft Corporation). The measured
tables themselves are *not* part of optsched; only the fitted parameters below are, and
``calibration_report`` re-measures the fit against the tables when they are at hand
(docs/catalogue.md lists the errors).

The shape is a data pipeline whose speed is the slowest of three stages (per GPU, relative to
the speed at Synergy's fair share of 3 cores and 62 GB per GPU)::

    cpu(c)  = cpu_at_1 * c ** cpu_exponent                 # pre-processing on c cores
    io(m)   = io_floor                   if m <  cache_min_gb   # cache thrashes: disk-bound
            = io_at_fair + io_per_gb * (m - 62)   if m <  dataset_gb  # partly cached
            = unbounded                  if m >= dataset_gb     # whole data set cached
    rate(c, m) = min(cpu(c), io(m), gpu_cap) / min(cpu(3), io(62), gpu_cap)

Language models and the VAE have no CPU or memory stage (``cpu_at_1 = None``): they are
GPU-bound and flat, as measured. Absolute throughput (samples/s) is ``gpus x batch /
iter_time_s x rate``: linear data-parallel scaling inside a node (cross-node loss is the
job's ``spread_factor``, set by whoever builds the round).

Memory levels are integers: Synergy's 20.83, 62.5, 125, 187.5 and 250 GB per GPU become 21,
62, 125, 187 and 250 in one place, :func:`round_mem_gb` (half-integers round *down*, so a
fair share of 8 x 62 GB fits a 500 GB server).
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from optsched.errors import InputError
from optsched.limits import share_total
from optsched.model import Profile

__all__ = [
    "ALIASES",
    "CPU_GRIDS",
    "FAIR_SHARE",
    "FAMILIES",
    "GPU_SPEEDS",
    "UNDISCLOSED_GPUS",
    "GRIDS",
    "MEM_GRIDS",
    "MODELS",
    "DEFAULT_MIX",
    "ModelSpec",
    "calibration_report",
    "canonical_model",
    "demand",
    "gpu_speeds",
    "match_model",
    "model_key",
    "model_spec",
    "profile",
    "round_mem_gb",
    "sample_models",
]

FAMILIES = ("image", "audio", "language", "other")

#: Synergy's fair share per GPU: 3 cores and 62.5 GB (rounded to 62) -- the fixed demand.
FAIR_SHARE: tuple[int, int] = (3, 62)

#: Synergy's measured memory levels (GB per GPU), before rounding.
SYNERGY_MEM_LEVELS = (20.83, 62.5, 125.0, 187.5, 250.0)


def round_mem_gb(gb: float) -> int:
    """The one place where memory levels become integers: nearest GB, halves rounded down."""
    return int(math.ceil(gb - 0.5))


#: cores per GPU on each grid; every grid holds the fair share's 3
CPU_GRIDS: Mapping[str, tuple[int, ...]] = MappingProxyType({
    "full": (1, 2, 3, 4, 5, 6, 9, 12, 24),
    "coarse": (1, 2, 3, 6, 12),
    "minimal": (1, 3, 6),
})
#: GB per GPU on each grid; every grid holds the fair share's 62
MEM_GRIDS: Mapping[str, tuple[int, ...]] = MappingProxyType({
    "full": tuple(round_mem_gb(g) for g in SYNERGY_MEM_LEVELS),  # (21, 62, 125, 187, 250)
    "coarse": (21, 62, 125, 250),
    "minimal": (21, 62, 125),
})
GRIDS = tuple(CPU_GRIDS)


@dataclass(frozen=True)
class ModelSpec:
    """One catalogue model: its family, absolute speed and the parameters of its shape."""

    name: str
    family: str
    batch: int  #: samples per iteration per GPU (Synergy's profile)
    iter_time_s: float  #: seconds per iteration at the fair share (Synergy's profile)
    gpu_cap: float = 1.0  #: GPU-bound rate (relative): the plateau
    cpu_at_1: float | None = None  #: pre-processing rate with one core; None = no CPU stage
    cpu_exponent: float = 1.0
    cache_min_gb: float | None = None  #: below this the input pipeline thrashes; None = no memory stage
    io_floor: float = 0.1
    dataset_gb: float = 62.0  #: at or above this the whole data set is cached
    io_at_fair: float = math.inf  #: I/O-bound rate at 62 GB when the data set does not fit
    io_per_gb: float = 0.0
    synergy_key: str = ""  #: the model's name in Synergy's profiles

    @property
    def samples_per_s(self) -> float:
        """Per-GPU throughput at the fair share (samples/s)."""
        return self.batch / self.iter_time_s

    def _raw(self, c: float, m: float) -> float:
        rate = self.gpu_cap
        if self.cpu_at_1 is not None:
            rate = min(rate, self.cpu_at_1 * c**self.cpu_exponent)
        if self.cache_min_gb is not None and m < self.dataset_gb:
            io = self.io_floor if m < self.cache_min_gb else self.io_at_fair + self.io_per_gb * (m - FAIR_SHARE[1])
            rate = min(rate, io)
        return rate

    def relative(self, cpus_per_gpu: float, mem_per_gpu_gb: float) -> float:
        """Speed relative to the fair share (1.0 at ``FAIR_SHARE``)."""
        return self._raw(cpus_per_gpu, mem_per_gpu_gb) / self._raw(*FAIR_SHARE)


def _image(name: str, key: str, batch: int, it: float, cap: float, a: float, b: float, **kw: Any) -> ModelSpec:
    return ModelSpec(name, "image", batch, it, gpu_cap=cap, cpu_at_1=a, cpu_exponent=b, cache_min_gb=42.0, synergy_key=key, **kw)


def _flat(name: str, family: str, key: str, batch: int, it: float) -> ModelSpec:
    return ModelSpec(name, family, batch, it, synergy_key=key)


# Fitted by least squares to Synergy's 1-GPU tables (procedure in docs/catalogue.md), rounded to 3 digits.
_SPECS = (
    _image("resnet18", "res18", 512, 0.64, 2.40, 0.403, 0.826),
    _image("resnet50", "res50", 512, 0.78, 1.15, 0.412, 0.807),
    _image("mobilenet", "mobilenet", 512, 0.71, 1.55, 0.404, 0.824),
    _image("alexnet", "alexnet", 512, 0.60, 2.94, 0.438, 0.751, dataset_gb=125.0, io_at_fair=2.0),
    _image("shufflenet", "shufflenet", 512, 0.615, 2.89, 0.442, 0.743, dataset_gb=125.0, io_at_fair=2.0),
    ModelSpec("m5", "audio", 512, 0.60, gpu_cap=2.5, cpu_at_1=0.307, cpu_exponent=1.076, cache_min_gb=42.0,
              dataset_gb=187.0, io_at_fair=1.48, io_per_gb=0.0083, synergy_key="m5"),
    ModelSpec("deepspeech", "audio", 20, 0.757, gpu_cap=1.0, cpu_at_1=0.300, cpu_exponent=1.14, cache_min_gb=42.0,
              synergy_key="deepspeech"),
    _flat("transformer", "language", "transformer", 128, 0.67),
    _flat("gnmt", "language", "gnmt", 128, 0.12),
    _flat("lstm", "language", "lstm", 20, 0.011),
    _flat("bert", "language", "bert", 20, 0.011),
    _flat("vae", "other", "vae", 20, 0.011),
)

#: every catalogue model by name
MODELS: Mapping[str, ModelSpec] = MappingProxyType({s.name: s for s in _SPECS})

#: default share of each family in sampled workloads, split evenly over its models
DEFAULT_MIX: Mapping[str, float] = MappingProxyType({"image": 0.4, "language": 0.3, "audio": 0.2, "other": 0.1})

#: GPU types whose model a trace does not disclose (Alibaba GPU v2023's G1, G2 and G3): given a
#: V100's speed so that such a cluster runs; a stand-in, not a measurement
UNDISCLOSED_GPUS = ("G1", "G2", "G3")

#: GPU speed relative to a V100 for each model family (Gavel-style heterogeneity, OSDI'20:
#: newer GPUs help large compute-bound models most, small models little). Assumed, rounded
#: figures, not fitted to measurements; see docs/catalogue.md.
GPU_SPEEDS: Mapping[str, Mapping[str, float]] = MappingProxyType({
    family: MappingProxyType({**speeds, "V100M16": 1.0, **{g: 1.0 for g in UNDISCLOSED_GPUS}})
    for family, speeds in {
        "image": {"K80": 0.22, "MISC": 0.22, "M60": 0.3, "P100": 0.58, "T4": 0.45, "A10": 0.9,
                  "V100": 1.0, "V100M32": 1.0, "A100": 2.0, "H100": 3.2},
        "audio": {"K80": 0.3, "MISC": 0.3, "M60": 0.38, "P100": 0.65, "T4": 0.5, "A10": 0.9,
                  "V100": 1.0, "V100M32": 1.0, "A100": 1.6, "H100": 2.4},
        "language": {"K80": 0.15, "MISC": 0.15, "M60": 0.22, "P100": 0.5, "T4": 0.4, "A10": 0.8,
                     "V100": 1.0, "V100M32": 1.0, "A100": 2.3, "H100": 3.8},
        "other": {"K80": 0.6, "MISC": 0.6, "M60": 0.65, "P100": 0.85, "T4": 0.8, "A10": 0.95,
                  "V100": 1.0, "V100M32": 1.0, "A100": 1.2, "H100": 1.3},
    }.items()
})


#: other names of catalogue models: Synergy's names (its profiles and simulator call ResNet-18
#: ``res18``); every name a mix or an API call takes goes through :func:`canonical_model` (exact
#: names), and a trace's ``model`` column, written by other systems, through :func:`match_model`
#: (case and punctuation ignored)
ALIASES: Mapping[str, str] = MappingProxyType({s.synergy_key: s.name for s in _SPECS if s.synergy_key and s.synergy_key != s.name})


def canonical_model(model: str) -> str:
    """The catalogue name of ``model`` (a catalogue name or an :data:`ALIASES` key, spelled
    exactly); unknown names raise :class:`InputError` naming the value and the known names."""
    if isinstance(model, str):
        if model in MODELS:
            return model
        if model in ALIASES:
            return ALIASES[model]
    raise InputError("model", model, f"unknown model; known: {sorted(MODELS)} (aliases: {dict(ALIASES)})")


def model_key(name: str) -> str:
    """``name`` as model names are compared: lower case, letters and digits only (``ResNet-50``,
    ``resnet_50`` and ``RESNET 50`` are all ``resnet50``)."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


def match_model(name: str, models: Collection[str] = MODELS, aliases: Mapping[str, str] = ALIASES) -> str:
    """The name in ``models`` that ``name`` stands for: itself or its ``aliases`` entry when
    spelled exactly; else the one model whose name or alias has the same :func:`model_key`; else
    the same for ``name`` without a parenthesised suffix (``GNMT (16 layers)`` is ``gnmt``).
    A name that matches several models, or none, raises :class:`InputError` (field ``model``)
    listing them, or the close names and every known one."""
    if not isinstance(name, str):
        raise InputError("model", name, "must be a model name")
    if name in aliases and aliases[name] in models:
        return aliases[name]
    if name in models:
        return name
    keys: dict[str, set[str]] = {}
    for n in models:
        keys.setdefault(model_key(n), set()).add(n)
    for a, n in aliases.items():
        if n in models:
            keys.setdefault(model_key(a), set()).add(n)
    stem = name
    while True:
        found = keys.get(model_key(stem))
        if found and len(found) > 1:
            raise InputError("model", name, f"matches several models: {sorted(found)}; name one exactly")
        if found:
            return next(iter(found))
        shorter = re.sub(r"\s*\([^()]*\)\s*$", "", stem)
        if shorter == stem or not shorter:
            break
        stem = shorter
    close = difflib.get_close_matches(model_key(name), list(keys), n=4, cutoff=0.6)
    near = sorted({m for k in close for m in keys[k]})
    known = f"known: {sorted(models)}" + (f" (aliases: {dict(aliases)})" if aliases else "")
    raise InputError("model", name, f"is not a catalogue model{f'; close: {near}' if near else ''}; {known}")


def model_spec(model: str) -> ModelSpec:
    """The :class:`ModelSpec` of ``model`` (a catalogue name or an alias); unknown names raise :class:`InputError`."""
    return MODELS[canonical_model(model)]


def _grid(grid: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if grid not in CPU_GRIDS:
        raise InputError("grid", grid, f"unknown profile grid; known: {list(GRIDS)}")
    return CPU_GRIDS[grid], MEM_GRIDS[grid]


def profile(model: str, gpus: int = 1, *, grid: str = "full") -> Profile:
    """The throughput profile (samples/s of the whole gang) of ``model`` on ``gpus`` GPUs."""
    spec = model_spec(model)
    if isinstance(gpus, bool) or not isinstance(gpus, (int, np.integer)) or gpus < 1:
        raise InputError("gpus", gpus, "must be an integer >= 1")
    return _profile(spec.name, int(gpus), grid)


@lru_cache(maxsize=1024)
def _profile(model: str, gpus: int, grid: str) -> Profile:
    spec = MODELS[model]
    cpus, mems = _grid(grid)
    base = gpus * spec.samples_per_s
    table = tuple(tuple(round(base * spec.relative(c, m), 6) for m in mems) for c in cpus)
    return Profile(cpus_per_gpu=cpus, mem_per_gpu_gb=mems, throughput=table)


def demand(model: str, gpus: int = 1) -> tuple[int, int]:
    """The fixed per-GPU demand a non-fungible scheduler gives: Synergy's fair share."""
    model_spec(model)
    if isinstance(gpus, bool) or not isinstance(gpus, (int, np.integer)) or gpus < 1:
        raise InputError("gpus", gpus, "must be an integer >= 1")
    return FAIR_SHARE


def gpu_speeds(model: str, gpu_types: Sequence[str]) -> dict[str, float]:
    """Speed factor of ``model`` on each of ``gpu_types`` (V100 = 1.0); unknown types raise."""
    table = GPU_SPEEDS[model_spec(model).family]
    if isinstance(gpu_types, str):
        gpu_types = (gpu_types,)
    out: dict[str, float] = {}
    for t in gpu_types:
        if t not in table:
            raise InputError("gpu_type", t, f"unknown GPU type; known: {sorted(table)}")
        out[t] = table[t]
    return out


def _mix_weights(mix: Mapping[str, float] | None) -> tuple[list[str], np.ndarray]:
    mix = DEFAULT_MIX if mix is None else mix
    if not isinstance(mix, Mapping) or not mix:
        raise InputError("mix", mix, "must map model or family names to non-negative weights")
    weights: dict[str, float] = {}
    for key, w in mix.items():
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise InputError(f"mix.{key}", w, "must be a finite weight >= 0")
        if key in MODELS or key in ALIASES:
            name = canonical_model(key)
            weights[name] = weights.get(name, 0.0) + float(w)
        elif key in FAMILIES:
            members = [s.name for s in _SPECS if s.family == key]
            for name in members:
                weights[name] = weights.get(name, 0.0) + float(w) / len(members)
        else:
            raise InputError("mix", key, f"is neither a model nor a family; models: {sorted(MODELS)}, families: {list(FAMILIES)}")
    names = [s.name for s in _SPECS if weights.get(s.name, 0.0) > 0]
    if not names:
        raise InputError("mix", dict(mix), "must give some model a positive weight")
    share_total("mix", dict(mix), (weights[n] for n in names), "weights")
    p = np.array([weights[n] for n in names])
    return names, p / p.sum()


def sample_models(rng: np.random.Generator, n: int, mix: Mapping[str, float] | None = None) -> list[str]:
    """``n`` model names drawn with ``rng`` from ``mix`` (model or family names -> weights;
    default :data:`DEFAULT_MIX`). Deterministic given the generator's state."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise InputError("n", n, "must be an integer >= 0")
    names, p = _mix_weights(mix)
    return [names[i] for i in rng.choice(len(names), size=int(n), p=p)]


# --- calibration against the measured tables -----------------------------------------------------


def calibration_report(path: str | Path) -> dict[str, dict[str, Any]]:
    """Compare the catalogue's shapes with Synergy's measured tables in ``path``
    (``synergy_profiles.json``). Per measured profile (``res18_1``, ...): the catalogue model,
    the measured and modelled speed-up at saturation, and the RMS and max absolute error of the
    relative throughput over every measured point (zeros, Synergy's "not measured", skipped).
    Multi-GPU tables have no 20.83 GB column; they are compared with the 1-GPU shape."""
    data = json.loads(Path(path).read_text())
    by_key = {s.synergy_key: s for s in _SPECS}
    cpus = data["cpus_per_gpu"]
    out: dict[str, dict[str, Any]] = {}
    for key, entry in sorted(data["models"].items()):
        spec = by_key.get(entry["model"])
        if spec is None:
            continue
        table = entry["throughput"]
        mems = list(SYNERGY_MEM_LEVELS[-len(table[0]):])
        errs, measured_max, model_max = [], 0.0, 0.0
        for a, c in enumerate(cpus):
            for b, m in enumerate(mems):
                t = table[a][b]
                if t <= 0:
                    continue
                r = spec.relative(c, round_mem_gb(m))
                errs.append(r - t)
                measured_max, model_max = max(measured_max, t), max(model_max, r)
        e = np.abs(np.array(errs))
        out[key] = {
            "model": spec.name, "gpus": entry["gpus"], "points": int(e.size),
            "measured_max": measured_max, "model_max": round(model_max, 4),
            "rmse": round(float(np.sqrt(np.mean(e**2))), 4), "max_abs": round(float(e.max()), 4),
        }
    return out
