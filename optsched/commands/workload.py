"""``optsched workload``: write a synthetic trace CSV (normalized schema) from a preset.

``optsched workload gang-heavy --jobs 2000 --gpus 176 --load 1.1 --seed 0 -o trace.csv`` writes the
trace that ``optsched simulate trace.csv`` replays, and prints a one-line summary: jobs, arrival
span, offered load, GPU-count shares (:mod:`optsched.sim.synthetic`).
"""

from __future__ import annotations

import argparse
from typing import Any

from optsched.commands.simulate import parse_mix
from optsched.errors import InputError
from optsched.io import check_writable
from optsched.limits import MAX_SEED, whole_number
from optsched.sim.synthetic import describe, resolve_spec, synthetic_trace
from optsched.sim.traces import write_trace_csv
from optsched.sim.workload import parse_duration


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("preset", help="parametric, synergy, gang-heavy or philly-multi (docs/simulator.md, 'Synthetic workloads')")
    p.add_argument("--jobs", type=whole_number, help="number of jobs (or --span); at most 10,000,000")
    p.add_argument("--span", help="arrival span instead of a job count (e.g. 7d, 36h)")
    p.add_argument("--rate", type=float, help="Poisson arrivals per hour (or --load)")
    p.add_argument("--load", type=float, help="offered load on --gpus GPUs: sum(gpus x duration) / (GPUs x span)")
    p.add_argument("--gpus", type=int, help="the cluster's GPUs, for --load and the summary")
    p.add_argument("--duration", help="duration distribution: lognormal, synergy or trace (resampled from --source)")
    p.add_argument("--median", help="log-normal median duration (e.g. 93, 20m)")
    p.add_argument("--p90", help="log-normal 90th percentile (e.g. 42m)")
    p.add_argument("--p99", help="log-normal 99th percentile (e.g. 45h); with --p90: a two-part log-normal")
    p.add_argument("--max-duration", help="clip durations above this (e.g. 7d)")
    p.add_argument("--sizes", help="GPU counts: single, synergy, philly, gang-heavy, trace, or shares '1:0.5,8:0.3,64:0.2'")
    p.add_argument("--gang-share", type=float, help="share of jobs that are multi-node gangs (> --node-gpus GPUs); reshapes --sizes")
    p.add_argument("--node-gpus", type=int, help="GPUs per node, for --gang-share (default 8)")
    p.add_argument("--source", help="trace to resample sizes/durations from (philly-multi: Philly's CSV; sample: the bundled two days of it)")
    p.add_argument("--source-min-gpus", type=int, help="resample only the source's jobs with at least this many GPUs")
    p.add_argument("--mix", help="model mix, e.g. image=0.2,language=0.7,audio=0.1 (or image:0.2,...; default: the preset's or the catalogue's)")
    p.add_argument("--tenants", type=int, help="label jobs with this many tenants t0..t(k-1), drawn evenly")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0): same options and seed, same trace")
    p.add_argument("-o", "--out", help="trace CSV to write (default: only print the summary)")


def run(args: argparse.Namespace) -> int:
    if args.out:
        check_writable(args.out)
    if not 0 <= args.seed <= MAX_SEED:  # as simulate and solve take it
        raise InputError("--seed", args.seed, f"must be in [0, {MAX_SEED}]")
    over: dict[str, Any] = {"seed": args.seed}
    for key, flag in (("jobs", "jobs"), ("rate_per_h", "rate"), ("load", "load"), ("gpus", "gpus"), ("duration", "duration"),
                      ("gang_share", "gang_share"), ("node_gpus", "node_gpus"), ("source", "source"),
                      ("source_min_gpus", "source_min_gpus"), ("tenants", "tenants")):
        if getattr(args, flag) is not None:
            over[key] = getattr(args, flag)
    for key, flag in (("span_s", "span"), ("median_s", "median"), ("p90_s", "p90"), ("p99_s", "p99"), ("max_duration_s", "max_duration")):
        if getattr(args, flag) is not None:
            over[key] = parse_duration(getattr(args, flag), f"--{flag.replace('_', '-')}")
    if args.sizes is not None:
        over["sizes"] = _sizes(args.sizes)
    if args.mix is not None:
        over["mix"] = parse_mix(args.mix)
    spec = resolve_spec(args.preset, **over)
    trace = synthetic_trace(spec)
    if args.out:
        write_trace_csv(trace, args.out)
    print(describe(trace, spec.gpus, spec.node_gpus) + (f" -> {args.out}" if args.out else ""))
    return 0


def _sizes(text: str) -> str | dict[int, float]:
    if ":" not in text:
        return text.strip()
    out: dict[int, float] = {}
    for part in text.split(","):
        g, _, w = part.partition(":")
        try:
            k, v = int(g), float(w)
        except ValueError:
            raise InputError("--sizes", text, "must be a name or GPUS:SHARE pairs separated by commas") from None
        if k in out:  # the later share silently replaced the earlier one
            raise InputError("--sizes", text, f"gives {g.strip()} twice: name each once")
        out[k] = v
    return out


