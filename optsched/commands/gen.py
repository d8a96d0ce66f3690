"""``optsched gen``: write random, valid round instances (see :mod:`optsched.gen`).

One instance: ``optsched gen --nodes 8 --jobs 32 --seed 1 -o round.json`` (stdout without
``-o``). Several: ``--count N`` (seeds ``seed+1 .. seed+N``) or a size class
(``--class small``) written into a directory, one ``<name>.json`` (``--gz``: ``.json.gz``)
each. Every generator option has a flag; ranges are ``LOW,HIGH`` and mixes ``KEY:SHARE,...``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from optsched.errors import InputError
from optsched.gen import SIZE_CLASSES, generate, iter_suite
from optsched.io import check_writable, write_json
from optsched.limits import MAX_GEN_COUNT, check_at_most, whole_number
from optsched.model import Instance


def add_arguments(p: argparse.ArgumentParser) -> None:
    what = p.add_argument_group("what to generate")
    what.add_argument("--class", dest="size_class", help="a size class: tiny, small, medium, large or huge")
    what.add_argument("--nodes", type=whole_number, help="servers (at most 100,000)")
    what.add_argument("--jobs", type=whole_number, help="jobs (at most 500,000; may be left out when --tightness is given)")
    what.add_argument("--count", type=whole_number, default=1, help="instances per shape (default 1, at most 10,000)")
    what.add_argument("--seed", type=int, default=0,
                      help="seed (default 0); with --count or --class, instance k uses seed+k")
    what.add_argument("--name", help="instance name (one instance only)")
    cl = p.add_argument_group("cluster")
    cl.add_argument("--gpu-types", help="GPU types: 'V100' or 'V100,K80' (even split) or 'V100:2,P100:1' (shares)")
    cl.add_argument("--gpus-per-node", type=int, help="GPUs per server (at most 1,000,000, as for every count)")
    cl.add_argument("--cpus-per-node", type=int, help="cores per server")
    cl.add_argument("--mem-per-node", type=int, dest="mem_per_node_gb", help="GB per server")
    cl.add_argument("--rack-size", type=int, help="servers per rack")
    jb = p.add_argument_group("jobs")
    jb.add_argument("--job-sizes", help="gang-size mix '1:0.932,2:0.022,...' (default Philly's)")
    jb.add_argument("--tightness", type=float, help="demanded GPUs / cluster GPUs")
    jb.add_argument("--mix", help="model mix 'image:0.5,language:0.5' (or image=0.5,...) or 'resnet18:1,bert:1' (default catalogue mix)")
    jb.add_argument("--grid", help="profile grid: full, coarse or minimal")
    jb.add_argument("--fair", action="store_true", default=None, help="a fair round (no job below its fixed-demand speed)")
    jb.add_argument("--running-fraction", type=float, help="share of jobs running now, placed at demand")
    jb.add_argument("--restart-s", help="restart cost of running jobs, seconds: 'S' or 'LOW,HIGH'")
    jb.add_argument("--spread-factor", help="multi-GPU jobs' spread factor: 'F' or 'LOW,HIGH'")
    jb.add_argument("--weights", help="job weights (log-uniform): 'W' or 'LOW,HIGH'")
    jb.add_argument("--restrict-fraction", type=float, help="share of jobs allowed only one GPU type")
    jb.add_argument("--elastic-share", type=float,
                    help="share of jobs that are elastic (contract v2): sizes gpus/4 .. 4 x gpus, Amdahl scaling per model")
    jb.add_argument("--duration", type=float, dest="duration_s", help="round length in seconds (default 300)")
    jb.add_argument("--spread-from", choices=("fewest", "one"),
                    help="where gangs start paying their spread factor: 'fewest' nodes that hold them (contract version 3, "
                         "the default) or 'one' node (the meaning of versions 1 and 2)")
    out = p.add_argument_group("output")
    out.add_argument("-o", "--out", help="a FILE.json / FILE.json.gz (one instance) or a DIRECTORY; stdout if absent")
    out.add_argument("--gz", action="store_true", help="compress files written into a directory (.json.gz)")


def _floats(flag: str, text: str | None) -> float | tuple[float, float] | None:
    if text is None:
        return None
    try:
        parts = [float(x) for x in text.split(",")]
    except ValueError:
        raise InputError(flag, text, "must be a number or LOW,HIGH") from None
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise InputError(flag, text, "must be a number or LOW,HIGH")


def parse_shares(flag: str, text: str | None, key=str) -> dict[Any, float] | None:
    """``NAME:SHARE`` (or ``NAME=SHARE``) pairs separated by commas; a bare ``NAME`` has share 1."""
    if not text:
        return None
    out: dict[Any, float] = {}
    for item in text.split(","):
        name, sep, share = item.replace("=", ":", 1).partition(":")
        try:
            if not name.strip():
                raise ValueError
            k, v = key(name.strip()), float(share) if sep else 1.0
        except ValueError:
            raise InputError(flag, item, "must be NAME:SHARE (or NAME=SHARE) pairs separated by commas") from None
        if k in out:  # the later share silently replaced the earlier one
            raise InputError(flag, text, f"gives {name.strip()} twice: name each once")
        out[k] = v
    return out


def generator_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options given on the command line, as :func:`optsched.gen.generate` keywords."""
    opts: dict[str, Any] = {
        "gpus_per_node": args.gpus_per_node, "cpus_per_node": args.cpus_per_node,
        "mem_per_node_gb": args.mem_per_node_gb, "rack_size": args.rack_size, "tightness": args.tightness,
        "grid": args.grid, "fair": args.fair, "running_fraction": args.running_fraction,
        "restrict_fraction": args.restrict_fraction, "duration_s": args.duration_s, "elastic_share": args.elastic_share,
        "spread_from": args.spread_from,
        "restart_s": _floats("--restart-s", args.restart_s),
        "spread_factor": _floats("--spread-factor", args.spread_factor),
        "weights": _floats("--weights", args.weights),
        "gpu_types": parse_shares("--gpu-types", args.gpu_types),
        "mix": parse_shares("--mix", args.mix),
    }
    if args.job_sizes is not None:
        opts["job_sizes"] = parse_shares("--job-sizes", args.job_sizes, key=int)
    return {k: v for k, v in opts.items() if v is not None}


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_writable(args.out, directory=not args.out.endswith((".json", ".json.gz")))
    opts = generator_options(args)
    if args.count < 1:
        raise InputError("--count", args.count, "must be >= 1")
    check_at_most("--count", args.count, MAX_GEN_COUNT, "instances per shape")
    instances: Iterator[Instance]  # drawn one at a time: one round in memory however many are written
    if args.size_class:
        if args.nodes is not None or args.jobs is not None:
            raise InputError("--class", args.size_class, "give either a size class or --nodes/--jobs, not both")
        if args.name:
            raise InputError("--name", args.name, "names come from the size class")
        instances = iter_suite(args.size_class, args.count, seed=args.seed, **opts)
        wanted = args.count * len(SIZE_CLASSES[args.size_class].shapes)
    else:
        if args.nodes is None:
            raise InputError("--nodes", None, "is required (or give --class)")
        if args.name and args.count > 1:
            raise InputError("--name", args.name, "names only one instance; leave it out with --count")
        seeds = [args.seed] if args.count == 1 else range(args.seed + 1, args.seed + args.count + 1)
        instances = (generate(args.nodes, args.jobs, seed=s, name=args.name, **opts) for s in seeds)
        wanted = args.count
    if args.out is None:
        if wanted != 1:
            raise InputError("--out", None, f"{wanted} instances need a directory (-o DIR)")
        json.dump(next(instances).to_dict(), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    out = Path(args.out)
    one_file = out.name.endswith((".json", ".json.gz"))
    if one_file and wanted != 1:
        raise InputError("--out", args.out, f"is one file but {wanted} instances are asked for; give a directory")
    suffix = ".json.gz" if args.gz else ".json"
    for inst in instances:
        path = out if one_file else out / f"{inst.name}{suffix}"
        write_json(inst.to_dict(), path)
        demanded = sum(j.gpus for j in inst.jobs)
        gpus = sum(n.gpus for n in inst.nodes)
        print(f"{path}  nodes={len(inst.nodes)} jobs={len(inst.jobs)} gpus={demanded}/{gpus}")
    return 0
