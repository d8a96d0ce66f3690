"""One simulation set-up from a few plain settings, shared by ``optsched simulate`` and
``benchmarks/bench_sim.py``: load a trace, cut a window, scale the load, cap job sizes to the
cluster, assign models, then run any queue policy x allocator pair on it (:func:`run`), or a
grid of them in parallel on a backend -- local processes or Ray -- (:func:`run_grid`)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from optsched.errors import InputError
from optsched.incremental import check_chain_solver
from optsched.limits import check_seed
from optsched.model import Node
from optsched.parallel import get_backend
from optsched.registry import get_method
from optsched.sim import cluster as clusters
from optsched.sim import workload as wl
from optsched.sim.allocators import AtDemand
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate
from optsched.sim.metrics import run_id
from optsched.sim.policies import get_policy
from optsched.sim.result import SimResult
from optsched.sim.shadow import Shadowed, shadow_summary
from optsched.sim.solving import SolveRoundAllocator
from optsched.sim.synthetic import parse_spec, synthetic_trace
from optsched.sim.traces import SAMPLE, CsvSchema, Trace, load_trace, sample_trace_path
from optsched.sim.workload import parse_duration

__all__ = [
    "CHAINED_SOLVERS",
    "DETERMINISTIC_TIME_SOLVERS",
    "SAMPLE",
    "SYNTHETIC_PREFIX",
    "TIME_FREE_SOLVERS",
    "Setup",
    "canonical_allocator",
    "check_allocator",
    "check_deterministic_time",
    "make_allocator",
    "open_trace",
    "parse_allocator",
    "prepare",
    "run",
    "run_grid",
    "sample_trace_path",
]

#: a trace argument ``synthetic:PRESET[:k=v,...]`` generates the trace (optsched.sim.synthetic)
SYNTHETIC_PREFIX = "synthetic:"
#: solvers whose per-round budget can be CP-SAT deterministic seconds (``deterministic_time``)
DETERMINISTIC_TIME_SOLVERS = ("cpsat", "lns")
#: solvers that do not look at the clock: the same round gives the same schedule whatever the load
TIME_FREE_SOLVERS = ("fixed-demand", "fungible-greedy")
#: solvers whose plain name solves a replay's rounds as one chain, each round from the last
#: (:class:`optsched.incremental.RoundSolver`): consecutive rounds differ by a few arrivals and
#: completions, and the chain's rounds are as good as those solved afresh at a fraction of the
#: time (docs/results.md, "Round chains"); ``SOLVER@cold`` solves every round afresh
CHAINED_SOLVERS = ("cpsat",)
#: an allocator's variants: ``SOLVER@warm`` (a round chain), ``SOLVER@cold`` (every round afresh),
#: ``SOLVER@demand`` (every job held at its fixed demand, every round afresh)
VARIANTS = ("warm", "cold", "demand")


def parse_allocator(allocator: str) -> tuple[str, str]:
    """An allocator name's solver and its variant (:data:`VARIANTS`), resolved: a plain solver
    name is ``"warm"`` for :data:`CHAINED_SOLVERS` and ``"cold"`` for the others. Refuses an
    unknown variant; the solver name is not looked up here."""
    if not isinstance(allocator, str):
        raise InputError("allocator", allocator, "must be a solver name, optionally with @warm, @cold or @demand")
    solver, at, variant = allocator.partition("@")
    if at and variant not in VARIANTS:
        raise InputError("allocator", allocator, "the variants are SOLVER@warm (each round from the last: optsched.incremental), "
                         "SOLVER@cold (every round afresh) and SOLVER@demand (every job held at its fixed demand)")
    return solver, variant or ("warm" if solver in CHAINED_SOLVERS else "cold")


def check_allocator(allocator: str) -> None:
    """Refuse, before any replay, an allocator name that :func:`make_allocator` would refuse: an
    unknown variant or solver, or ``SOLVER@warm`` for a solver that cannot run as a round chain
    (:func:`optsched.incremental.check_chain_solver`). Errors name the field ``allocator``."""
    solver, variant = parse_allocator(allocator)
    try:
        get_method(solver)
        if variant == "warm":
            check_chain_solver(solver)
    except InputError as e:
        raise InputError("allocator", allocator, e.problem) from None


def canonical_allocator(allocator: str) -> str:
    """The one name of what ``allocator`` runs, recorded in run manifests: ``cpsat`` and
    ``cpsat@warm`` are both ``"cpsat@warm"``; a cold run is ``"SOLVER@cold"`` for
    :data:`CHAINED_SOLVERS` and the plain name for other solvers (``"fungible-greedy"``)."""
    solver, variant = parse_allocator(allocator)
    return solver if variant == "cold" and solver not in CHAINED_SOLVERS else f"{solver}@{variant}"


def make_allocator(allocator: str, *, time_limit: float, seed: int = 0, validate: bool = True,
                   **solver_options: Any) -> SolveRoundAllocator | AtDemand:
    """The allocator an allocator name runs (:func:`parse_allocator`): a
    :class:`~optsched.sim.solving.SolveRoundAllocator` of the solver, solving the rounds as one
    chain for ``SOLVER@warm``, wrapped in :class:`~optsched.sim.allocators.AtDemand` for
    ``SOLVER@demand``; ``solver_options`` go to the solver."""
    solver, variant = parse_allocator(allocator)
    alloc = SolveRoundAllocator(solver, time_limit=time_limit, seed=seed, validate=validate, incremental=variant == "warm",
                                **solver_options)
    return AtDemand(alloc) if variant == "demand" else alloc


def check_deterministic_time(allocators: Sequence[str], deterministic_time: float | None) -> None:
    """Refuse ``deterministic_time`` that is not a positive number, or that some allocator would
    not honour (naming it): only :data:`DETERMINISTIC_TIME_SOLVERS` take one;
    :data:`TIME_FREE_SOLVERS` are deterministic anyway and pass."""
    if deterministic_time is None:
        return
    if isinstance(deterministic_time, bool) or not isinstance(deterministic_time, (int, float)) or not math.isfinite(deterministic_time) \
            or deterministic_time <= 0:
        raise InputError("deterministic_time", deterministic_time, "must be a positive number of CP-SAT deterministic seconds")
    for a in allocators:
        solver = a.partition("@")[0]
        if solver not in DETERMINISTIC_TIME_SOLVERS and solver not in TIME_FREE_SOLVERS:
            raise InputError("deterministic_time", a, f"allocator {solver!r} has no deterministic time budget (its rounds depend "
                             f"on the wall clock); {' and '.join(DETERMINISTIC_TIME_SOLVERS)} take one, "
                             f"{' and '.join(TIME_FREE_SOLVERS)} are deterministic without one")

@dataclass(frozen=True)
class Setup:
    """A trace window on a cluster, ready to simulate."""

    trace: str
    nodes: tuple[Node, ...]
    workload: wl.Workload
    settings: dict[str, Any] = field(default_factory=dict)
    #: what looks wrong in the trace but does not stop the run (times that look read in another
    #: unit, :func:`~optsched.sim.workload.unit_warning`); ``optsched simulate`` prints them
    warnings: tuple[str, ...] = ()


def open_trace(trace: str | Path, fmt: str = "auto", *, seed: int = 0, schema: CsvSchema | None = None, gpus: int | None = None,
               catalogue: wl.Catalogue | None = None) -> Trace:
    """The trace a ``simulate`` argument names: a CSV path (``fmt``, ``schema`` and ``catalogue``,
    whose models the file may name, as in :func:`~optsched.sim.traces.load_trace`), ``sample``
    (the bundled sample, :func:`sample_trace_path`; a file called ``sample`` is ``./sample``), or
    ``synthetic:PRESET[:k=v,...]``, generated by :func:`~optsched.sim.synthetic.synthetic_trace`
    from ``catalogue`` with ``seed`` unless the text sets one (and ``gpus``, the cluster's, where
    its offered load needs a GPU count it does not give)."""
    text = str(trace)
    if text.startswith(SYNTHETIC_PREFIX):
        if fmt != "auto" or schema is not None:
            raise InputError("format", fmt if schema is None else "schema", "a synthetic trace has no file format; leave it at auto")
        return synthetic_trace(parse_spec(text[len(SYNTHETIC_PREFIX):], seed=seed, gpus=gpus), catalogue=catalogue)
    return load_trace(sample_trace_path() if text == SAMPLE else trace, fmt, schema, catalogue=catalogue)


def _trace_digest(trace: str | Path) -> str | None:
    """sha256 of the trace file's bytes (``None`` for a missing file); for a synthetic trace, of
    the file it resamples (``source=``), else ``None`` (its text says everything)."""
    text = str(trace)
    if text.startswith(SYNTHETIC_PREFIX):
        m = re.search(r"(?:^|[:,])source=([^,]+)", text[len(SYNTHETIC_PREFIX):])
        if m is None:
            return None
        text = m.group(1).strip()
    p = sample_trace_path() if text == SAMPLE else Path(text)
    try:
        return hashlib.sha256(p.read_bytes()).hexdigest()
    except (OSError, ValueError):  # ValueError: a NUL in the name (refused when the trace is read)
        return None


def prepare(
    trace_path: str | Path,
    *,
    fmt: str = "auto",
    cluster: str | Sequence[Node] = "16x8",
    cpus: int = 64,
    mem_gb: int = 512,
    start: str | float | None = None,
    length: str | float | None = None,
    max_jobs: int | None = None,
    load: float = 1.0,
    target_load: float | None = None,
    min_duration: str | float | None = None,
    max_duration: str | float | None = None,
    cap_mode: str = "clip",
    seed: int = 0,
    mix: Any = None,
    restart_s: float = 60.0,
    spread_factor: float = 0.9,
    catalogue: wl.Catalogue | None = None,
    schema: CsvSchema | None = None,
) -> Setup:
    """Load (checking the whole trace's time unit, :attr:`Setup.warnings`), window (``start``/``length`` as durations), keep durations in
    ``[min_duration, max_duration]``, scale the arrival rate by ``load`` -- or, with
    ``target_load``, by whatever brings the offered load (GPU-seconds asked over GPU-seconds
    available across the arrival span, :func:`~optsched.sim.workload.offered_load`) to it --
    cap gangs to the largest GPU type's total, and assign models with ``seed``. ``catalogue``
    (default: :mod:`optsched.catalogue`) gives the models: a trace file's ``model`` column, and a
    ``schema``'s ``models``, name its models (:func:`open_trace`)."""
    check_seed(seed)
    nodes = clusters.parse_cluster(cluster, cpus=cpus, mem_gb=mem_gb) if isinstance(cluster, str) else tuple(cluster)
    schema = None if schema is None else schema.for_catalogue(catalogue)  # recorded with the catalogue's names
    trace = open_trace(trace_path, fmt, seed=seed, schema=schema, gpus=sum(nd.gpus for nd in nodes), catalogue=catalogue)
    if len(trace) == 0:
        raise InputError("trace", str(trace_path), f"holds no job to replay (what was dropped while reading: {dict(trace.notes) or 'nothing'})")
    warning = None if str(trace_path).startswith(SYNTHETIC_PREFIX) else wl.unit_warning(
        trace, *((schema.time_unit, schema.duration_unit) if schema else ("s", None)), schema=schema is not None)
    trace = wl.window(trace, parse_duration(start, "start") or 0.0, parse_duration(length, "length"), max_jobs)
    if len(trace) == 0:
        raise InputError("start/length", f"{start}/{length}", "the window holds no jobs")
    lo, hi = parse_duration(min_duration, "min_duration"), parse_duration(max_duration, "max_duration")
    if lo is not None or hi is not None:
        trace = wl.filter_durations(trace, lo, hi)
        if len(trace) == 0:
            raise InputError("min_duration/max_duration", f"{min_duration}/{max_duration}", "keep no job of the window")
    per_type: dict[str, int] = {}
    for nd in nodes:
        per_type[nd.gpu_type] = per_type.get(nd.gpu_type, 0) + nd.gpus
    trace = wl.cap_sizes(trace, max(per_type.values()), cap_mode)
    if len(trace) == 0:
        raise InputError("cap_mode", cap_mode, f"drops every job: each needs more than the largest GPU type's {max(per_type.values())} GPUs")
    total_gpus = sum(per_type.values())
    if target_load is not None:
        if not 0 < target_load < math.inf:
            raise InputError("target_load", target_load, "must be a positive number (the offered load: GPU-seconds asked over supplied)")
        offered = _offered(trace, total_gpus) or 0.0
        if offered <= 0:
            raise InputError("target_load", target_load, "needs a window with at least two jobs at different times")
        load = target_load / offered
    if load != 1.0:
        try:
            trace = wl.scale_load(trace, load)
        except InputError as e:
            if target_load is None:
                raise
            raise InputError("target_load", target_load, f"needs an arrival-rate multiplier of {load:.3g}, which {e.problem}") from None
    work = wl.build_workload(trace, nodes, seed=seed, catalogue=catalogue, mix=mix, restart_s=restart_s, spread_factor=spread_factor)
    settings = {
        "trace": str(trace_path), "format": fmt, "cluster": cluster if isinstance(cluster, str) else "custom",
        "cluster_summary": clusters.summary(nodes), "start": start, "length": length, "max_jobs": max_jobs,
        "load": load, "target_load": target_load, "offered_load": _offered(trace, total_gpus),
        "min_duration": min_duration, "max_duration": max_duration, "cap_mode": cap_mode, "seed": seed, "mix": mix, "restart_s": restart_s,
        "spread_factor": spread_factor, "jobs": len(work), "schema": None if schema is None else schema.to_dict(),
        "trace_sha256": _trace_digest(trace_path), "nodes_sha256": _nodes_digest(nodes),
    }
    return Setup(trace=str(trace_path), nodes=nodes, workload=work, settings=settings, warnings=(warning,) if warning else ())


def _nodes_digest(nodes: tuple[Node, ...]) -> str:
    """sha256 of the cluster's nodes (every field of each, in order): runs on clusters that differ in
    cores, memory, types or racks, however given, get different run ids."""
    return hashlib.sha256(json.dumps([n.to_dict() for n in nodes], sort_keys=True).encode()).hexdigest()


def _offered(trace: Trace, total_gpus: int) -> float | None:
    """The offered load over the window's arrival span; None where its arrivals span no time."""
    return wl.offered_load(trace, total_gpus) if len(trace) > 1 and trace.submit_s[-1] > trace.submit_s[0] else None


def run(
    setup: Setup,
    *,
    policy: str = "las",
    allocator: str = "fungible-greedy",
    time_limit: float = 5.0,
    seed: int = 0,
    config: SimConfig | None = None,
    validate: bool = True,
    deterministic_time: float | None = None,
    shadow: str | None = None,
    gap_target: float | None = None,
    **solver_options: Any,
) -> SimResult:
    """Simulate ``setup`` under a queue ``policy`` (name) and an ``allocator``: a registered
    solver name, with a variant (:func:`parse_allocator`): ``SOLVER@warm`` solves the rounds as
    one chain, each from the last (:class:`optsched.incremental.RoundSolver`; what a plain
    :data:`CHAINED_SOLVERS` name such as ``cpsat`` does), ``SOLVER@cold`` solves every round
    afresh (what other plain names do), ``SOLVER@demand`` holds every job at its fixed demand
    (:class:`~optsched.sim.allocators.AtDemand`: placement without fungibility). ``validate=False``
    skips ``solve_round``'s per-round check (see :class:`~optsched.sim.engine.SolveRoundAllocator`).

    ``deterministic_time`` bounds each round of a :data:`DETERMINISTIC_TIME_SOLVERS` allocator (and
    shadow) by CP-SAT deterministic seconds (``time_limit`` stays as a wall-clock cap), so that its
    rounds do not depend on the machine's load; :data:`TIME_FREE_SOLVERS` ignore it (they are
    deterministic anyway) and other allocators refuse it (:func:`check_deterministic_time`).

    ``gap_target`` is a round chain's relative gap at which a round stops
    (:data:`optsched.incremental.GAP_TARGET` when None); other allocators ignore it, and it is
    recorded only for the chains.

    A round chain's ``info["chain_paths"]`` counts how the chain answered its rounds
    (:attr:`SolveRoundAllocator.paths <optsched.sim.solving.SolveRoundAllocator>`).

    ``shadow`` (a solver name) also solves every round with that solver on the same state
    (:class:`~optsched.sim.shadow.Shadowed`): ``info["shadow"]`` holds the comparison and
    ``info["shadow_rounds"]`` the per-round records.

    The result's ``info["manifest"]`` records every setting that changes the result (or what is
    recorded of it) and ``info["run_id"]`` a short stable hash of it
    (:func:`optsched.sim.metrics.run_id`).
    """
    if not math.isfinite(time_limit) or time_limit <= 0:
        raise InputError("time_limit", time_limit, "must be > 0 seconds")
    check_seed(seed)
    check_deterministic_time([allocator] if shadow is None else [allocator, shadow], deterministic_time)
    solver, variant = parse_allocator(allocator)
    given = dict(solver_options)
    if deterministic_time is not None and solver in DETERMINISTIC_TIME_SOLVERS:
        solver_options = {**solver_options, "deterministic_time": float(deterministic_time)}
    if variant == "warm" and gap_target is not None:
        given["gap_target"] = solver_options["gap_target"] = gap_target
    alloc: Any = make_allocator(allocator, time_limit=time_limit, seed=seed, validate=validate, **solver_options)
    chain = alloc if variant == "warm" else None
    if shadow is not None:
        dt = {"deterministic_time": float(deterministic_time)} if deterministic_time is not None and shadow in DETERMINISTIC_TIME_SOLVERS else {}
        alloc = Shadowed(alloc, {shadow: SolveRoundAllocator(shadow, time_limit=time_limit, seed=seed, validate=validate, hint=False, **dt)})
    cfg = config or SimConfig()
    if cfg.name == "sim":
        cfg = replace(cfg, name=f"{policy}-{allocator}")
    res = simulate(setup.workload, setup.nodes, get_policy(policy), alloc, cfg)
    if shadow is not None:
        res.info["shadow"] = {"allocator": shadow, **shadow_summary(alloc.records, shadow)}
        res.info["shadow_rounds"] = alloc.records
    res.info["setup"] = dict(setup.settings)
    res.info["time_limit"] = time_limit
    res.info["deterministic_time"] = deterministic_time
    res.info["seed"] = seed
    res.info["validated"] = validate
    if chain is not None:  # how the chain answered its rounds (SolveRoundAllocator.paths)
        res.info["chain_paths"] = dict(sorted(chain.paths.items()))
    res.info["manifest"] = manifest(setup, policy=policy, allocator=canonical_allocator(allocator), time_limit=time_limit, seed=seed, config=cfg,
                                    deterministic_time=deterministic_time, solver_options=given, shadow=shadow)
    res.info["run_id"] = run_id(res.info["manifest"])
    return res


#: SimConfig fields that do not change a run's result (labels, progress bars, extra checks)
_NOT_RESULT = ("name", "progress", "check")
#: set-up values derived from the others (kept in ``info["setup"]``, not in the manifest)
_DERIVED = ("cluster_summary", "offered_load", "jobs")


def manifest(setup: Setup, *, policy: str, allocator: str, time_limit: float, seed: int, config: SimConfig,
             deterministic_time: float | None = None, solver_options: dict[str, Any] | None = None,
             shadow: str | None = None) -> dict[str, Any]:
    """Every setting that changes a run's result: the set-up (trace and its sha256, window,
    load, cluster, model seed, schema, ...), every :class:`SimConfig` field (but its name, the
    progress bar and ``check``), the policy, the allocator, its time limits, seed and options, and
    the shadow solver (which changes what a run records).
    Values derived from these (the offered load, the job count, the rate multiplier that a
    target load gives) are left out, so the manifest holds inputs only."""
    inputs = {k: v for k, v in setup.settings.items() if k not in _DERIVED}
    if inputs.get("target_load") is not None:
        inputs.pop("load", None)
    return {
        "policy": policy, "allocator": allocator, "seed": seed, "time_limit": time_limit, "deterministic_time": deterministic_time,
        "solver_options": dict(sorted((solver_options or {}).items())), "shadow": shadow,
        "setup": inputs,
        "config": {f.name: getattr(config, f.name) for f in fields(config) if f.name not in _NOT_RESULT},
    }


def _run_pair(task: tuple[Setup, str, str, float, int, SimConfig, dict[str, Any]]) -> tuple[str, str, SimResult]:
    setup, policy, allocator, time_limit, seed, cfg, opts = task
    return policy, allocator, run(setup, policy=policy, allocator=allocator, time_limit=time_limit, seed=seed, config=cfg, **opts)


def run_grid(
    setup: Setup,
    pairs: Sequence[tuple[str, str]],
    *,
    time_limit: float = 5.0,
    seed: int = 0,
    config: SimConfig | None = None,
    backend: Any = "local",
    workers: int | None = 1,
    address: str | None = None,
    progress: bool = True,
    **solver_options: Any,
) -> dict[tuple[str, str], SimResult]:
    """Simulate ``setup`` under every ``(policy, allocator)`` pair, ``workers`` at a time on
    ``backend`` (``"local"``: processes, serial when ``workers`` is 1; ``"ray"``: the Ray cluster
    at ``address`` or a local one; see :mod:`optsched.parallel`). Each run is named
    ``POLICY-ALLOCATOR``; results come back in the order of ``pairs`` whatever the backend."""
    cfg = config or SimConfig()
    be = get_backend(backend, workers=workers, address=address) if isinstance(backend, str) else backend
    inner = progress and len(pairs) == 1  # one run: its own bar; several: one bar over runs
    tasks = [(setup, p, a, time_limit, seed, replace(cfg, name=f"{p}-{a}", progress=inner and cfg.progress), dict(solver_options)) for p, a in pairs]
    done: dict[tuple[str, str], SimResult] = {}
    with tqdm(total=len(tasks), desc="simulations", unit="run", disable=not progress or inner) as bar:
        for p, a, res in be.imap_unordered(_run_pair, tasks):
            done[(p, a)] = res
            bar.update()
    return {pa: done[pa] for pa in pairs}
