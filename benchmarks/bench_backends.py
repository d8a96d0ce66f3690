"""Local process pool vs Ray on one bench sweep: identical tables, and the wall time of each.

    python benchmarks/bench_backends.py --generate 81 --workers 2 --solvers fixed-demand,fungible-greedy,cpsat \
        --time-limit 60 --deterministic-time 2

Instances: ``instances/tiny`` and ``instances/small`` plus ``--generate`` random small rounds
(``optsched gen --class small``, seeds from 1000), so 19 + 81 = 100 by default. Each backend runs
the same tasks (every instance x ``--solvers``) into its own table; the tables are compared with
the wall-clock columns left out. Starting the local Ray instance is timed apart from Ray's sweep. Writes ``<out>/summary.json`` and prints it. The machine's load average is recorded
beside the timings because they are noisy on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMED = {"time_s", "time_to_1pct", "primal_integral"}


def _table(path: Path) -> list[dict[str, str]]:
    from optsched.bench.runner import read_rows

    rows = [{k: v for k, v in r.items() if k not in TIMED} for r in read_rows(path)]
    return sorted(rows, key=lambda r: (r["instance"], r["solver"], r["seed"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/results/backends", help="tables, instances and summary.json (default %(default)s)")
    ap.add_argument("--generate", type=int, default=81, help="random small instances added to tiny + small")
    ap.add_argument("--solvers", default="fixed-demand,fungible-greedy")
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--deterministic-time", type=float, default=2.0, help="CP-SAT deterministic-time limit per run (default 2)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--address", help="Ray cluster to join (default: start a local one with --workers CPUs)")
    args = ap.parse_args(argv)

    import ray

    from optsched.bench.index import instance_files
    from optsched.bench.runner import BenchTask, run_bench
    from optsched.gen import generate_suite
    from optsched.io import save_instance

    out = Path(args.out)
    gen_dir = out / "instances"
    gen_dir.mkdir(parents=True, exist_ok=True)

    # the small class has several shapes and generate_suite gives `count` of each: keep the first N
    for k, inst in enumerate(generate_suite("small", args.generate, seed=1000)[: args.generate]):
        save_instance(inst, gen_dir / f"gen-small-{k:03d}.json")
    files = instance_files([str(REPO / "instances" / "tiny"), str(REPO / "instances" / "small"), str(gen_dir)])
    # CP-SAT on one thread under a deterministic-time limit gives the same result wherever it runs
    # (a wall-clock limit does not: a loaded machine stops it earlier); --time-limit is then a backstop
    opts = {"cpsat": {"num_workers": 1, "deterministic_time": args.deterministic_time}}
    tasks = [BenchTask(str(f), s, 0, args.time_limit, options=opts.get(s, {})) for f in files for s in args.solvers.split(",")]
    for name in ("local.csv", "ray.csv", "local.trajectories.jsonl", "ray.trajectories.jsonl"):
        (out / name).unlink(missing_ok=True)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    run_bench(tasks, out / "local.csv", backend="local", workers=args.workers)
    local_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ray.init(address=args.address, num_cpus=None if args.address else args.workers, include_dashboard=False, log_to_driver=False)
    ray_start_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    run_bench(tasks, out / "ray.csv", backend="ray", workers=args.workers)
    ray_s = time.perf_counter() - t0
    ray.shutdown()
    local, remote = _table(out / "local.csv"), _table(out / "ray.csv")
    summary = {
        "instances": len(files), "solvers": args.solvers.split(","), "runs": len(tasks), "workers": args.workers,
        "time_limit": args.time_limit, "cpsat_deterministic_time": args.deterministic_time,
        "statuses": dict(Counter(f"{r['solver']}:{r['status']}" for r in local)),
        "identical_tables": local == remote, "rows": [len(local), len(remote)],
        "errors": sum(r["error"] != "" for r in local + remote), "infeasible": sum(r["feasible"] != "1" for r in local + remote),
        "local_pool_s": round(local_s, 2), "ray_start_s": round(ray_start_s, 2), "ray_sweep_s": round(ray_s, 2),
        "ray_over_local": round(ray_s / local_s, 3), "loadavg_before": load0, "loadavg_after": os.getloadavg(),
        "cpus": os.cpu_count(), "ray": ray.__version__,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0 if summary["identical_tables"] else 1


if __name__ == "__main__":
    sys.exit(main())
