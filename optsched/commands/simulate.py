"""``optsched simulate``: replay a trace window on a cluster under queue policies x allocators.

Writes ``<out>/<policy>-<allocator>-s<seed>-<id>.metrics.json`` and ``.jobs.csv`` per run, where
``<id>`` is a short hash of every setting that changes the result (the metrics JSON's ``manifest``
lists them), so runs that differ never overwrite each other; prints a summary table, and with
``--plot`` draws JCT CDFs, queue and utilisation timelines side by side.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from optsched.commands.gen import parse_shares
from optsched.errors import InputError
from optsched.extras import require_extra
from optsched.incremental import GAP_TARGET
from optsched.io import check_writable
from optsched.parallel import check_backend
from optsched.registry import get_method, methods
from optsched.sim.config import (
    BACKFILL,
    PREEMPTION,
    SimConfig,
    parse_start_spread_horizon,
    pins_running_jobs,
    round_families,
)
from optsched.sim.experiment import check_allocator, check_deterministic_time, parse_allocator, prepare, run_grid
from optsched.sim.metrics import run_stem, write_jobs_csv, write_metrics_json
from optsched.sim.plots import plot_runs
from optsched.sim.policies import POLICIES, get_policy
from optsched.sim.result import summarise
from optsched.sim.shadow import write_rounds_csv
from optsched.sim.traces import CsvSchema
from optsched.sim.workload import parse_duration


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace CSV: normalized schema, Philly (Pollux), Alibaba v2023 pods, Helios or Slurm sacct (or any layout "
                                 "with --columns/--schema); 'sample' for the bundled two days of the Philly trace; or "
                                 "synthetic:PRESET[:KEY=VALUE,...] to generate one (presets parametric, synergy, gang-heavy, "
                                 "philly-multi; e.g. synthetic:gang-heavy:jobs=500,gpus=176,load=1.1; the seed is --seed "
                                 "unless given)")
    p.add_argument("--format", default="auto", help="auto (from the header), normalized, philly, philly-json (the original job log), alibaba, helios or sacct (Slurm)")
    p.add_argument("--start", default="0", help="window start after the first arrival (e.g. 0, 12h, 7d)")
    p.add_argument("--length", default=None, help="window length (e.g. 1d, 30d; default: to the end)")
    p.add_argument("--max-jobs", type=int, default=None, help="at most this many jobs from the window")
    p.add_argument("--load", type=float, default=1.0, help="arrival-rate multiplier (default 1)")
    p.add_argument("--target-load", type=float, default=None,
                   help="scale arrivals so that GPU demand / supply over the window is this (overrides --load)")
    p.add_argument("--min-duration", default=None, help="drop jobs shorter than this (e.g. 60)")
    p.add_argument("--max-duration", default=None, help="drop jobs longer than this (e.g. 2d)")
    p.add_argument("--cluster", default="16x8", help="NxG[:TYPE], mix:NAME:N, pai2020[:FRACTION], alibaba2023[:PATH][:FRACTION]")
    p.add_argument("--cpus", type=int, default=64, help="cores per node for NxG clusters (default 64)")
    p.add_argument("--mem-gb", type=int, default=512, help="GB per node for NxG clusters (default 512)")
    p.add_argument("--cap-mode", default="clip", choices=("clip", "drop"), help="jobs larger than the largest GPU type")
    p.add_argument("--policy", default="las", help="comma-separated queue policies: fifo, srf, las, maxmin, srtf, gittins, themis, gavel, gavel-makespan (default las)")
    p.add_argument("--allocator", default="fungible-greedy", help="comma-separated solvers (see `optsched methods`); SOLVER@warm solves the rounds as one chain, each from the last "
                        "(what plain cpsat does), SOLVER@cold solves every round afresh, SOLVER@demand holds jobs at their fixed demand "
                        "(default fungible-greedy)")
    p.add_argument("--time-limit", type=float, default=5.0,
                   help="allocator seconds per round (default 5; a round chain such as cpsat spends it only on rounds its bound "
                        "leaves open, and 0.2 gave the same JCTs in the measured streams: docs/simulator.md)")
    p.add_argument("--round", default="300", help="round length (default 300 s)")
    p.add_argument("--restart", default="60", help="restart cost of a moved or resumed job (default 60 s)")
    p.add_argument("--spread-factor", type=float, default=0.9,
                   help="throughput factor per node a gang uses beyond the fewest it needs (default 0.9)")
    p.add_argument("--queue-window", type=float, default=2.0,
                   help="waiting jobs offered per round, x cluster GPUs (0: all); jobs that fit the free GPUs backfill past it")
    p.add_argument("--horizon", default=None, help="stop at this simulated time (unfinished jobs are reported)")
    p.add_argument("--fair", action="store_true", help="Synergy fairness: no job slower than at its demand")
    p.add_argument("--slo-share", type=float, default=0.0,
                   help="share of jobs (drawn with --seed) that are SLO jobs with a deadline (default 0: none)")
    p.add_argument("--slo-slack", type=float, default=2.0,
                   help="an SLO job's deadline is submit + this x its trace duration (default 2)")
    p.add_argument("--packing", action="store_true",
                   help="Gandiva-style consolidation: among near-best schedules keep the most whole idle nodes (round.packing)")
    p.add_argument("--packing-tolerance", type=float, default=None,
                   help="with --packing: share of a round's worth consolidation may give up (default 0)")
    p.add_argument("--fairness", default=None,
                   help="drf: dominant resource fairness across the trace's tenants in every round; hug: HUG-style "
                        "progress fairness counting the cores and GB jobs get (round.fairness; "
                        "allocators that honour it: `optsched methods --json`)")
    p.add_argument("--max-moves", type=int, default=None,
                   help="Gandiva's migration budget: at most this many running jobs change nodes per round (round.max_moves; "
                        "default: unbounded)")
    p.add_argument("--preemption", default=SimConfig.preemption, choices=PREEMPTION,
                   help="none: a running job is never stopped or moved for another; allowed: the allocator may; auto (default): "
                        "the policy's own semantics (fifo does not preempt; las, srf, srtf and the others do), allowed with "
                        "quotas, SLO jobs or --fairness")
    p.add_argument("--backfill", default=None, choices=BACKFILL,
                   help="when the head of a non-preemptive queue does not fit: easy (default): EASY backfilling, the head holds "
                        "a reservation at the earliest time enough GPUs come free and only jobs that end by then (run time at "
                        "demand) or fit beside it may start; any: every waiting job that fits may start, however long it holds "
                        "the GPUs the head waits for")
    p.add_argument("--start-spread-horizon", default="2h",
                   help="non-preemptive rounds: a job started there keeps its nodes until it ends, so the round charges a start "
                        "on more nodes than the job needs its spread factor as over this long (default 2h: 0.9 per extra node "
                        "becomes 0.9^24 = 0.08 at 5-minute rounds); 'none': one round. The simulated speed is unchanged")
    p.add_argument("--start-min-throughput", type=float, default=0.5,
                   help="non-preemptive rounds: a waiting job starts only on GPU types whose nodes can give it at least this "
                        "share of its demand's throughput from their cores and memory per GPU, and, where some node shape's "
                        "fewest nodes feed it while another's would starve it, or it is a gang larger than any node, only at "
                        "grid points that reach it "
                        "(default 0.5; 0: no limit)")
    p.add_argument("--shadow", default=None,
                   help="also solve every round with this solver on the same state, afresh (SOLVER or SOLVER@cold), and write "
                        "<run>.rounds.csv comparing them (worth, GPUs, jobs started and preempted, gangs, head of queue)")
    p.add_argument("--elastic-share", type=float, default=0.0,
                   help="share of jobs (drawn with --seed) that are elastic: gpus/4 .. 4 x gpus GPUs, Amdahl scaling per model (default 0)")
    p.add_argument("--seed", type=int, default=0, help="model assignment and solver seed (default 0)")
    p.add_argument("--mix", default=None, help="model mix, families or models with weights, e.g. image=0.6,language=0.4 (or image:0.6,...; default: the catalogue's)")
    p.add_argument("--workers", type=int, default=1, help="simulations run at once (default 1)")
    p.add_argument("--backend", default="local", help="local (process pool, default), serial, or ray (optional extra)")
    p.add_argument("--address", help="Ray cluster to join with --backend ray (default: start a local one)")
    p.add_argument("-o", "--out", default="sim-out", help="output directory (default sim-out)")
    p.add_argument("--plot", action="store_true", help="write <out>/runs.png comparing the runs")
    p.add_argument("--check", action="store_true", help="re-check every round's schedule with the independent checker")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    # real traces of any layout, reproducible budgets
    p.add_argument("--columns", default=None,
                   help="read a CSV of another layout: FIELD=COLUMN pairs, e.g. submit=submitted_at,gpus=num_chips,duration=run_s "
                        "(fields: id, submit, duration or end [start], gpus, instances, gpu_fraction, cpu_cores, mem_gib, cpus_per_gpu, "
                        "mem_per_gpu_gb, tenant, gpu_type, model); adds to --schema's columns")
    p.add_argument("--time-unit", default=None, choices=("s", "ms", "us", "min", "h"),
                   help="unit of the submit/start/end (and duration) numbers of a --columns/--schema CSV (default s)")
    p.add_argument("--gpu-unit", type=float, default=None,
                   help="GPUs one unit of a --columns/--schema CSV's gpus column stands for (default 1; 0.01 for a column in "
                        "percent of a GPU, as Alibaba PAI 2020's plan_gpu); counts that are not whole are rounded up, "
                        "counted in the notes (fractional_gpu_as_whole below one GPU, rounded_gpus above)")
    p.add_argument("--cpu-unit", type=float, default=None,
                   help="cores one unit of a --columns/--schema CSV's cpu_cores column stands for (default 1; 0.01 for PAI 2020's plan_cpu)")
    p.add_argument("--schema", default=None,
                   help="JSON or TOML file describing a CSV layout: columns, time_unit, duration_unit, datetime_format, comment, gpu_unit, cpu_unit, "
                        "models (the trace's model names -> catalogue models)")
    p.add_argument("--deterministic-time", type=float, default=None,
                   help="per-round budget in CP-SAT deterministic seconds for cpsat and lns, so that results do not depend "
                        "on the machine's load (--time-limit stays a wall-clock cap); fixed-demand and fungible-greedy are "
                        "deterministic anyway; other allocators refuse it")
    p.add_argument("--gap-target", type=float, default=None, metavar="G",
                   help=f"round chains (cpsat, SOLVER@warm): stop a round once it is within this relative gap of a proven bound "
                        f"(default {GAP_TARGET}, i.e. {100 * GAP_TARGET:g} %%)")


#: prepare()'s setting names -> the options that set them (its errors name the option)
_OPTION_OF = {"start/length": "--start/--length", "min_duration/max_duration": "--min-duration/--max-duration", "cap_mode": "--cap-mode",
              "target_load": "--target-load", "cpus": "--cpus", "mem_gb": "--mem-gb", "max_gpus": "--cluster", "cluster": "--cluster", "trace": "trace",
              "spread_factor": "--spread-factor", "window.start_s": "--start", "window.length_s": "--length",
              "window.max_jobs": "--max-jobs", "restart_s": "--restart", "gpu_type": "--cluster", "cluster.fraction": "--cluster",
              "cluster.mix": "--cluster", "mix": "--mix", "load": "--load", "start": "--start", "length": "--length",
              "min_duration": "--min-duration", "max_duration": "--max-duration"}


#: SimConfig's fields -> the options that set them
_CONFIG_OPTION = {"round_s": "--round", "queue_window": "--queue-window", "horizon_s": "--horizon",
                  "start_spread_horizon_s": "--start-spread-horizon", "start_min_throughput": "--start-min-throughput",
                  "preemption": "--preemption", "backfill": "--backfill", "slo_share": "--slo-share", "slo_slack": "--slo-slack",
                  "elastic_share": "--elastic-share", "fairness": "--fairness", "max_moves": "--max-moves",
                  "packing_tolerance": "--packing-tolerance"}


def _as_option(e: InputError, options: dict[str, str]) -> InputError:
    """``e`` naming the command-line option that set its field, where ``options`` knows one."""
    return InputError(options[e.field], e.value, e.problem) if e.field in options else e


def _note_backfill(cfg: SimConfig, policies: list[str], backfill_given: bool) -> None:
    """Note where a ``--backfill`` the user gave changes none of the runs of some policies (it
    applies to queues that do not preempt)."""
    pinning = [pol for pol in policies if pins_running_jobs(cfg, get_policy(pol))]
    if backfill_given and len(pinning) < len(policies):
        print(f"note: --backfill {cfg.backfill} applies to queues that do not preempt; it does not change the runs of "
              f"{', '.join(pol for pol in policies if pol not in pinning)}", file=sys.stderr)


#: round-policy families -> the options that switch them on (_check_round_policies)
_FAMILY_OPTION = {"quotas": "tenant quotas", "max_moves": "--max-moves", "deadlines": "--slo-share", "drf": "--fairness drf",
                  "hug": "--fairness hug", "elastic": "--elastic-share", "packing": "--packing"}


def _check_round_policies(cfg: SimConfig, policies: list[str], allocators: list[str], shadow: str | None) -> None:
    """Refuse, before any replay, an allocator or shadow that does not honour a round policy the
    run's options switch on (:func:`~optsched.sim.config.round_families`), pinned running jobs
    (a queue that does not preempt) included: ``solve_round`` would refuse it only at the first
    round that uses it, which for SLO or elastic jobs may be hours into a replay, after the other
    runs of the grid."""
    named = [("--allocator", a) for a in allocators] + ([("--shadow", shadow)] if shadow else [])
    for pol in policies:
        families = round_families(cfg, get_policy(pol))
        for flag, a in named:
            missing = sorted(families - set(get_method(parse_allocator(a)[0]).policies))
            if missing:
                able = sorted(m.name for m in methods() if set(missing) <= set(m.policies))
                what = [_FAMILY_OPTION[f] for f in missing if f != "preemption"]
                text = f"cannot honour {', '.join(what)}" if what else "cannot"
                if "preemption" in missing:  # the rounds pin running jobs (contract job field preemptible)
                    text += (" and" if what else "") + (f" keep running jobs where they run, which --policy {pol} needs (its queue "
                                                        f"does not preempt: --preemption {cfg.preemption} pins them; "
                                                        "--preemption allowed does not)")
                raise InputError(flag, a, f"{text}; allocators that can: {', '.join(able)}")


def run(args: argparse.Namespace) -> int:
    check_writable(args.out, directory=True)
    if args.plot:  # before the run, not after it
        require_extra("matplotlib", "plot", "simulate --plot")
    policies = [s.strip() for s in args.policy.split(",") if s.strip()]
    allocators = [s.strip() for s in args.allocator.split(",") if s.strip()]
    for pol in policies:
        if pol not in POLICIES:
            raise InputError("--policy", pol, f"unknown queue policy; known: {sorted(POLICIES)}")
    for a in allocators:
        try:
            check_allocator(a)
        except InputError as e:
            raise InputError("--allocator", e.value, e.problem) from None
    if args.shadow is not None:
        solver, at, variant = args.shadow.partition("@")
        if at and variant != "cold":
            raise InputError("--shadow", args.shadow, "a shadow solves each round's state afresh: give SOLVER or SOLVER@cold")
        try:
            get_method(solver)
        except InputError as e:
            raise InputError("--shadow", e.value, e.problem) from None
        args.shadow = solver
    if not policies or not allocators:
        raise InputError("--policy/--allocator", f"{args.policy}/{args.allocator}", "name at least one of each")
    if not args.time_limit > 0 or not math.isfinite(args.time_limit):
        raise InputError("--time-limit", args.time_limit, "must be a positive number of seconds")
    if args.seed < 0:
        raise InputError("--seed", args.seed, "must be >= 0")
    if args.workers < 1:
        raise InputError("--workers", args.workers, "must be >= 1")
    check_backend(args.backend, "--backend")  # before the trace is read, not after
    if args.address and args.backend != "ray":
        raise InputError("--address", args.address, "only applies to --backend ray")
    if not 0 <= args.queue_window < math.inf:
        raise InputError("--queue-window", args.queue_window, "must be a number >= 0 (0 offers every waiting job)")
    if args.packing_tolerance is not None and not args.packing:
        raise InputError("--packing-tolerance", args.packing_tolerance, "applies only with --packing")
    if args.packing_tolerance is not None and not 0.0 <= args.packing_tolerance < 1.0:
        raise InputError("--packing-tolerance", args.packing_tolerance, "must be in [0, 1): the share of a round's worth packing may give up")
    if args.max_moves is not None and args.max_moves < 0:
        raise InputError("--max-moves", args.max_moves, "must be >= 0: the running jobs that may change nodes per round")
    try:
        check_deterministic_time([*allocators, *([args.shadow] if args.shadow else [])], args.deterministic_time)
    except InputError as e:
        raise InputError("--deterministic-time", e.value, e.problem) from None
    if args.gap_target is not None:
        if not 0.0 <= args.gap_target < 1.0:
            raise InputError("--gap-target", args.gap_target, "must be in [0, 1): a relative gap (0.001 is 0.1 %)")
        if not any(parse_allocator(a)[1] == "warm" for a in allocators):
            raise InputError("--gap-target", args.gap_target, "applies only to round chains (cpsat, or SOLVER@warm)")
    try:
        cfg = SimConfig(
            round_s=parse_duration(args.round, "--round"), fair=args.fair,
            queue_window=args.queue_window or None, horizon_s=parse_duration(args.horizon, "--horizon"),
            check=args.check, progress=not args.no_progress, slo_share=args.slo_share, slo_slack=args.slo_slack, slo_seed=args.seed,
            packing="consolidate" if args.packing else None, packing_tolerance=args.packing_tolerance,
            elastic_share=args.elastic_share, elastic_seed=args.seed, fairness=args.fairness, max_moves=args.max_moves,
            preemption=args.preemption, backfill=args.backfill or SimConfig.backfill,
            start_spread_horizon_s=parse_start_spread_horizon(args.start_spread_horizon), start_min_throughput=args.start_min_throughput,
        )
    except InputError as e:  # SimConfig's field names, as the options that set them
        raise _as_option(e, _CONFIG_OPTION) from None
    _note_backfill(cfg, policies, args.backfill is not None)
    _check_round_policies(cfg, policies, allocators, args.shadow)
    try:
        setup = prepare(
            args.trace, fmt=args.format, cluster=args.cluster, cpus=args.cpus, mem_gb=args.mem_gb, start=args.start,
            length=args.length, max_jobs=args.max_jobs, load=args.load, target_load=args.target_load,
            min_duration=args.min_duration, max_duration=args.max_duration, cap_mode=args.cap_mode, seed=args.seed,
            mix=parse_mix(args.mix), restart_s=parse_duration(args.restart, "--restart"), spread_factor=args.spread_factor,
            schema=_schema(args),
        )
    except InputError as e:  # the settings prepare() names, as the options that set them
        raise _as_option(e, _OPTION_OF) from None
    for warning in setup.warnings:
        print(warning, file=sys.stderr)
    out = Path(args.out)
    print(f"{setup.settings['cluster_summary']}; {len(setup.workload)} jobs; notes {dict(setup.workload.notes)}", file=sys.stderr)
    pairs = [(pol, a) for pol in policies for a in allocators]
    extra: dict[str, Any] = {} if args.shadow is None else {"shadow": args.shadow}
    if args.deterministic_time is not None:
        extra["deterministic_time"] = args.deterministic_time
    if args.gap_target is not None:
        extra["gap_target"] = args.gap_target
    results = run_grid(setup, pairs, time_limit=args.time_limit, seed=args.seed, config=cfg, backend=args.backend,
                       workers=args.workers, address=args.address, progress=not args.no_progress, **extra)
    runs = {}
    for (pol, a), res in results.items():
        stem = run_stem(res)  # <policy>-<allocator>-s<seed>-<hash of every setting that changes the result>
        shadow_rounds = res.info.pop("shadow_rounds", None)
        if shadow_rounds is not None:
            write_rounds_csv(shadow_rounds, out / f"{stem}.rounds.csv")
        write_metrics_json(res, out / f"{stem}.metrics.json")
        write_jobs_csv(res, out / f"{stem}.jobs.csv")
        print(f"{pol}/{a}: {out / stem}.metrics.json, .jobs.csv{', .rounds.csv' if shadow_rounds is not None else ''}", file=sys.stderr)
        if res.info.get("stalled"):
            left = summarise(res)["unfinished"]
            why = ("the cluster was idle, every job had arrived, and two rounds in a row started none of the waiting ones "
                   "(they fit at no point this allocator tries)") if res.info.get("stall") == "idle" else \
                  ("every job had arrived and none did any work for twice the longest restart plus ten rounds: the rounds "
                   "preempted or moved each running job before its restart (--restart) was over; a shorter --restart, "
                   "a longer --round or another --policy lets them run")
            print(f"warning: {pol}/{a} stopped with {left} jobs unfinished: {why}; their JCTs are missing from the averages",
                  file=sys.stderr)
        runs[f"{pol}/{a}"] = res
    print(_table(runs))
    if args.plot:
        print(f"plot: {plot_runs(runs, out / 'runs.png')}", file=sys.stderr)
    return 0


def _schema(args: argparse.Namespace) -> CsvSchema | None:
    """The CSV layout of ``--schema`` and ``--columns`` (columns merged, ``--columns`` winning),
    with ``--time-unit``; ``None`` when neither is given."""
    if args.schema is None and args.columns is None:
        for flag, value in (("--time-unit", args.time_unit), ("--gpu-unit", args.gpu_unit), ("--cpu-unit", args.cpu_unit)):
            if value is not None:
                raise InputError(flag, value, "applies only with --columns or --schema")
        return None
    columns = CsvSchema.parse_columns(args.columns) if args.columns else {}
    try:
        if args.schema:
            return CsvSchema.from_file(args.schema, columns=columns, time_unit=args.time_unit, gpu_unit=args.gpu_unit, cpu_unit=args.cpu_unit)
        return CsvSchema(columns, time_unit=args.time_unit or "s", gpu_unit=1.0 if args.gpu_unit is None else args.gpu_unit,
                         cpu_unit=1.0 if args.cpu_unit is None else args.cpu_unit)
    except InputError as e:  # a unit the option gave (it replaces the schema file's) is named as the option
        if e.field in ("time_unit", "gpu_unit", "cpu_unit") and getattr(args, e.field) is not None:
            raise InputError("--" + e.field.replace("_", "-"), e.value, e.problem) from None
        raise


def parse_mix(text: str | None) -> dict[str, float] | None:
    """``--mix``: ``NAME=WEIGHT`` (or ``NAME:WEIGHT``) pairs separated by commas."""
    return parse_shares("--mix", text)


def _table(runs: dict) -> str:
    cols = [("avg_jct_s", "avg JCT h", 3600), ("median_jct_s", "p50 h", 3600), ("p99_jct_s", "p99 h", 3600),
            ("makespan_s", "makespan h", 3600), ("avg_queueing_delay_s", "queue h", 3600), ("gpu_util", "GPU", 1),
            ("cpu_util", "CPU", 1), ("preemptions", "preempt", 1), ("moves", "moves", 1), ("unfinished", "unfin", 1),
            ("solve_s_mean", "solve s", 1), ("wall_s", "wall s", 1)]
    if any("deadline_satisfaction" in res.summary() for res in runs.values()):
        cols.insert(-2, ("deadline_satisfaction", "deadline met", 1))
    header = ["run", *(c[1] for c in cols)]
    rows = []
    for label, res in runs.items():
        s = res.summary()
        rows.append([label, *("-" if s[k] is None else f"{s[k] / d:.3g}" for k, _, d in cols)])
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(str(c).rjust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows])
