"""Per-round comparison of an allocator with a shadow on a gang-heavy replay (the diagnosis in
benchmarks/README.md, "Gang-heavy rounds").

Every round of the replay is solved by ``--allocator`` (its schedules are applied) and by
``--shadow`` on the very same state (:class:`optsched.sim.shadow.Shadowed`); prints one JSON line
with the run's JCTs and the per-round comparison::

    python benchmarks/bench_shadow.py --policy fifo --allocator cpsat@cold --load 1.6
    python benchmarks/bench_shadow.py --policy las --allocator fungible-greedy --preemption allowed

It runs on any tree that has ``optsched.sim.shadow``, ``optsched.sim.synthetic`` and
``optsched.sim.experiment.parse_allocator`` (older trees ignore ``--preemption``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--allocator", default="cpsat@cold", help="SOLVER, SOLVER@warm (a round chain) or SOLVER@cold")
    ap.add_argument("--shadow", default="fungible-greedy")
    ap.add_argument("--load", type=float, default=1.6, help="offered load on the 176 GPUs")
    ap.add_argument("--jobs", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=0.2)
    ap.add_argument("--spread-factor", type=float, default=1.0)
    ap.add_argument("--preemption", default="auto")
    args = ap.parse_args(argv)

    from optsched.sim.cluster import homogeneous
    from optsched.sim.config import SimConfig
    from optsched.sim.engine import simulate
    from optsched.sim.experiment import make_allocator, parse_allocator
    from optsched.sim.policies import get_policy
    from optsched.sim.shadow import Shadowed, shadow_summary
    from optsched.sim.solving import SolveRoundAllocator
    from optsched.sim.synthetic import synthetic_trace
    from optsched.sim.workload import build_workload, offered_load, scale_load

    nodes = homogeneous(22, cpus=48, mem_gb=512)
    tr = synthetic_trace("gang-heavy", jobs=args.jobs, seed=args.seed)
    tr = scale_load(tr, args.load / offered_load(tr, 176))
    wl = build_workload(tr, nodes, seed=args.seed, spread_factor=args.spread_factor, restart_s=60.0)
    kw = {"progress": False}
    if "preemption" in {f.name for f in dataclasses.fields(SimConfig)}:
        kw["preemption"] = args.preemption
    solver, variant = parse_allocator(args.allocator)
    if variant == "demand":
        raise SystemExit(f"--allocator {args.allocator}: a shadow comparison takes a plain, @warm or @cold solver")
    opts = {"num_workers": 1} if solver in ("cpsat", "lns") else {}
    primary = make_allocator(args.allocator, time_limit=args.time_limit, seed=args.seed, validate=False, **opts)
    sh = Shadowed(primary, {"shadow": SolveRoundAllocator(args.shadow, time_limit=args.time_limit, validate=False, hint=False)})
    t0 = time.time()
    res = simulate(wl, nodes, get_policy(args.policy), sh, SimConfig(**kw))
    s = res.summary()
    out = {**vars(args), "wall_s": round(time.time() - t0, 1),
           **{k: round(s[k] / 3600, 3) for k in ("avg_jct_s", "p99_jct_s", "makespan_s")},
           "gpu_util": round(s["gpu_util"], 3), "preemptions": s["preemptions"], "moves": s["moves"], "gap_mean": s["gap_mean"],
           "per_round": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in shadow_summary(sh.records, "shadow").items()}}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
