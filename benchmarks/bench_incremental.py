"""Cold vs warm exact rounds in the simulator: fungible-greedy, cpsat@cold (each round from scratch)
and cpsat@warm (each round from the last: optsched.incremental, what the simulator's plain cpsat
does) on the same workloads, in one run.

    python benchmarks/bench_incremental.py --workloads synergy,gang --jobs 300 --time-limit 0.2
    python benchmarks/bench_incremental.py --workloads philly --time-limit 0.2

With ``--deterministic-time D`` the cpsat (and lns) allocators' rounds are bounded by ``D`` CP-SAT
deterministic seconds (``--time-limit`` stays a wall-clock cap, and the round chain's wall-clock
rule for skipping a search is off), so the schedules, gaps and JCTs of a run are the same on
any machine; only the times differ. Without it a chain's path depends on the machine's speed,
and a month-long replay's JCT and mean gap move by several percent from run to run.

``philly`` is the bundled two days of the Philly trace (``optsched simulate sample``) on 64 x 8
GPUs with 48 cores and 512 GB per server, at the trace's own arrival rate (--jobs does not apply).
``trace`` replays a trace file of your own on the same cluster, for example a month of the full
Philly trace (jobs shorter than a minute dropped, as in the sample):

    python benchmarks/bench_incremental.py --workloads trace --trace philly.csv --length 30d

Per allocator: the run's wall time and its ratio to fungible-greedy's, the per-round solve time
(p50, p95) and solve CPU time (p50) over the rounds the allocator was called on, the mean and
p95 per-round gap against the round's own proven bound, the mean JCT, and for a chain how its
rounds were answered (``carried``, ``searched``, ``skipped:backoff``, ...). The rows also go to
``--out`` as JSON (``benchmarks/results/incremental.json`` by default).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sim import LOADS, WORKLOADS, setup_window  # noqa: E402

ALLOCATORS = ("fungible-greedy", "cpsat@cold", "cpsat@warm")
#: the synthetic trace presets behind the workloads (their job count is --jobs)
PRESETS = {"synergy": "synergy", "gang": "gang-heavy"}
#: the load each workload runs at (bench_sim's LOADS): Synergy's own arrival rate, gangs at 1.0
LOAD = {"synergy": "natural", "gang": "one"}


def setup_for(workload: str, jobs: int, seed: int, trace: str | None = None, start: str = "0d",
              length: str = "30d") -> Any:
    """The prepared set-up of one workload (the module text)."""
    if workload in ("philly", "trace"):
        from optsched.sim.experiment import prepare

        if workload == "philly":
            return prepare("sample", cluster="64x8", cpus=48, mem_gb=512, seed=seed)
        if trace is None:
            raise SystemExit("--workloads trace needs --trace CSV")
        return prepare(trace, start=start, length=length, min_duration="60", cluster="64x8", cpus=48, mem_gb=512,
                       seed=seed)
    WORKLOADS[workload] = {**WORKLOADS[workload], "trace": f"synthetic:{PRESETS[workload]}:jobs={jobs}"}
    return setup_window(workload, LOADS[LOAD[workload]], seed)


def run_allocator(setup: Any, allocator: str, policy: str, time_limit: float, seed: int,
                  deterministic_time: float | None = None, gap_target: float | None = None) -> dict[str, Any]:
    """One simulation; the figures of the module text. ``deterministic_time`` (CP-SAT
    deterministic seconds per round, ``time_limit`` then a wall-clock cap) goes to the allocators
    that take one and makes their runs reproducible (:func:`optsched.sim.experiment.run`)."""
    from optsched.sim.config import SimConfig
    from optsched.sim.experiment import run

    opts = {"num_workers": 1} if allocator.startswith("cpsat") else {}
    t0 = time.perf_counter()
    res = run(setup, policy=policy, allocator=allocator, time_limit=time_limit, seed=seed,
              config=SimConfig(name=allocator, progress=False), deterministic_time=deterministic_time, gap_target=gap_target, **opts)
    wall = time.perf_counter() - t0
    solved = res.rounds["solved"] > 0
    solve_s = res.rounds["solve_s"][solved]
    cpu_s = res.rounds["solve_cpu_s"][solved]
    gap = res.rounds["gap"][solved]
    gap = gap[np.isfinite(gap)]
    s = res.summary()
    return {"allocator": allocator, "wall_s": wall, "rounds": int(solved.sum()),
            "solve_p50_ms": 1e3 * float(np.median(solve_s)) if solve_s.size else math.nan,
            "solve_p95_ms": 1e3 * float(np.percentile(solve_s, 95)) if solve_s.size else math.nan,
            "cpu_p50_ms": 1e3 * float(np.median(cpu_s)) if cpu_s.size else math.nan,
            "gap_mean_pct": 100 * float(gap.mean()) if gap.size else math.nan,
            "gap_p95_pct": 100 * float(np.percentile(gap, 95)) if gap.size else math.nan,
            "avg_jct_h": s["avg_jct_s"] / 3600, "finished": s["finished"],
            **({"paths": res.info["chain_paths"]} if "chain_paths" in res.info else {})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="synergy,gang")
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--time-limit", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--deterministic-time", type=float, default=None, metavar="D",
                    help="cpsat and lns allocators: D CP-SAT deterministic seconds per round (--time-limit stays a wall-clock cap), "
                         "so that a run gives the same schedules on any machine; default: wall-clock time only")
    ap.add_argument("--gap-target", type=float, default=None, metavar="G",
                    help="the round chain's gap target (default: optsched.incremental.GAP_TARGET)")
    ap.add_argument("--allocators", default=",".join(ALLOCATORS))
    ap.add_argument("--trace", help="workload 'trace': the trace file to replay")
    ap.add_argument("--start", default="0d", help="workload 'trace': where the window starts (default 0d)")
    ap.add_argument("--length", default="30d", help="workload 'trace': the window's length (default 30d)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "incremental.json"),
                    help="write the rows as JSON here")
    args = ap.parse_args(argv)
    rows = []
    for wl in args.workloads.split(","):
        setup = setup_for(wl, args.jobs, args.seed, args.trace, args.start, args.length)
        base = None
        jobs = None if wl in ("philly", "trace") else args.jobs  # the trace's own jobs
        what = {"philly": "the bundled sample", "trace": f"{args.trace} from {args.start}, {args.length}"}.get(wl, f"{jobs} jobs")
        budget = f"{args.time_limit} s per round" + ("" if args.deterministic_time is None else f", {args.deterministic_time} deterministic s")
        print(f"\n{wl}: {what}, {setup.settings.get('cluster_summary', '')}, {args.policy}, {budget}")
        print(f"{'allocator':<16} {'wall s':>8} {'x greedy':>8} {'rounds':>6} {'p50 ms':>7} {'p95 ms':>7} {'cpu p50':>7} "
              f"{'gap %':>6} {'gap p95':>7} {'JCT h':>7}")
        for alloc in args.allocators.split(","):
            r = {"workload": wl, "jobs": jobs, "policy": args.policy, "deterministic_time": args.deterministic_time,
                 **({"gap_target": args.gap_target} if args.gap_target is not None and alloc.endswith("@warm") else {}),
                 **run_allocator(setup, alloc, args.policy, args.time_limit, args.seed, args.deterministic_time, args.gap_target)}
            base = r["wall_s"] if alloc == "fungible-greedy" else base
            r["x_greedy"] = r["wall_s"] / base if base else math.nan
            rows.append(r)
            print(f"{alloc:<16} {r['wall_s']:8.1f} {r['x_greedy']:8.2f} {r['rounds']:6d} {r['solve_p50_ms']:7.1f} {r['solve_p95_ms']:7.1f} "
                  f"{r['cpu_p50_ms']:7.1f} {r['gap_mean_pct']:6.2f} {r['gap_p95_pct']:7.2f} {r['avg_jct_h']:7.3f}", flush=True)
            if "paths" in r:  # how the chain answered its rounds
                print(f"{'':<16} rounds: " + ", ".join(f"{k} {v}" for k, v in r["paths"].items()), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
