"""Simulator benchmarks: engine speed, and the experiment grid behind docs/results.md.

Speed (target: one month of Philly on 64 nodes with a heuristic allocator in <= 2 minutes on 2 cores)::

    python benchmarks/bench_sim.py speed --length 30d --nodes 64 --allocator fixed-demand

Experiments (each run is one JSON under --out; re-running skips finished runs, so it resumes)::

    python benchmarks/bench_sim.py experiment --out results/sim --seeds 0,1,2 --workers 2
    python benchmarks/bench_sim.py experiment --out results/sim --backend ray --address auto --workers 64
    python benchmarks/bench_sim.py report results/sim --csv results/sim/runs.csv > results/sim/report.md
    python benchmarks/bench_sim.py plot results/sim docs/img/sim-philly-high-las.png --workload philly --load high --policy las

The experiment grid is WORKLOADS x LOADS x policies x allocators x seeds. A seed fixes the model
assignment of the trace's jobs and the solvers' seeds. The report gives, per workload, load and
policy, every allocator's mean (+- 95 % Student-t half-width over seeds) average JCT, p99 JCT and
makespan, and the improvement of integrated-fungible (cpsat: the round chain, ``cpsat@warm``, or
``cpsat@cold`` where only that ran) over fixed-demand and over fungible-greedy, computed per seed
and then averaged. Runs are filed under their allocator's one name
(:func:`optsched.sim.experiment.canonical_allocator`: ``cpsat`` is filed as ``cpsat@warm``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / ".." / "shared" / "traces"

#: The trace windows of docs/results.md. Durations are kept in [60 s, 1 d] as Pollux does for
#: Philly (it keeps >= 60 s and < 1000 GPU-hours), so that one multi-week job does not set the
#: makespan whatever the scheduler does. Clusters: Synergy-like 8-GPU servers with 48 cores and
#: 512 GB (the fair share 3 cores / 62 GB per GPU uses half the cores and 97 % of the memory),
#: and a 2 % slice of the real Alibaba PAI 2020 inventory for the Alibaba pods, whose CPU and
#: memory requests are their fixed demands.
WORKLOADS: dict[str, dict[str, Any]] = {
    "philly": dict(trace=TRACES / "normalized" / "philly_pollux.csv", start="30d", length="2d", max_jobs=400,
                   min_duration="60", max_duration="1d", cluster="16x8", cpus=48, mem_gb=512),
    "alibaba": dict(trace=TRACES / "normalized" / "alibaba_v2023_default.csv", start="120d", length="3d", max_jobs=400,
                    min_duration="60", max_duration="1d", cluster="pai2020:0.02"),
    # gang-heavy: half the jobs multi-node gangs of up to 128 GPUs on 22 x 8 GPUs (the generator's
    # gang-heavy preset: 4 % 1 GPU, 12 % 2-7, 37 % 8, 12 % 9-32, 3 % 33-64, 29 % 65-128; durations
    # log-normal, median 93 s, p90 42 min, p99 45 h)
    "gang": dict(trace="synthetic:gang-heavy:jobs=800", cluster="22x8", cpus=48, mem_gb=512),
    # Philly's multi-GPU jobs (sizes and durations resampled) on 16 x 8 GPUs
    "philly-multi": dict(trace=f"synthetic:philly-multi:jobs=600,source={TRACES / 'normalized' / 'philly_pollux.csv'}",
                         cluster="16x8", cpus=48, mem_gb=512, max_duration="1d"),
    # Synergy's own setup: single-GPU Poisson arrivals at 9 jobs/h, 16 x 8 V100 with 24 cores and
    # 500 GB per server, image/language/speech 20/70/10, restarts free (load "natural" only)
    "synergy": dict(trace="synthetic:synergy:jobs=1000", cluster="16x8", cpus=24, mem_gb=500, restart_s=0.0),
}
#: offered load (GPU demand / supply over the arrival span) per load level; None: the trace's own
LOADS = {"moderate": 0.8, "natural": None, "one": 1.0, "high": 1.6}
POLICIES = ("las", "fifo")
#: ``cpsat@demand`` is CP-SAT with every job held at its fixed demand: exact packing, no fungibility
ALLOCATORS = ("fixed-demand", "fungible-greedy", "lns", "cpsat@demand", "cpsat")
#: the order of a report's rows (runs are filed by canonical_allocator: cpsat as cpsat@warm)
ORDER = ("fixed-demand", "fungible-greedy", "lns", "cpsat@demand", "cpsat@warm", "cpsat@cold")
#: integrated-fungible, in the order a report picks it: the round chain, then every round afresh
#: (``cpsat``: a results directory written before plain cpsat became the chain)
INTEGRATED = ("cpsat@warm", "cpsat@cold", "cpsat")
BASELINES = ("fixed-demand", "fungible-greedy", "cpsat@demand")


def setup_window(workload: str, target_load: float, seed: int) -> Any:
    """The ``workload`` window (``WORKLOADS``) prepared at ``target_load`` with ``seed``."""
    from optsched.sim.experiment import prepare

    w = dict(WORKLOADS[workload])
    return prepare(w.pop("trace"), target_load=target_load, seed=seed, **w)


def _setup(workload: str, load: str, seed: int) -> Any:
    return setup_window(workload, LOADS[load], seed)


def run_one(workload: str, load: str, policy: str, allocator: str, seed: int, time_limit: float, out: str,
            deterministic_time: float | None = None, backfill: str | None = None, start_spread_horizon_s: float | None = 7200.0,
            start_min_throughput: float = 0.5) -> dict[str, Any]:
    """One simulation; writes ``<out>/<workload>-<load>-<policy>-<allocator>-s<seed>.json``
    (``backfill``, ``start_spread_horizon_s`` and ``start_min_throughput``: the
    :class:`optsched.sim.config.SimConfig` fields; ``backfill`` None: its default)."""
    from optsched.sim.config import SimConfig
    from optsched.sim.experiment import run
    from optsched.sim.metrics import write_jobs_csv, write_metrics_json

    backfill = backfill or SimConfig.backfill

    setup = _setup(workload, load, seed)
    name = f"{workload}-{load}-{policy}-{allocator}-s{seed}"
    cfg = SimConfig(name=name, progress=False, backfill=backfill, start_spread_horizon_s=start_spread_horizon_s,
                    start_min_throughput=start_min_throughput)
    opts: dict[str, Any] = {"num_workers": 1} if allocator.partition("@")[0] in ("cpsat", "lns") else {}
    if deterministic_time is not None and allocator.partition("@")[0] == "cpsat":
        opts["deterministic_time"] = deterministic_time  # load-independent, reproducible rounds
    res = run(setup, policy=policy, allocator=allocator, time_limit=time_limit, seed=seed, config=cfg, **opts)
    res.info["experiment"] = {"workload": workload, "load": load, "policy": policy, "allocator": allocator, "seed": seed,
                              "time_limit": time_limit, "deterministic_time": opts.get("deterministic_time"), "backfill": backfill,
                              "start_spread_horizon_s": start_spread_horizon_s, "start_min_throughput": start_min_throughput}
    path = Path(out) / f"{name}.json"
    write_jobs_csv(res, Path(out) / "jobs" / f"{name}.jobs.csv")  # first: the JSON marks the run done
    write_metrics_json(res, path)
    return {"name": name, **res.summary()}


def _run_safe(task: tuple[Any, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """:func:`run_one` on a backend, never raising (a failure becomes ``{"error": ...}``)."""
    try:
        return task, run_one(*task)
    except Exception as e:  # noqa: BLE001 - recorded and reported by the caller
        return task, {"error": f"{type(e).__name__}: {e}"}


def cmd_speed(args: argparse.Namespace) -> int:
    from optsched.sim.config import SimConfig
    from optsched.sim.experiment import prepare, run

    t0 = time.perf_counter()
    setup = prepare(args.trace, cluster=f"{args.nodes}x8", cpus=args.cpus, mem_gb=512, start=args.start, length=args.length, seed=0)
    prep = time.perf_counter() - t0
    cfg = SimConfig(name="speed", progress=not args.no_progress, horizon_s=None)
    if args.allocator == "hint-greedy":  # the CP-SAT hint's greedy, called directly (not a registered solver)
        from optsched.exact.hint import greedy_schedule
        from optsched.sim.engine import simulate
        from optsched.sim.policies import get_policy

        res = simulate(setup.workload, setup.nodes, get_policy(args.policy), greedy_schedule, cfg)
    else:
        res = run(setup, policy=args.policy, allocator=args.allocator, time_limit=args.time_limit, config=cfg,
                  validate=not args.no_validate)
    s = res.summary()
    out = {
        "jobs": len(setup.workload), "nodes": args.nodes, "window": args.length, "allocator": args.allocator,
        "policy": args.policy, "validated": not args.no_validate, "loadavg": [round(x, 2) for x in os.getloadavg()], "prepare_s": round(prep, 2), "simulate_s": round(res.info["wall_s"], 2),
        "simulate_cpu_s": round(res.info["cpu_s"], 2),
        "rounds": s["rounds"], "solver_calls": s["solver_calls"], "solve_s_total": round(s["solve_s_total"], 2),
        "engine_s": round(res.info["wall_s"] - s["solve_s_total"], 2),
        "solve_cpu_s_total": round(s["solve_cpu_s_total"], 2), "engine_cpu_s": round(res.info["cpu_s"] - s["solve_cpu_s_total"], 2), "simulated_days": round(res.info["end_s"] / 86400, 1),
        "avg_jct_h": None if s["avg_jct_s"] is None else round(s["avg_jct_s"] / 3600, 2), "cpus": os.cpu_count(),
    }
    print(json.dumps(out, indent=1))
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from optsched.parallel import get_backend
    from optsched.sim.config import parse_start_spread_horizon

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from optsched.sim.experiment import canonical_allocator

    grid = [(w, ld, p, canonical_allocator(a), s) for w in args.workloads.split(",") for ld in args.loads.split(",")
            for p in args.policies.split(",") for a in args.allocators.split(",") for s in _ints(args.seeds)]
    for w, ld, *_ in grid:
        if w not in WORKLOADS or ld not in LOADS:
            raise SystemExit(f"unknown workload/load {w}/{ld}; known: {sorted(WORKLOADS)} x {sorted(LOADS)}")
    todo = [g for g in grid if not (out / f"{g[0]}-{g[1]}-{g[2]}-{g[3]}-s{g[4]}.json").exists()]
    print(f"{len(grid)} runs, {len(grid) - len(todo)} done already", file=sys.stderr)
    failures = 0
    backend = get_backend(args.backend, workers=args.workers, address=args.address)
    horizon = parse_start_spread_horizon(args.start_spread_horizon)
    tasks = [(*g, args.time_limit, str(out), args.deterministic_time, args.backfill, horizon, args.start_min_throughput) for g in todo]
    for g, r in tqdm(backend.imap_unordered(_run_safe, tasks), total=len(tasks), desc="simulations"):
        if "error" in r:  # report and go on: one broken run must not lose the others
            failures += 1
            tqdm.write(f"{g[:5]}: FAILED {r['error']}")
        else:
            tqdm.write(f"{r['name']}: avg JCT {r['avg_jct_s'] / 3600:.2f} h, makespan {r['makespan_s'] / 3600:.1f} h, wall {r['wall_s']:.0f} s")
    print(report(out))
    return 1 if failures else 0


def report(out: Path) -> str:
    """Markdown tables from the run files in ``out``."""
    from optsched.sim.metrics import compare, mean_ci

    runs: dict[tuple[str, str, str], dict[str, dict[int, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    settings: dict[tuple[str, str], dict[str, Any]] = {}
    for p in sorted(out.glob("*.json")):
        doc = json.loads(p.read_text())
        e = doc["run"].get("experiment")
        if not e:
            continue
        runs[(e["workload"], e["load"], e["policy"])][e["allocator"]][e["seed"]] = doc["metrics"]
        settings[(e["workload"], e["load"])] = doc["run"].get("setup", {})
    lines: list[str] = []
    for (w, ld), st in sorted(settings.items()):
        lines.append(f"- **{w} / {ld}**: {st.get('jobs')} jobs, {st.get('cluster_summary')}, offered load "
                     f"{st.get('target_load')}, window start {st.get('start')} length {st.get('length')}, durations "
                     f"[{st.get('min_duration')}, {st.get('max_duration')}] s")
    lines.append("")
    for key in sorted(runs):
        w, ld, pol = key
        by_alloc = runs[key]
        seeds = sorted({s for a in by_alloc.values() for s in a})
        lines += [f"### {w}, {ld} load, {pol.upper()} (seeds {','.join(map(str, seeds))})", "",
                  "| allocator | avg JCT (h) | p99 JCT (h) | makespan (h) | queueing (h) | GPU util | CPU util | solve s/round | round gap % | unfinished |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for a in [x for x in ORDER if x in by_alloc] + sorted(set(by_alloc) - set(ORDER)):
            ms = list(by_alloc[a].values())

            def ci(k: str, scale: float = 3600.0, ms: list[dict[str, Any]] = ms) -> str:
                vals = [x[k] / scale for x in ms if x.get(k) is not None]
                m, h = mean_ci(vals)
                return "-" if m != m else f"{m:.3g}" if len(vals) == 1 else f"{m:.3g} ± {h:.2g}"

            unfinished = sum(x["unfinished"] for x in ms)
            lines.append(f"| {a} | {ci('avg_jct_s')} | {ci('p99_jct_s')} | {ci('makespan_s')} | {ci('avg_queueing_delay_s')} | "
                         f"{ci('gpu_util', 1)} | {ci('cpu_util', 1)} | {ci('solve_s_mean', 1)} | {ci('gap_mean', 0.01)} | {unfinished} |")
        ours = integrated(by_alloc)
        if ours is not None:
            lines.append("")
            for base in BASELINES:
                if base not in by_alloc:
                    continue
                common = sorted(set(by_alloc[ours]) & set(by_alloc[base]))
                for k, label in (("avg_jct_s", "average JCT"), ("p99_jct_s", "p99 JCT"), ("makespan_s", "makespan")):
                    vals = [compare(by_alloc[ours][s][k], by_alloc[base][s][k]) for s in common]
                    vals = [v for v in vals if v is not None]
                    m, h = mean_ci(vals)
                    ci_text = f" ± {h:.1f}" if len(vals) > 1 else ""
                    lines.append(f"- integrated-fungible ({ours}) vs {base}: {label} {m:+.1f} %{ci_text} lower "
                                 f"(per-seed improvement, mean{' ± 95 % CI' if len(vals) > 1 else ''}; {len(common)} seeds)")
        lines.append("")
    lines += improvement_table(runs)
    return "\n".join(lines)


def integrated(by_alloc: dict[str, Any]) -> str | None:
    """The integrated-fungible allocator of a grid cell (:data:`INTEGRATED`), or None."""
    return next((a for a in INTEGRATED if a in by_alloc), None)


def improvement_table(runs: dict[tuple[str, str, str], dict[str, dict[int, dict[str, Any]]]]) -> list[str]:
    """One row per workload, load and policy: how much lower (%) integrated-fungible's average JCT,
    p99 JCT and makespan are than each baseline's, per seed then mean ± 95 % CI."""
    from optsched.sim.metrics import compare, mean_ci

    bases = [b for b in BASELINES if any(b in r for r in runs.values())]
    head = " | ".join(f"{k} vs {b}" for b in bases for k in ("JCT", "p99 JCT", "makespan"))
    lines = ["### Improvement of integrated-fungible (cpsat), % lower (mean ± 95 % CI over seeds)", "",
             f"| workload | load | policy | {head} |", "|---|---|---|" + "---|" * (3 * len(bases))]
    for (w, ld, pol), by_alloc in sorted(runs.items()):
        ours = integrated(by_alloc)
        if ours is None:
            continue
        cells = []
        for b in bases:
            common = sorted(set(by_alloc[ours]) & set(by_alloc.get(b, {})))
            for k in ("avg_jct_s", "p99_jct_s", "makespan_s"):
                vals = [v for v in (compare(by_alloc[ours][s][k], by_alloc[b][s][k]) for s in common) if v is not None]
                m, h = mean_ci(vals)
                cells.append("-" if m != m else f"{m:+.1f} ± {h:.1f}" if len(vals) > 1 else f"{m:+.1f}")
        lines.append(f"| {w} | {ld} | {pol.upper()} | " + " | ".join(cells) + " |")
    return lines + [""]


def write_runs_csv(out: Path, path: Path) -> Path:
    """One row per run in ``out``: its grid coordinates and headline metrics (hours, shares)."""
    import csv

    cols = ("avg_jct_s", "median_jct_s", "p95_jct_s", "p99_jct_s", "makespan_s", "avg_queueing_delay_s", "gpu_util",
            "cpu_util", "mem_util", "preemptions", "moves", "unfinished", "solver_calls", "solve_s_mean", "solve_s_max", "gap_mean", "cpu_s")
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["workload", "load", "policy", "allocator", "seed", *cols])
        for p in sorted(out.glob("*.json")):
            doc = json.loads(p.read_text())
            e = doc["run"].get("experiment")
            if e:
                m = doc["metrics"]
                w.writerow([e["workload"], e["load"], e["policy"], e["allocator"], e["seed"],
                            *("" if m.get(c) is None else (round(m[c], 6) if isinstance(m[c], float) else m[c]) for c in cols)])
    return path


def cmd_plot(args: argparse.Namespace) -> int:
    """JCT CDFs, queue and utilisation timelines of every allocator for one grid cell and seed."""
    from optsched.sim.experiment import canonical_allocator
    from optsched.sim.metrics import read_run
    from optsched.sim.plots import plot_runs

    out = Path(args.out)
    runs = {}
    for a in map(canonical_allocator, args.allocators.split(",")):
        name = f"{args.workload}-{args.load}-{args.policy}-{a}-s{args.seed}"
        runs[a] = read_run(out / f"{name}.json", out / "jobs" / f"{name}.jobs.csv")
    print(plot_runs(runs, args.png))
    return 0


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    from optsched.sim.config import BACKFILL

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("speed", help="engine speed on a long Philly window")
    sp.add_argument("--trace", default=str(TRACES / "normalized" / "philly_pollux.csv"))
    sp.add_argument("--start", default="20d")
    sp.add_argument("--length", default="30d")
    sp.add_argument("--nodes", type=int, default=64)
    sp.add_argument("--cpus", type=int, default=64)
    sp.add_argument("--policy", default="las")
    sp.add_argument("--allocator", default="fixed-demand", help="a registered solver, or hint-greedy (optsched.exact.hint)")
    sp.add_argument("--time-limit", type=float, default=5.0)
    sp.add_argument("--no-progress", action="store_true")
    sp.add_argument("--no-validate", action="store_true", help="skip solve_round's per-round check (trusted heuristics)")
    ex = sub.add_parser("experiment", help="the docs/results.md grid (resumable)")
    ex.add_argument("--out", default="results/sim")
    ex.add_argument("--workloads", default=",".join(WORKLOADS))
    ex.add_argument("--loads", default=",".join(LOADS))
    ex.add_argument("--policies", default=",".join(POLICIES))
    ex.add_argument("--allocators", default=",".join(ALLOCATORS))
    ex.add_argument("--seeds", default="0,1,2")
    ex.add_argument("--time-limit", type=float, default=2.0, help="allocator seconds per round")
    ex.add_argument("--workers", type=int, default=2)
    ex.add_argument("--deterministic-time", type=float, default=None,
                    help="CP-SAT deterministic seconds per round (the time limit stays as a wall-clock cap): "
                         "results that do not depend on the machine's load")
    ex.add_argument("--backfill", default=None, choices=BACKFILL,
                    help="non-preemptive queues: easy (EASY backfilling, default) or any (SimConfig.backfill)")
    ex.add_argument("--start-spread-horizon", default="2h",
                    help="non-preemptive rounds: how long a start's spread is charged for (SimConfig.start_spread_horizon_s; "
                         "default 2h, 'none': one round)")
    ex.add_argument("--start-min-throughput", type=float, default=0.5,
                    help="non-preemptive rounds: where a waiting job may start (SimConfig.start_min_throughput; default 0.5, 0: anywhere)")
    ex.add_argument("--backend", default="local", help="local (process pool, default), serial, or ray (optional extra)")
    ex.add_argument("--address", help="Ray cluster to join with --backend ray (default: start a local one)")
    rp = sub.add_parser("report", help="markdown tables from a results directory")
    rp.add_argument("out")
    rp.add_argument("--csv", help="also write one row per run to this CSV")
    pl = sub.add_parser("plot", help="JCT CDF, queue and utilisation of every allocator for one grid cell and seed")
    pl.add_argument("out")
    pl.add_argument("png")
    pl.add_argument("--workload", default="philly")
    pl.add_argument("--load", default="high")
    pl.add_argument("--policy", default="las")
    pl.add_argument("--allocators", default="fixed-demand,fungible-greedy,cpsat@demand,cpsat@warm")
    pl.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.cmd == "speed":
        return cmd_speed(args)
    if args.cmd == "experiment":
        return cmd_experiment(args)
    if args.cmd == "plot":
        return cmd_plot(args)
    print(report(Path(args.out)))
    if args.csv:
        write_runs_csv(Path(args.out), Path(args.csv))
    return 0


if __name__ == "__main__":
    sys.exit(main())

