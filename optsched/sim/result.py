"""What a simulation run produced (:class:`SimResult`) and its headline numbers (:func:`summarise`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optsched.sim.deadlines import deadline_metrics

__all__ = ["SimResult", "finite_or_none", "summarise"]


@dataclass
class SimResult:
    """What a run produced: per-job columns, per-round columns, and the run's description."""

    name: str
    jobs: dict[str, np.ndarray]  #: id, model, gpus, submit_s, start_s, finish_s, duration_s, run_s, preemptions, moves, deadline_s, slo
    rounds: dict[str, np.ndarray]  #: t_s, active, running, waiting, gpu/cpu/mem_util, solved, solve_s, objective, gap
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def jct_s(self) -> np.ndarray:
        return self.jobs["finish_s"] - self.jobs["submit_s"]

    @property
    def finished(self) -> np.ndarray:
        return np.isfinite(self.jobs["finish_s"])

    def summary(self) -> dict[str, Any]:
        """The run's headline numbers (:func:`summarise`)."""
        return summarise(self)


def finite_or_none(x: float | None) -> float | None:
    """``x`` as a float, or ``None`` when it is ``None``, nan or infinite (JSON has no nan)."""
    return None if x is None or not math.isfinite(x) else float(x)


def _time_avg(rounds: Mapping[str, np.ndarray], key: str, end: float) -> float | None:
    """Time-weighted average of a per-round quantity over ``[first round, end)``; the clock's
    jumps over idle periods count as zero."""
    t = rounds["t_s"]
    if t.size == 0 or end <= t[0]:
        return None
    lengths = np.clip(np.minimum(t + rounds["span_s"], end) - t, 0.0, None)
    return float(np.sum(rounds[key] * lengths) / (end - t[0]))


def summarise(result: SimResult) -> dict[str, Any]:
    """The run's headline numbers (seconds; shares in [0, 1]); ``None`` where undefined."""
    jobs, rounds = result.jobs, result.rounds
    fin = np.isfinite(jobs["finish_s"])
    jct = (jobs["finish_s"] - jobs["submit_s"])[fin]
    started = np.isfinite(jobs["start_s"])
    delay = (jobs["start_s"] - jobs["submit_s"])[started]
    first = float(jobs["submit_s"].min()) if jobs["submit_s"].size else 0.0
    end = float(jobs["finish_s"][fin].max()) if fin.any() else first
    # utilisation averages over the replay: to the last completion, or, where the horizon cut it
    # with jobs left (not a stall: nothing ran then), to where it stopped
    util_end = end
    if not fin.all() and not result.info.get("stalled"):
        util_end = max(end, float(result.info.get("end_s", end)))
    round_s = float(result.info.get("config", {}).get("round_s", 300.0))
    spans = rounds["span_s"]
    solved = rounds["solved"] > 0 if rounds["solved"].size else np.zeros(0, dtype=bool)
    solve_s = rounds["solve_s"][solved]
    gaps = rounds["gap"][solved]
    gaps = gaps[np.isfinite(gaps)]
    out: dict[str, Any] = {
        "jobs": int(jobs["submit_s"].size),
        "finished": int(fin.sum()),
        "unfinished": int((~fin).sum()),
        "avg_jct_s": finite_or_none(jct.mean()) if jct.size else None,
        "median_jct_s": finite_or_none(np.median(jct)) if jct.size else None,
        "p95_jct_s": finite_or_none(np.percentile(jct, 95)) if jct.size else None,
        "p99_jct_s": finite_or_none(np.percentile(jct, 99)) if jct.size else None,
        "makespan_s": finite_or_none(end - first) if fin.any() else None,
        "avg_queueing_delay_s": finite_or_none(delay.mean()) if delay.size else None,
        "avg_slowdown": finite_or_none(np.mean(jct / jobs["duration_s"][fin])) if jct.size else None,
        "gpu_util": _time_avg(rounds, "gpu_util", util_end),
        "cpu_util": _time_avg(rounds, "cpu_util", util_end),
        "mem_util": _time_avg(rounds, "mem_util", util_end),
        "preemptions": int(jobs["preemptions"].sum()),
        "moves": int(jobs["moves"].sum()),
        "rounds": int(round(float(spans.sum()) / round_s)),  #: rounds simulated
        "steps": int(rounds["t_s"].size),  #: of which the engine stepped through one by one (the rest in blocks)
        "solver_calls": int(solved.sum()),
        "solve_s_mean": finite_or_none(solve_s.mean()) if solve_s.size else None,
        "solve_s_p95": finite_or_none(np.percentile(solve_s, 95)) if solve_s.size else None,
        "solve_s_max": finite_or_none(solve_s.max()) if solve_s.size else None,
        "solve_s_total": finite_or_none(solve_s.sum()) if solve_s.size else 0.0,
        "solve_cpu_s_total": finite_or_none(float(rounds["solve_cpu_s"].sum())),
        "gap_mean": finite_or_none(gaps.mean()) if gaps.size else None,
        "gap_max": finite_or_none(gaps.max()) if gaps.size else None,
        "wall_s": finite_or_none(result.info.get("wall_s", math.nan)),
        "cpu_s": finite_or_none(result.info.get("cpu_s", math.nan)),
    }
    out.update(deadline_metrics(jobs))  #: SLO counts and deadline satisfaction, when the run had SLO jobs
    return out
