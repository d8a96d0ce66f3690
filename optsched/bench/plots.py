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
    trajectories: Mapping[str, Sequence[Sequence[Any]]], *, ax: Any = None, title: str = "",
    horizon: float | None = None,
) -> Any:
    """Primal (solid: the incumbent's worth) and dual (dashed: the proven bound) curves over time,
    for one instance and several methods, as step functions; a dot marks each change.

    ``trajectories`` maps a label (e.g. the solver) to ``[(t, objective, bound?), ...]``
    (:mod:`optsched.trajectory`). Each curve is drawn on to ``horizon`` (default: the last event
    of any trajectory), so a method's final values show as a line, not a lone dot.
    """
    ax = _axes(ax)
    end = horizon if horizon is not None else max((float(p[0]) for traj in trajectories.values() for p in traj), default=0.0)
    for i, (label, traj) in enumerate(sorted(trajectories.items())):
        color = f"C{i}"
        for k, style, name in ((1, "-", "primal"), (2, "--", "bound")):
            pts = [(float(p[0]), float(p[k])) for p in traj if len(p) > k and p[k] is not None]
            if not pts:
                continue
            xs, ys = [x for x, _ in pts], [y for _, y in pts]
            ax.step([*xs, max(end, xs[-1])], [*ys, ys[-1]], where="post", color=color, ls=style, label=f"{label} {name}")
            changed = [i for i in range(len(ys)) if i == 0 or ys[i] != ys[i - 1]]
            ax.plot([xs[i] for i in changed], [ys[i] for i in changed], ls="none", marker=".", color=color)
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
