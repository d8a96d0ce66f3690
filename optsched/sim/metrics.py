"""The files ``optsched simulate`` writes for a run (a metrics JSON and a per-job CSV) and reads
back, run ids, and comparisons across runs (means with confidence intervals, improvements); the
run's headline numbers themselves are :func:`optsched.sim.result.summarise`."""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from optsched.fields import file_path
from optsched.sim.result import SimResult, finite_or_none, summarise

__all__ = ["compare", "mean_ci", "read_run", "run_id", "run_stem", "write_jobs_csv", "write_metrics_json"]


def run_id(manifest: Mapping[str, Any]) -> str:
    """A short stable hash (6 hex digits of a sha256) of a run's manifest
    (:func:`optsched.sim.experiment.manifest`): runs that differ in any setting that changes the
    result get different ids. Where the trace file's sha256 is known its path is left out, so that
    the same trace read from another place gives the same id (a synthetic trace keeps its text,
    and the sha256 is that of the file it resamples)."""
    doc = _jsonable(manifest)
    setup = doc.get("setup")
    if isinstance(setup, dict) and setup.get("trace_sha256") and not str(setup.get("trace", "")).startswith("synthetic:"):
        doc = {**doc, "setup": {k: v for k, v in setup.items() if k != "trace"}}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def run_stem(result: SimResult) -> str:
    """``<policy>-<allocator>-s<seed>-<run_id>``: the file stem ``optsched simulate`` writes a run under."""
    info = result.info
    m = info.get("manifest") or {}
    rid = info.get("run_id") or run_id(m)
    return f"{m.get('policy', info.get('policy'))}-{m.get('allocator', info.get('allocator'))}-s{m.get('seed', info.get('seed'))}-{rid}"


def write_metrics_json(result: SimResult, path: str | Path) -> Path:
    """``{"manifest": every setting that changes the result, "run": info, "metrics": summary,
    "timeline": per-round columns}`` (``manifest`` only for runs made by
    :func:`optsched.sim.experiment.run`)."""
    p = file_path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    timeline = {k: [finite_or_none(x) for x in v.tolist()] for k, v in result.rounds.items()}
    info = dict(result.info)
    head = {"manifest": _jsonable(info.pop("manifest")), "run_id": info.pop("run_id", None)} if "manifest" in info else {}
    doc = {**head, "run": _jsonable(info), "metrics": summarise(result), "timeline": timeline}
    p.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return p


def write_jobs_csv(result: SimResult, path: str | Path) -> Path:
    """One row per job: ids, sizes, times (``nan``-free: empty when a job never started/finished)."""
    p = file_path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    cols = list(result.jobs)
    jct = result.jct_s
    with p.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([*cols, "jct_s", "queueing_delay_s"])
        for i in range(len(jct)):
            row = [_cell(result.jobs[c][i]) for c in cols]
            row += [_cell(jct[i]), _cell(result.jobs["start_s"][i] - result.jobs["submit_s"][i])]
            w.writerow(row)
    return p


def read_run(metrics_json: str | Path, jobs_csv: str | Path | None = None) -> SimResult:
    """A :class:`SimResult` back from the files :func:`write_metrics_json` (and, for the per-job
    columns, :func:`write_jobs_csv`) wrote: enough to summarise and plot a finished run again.
    Without ``jobs_csv`` the per-job columns are empty."""
    doc = json.loads(file_path(metrics_json, "metrics_json").read_text())
    rounds = {k: np.array([math.nan if x is None else x for x in v], dtype=np.float64) for k, v in doc["timeline"].items()}
    jobs: dict[str, np.ndarray] = {k: np.zeros(0) for k in ("submit_s", "start_s", "finish_s", "duration_s", "preemptions", "moves")}
    if jobs_csv is not None:
        with file_path(jobs_csv, "jobs_csv").open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        text = ("id", "model")
        for col in (rows[0].keys() if rows else ()):
            if col in ("jct_s", "queueing_delay_s"):
                continue
            vals = [r[col] for r in rows]
            jobs[col] = np.array(vals, dtype=object) if col in text else np.array([float(v) if v != "" else math.nan for v in vals])
    info = dict(doc["run"])
    if "manifest" in doc:
        info["manifest"], info["run_id"] = doc["manifest"], doc.get("run_id")
    return SimResult(name=info.get("name", Path(metrics_json).stem), jobs=jobs, rounds=rounds, info=info)


def _cell(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return "" if not math.isfinite(v) else repr(float(v))
    if isinstance(v, np.integer):
        return int(v)
    return v


def _jsonable(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return finite_or_none(float(v))
    return v


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Mean and the half-width of its Student-t confidence interval (0 for one value)."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if x.size == 0:
        return math.nan, math.nan
    if x.size == 1:
        return float(x[0]), 0.0
    from scipy import stats  # lazy: scipy.stats costs about a second to import and only confidence intervals need it

    half = stats.t.ppf(0.5 + confidence / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return float(x.mean()), float(half)


def compare(better: float | None, baseline: float | None) -> float | None:
    """Improvement of ``better`` over ``baseline`` in % (positive: lower is better and it is lower)."""
    if better is None or baseline is None or not baseline:
        return None
    return 100.0 * (baseline - better) / baseline
