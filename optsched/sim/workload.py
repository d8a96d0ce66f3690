"""Workloads for the simulator: shaping a trace (window, load, durations, sizes) and turning
it into :class:`SimJob` s with a catalogue model, profile, fixed demand and GPU speeds.

Traces themselves, and reading them, are :mod:`optsched.sim.traces`. :func:`window`,
:func:`scale_load`, :func:`filter_durations` and :func:`cap_sizes` shape a trace
(durations as text: :func:`parse_duration`);
:func:`build_workload` turns it into a :class:`Workload`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optsched.errors import InputError
from optsched.model import Elastic, Node, Profile
from optsched.sim.catalogues import Catalogue, ModelNames, default_catalogue
from optsched.sim.csv_rows import MAX_DURATION_S
from optsched.sim.traces import TIME_UNITS, Trace

__all__ = [
    "Catalogue",
    "SimJob",
    "Workload",
    "build_workload",
    "cap_sizes",
    "default_catalogue",
    "filter_durations",
    "offered_load",
    "parse_duration",
    "scale_load",
    "snap",
    "unit_warning",
    "window",
]


#: duration suffixes (:func:`parse_duration`)
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def parse_duration(text: str | float | None, field_name: str = "duration") -> float | None:
    """``"90"`` (seconds), ``"15m"``, ``"12h"``, ``"7d"``, ``"2w"`` -> seconds; ``None`` stays ``None``."""
    if text is None or isinstance(text, (int, float)):
        return None if text is None else float(text)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smhdw]?)\s*", text)
    if not m:
        raise InputError(field_name, text, "must be a duration such as 3600, 90m, 12h or 7d")
    out = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    if not math.isfinite(out):
        raise InputError(field_name, text, "must be a finite duration such as 3600, 90m, 12h or 7d")
    return out


# --- shaping --------------------------------------------------------------------------------------


def window(trace: Trace, start_s: float = 0.0, length_s: float | None = None, max_jobs: int | None = None) -> Trace:
    """Jobs submitted in ``[start_s, start_s + length_s)``, at most the first ``max_jobs``,
    with submit times rebased so that the window starts at 0."""
    if not math.isfinite(start_s) or start_s < 0:
        raise InputError("window.start_s", start_s, "must be a finite time >= 0")
    if length_s is not None and (not math.isfinite(length_s) or length_s <= 0):
        raise InputError("window.length_s", length_s, "must be > 0")
    if max_jobs is not None and max_jobs < 1:
        raise InputError("window.max_jobs", max_jobs, "must be >= 1")
    mask = trace.submit_s >= start_s
    if length_s is not None:
        mask &= trace.submit_s < start_s + length_s
    idx = np.flatnonzero(mask)
    if max_jobs is not None:
        idx = idx[:max_jobs]
    out = trace.take(idx)
    return out.with_columns(submit_s=out.submit_s - start_s)


def scale_load(trace: Trace, factor: float) -> Trace:
    """Multiply the arrival rate by ``factor``: inter-arrival times shrink by it (times from 0)."""
    if not math.isfinite(factor) or factor <= 0:
        raise InputError("load", factor, "must be a positive arrival-rate multiplier")
    if len(trace) == 0:
        return trace
    t0 = float(trace.submit_s[0])
    submit = t0 + (trace.submit_s - t0) / factor
    if not float(np.max(submit)) <= MAX_DURATION_S:  # as a trace's own arrivals (csv_rows.drop_and_rebase); NaN/inf too
        raise InputError("load", factor, f"spreads the arrivals over more than {MAX_DURATION_S:.0e} seconds (31.7 million years), beyond "
                         "what the simulator computes with")
    return trace.with_columns(submit_s=submit)


def filter_durations(trace: Trace, min_s: float | None = None, max_s: float | None = None) -> Trace:
    """Keep jobs with ``min_s <= duration_s <= max_s`` (as Pollux keeps Philly jobs of >= 60 s);
    the count dropped goes to ``notes["dropped_duration"]``."""
    keep = np.ones(len(trace), dtype=bool)
    if min_s is not None:
        keep &= trace.duration_s >= min_s
    if max_s is not None:
        if min_s is not None and max_s < min_s:
            raise InputError("max_duration", max_s, f"must be >= min_duration {min_s}")
        keep &= trace.duration_s <= max_s
    return trace.take(keep, notes={"dropped_duration": int((~keep).sum())})


def offered_load(trace: Trace, total_gpus: int, span_s: float | None = None) -> float:
    """GPU demand over supply: ``sum(gpus x duration) / (span x total_gpus)``, where ``span`` is
    the arrival span (first to last submit) unless given."""
    if len(trace) == 0:
        return 0.0
    span = span_s if span_s is not None else float(trace.submit_s[-1] - trace.submit_s[0])
    if span <= 0:
        raise InputError("span_s", span, "the window's arrivals span no time; give span_s")
    return float(np.sum(trace.gpus * trace.duration_s)) / (span * total_gpus)


def cap_sizes(trace: Trace, max_gpus: int, mode: str = "clip") -> Trace:
    """Make every job fit a cluster whose largest gang is ``max_gpus`` GPUs.

    ``mode="clip"`` shrinks larger jobs to ``max_gpus`` (their duration at demand is kept);
    ``"drop"`` removes them. The count goes to ``notes["capped"]`` / ``notes["dropped_too_big"]``.
    """
    if max_gpus < 1:
        raise InputError("max_gpus", max_gpus, "must be >= 1")
    big = trace.gpus > max_gpus
    if mode == "drop":
        return trace.take(~big, notes={"dropped_too_big": int(big.sum())})
    if mode == "clip":
        out = trace.with_columns(gpus=np.minimum(trace.gpus, max_gpus))
        notes = dict(out.notes)
        notes["capped"] = notes.get("capped", 0) + int(big.sum())
        return out.with_columns(notes=notes)
    raise InputError("cap_mode", mode, "must be 'clip' or 'drop'")


# --- a trace read in the wrong time unit ------------------------------------------------------------

#: what no real trace shows, read in the right unit (a trace in ms read as seconds shows all of
#: them, its times 1,000 times too long): a median job of more than 3 days, a median gap between
#: arrivals of more than a day (traces of 10 jobs or more), arrivals spread over more than 5 years
UNIT_LIMITS_S = {"median_duration": 3 * 86_400.0, "median_gap": 86_400.0, "span": 5 * 365 * 86_400.0}


def unit_warning(trace: Trace, time_unit: str = "s", duration_unit: str | None = None, *, schema: bool = True) -> str | None:
    """A warning where the whole trace's times look read in too large a unit (:data:`UNIT_LIMITS_S`),
    saying which unit would make them plausible and how to pass it (``schema``: the trace was read
    with ``--columns`` / ``--schema``, whose ``time_unit`` and ``duration_unit`` are given); else ``None``."""
    n = len(trace)
    if not n:
        return None
    median = float(np.median(trace.duration_s))
    span = float(trace.submit_s[-1] - trace.submit_s[0])
    gap = float(np.median(np.diff(trace.submit_s))) if n >= 10 else 0.0
    lim = UNIT_LIMITS_S
    facts = [text for bad, text in (
        (median > lim["median_duration"], f"the median job runs {median / 86_400:,.1f} days"),
        (gap > lim["median_gap"], f"jobs arrive {gap / 86_400:,.1f} days apart (median)"),
        (span > lim["span"], f"arrivals span {span / (365 * 86_400):,.0f} years"),
    ) if bad]
    if not facts:
        return None
    du = duration_unit or time_unit
    arrivals = max(gap / lim["median_gap"], span / lim["span"])
    durations = median / lim["median_duration"]
    unit = _smaller_unit(time_unit if arrivals > 1 else du, max(arrivals, durations))
    how = f"--time-unit {unit}" + (" (with --columns/--schema)" if not schema else "")
    if arrivals <= 1:
        how += f", or duration_unit {unit} in a --schema file if only the durations are in it"
    return (f"warning: read in {TIME_UNITS_NAMES.get(time_unit, time_unit)}, {' and '.join(facts)}: are the trace's times in "
            f"another unit? Pass {how}")


#: how :func:`unit_warning` names a time unit
TIME_UNITS_NAMES = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "min": "minutes", "h": "hours"}


def _smaller_unit(unit: str, ratio: float) -> str:
    """The largest time unit at least ``ratio`` times smaller than ``unit`` (the smallest there is
    where none is)."""
    fits = [u for u, sec in TIME_UNITS.items() if sec * ratio <= TIME_UNITS[unit]]
    return max(fits, key=lambda u: TIME_UNITS[u]) if fits else min(TIME_UNITS, key=lambda u: TIME_UNITS[u])


# --- jobs with profiles ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SimJob:
    """A job as the simulator replays it. ``work = duration_s x throughput(demand)`` (samples)."""

    id: str
    submit_s: float
    gpus: int
    duration_s: float
    model: str
    profile: Profile
    demand: tuple[int, int]
    gpu_speed: Mapping[str, float] | None
    spread_factor: float
    restart_s: float
    tenant: str = ""
    #: absolute simulated time by which an SLO job should finish (``None``: best-effort unless
    #: ``SimConfig.slo_share`` marks it; optsched.sim.deadlines)
    deadline_s: float | None = None
    #: elastic gang (contract v2): the GPU counts it may run with and the throughput at each,
    #: relative to ``gpus`` (``None``: rigid unless ``SimConfig.elastic_share`` marks it)
    elastic: Elastic | None = None

    @property
    def work(self) -> float:
        return self.duration_s * self.profile.at(*self.demand)


@dataclass(frozen=True)
class Workload:
    """The jobs to replay, sorted by submit time, and what shaping changed (``notes``)."""

    name: str
    jobs: tuple[SimJob, ...]
    notes: Mapping[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.jobs)


def snap(value: float, grid: Sequence[int]) -> int:
    """The grid value nearest to ``value`` (ties go to the smaller one)."""
    return min(grid, key=lambda g: (abs(g - value), g))


def build_workload(
    trace: Trace,
    nodes: Sequence[Node],
    *,
    seed: int = 0,
    catalogue: Catalogue | None = None,
    mix: Any = None,
    spread_factor: float = 0.9,
    restart_s: float = 60.0,
) -> Workload:
    """Give every trace job a catalogue model (the trace's ``model`` column -- a catalogue name or
    one of the catalogue's ``ALIASES``, such as Synergy's ``res18``, matched as
    :func:`optsched.catalogue.match_model` does, :class:`~optsched.sim.catalogues.ModelNames` --
    else sampled with ``seed`` and ``mix``), its profile and fixed demand, and its speeds on the
    cluster's GPU types. (The trace loaders match the names of a file's ``model`` column already,
    against the catalogue they are given, naming the line of a name they cannot match.)

    The fixed demand is the trace's per-GPU request where it has one (Alibaba's ``cpu_cores`` /
    ``mem_gib`` divided by the GPUs, or ``cpus_per_gpu`` / ``mem_per_gpu_gb``) snapped to the
    profile grid (a request above the grid's top takes the top, counted in
    ``notes["demand_above_grid"]``), otherwise the catalogue's demand (the fair share). A GPU-type constraint
    (``gpu_type``, ``|``-separated) restricts ``gpu_speed`` to the allowed types the cluster has;
    a constraint naming none of the cluster's types is ignored and counted in the workload's
    ``notes["gpu_type_unmatched"]``, and so is one whose types together hold fewer GPUs than the
    job needs (``notes["gpu_type_too_small"]``: it could never start).
    """
    if not 0 < spread_factor <= 1:
        raise InputError("spread_factor", spread_factor, "must be in (0, 1]")
    if not math.isfinite(restart_s) or restart_s < 0:
        raise InputError("restart_s", restart_s, "must be >= 0")
    cat = catalogue if catalogue is not None else default_catalogue()
    rng = np.random.default_rng(seed)
    n = len(trace)
    sampled = list(cat.sample_models(rng, n, mix)) if n else []
    gpu_types = tuple(dict.fromkeys(nd.gpu_type for nd in nodes))
    profiles: dict[tuple[str, int], Profile] = {}
    speeds: dict[str, Mapping[str, float]] = {}
    jobs: list[SimJob] = []
    unmatched = clipped = too_small = 0
    type_gpus: dict[str, int] = {}
    for nd in nodes:
        type_gpus[nd.gpu_type] = type_gpus.get(nd.gpu_type, 0) + nd.gpus
    names = ModelNames(cat)
    for i in range(n):
        model = trace.model[i] or sampled[i]
        try:  # e.g. Synergy's res18, or ResNet-18 -> resnet18
            model = names.match(model)
        except InputError as e:
            raise InputError(f"{trace.name}[{trace.job_id[i]}].model", model, e.problem) from None
        g = int(trace.gpus[i])
        key = (model, g)
        if key not in profiles:
            profiles[key] = cat.profile(model, g)
        prof = profiles[key]
        dem, above = _demand(trace, i, prof, cat, model, g)
        clipped += above
        if model not in speeds:
            speeds[model] = dict(cat.gpu_speeds(model, gpu_types))
        sp = dict(speeds[model])
        if trace.gpu_type[i]:
            allowed = {t for t in trace.gpu_type[i].split("|") if t}
            restricted = {t: v for t, v in sp.items() if t in allowed}
            if not restricted:
                unmatched += 1
            elif max(type_gpus[t] for t in restricted) < g:
                too_small += 1  # no allowed type has the GPUs: the job could never start there
            else:
                sp = restricted
        jobs.append(SimJob(
            id=trace.job_id[i], submit_s=float(trace.submit_s[i]), gpus=g, duration_s=float(trace.duration_s[i]),
            model=model, profile=prof, demand=dem, gpu_speed=sp or None, spread_factor=spread_factor,
            restart_s=restart_s, tenant=trace.tenant[i],
        ))
    notes = dict(trace.notes)
    if unmatched:
        notes["gpu_type_unmatched"] = unmatched
    if clipped:
        notes["demand_above_grid"] = clipped
    if too_small:
        notes["gpu_type_too_small"] = too_small
    return Workload(name=trace.name, jobs=tuple(jobs), notes=notes)


def _demand(trace: Trace, i: int, prof: Profile, cat: Catalogue, model: str, g: int) -> tuple[tuple[int, int], bool]:
    """The job's fixed demand on its profile's grid, and whether the trace asked for more cores or
    memory per GPU than the grid's top (then the top is taken; counted in ``demand_above_grid``)."""
    c, m = float(trace.cpus_per_gpu[i]), float(trace.mem_per_gpu_gb[i])
    if math.isnan(c) and math.isfinite(trace.cpu_cores[i]):
        c = float(trace.cpu_cores[i]) / g
    if math.isnan(m) and math.isfinite(trace.mem_gib[i]):
        m = float(trace.mem_gib[i]) / g
    above = (not math.isnan(c) and c > prof.cpus_per_gpu[-1]) or (not math.isnan(m) and m > prof.mem_per_gpu_gb[-1])
    if math.isnan(c) or math.isnan(m):
        base = tuple(cat.demand(model, g))
        c = base[0] if math.isnan(c) else c
        m = base[1] if math.isnan(m) else m
    return (snap(c, prof.cpus_per_gpu), snap(m, prof.mem_per_gpu_gb)), above
