"""How each method scales with the round: one table of rounds (nodes x jobs) x methods with the
wall time from a fresh process's start (imports and reading the round included), the peak
resident memory, the worth and its gap to the round's bound, and where the time goes.

    optsched gen --nodes 4096 --jobs 16000 --seed 0 -o runs/r16k.json.gz
    optsched gen --nodes 12500 --jobs 50000 --seed 0 -o runs/r100k.json.gz
    python benchmarks/bench_scale.py instances/large/l-256n-1000j-01.json.gz \\
        instances/large/l-1024n-4000j-01.json.gz instances/huge/h-2048n-8000j-01.json.gz \\
        runs/r16k.json.gz runs/r100k.json.gz --time-limit 30

Each run is a child process of its own (``solve_round(instance, solver=method, time_limit=...)``, then
the independent checker), so its peak memory (``ru_maxrss`` of the child and of its workers,
the larger) is the method's alone. The time splits into the interpreter and imports, reading the
round, the solve and the check; within the solve, where the method reports it: the policy's
featurising and forward pass, its decode and its repair (``maifs``); partitioning, the parts'
passes and the final repair (``partitioned``). The bound is the round's LP bound from
``instances/index.csv`` for library rounds, else the GPU knapsack bound
(:func:`optsched.knapsack_bound.worth_bound`, no LP; where GPUs are scarce it is looser than
the LP bound). Rows go to ``--out`` as CSV.
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

METHODS = ("fungible-greedy", "maifs", "lns", "partitioned")
FIELDS = ("round", "nodes", "jobs", "method", "time_limit", "total_s", "start_s", "read_s", "solve_s", "check_s", "peak_mb",
          "feasible", "objective", "bound", "bound_kind", "gap_pct", "split")


def child(path: str, method: str, time_limit: float, t0: float) -> dict[str, Any]:
    """One run in this process (the module text); ``t0``: the parent's clock when it started us."""
    started = time.time() - t0
    from optsched import load_instance, solve_round
    from optsched.checker import check_schedule

    t = time.perf_counter()
    inst = load_instance(path)
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    res = solve_round(inst, "auto", solver=method, time_limit=time_limit, seed=0)
    solve_s = time.perf_counter() - t
    t = time.perf_counter()
    report = check_schedule(inst, res.schedule)
    check_s = time.perf_counter() - t
    st = res.stats
    split = {k: round(float(st[k]), 2) for k in ("featurise_forward_s", "decode_s", "repair_s", "prep_s", "encode_s") if k in st}
    if "pass_s" in st:
        split["pass_s"] = [round(float(x), 2) for x in st["pass_s"]]
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return {"start_s": round(started, 2), "read_s": round(read_s, 2), "solve_s": round(solve_s, 2), "check_s": round(check_s, 2),
            "peak_mb": round(peak), "feasible": report.feasible, "objective": report.objective, "split": json.dumps(split),
            "nodes": len(inst.nodes), "jobs": len(inst.jobs)}


def bound_of(path: str) -> tuple[float, str]:
    """The round's LP bound from the library index, else its knapsack bound."""
    from optsched import load_instance
    from optsched.bench.index import read_index
    from optsched.knapsack_bound import worth_bound

    row = read_index(Path(__file__).resolve().parent.parent / "instances" / "index.csv").get(Path(path).name)
    if row is not None and row["lp_bound"]:
        return float(row["lp_bound"]), "lp"

    value = worth_bound(load_instance(path))
    if value is None:
        raise SystemExit(f"{path}: no bound (a policy family the knapsack bound does not cover)")
    return value, "knapsack"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rounds", nargs="*", help="round files (JSON, .json.gz)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--out", default="runs/scale.csv", help="write the rows here as CSV (default runs/scale.csv)")
    ap.add_argument("--child", nargs=4, metavar=("ROUND", "METHOD", "LIMIT", "T0"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        path, method, limit, t0 = args.child
        print(json.dumps(child(path, method, float(limit), float(t0))))
        return 0
    if not args.rounds:
        ap.error("give at least one round file")
    rows = []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"{'round':<28} {'method':<16} {'total s':>7} {'read':>5} {'solve':>6} {'check':>5} {'MB':>6} {'gap %':>7}  split", flush=True)
    for path in args.rounds:
        bound, kind = bound_of(path)
        for method in args.methods.split(","):
            t0 = time.time()
            proc = subprocess.run([sys.executable, __file__, "--child", path, method, str(args.time_limit), repr(t0)],
                                  capture_output=True, text=True)
            total = time.time() - t0
            if proc.returncode:
                raise SystemExit(f"{path} {method}: the run failed:\n{proc.stderr[-2000:]}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            r.update(round=Path(path).name, method=method, time_limit=args.time_limit, total_s=round(total, 2), bound=bound,
                     bound_kind=kind, gap_pct=round(100 * (1 - r["objective"] / bound), 3) if bound > 0 else 0.0)
            rows.append(r)
            print(f"{r['round'][:28]:<28} {method:<16} {r['total_s']:7.1f} {r['read_s']:5.1f} {r['solve_s']:6.1f} {r['check_s']:5.1f} "
                  f"{r['peak_mb']:6d} {r['gap_pct']:7.3f}  {r['split']}", flush=True)
            with out.open("w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=FIELDS)
                w.writeheader()
                w.writerows({k: row.get(k) for k in FIELDS} for row in rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
