"""The instance library's index: one row per instance with its best-known value and best bound.

``instances/index.csv`` is regenerated from results tables (``optsched bench ... --update-index``):
the best-known objective is the best feasible objective any run found, the best bound the
smallest proven bound (a solver's, or the LP relaxation's with ``--lp-bound``), and an instance
is proven optimal when an exact run says so (CP-SAT proves optimality on its integer-scaled
objective, within 1e-5 relative) or the two values meet (1e-6 relative).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tqdm import tqdm

from optsched.bench.runner import as_float
from optsched.bench.summary import size_class
from optsched.io import load_instance
from optsched.mip.bound import lp_bound

__all__ = ["INDEX_COLUMNS", "instance_files", "lp_bounds", "read_index", "update_index"]

INDEX_COLUMNS = (
    "instance", "path", "class", "nodes", "jobs", "gpus", "gpu_types", "fair", "running",
    "best_known", "best_bound", "lp_bound", "gap", "proven_optimal", "best_solver",
)  # fmt: skip


def instance_files(paths: Iterable[str | Path]) -> list[Path]:
    """Instance files named directly or found (recursively) in directories, sorted, no duplicates."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found += sorted(q for q in p.rglob("*") if q.name.endswith((".json", ".json.gz")) and "index" not in q.name)
        else:
            found.append(p)
    return list(dict.fromkeys(found))


def read_index(path: str | Path) -> dict[str, dict[str, str]]:
    p = Path(path)
    if not p.exists():
        return {}
    with p.open(newline="") as f:
        return {r["instance"]: r for r in csv.DictReader(f)}


def _describe(path: Path, root: Path) -> dict[str, Any]:
    inst = load_instance(path)
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        rel = path
    return {
        "instance": path.name,
        "path": str(rel),
        "class": size_class(len(inst.nodes), len(inst.jobs)),
        "nodes": len(inst.nodes),
        "jobs": len(inst.jobs),
        "gpus": sum(n.gpus for n in inst.nodes),
        "gpu_types": "+".join(sorted(inst.gpu_types)),
        "fair": int(inst.round.fair),
        "running": sum(1 for j in inst.jobs if j.running),
    }


def lp_bounds(files: Iterable[Path], *, time_limit: float = 60.0, progress: bool = True) -> dict[str, float]:
    """The LP-relaxation bound (:func:`optsched.mip.bound.lp_bound`) of each instance file, by name;
    instances whose LP does not finish within ``time_limit`` are left out."""
    files = list(files)
    out = {}
    for f in tqdm(files, desc="LP bounds", unit="instance", disable=not progress):
        try:
            out[f.name] = lp_bound(load_instance(f), time_limit=time_limit)
        except RuntimeError:  # the LP hit its time limit
            continue
    return out


def update_index(
    path: str | Path,
    files: Iterable[Path],
    rows: Iterable[Mapping[str, Any]],
    lp: Mapping[str, float] | None = None,
) -> dict[str, dict[str, Any]]:
    """Merge results ``rows`` (and LP bounds ``lp``, by instance name) into the index at ``path``
    (created if absent) and write it back."""
    path = Path(path)
    index: dict[str, dict[str, Any]] = dict(read_index(path))
    for f in files:
        entry = index.get(f.name, {})
        index[f.name] = {**entry, **_describe(f, path.parent)}
    proven: set[str] = {name for name, e in index.items() if str(e.get("proven_optimal")) == "1"}
    for name, b in (lp or {}).items():
        if name in index:
            index[name]["lp_bound"] = b
            bb = as_float(index[name].get("best_bound"))
            if bb is None or b < bb:
                index[name]["best_bound"] = b
    for r in rows:
        e = index.get(r["instance"])
        if e is None or r.get("status") == "error" or str(r.get("feasible")) != "1":
            continue
        obj, bound = as_float(r.get("objective")), as_float(r.get("bound"))
        bk = as_float(e.get("best_known"))
        if obj is not None and (bk is None or obj > bk + 1e-12):
            e["best_known"], e["best_solver"] = obj, r["solver"]
        bb = as_float(e.get("best_bound"))
        if bound is not None and (bb is None or bound < bb):
            e["best_bound"] = bound
        if r.get("status") == "optimal":
            proven.add(r["instance"])
    for name, e in index.items():
        bk, bb = as_float(e.get("best_known")), as_float(e.get("best_bound"))
        if bk is not None and bb is not None:
            gap = max(0.0, (bb - bk) / max(abs(bb), 1e-9))
            e["gap"], e["proven_optimal"] = gap, int(gap <= 1e-6 or (name in proven and gap <= 1e-5))
        else:
            e["gap"], e["proven_optimal"] = "", 0
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=INDEX_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for name in sorted(index, key=lambda n: (index[n].get("path", ""), n)):
            w.writerow({c: index[name].get(c, "") for c in INDEX_COLUMNS})
    tmp.replace(path)
    return index
