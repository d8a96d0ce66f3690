"""One simulation set-up from a few plain settings, shared by ``optsched simulate`` and
``benchmarks/bench_sim.py``: load a trace, cut a window, scale the load, cap job sizes to the
cluster, assign models, then run any queue policy x allocator pair on it (:func:`run`), or a
grid of them in parallel on a backend -- local processes or Ray -- (:func:`run_grid`)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from optsched.errors import InputError
from optsched.model import Node
from optsched.sim import cluster as clusters
from optsched.sim import workload as wl
from optsched.sim.engine import SimConfig, SimResult, SolveRoundAllocator, simulate
from optsched.sim.policies import get_policy

__all__ = ["Setup", "parse_duration", "prepare", "run", "run_grid"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def parse_duration(text: str | float | None, field_name: str = "duration") -> float | None:
    """``"90"`` (seconds), ``"15m"``, ``"12h"``, ``"7d"``, ``"2w"`` -> seconds; ``None`` stays ``None``."""
    if text is None or isinstance(text, (int, float)):
        return None if text is None else float(text)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smhdw]?)\s*", text)
    if not m:
        raise InputError(field_name, text, "must be a duration such as 3600, 90m, 12h or 7d")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


@dataclass(frozen=True)
class Setup:
    """A trace window on a cluster, ready to simulate."""

    trace: str
    nodes: tuple[Node, ...]
    workload: wl.Workload
    settings: dict[str, Any] = field(default_factory=dict)


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
) -> Setup:
    """Load, window (``start``/``length`` as durations), keep durations in
    ``[min_duration, max_duration]``, scale the arrival rate by ``load`` -- or, with
    ``target_load``, by whatever brings the offered load (GPU-seconds asked over GPU-seconds
    available across the arrival span, :func:`~optsched.sim.workload.offered_load`) to it --
    cap gangs to the largest GPU type's total, and assign models with ``seed``."""
    nodes = clusters.parse_cluster(cluster, cpus=cpus, mem_gb=mem_gb) if isinstance(cluster, str) else tuple(cluster)
    trace = wl.load_trace(trace_path, fmt)
    trace = wl.window(trace, parse_duration(start, "start") or 0.0, parse_duration(length, "length"), max_jobs)
    lo, hi = parse_duration(min_duration, "min_duration"), parse_duration(max_duration, "max_duration")
    if lo is not None or hi is not None:
        trace = wl.filter_durations(trace, lo, hi)
    per_type: dict[str, int] = {}
    for nd in nodes:
        per_type[nd.gpu_type] = per_type.get(nd.gpu_type, 0) + nd.gpus
    trace = wl.cap_sizes(trace, max(per_type.values()), cap_mode)
    total_gpus = sum(per_type.values())
    if target_load is not None:
        if not target_load > 0:
            raise InputError("target_load", target_load, "must be > 0")
        offered = wl.offered_load(trace, total_gpus) if len(trace) > 1 else 0.0
        if offered <= 0:
            raise InputError("target_load", target_load, "needs a window with at least two jobs at different times")
        load = target_load / offered
    if load != 1.0:
        trace = wl.scale_load(trace, load)
    work = wl.build_workload(trace, nodes, seed=seed, catalogue=catalogue, mix=mix, restart_s=restart_s, spread_factor=spread_factor)
    settings = {
        "trace": str(trace_path), "format": fmt, "cluster": cluster if isinstance(cluster, str) else "custom",
        "cluster_summary": clusters.summary(nodes), "start": start, "length": length, "max_jobs": max_jobs,
        "load": load, "target_load": target_load, "offered_load": wl.offered_load(trace, total_gpus) if len(trace) > 1 else None,
        "min_duration": min_duration, "max_duration": max_duration, "cap_mode": cap_mode, "seed": seed, "mix": mix, "restart_s": restart_s,
        "spread_factor": spread_factor, "jobs": len(work),
    }
    return Setup(trace=str(trace_path), nodes=nodes, workload=work, settings=settings)


def run(
    setup: Setup,
    *,
    policy: str = "las",
    allocator: str = "fungible-greedy",
    time_limit: float = 5.0,
    seed: int = 0,
    config: SimConfig | None = None,
    validate: bool = True,
    shadow: str | None = None,
    **solver_options: Any,
) -> SimResult:
    """Simulate ``setup`` under a queue ``policy`` (name) and an ``allocator``: a registered
    solver name, or ``SOLVER@demand`` for that solver with every job held at its fixed demand
    (:class:`~optsched.sim.allocators.AtDemand`: placement without fungibility). ``validate=False``
    skips ``solve_round``'s per-round check (see :class:`~optsched.sim.engine.SolveRoundAllocator`).
    ``shadow`` (a solver name) also solves every round with that solver on the same state
    (:class:`~optsched.sim.shadow.Shadowed`): ``info["shadow"]`` holds the comparison and
    ``info["shadow_rounds"]`` the per-round records."""
    if not math.isfinite(time_limit) or time_limit <= 0:
        raise InputError("time_limit", time_limit, "must be > 0 seconds")
    solver, _, variant = allocator.partition("@")
    if variant not in ("", "demand"):
        raise InputError("allocator", allocator, "the only variant is SOLVER@demand (every job held at its fixed demand)")
    alloc: Any = SolveRoundAllocator(solver, time_limit=time_limit, seed=seed, validate=validate, **solver_options)
    if variant:
        from optsched.sim.allocators import AtDemand

        alloc = AtDemand(alloc)
    if shadow is not None:
        from optsched.sim.shadow import Shadowed

        alloc = Shadowed(alloc, {shadow: SolveRoundAllocator(shadow, time_limit=time_limit, seed=seed, validate=validate, hint=False)})
    cfg = config or SimConfig()
    if cfg.name == "sim":
        cfg = replace(cfg, name=f"{policy}-{allocator}")
    res = simulate(setup.workload, setup.nodes, get_policy(policy), alloc, cfg)
    if shadow is not None:
        from optsched.sim.shadow import shadow_summary

        res.info["shadow"] = {"allocator": shadow, **shadow_summary(alloc.records, shadow)}
        res.info["shadow_rounds"] = alloc.records
    res.info["setup"] = dict(setup.settings)
    res.info["time_limit"] = time_limit
    res.info["seed"] = seed
    res.info["validated"] = validate
    return res


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
    at ``address`` or a local one; see :mod:`optsched.bench.backends`). Each run is named
    ``POLICY-ALLOCATOR``; results come back in the order of ``pairs`` whatever the backend."""
    from tqdm import tqdm

    from optsched.bench.backends import get_backend

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
