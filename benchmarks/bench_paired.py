"""Before/after in one run: ``bench_core.py``'s rounds solved alternately by two revisions.

    .venv/bin/python benchmarks/bench_paired.py --before 6869e7d --classes medium --seeds 2 \\
        -o benchmarks/results/core-paired.csv

The ``--before`` revision is extracted with ``git archive`` into a temporary directory; "after"
is this working tree. Each round is generated once (by this tree's generator) and saved as
JSON, then each solver runs on it once per revision, in a fresh interpreter each time
(``PYTHONPATH`` picks the revision), the two revisions alternating which goes first from round to
round, so that both see the same load. Timing runs belong under the shared lock
(``flock /tmp/optsched-bench.lock ...``); every row records the 1-minute load average.

Gaps: each side's own reported gap, and the gap against the best bound either side proved on
the round (``gap_best_bound``, the one comparable across sides).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_core import SHAPES, make_instance, rounds, write_rows  # noqa: E402

from optsched.io import save_instance  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: run in the child: solve one saved round and print the result as JSON
_CHILD = """
import json, os, sys, time
from optsched.io import load_instance
from optsched.solve import solve_round
inst = load_instance(sys.argv[1])
opts = json.loads(sys.argv[5])
t0 = time.perf_counter()
r = solve_round(inst, solver=sys.argv[2], time_limit=float(sys.argv[3]), seed=int(sys.argv[4]), **opts)
print(json.dumps({"status": r.status.value, "objective": r.objective, "bound": r.bound, "gap": r.gap,
                  "time_s": time.perf_counter() - t0, "load1": os.getloadavg()[0]}))
"""


def solve_in(code_dir: Path, path: Path, solver: str, time_limit: float, seed: int, options: dict) -> dict:
    """Solve the round saved at ``path`` with the optsched found in ``code_dir``."""
    env = {**os.environ, "PYTHONPATH": str(code_dir)}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), solver, str(time_limit), str(seed), json.dumps(options)],
                         env=env, cwd=code_dir, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(before: str, classes: list[str], seeds: int, methods: list[str], time_limit: float, workers: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="optsched-before-") as tmp:
        old = Path(tmp) / "code"
        old.mkdir()
        archive = subprocess.run(["git", "archive", before], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        for k, (cls, nodes, jobs, variant, seed) in enumerate(rounds(classes, seeds, ["base", "mixed"])):
            path = Path(tmp) / f"{cls}-{variant}-{nodes}x{jobs}-{seed}.json"
            save_instance(make_instance(cls, nodes, jobs, seed, variant), path)
            sides = [("before", old), ("after", ROOT)]
            if k % 2:
                sides.reverse()
            for solver in methods:
                opts = {"num_workers": workers} if solver == "cpsat" else {}
                got = {side: solve_in(code, path, solver, time_limit, seed, opts) for side, code in sides}
                best = min((g["bound"] for g in got.values() if g["bound"] is not None), default=None)
                for side, g in got.items():
                    gb = None if best is None else max(0.0, best - g["objective"]) / max(best, 1e-9)
                    row = {"class": cls, "variant": variant, "nodes": nodes, "jobs": jobs, "seed": seed,
                           "solver": solver, "side": side, **g, "gap_best_bound": gb}
                    rows.append(row)
                    print(f"{cls:6} {variant:5} {nodes:4}x{jobs:<4} s{seed} {solver:5} {side:6} {g['status']:10} "
                          f"obj={g['objective']:.4f} gap={g['gap']} gap_best={gb if gb is None else round(gb, 5)} "
                          f"t={g['time_s']:.2f} load={g['load1']:.2f}", flush=True)
    return rows


def summarise(rows: list[dict]) -> str:
    out = []
    for cls in dict.fromkeys(r["class"] for r in rows):
        for solver in dict.fromkeys(r["solver"] for r in rows):
            for side in ("before", "after"):
                rs = [r for r in rows if r["class"] == cls and r["solver"] == solver and r["side"] == side]
                if not rs:
                    continue
                gaps = [100 * r["gap_best_bound"] for r in rs if r["gap_best_bound"] is not None]
                own = [100 * r["gap"] for r in rs if r["gap"] is not None]
                proven = sum(r["status"] == "optimal" for r in rs)
                times = [r["time_s"] for r in rs]
                vs_best = f"median {statistics.median(gaps):.3f}% max {max(gaps):.3f}%" if gaps else "n/a (no bound)"
                out.append(f"{cls:6} {solver:5} {side:6}: gap vs best bound {vs_best}"
                           f" | own gap median {statistics.median(own) if own else float('nan'):.3f}%"
                           f" | proven {proven}/{len(rs)} | time median {statistics.median(times):.2f}s max {max(times):.2f}s")
    loads = [r["load1"] for r in rows]
    out.append(f"load average (1 min): {min(loads):.2f} to {max(loads):.2f} on {os.cpu_count()} cores")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="git revision to compare against (e.g. a commit hash)")
    ap.add_argument("--classes", nargs="+", default=["medium"], choices=sorted(SHAPES))
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--methods", nargs="+", default=["cpsat", "lns"])
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("-o", "--output", type=Path, default=Path(__file__).parent / "results" / "core-paired.csv")
    args = ap.parse_args(argv)
    rows = run(args.before, args.classes, args.seeds, args.methods, args.time_limit, args.workers)
    write_rows(rows, args.output, summarise)
    return 0


if __name__ == "__main__":
    sys.exit(main())
