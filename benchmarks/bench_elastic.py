"""Elastic gangs over a whole trace (issue 7 item 8): rigid vs elastic jobs, with fixed-demand,
fungible-greedy and CP-SAT allocation, on bench_policies.py's Philly and Alibaba windows
(docs/results.md, "Scheduling policies from the literature").

    python benchmarks/bench_elastic.py run --out benchmarks/results/elastic.csv
    python benchmarks/bench_elastic.py run --out benchmarks/results/elastic.csv --allocators cpsat@cold \
        --time-limit 5 --deterministic-time 1
    python benchmarks/bench_elastic.py table benchmarks/results/elastic.csv

``elastic_share`` of the jobs (seeded) may run with gpus/4 .. 4 x gpus GPUs in powers of two (at
most the largest GPU type's total) with an Amdahl curve per catalogue model
(:func:`optsched.elastic.elastic_spec`); the allocator chooses each round's size and a size change
is a restart. ``fixed-demand`` keeps every job at its nominal gang (the rigid baseline);
``fungible-greedy`` and ``cpsat`` choose sizes. Per run: average and p99 JCT, makespan, GPU
utilisation, the mean GPUs an elastic job held while running (GPU-seconds / run seconds),
preemptions and moves. Load average is recorded beside wall time (shared machine).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_policies import LOAD, run_resumable, run_table_parser, summary_columns  # noqa: E402
from bench_sim import WORKLOADS, setup_window  # noqa: E402

ALLOCATORS = ("fixed-demand", "fungible-greedy", "cpsat@cold")
SHARES = ("0", "1")
POLICY = "las"
FIELDS = ("workload", "policy", "elastic_share", "allocator", "jobs", "finished", "avg_jct_h", "p99_jct_h", "makespan_h", "gpu_util",
          "elastic_mean_gpus", "elastic_nominal_gpus", "preemptions", "moves", "solver_calls", "solve_s_mean", "wall_s", "cpu_s",
          "loadavg")


def run_one(workload: str, share: str, allocator: str, seed: int, time_limit: float, deterministic_time: float | None,
            policy: str = POLICY) -> dict[str, Any]:
    from optsched.sim.config import SimConfig
    from optsched.sim.experiment import run

    setup = setup_window(workload, LOAD, seed)
    opts: dict[str, Any] = {}
    if allocator.partition("@")[0] == "cpsat":
        opts["num_workers"] = 1
        if deterministic_time is not None:
            opts["deterministic_time"] = deterministic_time
    cfg = SimConfig(name=f"{workload}-{share}-{allocator}", progress=False, elastic_share=float(share), elastic_seed=seed)
    t0, c0 = time.perf_counter(), time.process_time()
    res = run(setup, policy=policy, allocator=allocator, time_limit=time_limit, seed=seed, config=cfg, **opts)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    s = res.summary()
    el = res.jobs["elastic"].astype(bool) & (res.jobs["run_s"] > 0)
    mean_gpus = float(res.jobs["gpu_s"][el].sum() / res.jobs["run_s"][el].sum()) if el.any() else float("nan")
    nominal = float((res.jobs["gpus"][el] * res.jobs["run_s"][el]).sum() / res.jobs["run_s"][el].sum()) if el.any() else float("nan")
    return {"workload": workload, "policy": policy, "elastic_share": share, "allocator": allocator, **summary_columns(s),
            "gpu_util": s["gpu_util"], "elastic_mean_gpus": mean_gpus, "elastic_nominal_gpus": nominal, "moves": s["moves"],
            "solver_calls": s["solver_calls"],
            "solve_s_mean": s["solve_s_mean"] or 0.0, "wall_s": wall, "cpu_s": cpu, "loadavg": os.getloadavg()[0]}


def cmd_run(args: argparse.Namespace) -> int:
    grid = [(w, sh, a) for w in args.workloads for sh in args.shares for a in args.allocators]
    run_resumable(Path(args.out), list(FIELDS), ("workload", "elastic_share", "allocator"), grid,
                  lambda w, sh, a: run_one(w, sh, a, args.seed, args.time_limit, args.deterministic_time),
                  lambda row: f"avg JCT {row['avg_jct_h']:.2f} h, makespan {row['makespan_h']:.1f} h", "elastic runs")
    return 0


def _f(x: str, fmt: str) -> str:
    try:
        v = float(x)
    except ValueError:
        return x
    return "–" if np.isnan(v) else format(v, fmt)


def cmd_table(args: argparse.Namespace) -> int:
    with open(args.csv) as fh:
        rows = list(csv.DictReader(fh))
    loads = list(dict.fromkeys(r["workload"] for r in rows))
    rows.sort(key=lambda r: (loads.index(r["workload"]), ALLOCATORS.index(r["allocator"]) if r["allocator"] in ALLOCATORS else 99,
                             float(r["elastic_share"])))
    base = {(r["workload"], r["elastic_share"]): float(r["avg_jct_h"]) for r in rows if r["allocator"] == "fixed-demand"}
    print("| workload | allocator | elastic share | avg JCT (h) | vs fixed-demand | p99 JCT (h) | makespan (h) | GPU util | "
          "GPUs per elastic job (nominal) | preemptions | moves |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        b = base.get((r["workload"], r["elastic_share"]))
        vs = f"{100 * (float(r['avg_jct_h']) - b) / b:+.0f} %" if b else "–"
        gp = f"{_f(r['elastic_mean_gpus'], '.2f')} ({_f(r['elastic_nominal_gpus'], '.2f')})"
        print(f"| {r['workload']} | {r['allocator']} | {float(r['elastic_share']):g} | {float(r['avg_jct_h']):.2f} | {vs} | "
              f"{float(r['p99_jct_h']):.1f} | {float(r['makespan_h']):.1f} | {float(r['gpu_util']):.2f} | {gp} | {r['preemptions']} | "
              f"{r['moves']} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap, _, _ = run_table_parser(__doc__, "benchmarks/results/elastic.csv", workloads=WORKLOADS,
                                axis=("--shares", SHARES, "elastic shares, e.g. 0 0.5 1"), allocators=ALLOCATORS, time_limit=5.0,
                                deterministic_time=True, run=cmd_run, table=cmd_table)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    raise SystemExit(main())
