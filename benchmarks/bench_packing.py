"""Gandiva-style consolidation and migration budgets over a trace: does keeping whole nodes idle
help the large gangs, and what does bounding the moves per round cost and save? On
bench_policies.py's Philly window (``--workloads alibaba``: its Alibaba window, bench_sim.WORKLOADS),
with fungible (cpsat, fungible-greedy) and fixed-demand allocation (docs/results.md, "Scheduling
policies from the literature").

    python benchmarks/bench_packing.py run --out benchmarks/results/packing.csv
    python benchmarks/bench_packing.py run --seed 1 --out benchmarks/results/packing_s1.csv   # another model draw
    python benchmarks/bench_packing.py table benchmarks/results/packing.csv benchmarks/results/packing_s1.csv
    python benchmarks/bench_packing.py run --variants plain moves4 moves1 moves0 --time-limit 5 --deterministic-time 1 \
        --out benchmarks/results/moves.csv                                                     # bounded moves
    python benchmarks/bench_packing.py run --workloads alibaba --out benchmarks/results/packing_alibaba.csv

Variants per allocator (queue policy LAS unless ``--policy``; ``--preemption`` sets every run's
``SimConfig.preemption``, default ``auto``: FIFO pins running jobs, which then neither move nor
stop, as in bench_round_policies.py): ``plain`` (no packing),
``pack`` (``round.packing = "consolidate"``, tolerance 0: only among the worth-optimal schedules
for cpsat, worth-preserving moves for the heuristics) and ``pack5`` (tolerance 0.05: up to 5 %
of a round's worth may be given up for idle nodes); ``movesK`` (``round.max_moves = K``: at most K
running jobs change their node -> GPU map per round, Gandiva's migration budget; preempting a
running job is not a move) and ``pack5-movesK`` (both).

Per run: average and p99 JCT and makespan over all jobs; for the *large* jobs (gangs of at least
``LARGE`` GPUs, a whole Philly node or more) their average queueing delay (first start minus
arrival) and average JCT (none on the Alibaba window, whose pods take 1 GPU each: the table prints
``–``); the average JCT of 1-GPU jobs; and, from each solved round's schedule,
time-weighted over the rounds with active jobs, the whole free GPUs (on wholly idle nodes) and
the fragmentation (share of free GPUs on partly used nodes). Load average is recorded beside wall
time (shared machine).
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_policies import LOAD, policy_label, run_resumable, run_table_parser, summary_columns  # noqa: E402
from bench_sim import setup_window  # noqa: E402

ALLOCATORS = ("cpsat@cold", "fungible-greedy", "fixed-demand")
#: variant -> (packing tolerance, max_moves); None: no packing / unbounded moves
VARIANTS: dict[str, tuple[float | None, int | None]] = {
    "plain": (None, None), "pack": (0.0, None), "pack5": (0.05, None),
    "moves4": (None, 4), "moves1": (None, 1), "moves0": (None, 0), "pack5-moves4": (0.05, 4), "pack5-moves1": (0.05, 1)}
POLICY = "las"
LARGE = 8
FIELDS = ("workload", "policy", "preemption", "variant", "allocator", "jobs", "finished", "large_jobs", "avg_jct_h", "p99_jct_h", "makespan_h",
          "large_queue_h", "large_jct_h", "small_jct_h", "whole_free_gpus", "fragmentation", "gpu_util", "preemptions", "moves",
          "solver_calls", "wall_s", "loadavg")


class FreeRecorder:
    """Wraps an allocator; keeps each solved round's ``(t, whole free GPUs, free GPUs)``."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name = inner, getattr(inner, "name", "alloc")
        self.rounds: list[tuple[float, int, int]] = []

    def __call__(self, inst: Any) -> Any:
        out = self.inner(inst)
        sched = getattr(out, "schedule", out)
        used: dict[str, int] = {}
        for a in sched.jobs.values():
            for n, g in a.nodes.items():
                used[n] = used.get(n, 0) + g
        whole = sum(nd.gpus for nd in inst.nodes if nd.gpus > 0 and used.get(nd.id, 0) == 0)
        free = sum(nd.gpus - used.get(nd.id, 0) for nd in inst.nodes)
        self.rounds.append((float(re.search(r"-t(\d+)$", inst.name).group(1)), whole, free))
        return out


def free_metrics(res: Any, rec: FreeRecorder) -> dict[str, float]:
    """Time-weighted whole free GPUs and fragmentation over the rounds with active jobs (a round
    that reuses the previous schedule counts that schedule's figures)."""
    r = res.rounds
    k = -1
    tot = whole = frag = 0.0
    for span, solved in zip(r["span_s"], r["solved"], strict=True):
        if solved > 0:
            k += 1
        if k < 0:
            continue
        _, w, f = rec.rounds[k]
        tot += span
        whole += span * w
        frag += span * (1.0 - w / f if f else 0.0)
    return {"whole_free_gpus": whole / tot if tot else 0.0, "fragmentation": frag / tot if tot else 0.0}


def run_one(workload: str, variant: str, allocator: str, seed: int, time_limit: float, policy: str = POLICY,
            deterministic_time: float | None = None, preemption: str | None = None) -> dict[str, Any]:
    from optsched.sim.config import SimConfig
    from optsched.sim.engine import simulate
    from optsched.sim.experiment import make_allocator, parse_allocator
    from optsched.sim.policies import get_policy

    preemption = preemption or SimConfig.preemption  # None: the simulator's default
    setup = setup_window(workload, LOAD, seed)
    solver, how = parse_allocator(allocator)
    if how == "demand":
        raise SystemExit(f"{allocator}: this benchmark takes SOLVER, SOLVER@warm or SOLVER@cold")
    opts: dict[str, Any] = {"num_workers": 1} if solver == "cpsat" else {}
    if solver == "cpsat" and deterministic_time is not None:
        opts["deterministic_time"] = deterministic_time  # load-independent, reproducible rounds
    rec = FreeRecorder(make_allocator(allocator, time_limit=time_limit, seed=seed, **opts))
    tol, max_moves = VARIANTS[variant]
    cfg = SimConfig(name=f"{workload}-{variant}-{allocator}", progress=False, preemption=preemption,
                    packing=None if tol is None else "consolidate", packing_tolerance=tol or None, max_moves=max_moves)
    t0 = time.perf_counter()
    res = simulate(setup.workload, setup.nodes, get_policy(policy), rec, cfg)
    wall = time.perf_counter() - t0
    s = res.summary()
    jobs = res.jobs
    jct = res.jct_s
    fin = res.finished
    large = fin & (jobs["gpus"] >= LARGE)
    small = fin & (jobs["gpus"] == 1)
    row: dict[str, Any] = {
        "workload": workload, "policy": policy, "preemption": preemption, "variant": variant, "allocator": allocator, **summary_columns(s),
        "large_jobs": int(large.sum()),
        "large_queue_h": float(np.mean(jobs["start_s"][large] - jobs["submit_s"][large])) / 3600 if large.any() else float("nan"),
        "large_jct_h": float(np.mean(jct[large])) / 3600 if large.any() else float("nan"),
        "small_jct_h": float(np.mean(jct[small])) / 3600 if small.any() else float("nan"),
        "gpu_util": s["gpu_util"], "moves": s["moves"], "solver_calls": s["solver_calls"],
        "wall_s": wall, "loadavg": os.getloadavg()[0],
    }
    row.update(free_metrics(res, rec))
    return row


def cmd_run(args: argparse.Namespace) -> int:
    for v in args.variants:
        if v not in VARIANTS:
            raise SystemExit(f"unknown variant {v!r}; known: {list(VARIANTS)}")
    grid = [(w, v, a) for w in args.workloads for v in args.variants for a in args.allocators]
    run_resumable(Path(args.out), FIELDS, ("workload", "variant", "allocator"), grid,
                  lambda w, v, a: run_one(w, v, a, args.seed, args.time_limit, args.policy, args.deterministic_time, args.preemption),
                  lambda row: (f"avg JCT {row['avg_jct_h']:.2f} h, large queue {row['large_queue_h']:.2f} h, "
                               f"whole free {row['whole_free_gpus']:.1f}"),
                  "packing runs")
    return 0


NUMERIC = ("avg_jct_h", "p99_jct_h", "makespan_h", "large_queue_h", "large_jct_h", "small_jct_h", "whole_free_gpus", "fragmentation",
           "gpu_util", "preemptions", "moves")


def cmd_table(args: argparse.Namespace) -> int:
    """One row per (policy, allocator, variant): the mean over the files given (one seed each)."""
    groups: dict[tuple[str, str, str, str], list[dict[str, str]]] = {}
    for path in args.csv:
        with open(path) as fh:
            for r in csv.DictReader(fh):
                pol = policy_label(r["policy"], r.get("preemption", "auto"))  # files from before the column: auto
                groups.setdefault((r["workload"], pol, r["allocator"], r["variant"]), []).append(r)
    keys = sorted(groups, key=lambda k: (k[0], k[1], ALLOCATORS.index(k[2]) if k[2] in ALLOCATORS else len(ALLOCATORS), list(VARIANTS).index(k[3])))
    print("| policy | allocator | variant | seeds | avg JCT (h) | p99 JCT (h) | makespan (h) | large (>= 8 GPUs): queueing delay (h) "
          "| large: JCT (h) | 1-GPU JCT (h) | whole free GPUs | fragmentation | GPU util | preemptions | moves |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in keys:
        rows = groups[k]
        f = {c: float(np.mean([float(r[c]) for r in rows])) for c in NUMERIC}
        large = [("–" if np.isnan(f[c]) else f"{f[c]:.2f}") for c in ("large_queue_h", "large_jct_h")]  # no large jobs
        print(f"| {k[1]} | {k[2]} | {k[3]} | {len(rows)} | {f['avg_jct_h']:.2f} | {f['p99_jct_h']:.1f} | {f['makespan_h']:.1f} | "
              f"{large[0]} | {large[1]} | {f['small_jct_h']:.2f} | {f['whole_free_gpus']:.1f} | "
              f"{f['fragmentation']:.0%} | {f['gpu_util']:.0%} | {f['preemptions']:.0f} | {f['moves']:.0f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap, _, _ = run_table_parser(__doc__, "benchmarks/results/packing.csv", workloads=["philly"],
                                axis=("--variants", ["plain", "pack", "pack5"], f"of {list(VARIANTS)} (default: the packing ones)"),
                                allocators=ALLOCATORS, time_limit=1.0, policy=POLICY, deterministic_time=True, run=cmd_run, table=cmd_table,
                                table_nargs="+", table_help="one results file per seed", preemption=True)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    raise SystemExit(main())
