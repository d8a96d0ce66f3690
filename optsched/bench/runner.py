"""The benchmark runner: instances x solvers x seeds, in parallel, resumable, one tidy row per run.

Rows are appended to a CSV file as each run completes (flushed and fsynced), so an interrupted
sweep loses nothing; re-running the same command skips every (instance, solver, seed,
time_limit) already present. Column meanings are documented in ``docs/benchmarking.md``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import time
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from optsched.checker import check_schedule
from optsched.io import load_instance
from optsched.parallel import Backend, get_backend
from optsched.registry import get_method
from optsched.solve import solve_round

__all__ = [
    "COLUMNS", "BenchTask", "primal_gap", "primal_integral", "read_rows", "read_trajectories", "rescore", "run_bench", "run_task",
    "time_to_gap", "trajectory_path", "write_rows",
]

COLUMNS = (
    "instance", "nodes", "jobs", "method", "solver", "seed", "time_limit", "status", "feasible",
    "objective", "bound", "gap", "best_known", "gap_to_best", "time_s", "time_to_1pct",
    "primal_integral", "error",
)  # fmt: skip

_KEY = ("instance", "solver", "seed", "time_limit")


@dataclass(frozen=True)
class BenchTask:
    instance: str  #: path of the instance file
    solver: str
    seed: int = 0
    time_limit: float = 10.0
    best_known: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def key(self) -> tuple[str, str, str, str]:
        return (Path(self.instance).name, self.solver, str(self.seed), _fmt(self.time_limit))


def _fmt(x: float) -> str:
    return f"{x:g}"


def time_to_gap(trajectory: Sequence[Sequence[Any]], reference: float | None, gap: float = 0.01) -> float | None:
    """First time the incumbent came within ``gap`` (relative) of ``reference``: the smallest
    ``t`` of a point whose objective ``z`` has ``reference - z <= gap * |reference|``; ``None`` if
    never (or without a reference). ``trajectory`` is ``[(t, objective, bound?), ...]`` in time
    order, ``objective`` ``None`` before the first incumbent."""
    if reference is None:
        return None
    for t, obj, *_ in trajectory:
        if obj is not None and reference - obj <= gap * max(abs(reference), 1e-9):
            return float(t)
    return None


def primal_gap(reference: float, objective: float | None) -> float:
    """Berthold's primal gap of an incumbent worth ``objective`` against the best known value
    ``reference``: 1 without an incumbent or when the two differ in sign, 0 when both are 0,
    else ``|reference - objective| / max(|reference|, |objective|)`` (in [0, 1])."""
    if objective is None or reference * objective < 0:
        return 1.0
    if reference == 0 and objective == 0:
        return 0.0
    return abs(reference - objective) / max(abs(reference), abs(objective))


def primal_integral(trajectory: Sequence[Sequence[Any]], reference: float | None, horizon: float) -> float | None:
    """Berthold's primal integral (Operations Research Letters 41(6), 2013): the integral over
    ``[0, horizon]`` of the primal gap :func:`primal_gap` of the incumbent at time ``t``, a step
    function that changes at each point of ``trajectory`` (``[(t, objective, bound?), ...]``, in
    time order) and is 1 before the first incumbent. In seconds: 0 for an optimal schedule at
    once, ``horizon`` for none. ``None`` without a reference or a positive horizon."""
    if reference is None or horizon <= 0:
        return None
    total, last_t, last_gap = 0.0, 0.0, 1.0
    for t, obj, *_ in trajectory:
        t = min(max(float(t), last_t), horizon)
        total += last_gap * (t - last_t)
        last_t = t
        if obj is not None:
            last_gap = primal_gap(reference, float(obj))
    return total + last_gap * (horizon - last_t)


def run_task(task: BenchTask) -> dict[str, Any]:
    """One run, never raising: a crash becomes a row with ``error`` set."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS, "")
    row.update(instance=Path(task.instance).name, solver=task.solver, seed=task.seed, time_limit=_fmt(task.time_limit))
    try:
        inst = load_instance(task.instance)
        # "auto" is solve_round's own choice (recorded in the row's method column as auto:SOLVER)
        auto = task.solver == "auto"
        how: dict[str, Any] = {"method": "auto"} if auto else {"solver": task.solver}
        row.update(nodes=len(inst.nodes), jobs=len(inst.jobs), method="auto" if auto else get_method(task.solver).family)
        start = time.perf_counter()
        res = solve_round(inst, **how, time_limit=task.time_limit, seed=task.seed, **dict(task.options))
        if auto:
            row["method"] = f"auto:{res.solver}"
        wall = time.perf_counter() - start
        report = check_schedule(inst, res.schedule)
        traj = [tuple(p) for p in res.trajectory] or [(res.time_s, res.objective, res.bound)]
        row.update(
            status=res.status.value,
            feasible=int(not report),
            objective=res.objective,
            bound="" if res.bound is None else res.bound,
            gap="" if res.gap is None else res.gap,
            best_known="" if task.best_known is None else task.best_known,
            gap_to_best="" if task.best_known is None else max(0.0, (task.best_known - res.objective) / max(abs(task.best_known), 1e-9)),
            time_s=round(wall, 4),
        )
        t1, pi = _metrics(traj, task.best_known, res.bound, res.objective, max(task.time_limit, wall))
        row.update(time_to_1pct="" if t1 is None else round(t1, 4), primal_integral="" if pi is None else round(pi, 4))
        row["_trajectory"] = [list(p) for p in traj]
    except Exception as e:  # noqa: BLE001 - a benchmark records failures instead of stopping the sweep
        row["error"] = f"{type(e).__name__}: {e}".replace("\n", " ")[:500]
        row["status"] = "error"
        if os.environ.get("OPTSCHED_BENCH_TRACEBACK"):
            traceback.print_exc()
    return row


def _metrics(traj: Sequence[Sequence[Any]], best_known: float | None, bound: float | None, objective: float,
             horizon: float) -> tuple[float | None, float | None]:
    """``time_to_1pct`` against the best-known value, else the run's final bound; the primal
    integral against the best-known value, else the best objective the run found."""
    t1 = time_to_gap(traj, best_known if best_known is not None else bound)
    return t1, primal_integral(traj, best_known if best_known is not None else objective, horizon)


def _done_keys(path: Path) -> set[tuple[str, ...]]:
    if not path.exists():
        return set()
    with path.open(newline="") as f:
        return {tuple(r[k] for k in _KEY) for r in csv.DictReader(f) if r.get("status") != "error"}


def trajectory_path(out: str | Path) -> Path:
    """Where the incumbent/bound trajectories of a results table live (JSON lines beside it)."""
    out = Path(out)
    return out.with_name(out.stem + ".trajectories.jsonl")


def read_trajectories(out: str | Path) -> dict[tuple[str, ...], list[list[float]]]:
    """(instance, solver, seed, time_limit) -> [[t, objective, bound?], ...] for every run recorded."""
    p = trajectory_path(out)
    if not p.exists():
        return {}
    found = {}
    for line in p.read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            found[tuple(d[k] for k in _KEY)] = d["trajectory"]
    return found


def read_rows(path: str | Path) -> list[dict[str, str]]:
    with Path(path).open(newline="") as f:
        return list(csv.DictReader(f))


def write_rows(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Rewrite a results table atomically (a crash leaves the old file whole)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in COLUMNS})
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def rescore(
    rows: Iterable[Mapping[str, Any]],
    trajectories: Mapping[tuple[str, ...], Sequence[Sequence[float]]],
    best_known: Mapping[str, float],
) -> list[dict[str, Any]]:
    """Rows with ``best_known``, ``gap_to_best``, ``time_to_1pct`` and ``primal_integral`` recomputed
    against ``best_known`` (instance name -> value, e.g. from the index after a sweep), so runs made
    before the best value was known are measured against it too. Other columns are kept."""
    out = []
    for r in rows:
        r = dict(r)
        ref = best_known.get(r["instance"])
        obj = as_float(r.get("objective"))
        if ref is not None and obj is not None and r.get("status") != "error":
            traj = trajectories.get(tuple(str(r[k]) for k in _KEY)) or [(as_float(r["time_s"]) or 0.0, obj)]
            horizon = max(as_float(r["time_limit"]) or 0.0, as_float(r["time_s"]) or 0.0)
            t1, pi = _metrics(traj, ref, as_float(r.get("bound")), obj, horizon)
            r.update(
                best_known=ref,
                gap_to_best=max(0.0, (ref - obj) / max(abs(ref), 1e-9)),
                time_to_1pct="" if t1 is None else round(t1, 4),
                primal_integral="" if pi is None else round(pi, 4),
            )
        out.append(r)
    return out


def run_bench(
    tasks: Iterable[BenchTask],
    out: str | Path,
    *,
    backend: str | Backend = "local",
    workers: int | None = 1,
    address: str | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Run every task not already in ``out`` and append its row; returns the new rows.

    ``workers=1`` (the default) runs one solve at a time so each gets the whole machine: timings
    in the table are then comparable. Rows that errored are retried on the next run.
    ``backend`` is ``"local"``, ``"serial"``, ``"ray"`` (joining the Ray cluster at ``address``,
    or a local one) or any object with the backend protocol's ``imap_unordered``.
    """
    out = Path(out)
    done = _done_keys(out)
    todo = [t for t in tasks if t.key() not in done]
    be = get_backend(backend, workers=workers, address=address) if isinstance(backend, str) else backend
    out.parent.mkdir(parents=True, exist_ok=True)
    new_file = not out.exists() or out.stat().st_size == 0
    rows: list[dict[str, Any]] = []
    with out.open("a", newline="") as f, trajectory_path(out).open("a") as ft:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        if new_file:
            writer.writeheader()
        bar = tqdm(total=len(todo), desc="bench", unit="run", disable=not progress or not todo)
        for row in be.imap_unordered(run_task, todo):
            writer.writerow(row)
            f.flush()
            os.fsync(f.fileno())
            if "_trajectory" in row:
                ft.write(json.dumps({**{k: str(row[k]) for k in _KEY}, "trajectory": row.pop("_trajectory")}) + "\n")
                ft.flush()
            rows.append(row)
            bar.update(1)
            bar.set_postfix_str(f"{row['solver']} {row['status']}")
        bar.close()
    return rows


def as_float(x: Any) -> float | None:
    """A CSV cell as float (``None`` for empty cells)."""
    if x is None or x == "":
        return None
    v = float(x)
    return v if math.isfinite(v) else None
