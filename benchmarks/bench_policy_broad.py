"""Learned-policy weights compared on large library rounds and on unfamiliar small rounds.

For each weights file (default: the shipped ``maifs-small.npz`` and ``maifs-broad.npz``), in one run:

- **large**: the library's 1,024 x 4,000 rounds, ``method="learned"`` with ``repair=False`` (the
  network and its greedy decode alone) and with the default repair, gap to the round's LP bound
  (``instances/index.csv``) and wall time;
- **unfamiliar small**: rounds of each ``--generators`` entry,
  :func:`optsched.learned.curriculum.unfamiliar_round` (GPU types, node shapes, model mixes, gang
  mixes, tightness and running shares that no training set draws) and
  :func:`optsched.learned.curriculum.shapes_round` (random profile surfaces of no catalogue
  model), ``method="learned"`` with its defaults (and, with ``--no-repair``, also without the
  repair), gap to the CP-SAT optimum (rounds CP-SAT does not prove optimal within
  ``--cpsat-limit`` are left out and counted) and wall time.

    python benchmarks/bench_policy_broad.py -o runs/bench-policy-broad.json

Optima are cached in ``--cache`` (JSON), so a rerun only solves the policy.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from optsched.io import load_instance
from optsched.learned.curriculum import shapes_round, unfamiliar_round
from optsched.solve import solve_round

WEIGHTS = Path(__file__).resolve().parents[1] / "optsched" / "learned" / "weights"
LIBRARY = Path(__file__).resolve().parents[1] / "instances"
LARGE = ("l-1024n-4000j-01.json.gz", "l-1024n-4000j-het-run-01.json.gz")
#: the small-round generators and the first seed of each (per size: + 1000 x nodes + k)
GENERATORS = {"unfamiliar": (unfamiliar_round, 7_000_000), "shapes": (shapes_round, 9_000_000)}


def _lp_bounds(library: Path) -> dict[str, float]:
    with (library / "index.csv").open() as f:
        return {r["instance"]: float(r["lp_bound"]) for r in csv.DictReader(f)}


def _optimum(args: tuple[str, int, int, int, float]) -> dict:
    gen, n, j, seed, limit = args
    r = solve_round(GENERATORS[gen][0](n, j, seed=seed), solver="cpsat", time_limit=limit, num_workers=1)
    return {"objective": r.objective, "optimal": r.status.value == "optimal"}


def _optima(gen: str, sizes: list[tuple[int, int]], count: int, limit: float, cache: Path, workers: int) -> list[dict]:
    known = json.loads(cache.read_text()) if cache.exists() else {}
    todo = [(gen, n, j, GENERATORS[gen][1] + 1000 * n + s) for n, j in sizes for s in range(count)]
    key = lambda g, n, j, seed: f"{'' if g == 'unfamiliar' else g + '-'}{n}x{j}-s{seed}-t{limit}"  # noqa: E731
    missing = [t for t in todo if key(*t) not in known]
    if missing:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for t, res in zip(missing, pool.map(_optimum, [(*t, limit) for t in missing]), strict=True):
                known[key(*t)] = res
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(known, indent=0))
    return [{"size": f"{n}x{j}", "seed": seed, **known[key(g, n, j, seed)]} for g, n, j, seed in todo]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weights", nargs="+", default=[str(WEIGHTS / "maifs-small.npz"), str(WEIGHTS / "maifs-broad.npz")])
    p.add_argument("--sizes", default="2x6,4x12,5x18", help="unfamiliar small round sizes NODESxJOBS")
    p.add_argument("--count", type=int, default=20, help="unfamiliar rounds per size")
    p.add_argument("--cpsat-limit", type=float, default=20.0, help="CP-SAT seconds for the optimum of a small round")
    p.add_argument("--cache", default="runs/bench-policy-broad-optima.json")
    p.add_argument("--workers", type=int, default=2, help="processes for the CP-SAT optima")
    p.add_argument("--library", default=str(LIBRARY), help="the instance library (its index.csv and large/)")
    p.add_argument("--generators", default="unfamiliar,shapes", help=f"small-round generators, comma-separated: {', '.join(GENERATORS)}")
    p.add_argument("--no-repair", action="store_true", help="small rounds also without the repair (repair=False)")
    p.add_argument("--skip", nargs="*", default=[], choices=["large", "small"])
    p.add_argument("-o", "--output", default="runs/bench-policy-broad.json")
    a = p.parse_args(argv)
    out: dict = {"weights": a.weights, "large": [], "small": {}}
    if "large" not in a.skip:
        lp = _lp_bounds(Path(a.library))
        for name in LARGE:
            inst = load_instance(Path(a.library) / "large" / name)
            for w in a.weights:
                for repair in (False, True):
                    t = time.perf_counter()
                    r = solve_round(inst, method="learned", time_limit=30.0, weights=w, repair=repair)
                    wall = time.perf_counter() - t
                    row = {"instance": name, "weights": Path(w).name, "repair": repair, "objective": r.objective,
                           "gap_to_lp": (lp[name] - r.objective) / lp[name], "wall_s": wall}
                    out["large"].append(row)
                    print(json.dumps(row), flush=True)
    if "small" not in a.skip:
        sizes = [tuple(int(x) for x in s.split("x")) for s in a.sizes.split(",")]
        out["small_rounds"] = {}
        for gen in a.generators.split(","):
            if gen not in GENERATORS:
                p.error(f"--generators: unknown {gen!r}; known: {', '.join(GENERATORS)}")
            opt = _optima(gen, sizes, a.count, a.cpsat_limit, Path(a.cache), a.workers)
            proven = [o for o in opt if o["optimal"]]
            out["small_rounds"][gen] = {"total": len(opt), "proven_optimal": len(proven)}
            for w in a.weights:
                for repair in [None, False] if a.no_repair else [None]:
                    gaps, times, per = [], [], {}
                    for o in proven:
                        n, j = (int(x) for x in o["size"].split("x"))
                        inst = GENERATORS[gen][0](n, j, seed=o["seed"])
                        t = time.perf_counter()
                        r = solve_round(inst, method="learned", time_limit=2.0, weights=w, repair=repair)
                        times.append(time.perf_counter() - t)
                        g = (o["objective"] - r.objective) / max(o["objective"], 1e-9)
                        gaps.append(g)
                        per.setdefault(o["size"], []).append(g)
                    row = {"generator": gen, "weights": Path(w).name, "repair": "default" if repair is None else repair,
                           "median_gap": float(np.median(gaps)), "p90_gap": float(np.quantile(gaps, 0.9)), "max_gap": float(np.max(gaps)),
                           "median_s": float(np.median(times)), "p90_s": float(np.quantile(times, 0.9)),
                           "by_size_median": {k: float(np.median(v)) for k, v in per.items()}, "rounds": len(gaps)}
                    out["small"].setdefault(gen, []).append(row)
                    print(json.dumps(row), flush=True)
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
