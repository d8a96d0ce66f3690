"""Benchmark plots. One function per plot; each draws on an optional matplotlib ``ax``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from optsched.bench.runner import as_float, time_to_gap
from optsched.extras import pyplot

__all__ = ["plot_bounds_over_time", "plot_performance_profile"]


def _axes(ax: Any) -> Any:
    if ax is None:
        _, ax = pyplot().subplots(figsize=(6, 4))
    return ax


def plot_bounds_over_time(
    trajectories: Mapping[str, Sequence[Sequence[float | None]]], *, ax: Any = None, title: str = ""
) -> Any:
    """Primal (solid) and dual (dashed) bound over time for one instance and several methods.

    ``trajectories`` maps a label (e.g. the solver) to ``[(t, objective, bound?), ...]``.
    """
    ax = _axes(ax)
    for i, (label, traj) in enumerate(sorted(trajectories.items())):
        color = f"C{i}"
        pts = [p for p in traj if p[1] is not None]
        if pts:
            ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", color=color, label=f"{label} primal")
        dual = [p for p in traj if len(p) > 2 and p[2] is not None]
        if dual:
            ax.step([p[0] for p in dual], [p[2] for p in dual], where="post", color=color, ls="--", label=f"{label} bound")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("objective")
    ax.set_title(title or "primal and dual bounds over time")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return ax


def plot_performance_profile(
    rows: Sequence[Mapping[str, Any]],
    trajectories: Mapping[tuple[str, ...], Sequence[Sequence[float]]] | None = None,
    *,
    gap: float = 0.01,
    ax: Any = None,
) -> Any:
    """Share of instances on which each solver came within ``gap`` of the best known value, by time.

    The reference per instance is its ``best_known`` column, else the best objective any solver
    found. Times come from recorded trajectories when given, else from the final result.
    """
    ax = _axes(ax)
    trajectories = trajectories or {}
    best: dict[str, float] = {}
    for r in rows:
        ref = as_float(r.get("best_known"))
        obj = as_float(r.get("objective"))
        cand = ref if ref is not None else obj
        if cand is not None:
            best[r["instance"]] = max(best.get(r["instance"], cand), cand)
    per_solver: dict[str, list[float]] = defaultdict(list)
    horizon = 0.0
    instances = sorted(best)
    for r in rows:
        if r.get("status") == "error" or r["instance"] not in best:
            continue
        key = (r["instance"], r["solver"], str(r["seed"]), str(r["time_limit"]))
        traj = trajectories.get(key) or [(as_float(r["time_s"]) or 0.0, as_float(r["objective"]) or 0.0)]
        t = time_to_gap(traj, best[r["instance"]], gap)
        horizon = max(horizon, as_float(r["time_limit"]) or 0.0, as_float(r["time_s"]) or 0.0)
        per_solver[r["solver"]].append(float("inf") if t is None else t)
    for i, (solver, times) in enumerate(sorted(per_solver.items())):
        ts = sorted(t for t in times if t != float("inf"))
        share = [(k + 1) / max(len(instances), 1) for k in range(len(ts))]
        ax.step([0.0, *ts, horizon], [0.0, *share, share[-1] if share else 0.0], where="post", color=f"C{i}", label=solver)
    ax.set_xscale("symlog", linthresh=0.01)
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"share of instances within {100 * gap:g}% of best")
    ax.set_ylim(0, 1.02)
    ax.set_title("performance profile")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return ax
