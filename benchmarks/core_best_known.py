"""Best-known schedules of the core bench's medium rounds, by long runs, and the split of a gap.

    .venv/bin/python benchmarks/core_best_known.py search --time 240          # lns, resumable
    .venv/bin/python benchmarks/core_best_known.py search --method cpsat --time 120 --options '{"lns_share": 0}'
    .venv/bin/python benchmarks/core_best_known.py bounds                      # LP and config-LP bounds
    .venv/bin/python benchmarks/core_best_known.py split benchmarks/results/core-quiet.csv

``search`` solves each medium round of ``bench_core.py`` (same generator, same shapes and seeds)
for a long time, starting from the best schedule found so far (so repeated runs only improve),
checks the schedule with the independent checker and keeps it, gzipped, under
``benchmarks/results/best_known/``; ``benchmarks/results/core-best-known.csv`` lists the best
objective per round with what found it.

``split`` reads a ``bench_core.py`` CSV and writes, per medium row, the gap at 10 s split in two
parts against the best-known objective ``B*`` (the stored long runs', or the best any solver of
that bench CSV found on the round; ``bound`` the row's reported bound, ``obj`` its
objective; both parts are fractions of the bound, so they add up to the reported gap):

* primal part ``(B* - obj) / bound``: what a better schedule would close;
* bound part ``(bound - B*) / bound``: what a better bound would close (an upper estimate: the
  true optimum may lie above ``B*``); ``config_converged_pct`` is what of it the configuration LP
  (``bounds``: run to convergence) would still leave.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_core import SHAPES, make_instance  # noqa: E402

from optsched.checker import check_schedule  # noqa: E402
from optsched.io import load_schedule, write_json  # noqa: E402
from optsched.solve import solve_round  # noqa: E402
from optsched.values import schedule_value  # noqa: E402

RESULTS = Path(__file__).parent / "results"
STORE = RESULTS / "best_known"
TABLE = RESULTS / "core-best-known.csv"
FIELDS = ["class", "variant", "nodes", "jobs", "seed", "best_objective", "found_by", "seconds", "file", "lp_bound",
          "config_bound"]


def round_name(cls: str, variant: str, nodes: int, jobs: int, seed: int) -> str:
    return f"{cls}-{variant}-{nodes}x{jobs}-s{seed}"


def read_table(path: Path = TABLE) -> dict[str, dict]:
    if not path.exists():
        return {}
    with path.open() as f:
        return {r["file"]: r for r in csv.DictReader(f)}


def write_table(rows: dict[str, dict], path: Path = TABLE) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for key in sorted(rows):
            w.writerow(rows[key])


def search(classes: list[str], seeds: int, variants: list[str], method: str, seconds: float, workers: int,
           options: dict | None = None) -> None:
    """Improve the stored best schedule of every round with one long run of ``method``."""
    table = read_table()
    for cls in classes:
        for nodes, jobs in SHAPES[cls]:
            for variant in variants:
                for seed in range(seeds):
                    inst = make_instance(cls, nodes, jobs, seed, variant)
                    name = round_name(cls, variant, nodes, jobs, seed)
                    path = STORE / f"{name}.json.gz"
                    hint = None
                    if path.exists():
                        hint = load_schedule(path)
                        hint = hint if check_schedule(inst, hint).feasible else None
                    opts = {"num_workers": workers} if method == "cpsat" else {}
                    opts.update(options or {})
                    t0 = time.perf_counter()
                    res = solve_round(inst, solver=method, time_limit=seconds, seed=seed, hint=hint, **opts)
                    took = time.perf_counter() - t0
                    old = float(table[name]["best_objective"]) if name in table else float("-inf")
                    value = schedule_value(inst, res.schedule)
                    better = value > old + 1e-9
                    if better:
                        write_json(res.schedule.to_dict(), path)
                        prev = float(table[name]["seconds"]) if name in table else 0.0
                        table[name] = {"class": cls, "variant": variant, "nodes": nodes, "jobs": jobs, "seed": seed,
                                       "best_objective": round(value, 6),
                                       "found_by": f"{method} {seconds:g}s{' ' + json.dumps(options) if options else ''}",
                                       "seconds": round(prev + took, 1), "file": name}
                        write_table(table)
                    print(f"{name}: {method} {value:.4f} (stored {old:.4f}{', improved' if better else ''}) "
                          f"bound={res.bound} {took:.0f}s", flush=True)


def bounds(seconds: float) -> None:
    """Store each round's LP bound and its configuration-LP bound run to convergence (or ``seconds``)."""
    from optsched.mip.bound import lp_bound
    from optsched.mip.colgen import config_bound

    table = read_table()
    for name, row in sorted(table.items()):
        inst = make_instance(row["class"], int(row["nodes"]), int(row["jobs"]), int(row["seed"]), row["variant"])
        start = [load_schedule(STORE / f"{name}.json.gz")]
        t0 = time.perf_counter()
        r = config_bound(inst, time_limit=seconds, schedules=start)
        row["lp_bound"] = round(lp_bound(inst), 6)
        row["config_bound"] = round(r.bound, 6) if r.converged else ""
        print(f"{name}: LP {row['lp_bound']} config {r.bound:.6f} (converged {r.converged}, {time.perf_counter() - t0:.1f} s)",
              flush=True)
        write_table(table)


def split(bench_csv: Path, out: Path, also: list[Path] | None = None) -> None:
    """Per medium row of a bench CSV: the gap split into its primal and bound parts (``also``:
    more bench CSVs whose schedules count towards the best known)."""
    table = read_table()
    rows = []
    with bench_csv.open() as f:
        bench = [r for r in csv.DictReader(f) if r["class"] == "medium"]
    others = []
    for path in also or []:
        with path.open() as f:
            others += [r for r in csv.DictReader(f) if r["class"] == "medium"]
    # the best known: the stored long runs, or a better schedule any solver of the bench(es) found
    best_of: dict[str, float] = {}
    for r in bench + others:
        name = round_name(r["class"], r["variant"], int(r["nodes"]), int(r["jobs"]), int(r["seed"]))
        stored = float(table[name]["best_objective"]) if name in table else float("-inf")
        best_of[name] = max(best_of.get(name, stored), float(r["objective"]))
    for r in bench:
        if not r["bound"]:
            continue
        name = round_name(r["class"], r["variant"], int(r["nodes"]), int(r["jobs"]), int(r["seed"]))
        best, obj, bound = best_of[name], float(r["objective"]), float(r["bound"])
        cfg = table.get(name, {}).get("config_bound") or None
        rows.append({"round": name, "solver": r["solver"], "objective": obj, "bound": bound, "best_known": best,
                     "gap_pct": round(100 * (bound - obj) / bound, 3),
                     "primal_pct": round(100 * (best - obj) / bound, 3),
                     "bound_pct": round(100 * (bound - best) / bound, 3),
                     # of the bound part, what the converged configuration LP would still leave
                     "config_converged_pct": None if cfg is None else round(100 * (float(cfg) - best) / bound, 3),
                     "bench": bench_csv.name})
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        print(f"{r['round']:28} {r['solver']:6} gap {r['gap_pct']:6.2f}% = primal {r['primal_pct']:6.2f}% + bound {r['bound_pct']:6.2f}%")
    print(f"rows written to {out}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("search", help="long runs that improve the stored best-known schedules")
    s.add_argument("--classes", nargs="+", default=["medium"], choices=sorted(SHAPES))
    s.add_argument("--seeds", type=int, default=2)
    s.add_argument("--variants", nargs="+", default=["base", "mixed"], choices=["base", "mixed"])
    s.add_argument("--method", default="lns")
    s.add_argument("--time", type=float, default=240.0)
    s.add_argument("--workers", type=int, default=2)
    s.add_argument("--options", type=json.loads, default=None, help='solver options as JSON, e.g. \'{"lns_share": 0}\'')
    b = sub.add_parser("bounds", help="store each round's LP bound and converged configuration-LP bound")
    b.add_argument("--time", type=float, default=120.0)
    p = sub.add_parser("split", help="split a bench CSV's medium gaps into primal and bound parts")
    p.add_argument("bench_csv", type=Path)
    p.add_argument("-o", "--output", type=Path, default=RESULTS / "core-gap-split.csv")
    p.add_argument("--also", type=Path, nargs="*", default=[], help="more bench CSVs counted for the best known")
    args = ap.parse_args(argv)
    if args.cmd == "search":
        search(args.classes, args.seeds, args.variants, args.method, args.time, args.workers, args.options)
    elif args.cmd == "bounds":
        bounds(args.time)
    else:
        split(args.bench_csv, args.output, args.also)
    return 0


if __name__ == "__main__":
    sys.exit(main())
