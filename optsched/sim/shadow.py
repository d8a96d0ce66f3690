"""Shadow replays: run other allocators on every round the simulator solves, on the same state.

:class:`Shadowed` wraps the allocator whose schedules the simulator applies (the *primary*) and
calls one or more *shadow* allocators on each of the very same round instances. It records, per
round and per allocator, what the schedule is worth (recomputed by the independent checker) and
what it does to the queue: GPUs used, jobs kept, started and preempted, gangs started, moves,
whether the head of the queue started, and the round's solve time. Comparing the columns shows
whether an allocator loses *per round* (a budget or model problem: its worth is below the
shadow's on the same state) or wins per round and loses over time (its round objective is not
aligned with job completion times).

``optsched simulate --shadow fungible-greedy`` writes the records as ``<stem>.rounds.csv``;
:func:`shadow_summary` condenses them.
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from optsched.checker import check_schedule
from optsched.fields import file_path
from optsched.model import Instance
from optsched.result import Result
from optsched.schedule import Schedule

__all__ = ["SHADOW_COLUMNS", "Shadowed", "round_record", "shadow_summary", "write_rounds_csv"]

#: the per-allocator columns of a shadow record (each prefixed ``<label>.``)
SHADOW_COLUMNS = ("worth", "gpus_used", "jobs", "kept", "started", "preempted", "moved", "gangs_started",
                  "gang_gpus_started", "head_started", "solve_s")


def _as_schedule(out: Schedule | Result) -> tuple[Schedule, Result | None]:
    return (out.schedule, out) if isinstance(out, Result) else (out, None)


def round_record(instance: Instance, schedule: Schedule) -> dict[str, float]:
    """What ``schedule`` does on ``instance``: its worth (from the independent checker; ``nan``
    when the checker refuses it), GPUs used, scheduled jobs, running jobs kept and preempted,
    waiting jobs started, moves, multi-node gangs started (jobs larger than the round's largest
    node) with their GPUs, and whether the waiting job of highest weight started."""
    report = check_schedule(instance, schedule)
    worth = report.objective if not report else math.nan
    largest = max((n.gpus for n in instance.nodes), default=0)
    kept = preempted = started = moved = gangs = gang_gpus = 0
    head_weight, head_started = -math.inf, 0.0
    for job in instance.jobs:
        a = schedule.jobs.get(job.id)
        if job.placement is not None:
            if a is None:
                preempted += 1
            else:
                kept += 1
                if dict(job.placement) != {n: k for n, k in a.nodes.items() if k}:
                    moved += 1
            continue
        if job.weight > head_weight:
            head_weight, head_started = job.weight, float(a is not None)
        if a is not None:
            started += 1
            if job.gpus > largest:
                gangs += 1
                gang_gpus += job.gpus
    return {
        "worth": worth, "gpus_used": float(sum(a.gpus for a in schedule.jobs.values())), "jobs": float(len(schedule.jobs)),
        "kept": float(kept), "started": float(started), "preempted": float(preempted), "moved": float(moved),
        "gangs_started": float(gangs), "gang_gpus_started": float(gang_gpus),
        "head_started": head_started if head_weight > -math.inf else math.nan,
    }


class Shadowed:
    """An allocator that applies ``primary``'s schedules and records ``shadows``' on the same rounds.

    ``shadows`` maps a label to an allocator (a callable ``Instance -> Schedule | Result``, e.g. a
    :class:`~optsched.sim.engine.SolveRoundAllocator`). A shadow sees exactly the instance the
    primary saw, including the running jobs' placements that the *primary's* earlier schedules
    made; its own schedules are never applied. ``records`` holds one dict per solved round:
    ``t_s``, ``waiting``, ``free_gpus`` (not held by running jobs) and, per label (``primary``
    and each shadow's), the columns of :data:`SHADOW_COLUMNS`.
    """

    def __init__(self, primary: Callable[[Instance], Schedule | Result], shadows: Mapping[str, Callable[[Instance], Schedule | Result]],
                 name: str | None = None) -> None:
        if "primary" in shadows:
            raise ValueError("'primary' is the label of the applied allocator; name the shadows otherwise")
        self.primary = primary
        self.shadows = dict(shadows)
        self.name = name or getattr(primary, "name", type(primary).__name__)
        self.records: list[dict[str, float]] = []

    def __call__(self, instance: Instance) -> Schedule | Result:
        t0 = time.perf_counter()
        out = self.primary(instance)
        solve_s = time.perf_counter() - t0
        rec: dict[str, float] = {"t_s": _round_time(instance), "waiting": float(sum(j.placement is None for j in instance.jobs)),
                                 "free_gpus": float(sum(n.gpus for n in instance.nodes)
                                                    - sum(j.gpus for j in instance.jobs if j.placement is not None))}
        sched, _ = _as_schedule(out)
        rec.update({f"primary.{k}": v for k, v in round_record(instance, sched).items()})
        rec["primary.solve_s"] = solve_s
        for label, alloc in self.shadows.items():
            t0 = time.perf_counter()
            s_out = alloc(instance)
            s_solve = time.perf_counter() - t0
            s_sched, _ = _as_schedule(s_out)
            rec.update({f"{label}.{k}": v for k, v in round_record(instance, s_sched).items()})
            rec[f"{label}.solve_s"] = s_solve
        self.records.append(rec)
        return out


def _round_time(instance: Instance) -> float:
    """The simulated time the engine writes into a round's name (``<name>-t<seconds>``)."""
    head, _, tail = instance.name.rpartition("-t")
    try:
        return float(tail) if head else math.nan
    except ValueError:
        return math.nan


def write_rounds_csv(records: Sequence[Mapping[str, float]], path: str | Path) -> Path:
    """The records of :class:`Shadowed`, one row per solved round."""
    path = file_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = list(dict.fromkeys(k for r in records for k in r))
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in records:
            w.writerow({k: r.get(k, "") for k in cols})
    return path


def shadow_summary(records: Sequence[Mapping[str, float]], shadow: str, primary: str = "primary") -> dict[str, Any]:
    """How ``primary`` compares with ``shadow`` over the rounds both solved.

    ``worth_ratio_mean``: mean of primary worth / shadow worth over rounds where the shadow's
    worth is > 0; ``rounds_worse`` / ``rounds_better``: shares of rounds where the primary's worth
    is below / above the shadow's by more than 1e-6 relative; and the per-round means of the
    other columns for both."""
    if not records:
        return {"rounds": 0}
    p = {k: np.array([r.get(f"{primary}.{k}", math.nan) for r in records], dtype=np.float64) for k in SHADOW_COLUMNS}
    s = {k: np.array([r.get(f"{shadow}.{k}", math.nan) for r in records], dtype=np.float64) for k in SHADOW_COLUMNS}
    ok = np.isfinite(p["worth"]) & np.isfinite(s["worth"])
    pos = ok & (s["worth"] > 0)
    tol = 1e-6 * np.maximum(1.0, np.abs(s["worth"]))
    out: dict[str, Any] = {
        "rounds": len(records),
        "worth_ratio_mean": float(np.mean(p["worth"][pos] / s["worth"][pos])) if pos.any() else None,
        "rounds_worse": float(np.mean(p["worth"][ok] < s["worth"][ok] - tol[ok])) if ok.any() else None,
        "rounds_better": float(np.mean(p["worth"][ok] > s["worth"][ok] + tol[ok])) if ok.any() else None,
    }
    for k in SHADOW_COLUMNS[1:]:
        out[f"{primary}.{k}"] = float(np.nanmean(p[k])) if np.isfinite(p[k]).any() else None
        out[f"{shadow}.{k}"] = float(np.nanmean(s[k])) if np.isfinite(s[k]).any() else None
    return out
