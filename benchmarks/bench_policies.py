"""Queue policies from the literature on the same Philly and Alibaba windows, with fungible and
fixed-demand allocation (docs/results.md, "Scheduling policies from the literature").

    python benchmarks/bench_policies.py run --out benchmarks/results/policies.csv
    python benchmarks/bench_policies.py table benchmarks/results/policies.csv

Windows and clusters are ``bench_sim.py``'s (durations in [60 s, 1 d], 400 jobs, offered load
1.6). Per run: average and p99 JCT, makespan, the maximum and mean finish-time fairness
``rho = JCT / duration`` (the job's time in the shared cluster over its run time alone at its
demand), and Jain's index of ``1 / rho`` (1: every job slowed down alike). The isolated time is
the job alone on the cluster at its best rate (fastest allowed GPU type, best CPU/memory point),
so the same yardstick serves fungible and fixed-demand allocation.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sim import WORKLOADS, setup_window  # noqa: E402

POLICIES = ("fifo", "las", "srtf", "gittins", "themis", "gavel", "gavel-makespan", "maxmin")
ALLOCATORS = ("fungible-greedy", "fixed-demand")
LOAD = 1.6
FIELDS = ("workload", "policy", "allocator", "jobs", "finished", "avg_jct_h", "p99_jct_h", "makespan_h", "max_rho", "mean_rho",
          "jain", "preemptions", "wall_s", "loadavg")


def isolated_s(setup: Any) -> np.ndarray:
    """Per job: its run time alone at its best rate (trace duration x demand throughput / best)."""
    types = {nd.gpu_type for nd in setup.nodes}
    out = []
    for j in setup.workload.jobs:
        speed = max(1.0 if j.gpu_speed is None else j.gpu_speed.get(t, 0.0) for t in types)
        top = max(tp for _c, _m, tp in j.profile.points())
        out.append(j.duration_s * j.profile.at(*j.demand) / (max(speed, 1e-9) * top))
    return np.asarray(out)


def fairness(jct: np.ndarray, duration: np.ndarray) -> dict[str, float]:
    """Max and mean ``rho = JCT / isolated time`` and Jain's index of ``1 / rho`` over finished jobs."""
    rho = jct / np.maximum(duration, 1e-9)
    x = 1.0 / rho
    jain = float(x.sum() ** 2 / (x.size * (x ** 2).sum())) if x.size else float("nan")
    return {"max_rho": float(rho.max()), "mean_rho": float(rho.mean()), "jain": jain}


def summary_columns(s: dict[str, Any]) -> dict[str, Any]:
    """The columns every simulation bench shares, from a run's ``summary()``: counts, JCTs and makespan in hours."""
    return {"jobs": s["jobs"], "finished": s["finished"], "avg_jct_h": s["avg_jct_s"] / 3600, "p99_jct_h": s["p99_jct_s"] / 3600,
            "makespan_h": s["makespan_s"] / 3600, "preemptions": s["preemptions"]}


def run_one(workload: str, policy: str, allocator: str, seed: int, time_limit: float) -> dict[str, Any]:
    from optsched.sim.config import SimConfig
    from optsched.sim.experiment import run

    setup = setup_window(workload, LOAD, seed)
    res = run(setup, policy=policy, allocator=allocator, time_limit=time_limit, seed=seed,
              config=SimConfig(name=f"{workload}-{policy}-{allocator}", progress=False))
    s = res.summary()
    fin = res.finished
    row = {"workload": workload, "policy": policy, "allocator": allocator, **summary_columns(s), "wall_s": s["wall_s"],
           "loadavg": os.getloadavg()[0]}
    row.update(fairness(res.jct_s[fin], isolated_s(setup)[fin]))
    return row


def run_resumable(out: Path, fields: list[str], key: tuple[str, ...], grid: list[tuple[str, ...]], run, describe, desc: str) -> None:
    """Run ``run(*cell)`` for every grid cell whose ``key`` columns are not in ``out`` yet and append
    its row (flushed at once: an interrupted sweep resumes where it stopped); ``describe(cell, row)``
    is the progress line printed after each run."""
    from tqdm import tqdm

    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        with out.open() as fh:
            done = {tuple(r[k] for k in key) for r in csv.DictReader(fh)}
    todo = [cell for cell in grid if cell not in done]
    new = not out.exists()
    with out.open("a", newline="") as fh:
        wr = csv.DictWriter(fh, fields)
        if new:
            wr.writeheader()
        for cell in tqdm(todo, desc=desc, unit="run"):
            t0 = time.perf_counter()
            row = run(*cell)
            wr.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in row.items()})
            fh.flush()
            tqdm.write(f"{' '.join(cell)}: {describe(row)} ({time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f})")


def run_table_parser(doc: str, out: str, *, workloads: Sequence[str], axis: tuple[str, Sequence[str], str | None],
                     allocators: Sequence[str], time_limit: float, run: Callable[[argparse.Namespace], int],
                     table: Callable[[argparse.Namespace], int], policy: str | None = None, deterministic_time: bool = False,
                     table_nargs: str | None = None, table_help: str | None = None, preemption: bool = False,
                     extra: Callable[[Any], None] | None = None) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser,
                                                                            argparse.ArgumentParser]:
    """The simulation benches' shared command line: a ``run`` sub-command (``--out``, ``--workloads``,
    the script's own grid axis ``axis = (flag, default, help)``, ``--allocators``, ``--seed``,
    ``--time-limit``, then ``--policy`` when ``policy`` is given, and ``--deterministic-time`` and
    ``--preemption`` (every run's ``SimConfig.preemption``) when asked) dispatching to ``run``, and a ``table CSV`` sub-command dispatching to ``table``;
    ``extra(subparsers)`` may add sub-commands between the two. The description is ``doc``'s first
    paragraph. Returns ``(parser, run parser, table parser)``; ``args.fn(args)`` runs the command."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", default=out)
    r.add_argument("--workloads", nargs="+", default=list(workloads))
    flag, default, help_ = axis
    r.add_argument(flag, nargs="+", default=list(default), help=help_)
    r.add_argument("--allocators", nargs="+", default=list(allocators))
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--time-limit", type=float, default=time_limit)
    if policy is not None:
        r.add_argument("--policy", default=policy, help=f"queue policy of every run (default {policy})")
    if deterministic_time:
        r.add_argument("--deterministic-time", type=float, default=None, help="cpsat's deterministic-time budget per round")
    if preemption:
        from optsched.sim.config import PREEMPTION, SimConfig

        r.add_argument("--preemption", default=SimConfig.preemption, choices=PREEMPTION,
                       help=f"SimConfig.preemption of every run (default {SimConfig.preemption}: the queue policy's own; FIFO pins "
                            "running jobs unless a round policy preempts)")
    r.set_defaults(fn=run)
    if extra is not None:
        extra(sub)
    t = sub.add_parser("table")
    t.add_argument("csv", nargs=table_nargs, help=table_help)
    t.set_defaults(fn=table)
    return ap, r, t


def policy_label(policy: str, preemption: str = "auto") -> str:
    """A table's policy cell: the policy, and its preemption setting where that is not ``auto``."""
    return policy if preemption == "auto" else f"{policy}, preemption {preemption}"


def cmd_run(args: argparse.Namespace) -> int:
    grid = [(w, p, a) for w in args.workloads for p in args.policies for a in args.allocators]
    run_resumable(Path(args.out), FIELDS, ("workload", "policy", "allocator"), grid,
                  lambda w, p, a: run_one(w, p, a, args.seed, args.time_limit),
                  lambda row: f"avg JCT {row['avg_jct_h']:.2f} h, max rho {row['max_rho']:.1f}", "policy runs")
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    with open(args.csv) as fh:
        rows = list(csv.DictReader(fh))
    loads = list(dict.fromkeys(r["workload"] for r in rows))
    allocs = ("cpsat", "cpsat@warm", "cpsat@cold", *ALLOCATORS)
    rows.sort(key=lambda r: (loads.index(r["workload"]), POLICIES.index(r["policy"]) if r["policy"] in POLICIES else 99,
                             allocs.index(r["allocator"]) if r["allocator"] in allocs else 99))
    print("| workload | policy | allocator | avg JCT (h) | p99 JCT (h) | makespan (h) | max rho | mean rho | Jain | preemptions |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['workload']} | {r['policy']} | {r['allocator']} | {float(r['avg_jct_h']):.2f} | {float(r['p99_jct_h']):.1f} | "
              f"{float(r['makespan_h']):.1f} | {float(r['max_rho']):.0f} | {float(r['mean_rho']):.1f} | {float(r['jain']):.2f} | "
              f"{r['preemptions']} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap, _, _ = run_table_parser(__doc__, "benchmarks/results/policies.csv", workloads=WORKLOADS, axis=("--policies", POLICIES, None),
                                allocators=ALLOCATORS, time_limit=5.0, run=cmd_run, table=cmd_table)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    raise SystemExit(main())
