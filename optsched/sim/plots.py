"""Simulator plots. One function per plot; each draws on an optional matplotlib ``ax``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from optsched.extras import pyplot
from optsched.sim.result import SimResult

__all__ = ["plot_jct_cdf", "plot_queue", "plot_runs", "plot_utilisation"]


def _axes(ax: Any) -> Any:
    if ax is None:
        _, ax = pyplot().subplots(figsize=(6, 4))
    return ax


def _legend(ax: Any, empty: str) -> None:
    """A legend when some run drew a line; otherwise ``empty`` written across the panel."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    else:
        ax.text(0.5, 0.5, empty, ha="center", va="center", transform=ax.transAxes, color="grey")


def plot_jct_cdf(runs: Mapping[str, SimResult], *, ax: Any = None, log: bool = True) -> Any:
    """Empirical CDF of job completion times (finished jobs), one line per run."""
    ax = _axes(ax)
    for label, res in runs.items():
        jct = np.sort(res.jct_s[res.finished]) / 3600.0
        if jct.size:
            ax.step(jct, np.arange(1, jct.size + 1) / jct.size, where="post", label=label)
    if log:
        ax.set_xscale("log")
    ax.set_xlabel("JCT (hours)")
    ax.set_ylabel("share of jobs")
    ax.set_title("job completion time CDF")
    ax.grid(alpha=0.3)
    _legend(ax, "no job finished")
    return ax


def plot_utilisation(runs: Mapping[str, SimResult], *, resource: str = "gpu", ax: Any = None) -> Any:
    """Share of the cluster's ``resource`` (gpu, cpu, mem) allocated per round, one line per run."""
    ax = _axes(ax)
    key = f"{resource}_util"
    for label, res in runs.items():
        t = res.rounds["t_s"] / 3600.0
        if t.size:
            ax.step(t, res.rounds[key], where="post", label=label, lw=0.8)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel(f"{resource.upper()} allocated")
    ax.set_title(f"{resource.upper()} utilisation")
    ax.grid(alpha=0.3)
    _legend(ax, "no round")
    return ax


def plot_queue(runs: Mapping[str, SimResult], *, ax: Any = None) -> Any:
    """Jobs waiting per round, one line per run."""
    ax = _axes(ax)
    for label, res in runs.items():
        ax.step(res.rounds["t_s"] / 3600.0, res.rounds["waiting"], where="post", label=label, lw=0.8)
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel("jobs waiting")
    ax.set_title("queue length")
    ax.grid(alpha=0.3)
    _legend(ax, "no round")
    return ax


def plot_runs(runs: Mapping[str, SimResult], path: str | Path, *, resources: Sequence[str] = ("gpu", "cpu", "mem")) -> Path:
    """Runs side by side: JCT CDFs, the queue, and one utilisation timeline per resource; a PNG."""
    plt = pyplot()
    panels = 2 + len(resources)
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4))
    plot_jct_cdf(runs, ax=axes[0])
    plot_queue(runs, ax=axes[1])
    for ax, r in zip(axes[2:], resources, strict=True):
        plot_utilisation(runs, resource=r, ax=ax)
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p
