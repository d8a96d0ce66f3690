"""The partitioned solver: speed-up from 1 to N local workers, and quality against plain lns.

    flock /tmp/optsched-heavy.lock python benchmarks/bench_partition.py --time-limit 20

1. **Speed-up** (``--speedup-round``, ``--parts``, ``--work``, ``--speedup-workers``): the same
   partitioned solve (fixed deterministic budget per part, so the work is the same) with 1 worker
   (in process) and with each count of local processes in ``--speedup-workers``; prints the wall
   times, their ratios to 1 worker, and whether the schedules are identical (they must be:
   answers are taken in part order).
2. **Quality** (``--rounds``, default the large and huge library rounds): plain ``lns``, and
   ``partitioned`` with its defaults (price re-balancing, 2 passes), with one pass (no
   re-balancing) and with re-balancing by room only, each at ``--time-limit`` through
   ``solve_round`` (checker included); gap to the LP bound of ``instances/index.csv``.

The load average is printed beside the timings: the machine is shared. Writes
``<out>/summary.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROUNDS = ["large/l-256n-1000j-01.json.gz", "large/l-1024n-4000j-01.json.gz", "large/l-1024n-4000j-het-run-01.json.gz",
          "huge/h-2048n-8000j-01.json.gz"]
CONFIGS = {
    "lns": ("lns", {}),
    "partitioned": ("partitioned", {}),
    "partitioned 1 pass": ("partitioned", {"passes": 1}),
    "partitioned by room": ("partitioned", {"rebalance": "leftover"}),
}


def _bounds() -> dict[str, float]:
    with open(REPO / "instances" / "index.csv") as f:
        return {r["path"]: float(r["lp_bound"]) for r in csv.DictReader(f)}


def _peak_mb() -> float:
    """Peak resident memory of this process and of its finished children (MB; Linux reports kB)."""
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(me, kids) / 1024


def speedup(path: Path, *, parts: int, work: float, workers: list[int], seed: int) -> dict:
    """The same partitioned solve with 1 worker (in process) and with each count in ``workers``."""
    from optsched import load_instance, solve_round

    inst = load_instance(path)
    out: dict = {"round": path.name, "parts": parts, "work": work, "workers": workers}
    results = {}
    for w in (1, *[w for w in workers if w != 1]):
        t0 = time.perf_counter()
        res = solve_round(inst, solver="partitioned", time_limit=600.0, seed=seed, parts=parts, work=work, workers=w)
        results[w] = (time.perf_counter() - t0, res)
        out[f"wall_s_{w}"] = round(results[w][0], 2)
        out[f"cut_parts_{w}"] = res.stats["cut_parts"]
        out[f"passes_s_{w}"] = round(sum(res.stats["pass_s"]), 2)  # the parallel part of the solve
        out[f"objective_{w}"] = res.objective
        if w != 1:
            out[f"speedup_{w}"] = round(results[1][0] / results[w][0], 2)
            out[f"passes_speedup_{w}"] = round(out["passes_s_1"] / out[f"passes_s_{w}"], 2)
            out[f"identical_{w}"] = results[1][1].schedule.to_dict()["jobs"] == res.schedule.to_dict()["jobs"]
    out["load_avg"] = os.getloadavg()[0]
    return out


def quality(paths: list[str], *, time_limit: float, seed: int, workers: int, configs: list[str]) -> list[dict]:
    from optsched import load_instance, solve_round

    bounds = _bounds()
    rows = []
    for rel in paths:
        inst = load_instance(REPO / "instances" / rel)
        bound = bounds[rel]
        for name in configs:
            solver, opts = CONFIGS[name]
            if solver == "partitioned":
                opts = {"workers": workers, **opts}
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            res = solve_round(inst, solver=solver, time_limit=time_limit, seed=seed, **opts)
            wall = time.perf_counter() - t0
            row = {"round": Path(rel).name, "method": name, "time_limit": time_limit, "wall_s": round(wall, 2),
                   "objective": round(res.objective, 3), "lp_bound": round(bound, 3),
                   "gap_pct": round(100 * (bound - res.objective) / bound, 3), "load_avg": round(load, 2)}
            if solver == "partitioned":
                st = res.stats
                row.update(parts=st["parts"], pass_objectives=[round(v, 3) for v in st["pass_objectives"]], moved=st["moved"],
                           merged=round(st["merged_objective"], 3), cut_parts=st["cut_parts"], rest=st["rest"])
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/results/partition", help="where summary.json goes (default %(default)s)")
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2, help="local processes of the quality runs")
    ap.add_argument("--speedup-workers", default="2", help="worker counts compared with 1 in the speed-up run (default 2; e.g. 2,4,8)")
    ap.add_argument("--speedup-round", default="large/l-1024n-4000j-01.json.gz")
    ap.add_argument("--parts", type=int, default=4, help="parts of the speed-up run (default 4)")
    ap.add_argument("--work", type=float, default=0.5, help="deterministic seconds per part in pass 1 of the speed-up run")
    ap.add_argument("--rounds", default=",".join(ROUNDS), help="library rounds (paths under instances/) for the quality table")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"of {list(CONFIGS)}")
    ap.add_argument("--skip-speedup", action="store_true")
    args = ap.parse_args(argv)

    summary: dict = {"cpus": os.cpu_count()}
    counts = [int(w) for w in args.speedup_workers.split(",") if w]
    if not args.skip_speedup:
        summary["speedup"] = s = speedup(REPO / "instances" / args.speedup_round, parts=args.parts, work=args.work,
                                         workers=counts, seed=args.seed)
        for w in counts:
            print(f"speed-up 1 -> {w} workers on {s['round']} ({s['parts']} parts, {s['work']} deterministic s each): "
                  f"{s['wall_s_1']} s -> {s[f'wall_s_{w}']} s = {s[f'speedup_{w}']}x (the passes alone: "
                  f"{s[f'passes_speedup_{w}']}x), identical schedules: {s[f'identical_{w}']}, "
                  f"load average {s['load_avg']:.2f}", flush=True)
    rounds = [r for r in args.rounds.split(",") if r]
    summary["quality"] = quality(rounds, time_limit=args.time_limit, seed=args.seed, workers=args.workers,
                                 configs=[c for c in args.configs.split(",") if c])
    summary["peak_mb"] = round(_peak_mb(), 1)
    print(f"\n{'round':34} {'method':22} {'wall s':>7} {'objective':>11} {'gap %':>7}")
    for r in summary["quality"]:
        print(f"{r['round']:34} {r['method']:22} {r['wall_s']:7.2f} {r['objective']:11.3f} {r['gap_pct']:7.3f}")
    if "speedup" in summary:
        s = summary["speedup"]
        for w in counts:
            print(f"speed-up 1 -> {w} workers: {s[f'speedup_{w}']}x, passes alone {s[f'passes_speedup_{w}']}x "
                  f"(identical schedules: {s[f'identical_{w}']})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
