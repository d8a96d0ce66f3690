"""``optsched bench``: run solvers over instance sets; a resumable results table, a summary, plots."""

from __future__ import annotations

import argparse
from pathlib import Path

from optsched.bench.index import instance_files, lp_bounds, read_index, update_index
from optsched.bench.plots import plot_bounds_over_time, plot_performance_profile
from optsched.bench.runner import BenchTask, read_rows, read_trajectories, rescore, run_bench, write_rows
from optsched.bench.summary import format_table, summarise
from optsched.errors import InputError
from optsched.extras import pyplot, require_extra
from optsched.registry import get_method


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("instances", nargs="+", help="instance files or directories (searched recursively)")
    p.add_argument("--solvers", default="cpsat,fungible-greedy", help="comma-separated solver names (see `optsched methods`), or auto (solve_round's own choice)")
    p.add_argument("--time-limit", type=float, default=10.0, help="seconds per run (default 10)")
    p.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    p.add_argument("--workers", type=int, default=1, help="runs in parallel (default 1: each run gets the whole machine)")
    p.add_argument("--backend", default="local", help="local (process pool, default), serial, or ray (optional extra)")
    p.add_argument("--address", help="Ray cluster to join with --backend ray (e.g. auto, ray://head:10001); default: start a local one")
    p.add_argument("-o", "--out", default="bench-results.csv", help="results table (CSV), appended to and resumed")
    p.add_argument("--index", help="instance index CSV giving best-known values (e.g. instances/index.csv)")
    p.add_argument("--update-index", action="store_true", help="write best-known values and bounds back into --index")
    p.add_argument("--lp-bound", action="store_true", help="with --update-index: also record each instance's LP-relaxation bound")
    p.add_argument("--plot", metavar="DIR", help="write performance-profile and bound-trajectory PNGs into DIR")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--markdown", action="store_true", help="print the summary as a Markdown table")


def run(args: argparse.Namespace) -> int:
    if args.plot:  # before the run, not after it
        require_extra("matplotlib", "plot", "bench --plot")
    solvers = [s.strip() for s in args.solvers.split(",") if s.strip()]
    for s in solvers:
        if s != "auto":  # auto: solve_round's own choice by size and time
            get_method(s)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise InputError("--seeds", args.seeds, "must be comma-separated integers") from None
    if args.time_limit <= 0:
        raise InputError("--time-limit", args.time_limit, "must be positive")
    if args.workers < 1:
        raise InputError("--workers", args.workers, "must be >= 1")
    if args.address and args.backend != "ray":
        raise InputError("--address", args.address, "only applies to --backend ray")
    if args.update_index and not args.index:
        raise InputError("--update-index", True, "needs --index")
    if args.lp_bound and not args.update_index:
        raise InputError("--lp-bound", True, "needs --update-index")
    files = instance_files(args.instances)
    missing = [f for f in files if not f.exists()]
    if missing:
        raise InputError("instances", str(missing[0]), "no such file or directory")
    if not files:
        raise InputError("instances", args.instances, "no instance files found")
    index = read_index(args.index) if args.index else {}
    tasks = [
        BenchTask(str(f), s, seed, args.time_limit, best_known=_float(index.get(f.name, {}).get("best_known")))
        for f in files
        for s in solvers
        for seed in seeds
    ]
    run_bench(tasks, args.out, backend=args.backend, workers=args.workers, address=args.address, progress=not args.no_progress)
    names = {f.name for f in files}
    trajectories = read_trajectories(args.out)
    if args.update_index:
        lp = lp_bounds(files, progress=not args.no_progress) if args.lp_bound else None
        index = update_index(args.index, files, read_rows(args.out), lp)
        print(f"index updated: {args.index}")
    if index:  # measure every run against the best value now known, not the one known when it ran
        best = {n: v for n, e in index.items() if (v := _float(e.get("best_known"))) is not None}
        write_rows(args.out, rescore(read_rows(args.out), trajectories, best))
    rows = [r for r in read_rows(args.out) if r["instance"] in names and r["solver"] in solvers]
    print(format_table(summarise(rows), markdown=args.markdown))
    if args.plot:
        _plots(Path(args.plot), rows, trajectories)
        print(f"plots written to {args.plot}")
    return 0


def _float(x: str | None) -> float | None:
    return None if x in (None, "") else float(x)


def _plots(out: Path, rows: list[dict], trajectories: dict) -> None:
    plt = pyplot("optsched bench's plots")

    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    plot_performance_profile(rows, trajectories, ax=ax)
    fig.tight_layout()
    fig.savefig(out / "performance_profile.png", dpi=120)
    plt.close(fig)
    by_instance: dict[str, dict[str, list]] = {}
    for (inst, solver, seed, _tl), traj in trajectories.items():
        if any(r["instance"] == inst and r["solver"] == solver for r in rows) and seed == str(rows[0]["seed"]):
            by_instance.setdefault(inst, {})[solver] = traj
    for inst, trajs in sorted(by_instance.items())[:12]:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        plot_bounds_over_time(trajs, ax=ax, title=inst)
        fig.tight_layout()
        fig.savefig(out / f"bounds_{inst.split('.')[0]}.png", dpi=120)
        plt.close(fig)
