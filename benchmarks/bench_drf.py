"""Dominant resource fairness over a trace: DRF vs no DRF on bench_policies.py's Philly and
Alibaba windows, with integrated-fungible and fixed-demand allocation (docs/results.md,
"Dominant resource fairness over the Philly and Alibaba windows").

    python benchmarks/bench_drf.py run --out benchmarks/results/drf.csv
    python benchmarks/bench_drf.py table benchmarks/results/drf.csv
    python benchmarks/bench_drf.py rounds --out benchmarks/results/drf-rounds.csv   # single large rounds

Variants (queue policy LAS): ``plain`` (no round policy), ``drf`` (``SimConfig.fairness =
"drf"``: every round maximises the smallest dominant share across the trace's tenants, then worth;
tenants are Philly's virtual clusters and Alibaba's QoS classes, the only tenant field that trace
has) and ``hug`` (``SimConfig.fairness = "hug"``: the smallest HUG-style progress, which counts
the cores and GB jobs get, then worth). Allocators: ``cpsat@cold`` (integrated fungible, exact, every round afresh), ``cpsat@demand`` (the same exact solver
with every job held at its fixed demand), ``fungible-greedy`` and ``fixed-demand`` (both with
progressive filling under DRF).

DRF metrics, per round from the allocator's schedules, over the tenants with jobs offered that
round, time-weighted over the *contended* rounds (at least two tenants offered; alone, a tenant's
share says nothing about fairness, and the single-tenant tail of a run would dominate the average):
a tenant's dominant share is the largest of its GPUs, cores and GB at its jobs' fixed demand over
the cluster's totals (what the round maximises the minimum of); ``min_dshare`` is the time average
of the smallest, ``jain_dshare`` of Jain's index of the shares, ``starved`` the share of contended
time some tenant with jobs offered holds nothing, ``jain_gpu`` Jain's index of the tenants' GPU
counts, ``contended_h`` the contended time. Outcome per tenant: ``worst_tenant_rho``, the largest
over tenants of their finished jobs' mean ``rho = JCT / isolated time`` (bench_policies.py).
``min_progress``: the time average over the contended rounds of the smallest HUG-style progress
(:func:`progress_metric`: per tenant, its offered jobs' fixed demand gives the demand vector, and
what its scheduled jobs got at their points the progress along it). All variants are measured
alike, so the plain rows show what a scheduler unaware of DRF gives.
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
from bench_policies import LOAD, fairness, isolated_s, run_resumable, run_table_parser, summary_columns  # noqa: E402
from bench_round_policies import Recorder, jain_index, solved_rounds  # noqa: E402
from bench_sim import WORKLOADS, setup_window  # noqa: E402

ALLOCATORS = ("cpsat@cold", "cpsat@demand", "fungible-greedy", "fixed-demand")
VARIANTS = ("plain", "drf", "hug")
POLICY = "las"
FIELDS = ("workload", "policy", "variant", "allocator", "jobs", "finished", "avg_jct_h", "p99_jct_h", "makespan_h", "max_rho", "jain_jobs",
          "min_dshare", "jain_dshare", "starved", "jain_gpu", "contended_h", "worst_tenant_rho", "tenants", "gpu_util", "preemptions", "solver_calls", "solve_s_mean", "wall_s",
          "loadavg", "min_progress")


class Progress:
    """Wraps an allocator; keeps per solved round and tenant (trace tenant) its offered jobs' fixed
    demand (nominal GPUs x per-GPU demand) and what its scheduled jobs got (GPUs, cores, GB)."""

    def __init__(self, inner: Any, tenant_of: dict[str, str]) -> None:
        self.inner, self.tenant_of, self.name = inner, tenant_of, getattr(inner, "name", "alloc")
        self.rounds: list[dict[str, tuple[np.ndarray, np.ndarray]]] = []

    def __call__(self, inst: Any) -> Any:
        out = self.inner(inst)
        sched = getattr(out, "schedule", out)
        rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for j in inst.jobs:
            dem, got = rows.setdefault(self.tenant_of[j.id] or "-", (np.zeros(3), np.zeros(3)))
            dem += (j.gpus, j.gpus * j.demand[0], j.gpus * j.demand[1])
            a = sched.jobs.get(j.id)
            if a is not None:
                got += (a.gpus, a.gpus * a.cpus_per_gpu, a.gpus * a.mem_per_gpu_gb)
        self.rounds.append(rows)
        return out


def progress_metric(res: Any, rec: Recorder, prog: Progress, caps: np.ndarray) -> float:
    """Time average over the contended rounds of ``min_t P_t``, ``P_t = min_r M_t U[t,r] / D[t,r]``
    (``M_t = max_r D[t,r] / cap_r``; formulations/policies.md, "HUG-style progress fairness")."""
    tot = acc = 0.0
    for span, k in solved_rounds(res, rec):
        rows = prog.rounds[k]
        if len(rows) < 2:
            continue
        ps = []
        for dem, got in rows.values():
            live = (caps > 0) & (dem > 0)
            top = (dem[live] / caps[live]).max()
            ps.append(float((top * got[live] / dem[live]).min()))
        tot += span
        acc += span * min(ps)
    return acc / tot if tot else 0.0


def drf_metrics(res: Any, rec: Recorder, caps: np.ndarray) -> dict[str, float]:
    """Over the contended rounds, time-weighted: the smallest dominant share, Jain's index of the
    dominant shares and of the GPU counts, and the share of time some tenant with offered jobs
    holds nothing (module docstring)."""
    tot = mins = jd = starved = jg = 0.0
    for span, k in solved_rounds(res, rec):
        usage = rec.usage[k]
        if len(usage) < 2:
            continue
        rows = np.array(list(usage.values()))
        live = caps > 0
        d = (rows[:, live] / caps[live]).max(axis=1)
        tot += span
        mins += span * d.min()
        jd += span * jain_index(d)
        starved += span * float(d.min() <= 0.0)
        jg += span * jain_index(rows[:, 0])
    return {"min_dshare": mins / tot, "jain_dshare": jd / tot, "starved": starved / tot, "jain_gpu": jg / tot, "contended_h": tot / 3600}


def worst_tenant_rho(tenants: np.ndarray, rho: np.ndarray) -> float:
    """The largest over tenants of the mean ``rho`` of their jobs."""
    return max(float(rho[tenants == t].mean()) for t in np.unique(tenants))


def run_one(workload: str, variant: str, allocator: str, seed: int, time_limit: float, policy: str = POLICY) -> dict[str, Any]:
    from optsched.sim.config import SimConfig
    from optsched.sim.engine import simulate
    from optsched.sim.experiment import make_allocator, parse_allocator
    from optsched.sim.policies import get_policy

    setup = setup_window(workload, LOAD, seed)
    jobs = setup.workload.jobs
    opts = {"num_workers": 1} if parse_allocator(allocator)[0] == "cpsat" else {}
    rec = Recorder(make_allocator(allocator, time_limit=time_limit, seed=seed, **opts), {j.id: j.tenant for j in jobs})
    prog = Progress(rec, {j.id: j.tenant for j in jobs})
    cfg = SimConfig(name=f"{workload}-{variant}-{allocator}", progress=False, fairness=None if variant == "plain" else variant)
    t0 = time.perf_counter()
    res = simulate(setup.workload, setup.nodes, get_policy(policy), prog, cfg)
    wall = time.perf_counter() - t0
    s = res.summary()
    fin = res.finished
    row: dict[str, Any] = {"workload": workload, "policy": policy, "variant": variant, "allocator": allocator, **summary_columns(s),
                           "gpu_util": s["gpu_util"], "solver_calls": s["solver_calls"], "solve_s_mean": s["solve_s_mean"], "wall_s": wall,
                           "loadavg": os.getloadavg()[0], "tenants": len({j.tenant for j in jobs})}
    iso = isolated_s(setup)
    f = fairness(res.jct_s[fin], iso[fin])
    row.update(max_rho=f["max_rho"], jain_jobs=f["jain"])
    tenant = np.array([j.tenant for j in jobs], dtype=object)
    row["worst_tenant_rho"] = worst_tenant_rho(tenant[fin], res.jct_s[fin] / np.maximum(iso[fin], 1e-9))
    caps = np.array([sum(n.gpus for n in setup.nodes), sum(n.cpus for n in setup.nodes), sum(n.mem_gb for n in setup.nodes)], dtype=float)
    row.update(drf_metrics(res, rec, caps))
    row["min_progress"] = progress_metric(res, rec, prog, caps)
    return row


def cmd_run(args: argparse.Namespace) -> int:
    grid = [(w, v, a) for w in args.workloads for a in args.allocators for v in args.variants]
    run_resumable(Path(args.out), FIELDS, ("workload", "variant", "allocator"), grid,
                  lambda w, v, a: run_one(w, v, a, args.seed, args.time_limit, args.policy),
                  lambda row: f"avg JCT {row['avg_jct_h']:.2f} h, min dominant share {row['min_dshare']:.3f}, starved {row['starved']:.0%}",
                  "drf runs")
    return 0


ROUNDS = ("large/l-256n-1000j-01.json.gz", "large/l-1024n-4000j-het-run-01.json.gz")
ROUND_FIELDS = ("instance", "tenants", "method", "fairness", "time_limit", "wall_s", "min_dshare", "level_bound", "worth", "picked", "loadavg")


def tenant_round(path: str, tenants: int, seed: int, fairness: str | None) -> Any:
    """A library round whose jobs get one of ``tenants`` tenants, tenant ``t`` drawn with weight
    ``1 / (t + 1)`` (skewed, as trace tenants are), and ``round.fairness``."""
    import random
    from dataclasses import replace

    from optsched.io import load_instance
    from optsched.model import Round

    inst = load_instance(Path(__file__).resolve().parents[1] / "instances" / path)
    rng = random.Random(seed)
    w = [1 / (t + 1) for t in range(tenants)]
    jobs = tuple(replace(j, tenant=f"t{rng.choices(range(tenants), w)[0]}") for j in inst.jobs)
    return replace(inst, jobs=jobs, round=Round(duration_s=inst.round.duration_s, fair=inst.round.fair, fairness=fairness))


def cmd_rounds(args: argparse.Namespace) -> int:
    """Single large rounds with and without DRF: each heuristic's smallest dominant share (measured
    against the DRF round either way), worth and time; ``level_bound`` is the smallest over tenants
    of the dominant share of *all* its jobs, which no schedule can exceed."""
    from optsched.round_policies import dominant_shares, drf_level, drf_scale, drf_tenants
    from optsched.solve import solve_round

    grid = [(p, m, f) for p in ROUNDS for m in args.methods for f in ("none", "drf")]

    def one(path: str, method: str, fair: str) -> dict[str, Any]:
        drf = tenant_round(path, args.tenants, args.seed, "drf")
        inst = drf if fair == "drf" else tenant_round(path, args.tenants, args.seed, None)
        opts = {"num_workers": 1} if method == "cpsat" else {}
        t0 = time.perf_counter()
        res = solve_round(inst, solver=method, time_limit=args.time_limit, seed=args.seed, **opts)
        wall = time.perf_counter() - t0
        everything = dominant_shares(drf, [j.id for j in drf.jobs])
        return {"instance": Path(path).name, "tenants": args.tenants, "method": method, "fairness": fair, "time_limit": args.time_limit,
                "wall_s": wall, "min_dshare": drf_level(drf, res.schedule.jobs) / drf_scale(drf),
                "level_bound": min(everything[t] for t in drf_tenants(drf)), "worth": res.objective,
                "picked": res.stats.get("picked", ""), "loadavg": os.getloadavg()[0]}

    run_resumable(Path(args.out), list(ROUND_FIELDS), ("instance", "method", "fairness"),
                  [(Path(p).name, m, f) for p, m, f in grid], lambda name, m, f: one(next(p for p in ROUNDS if p.endswith(name)), m, f),
                  lambda row: f"min dominant share {row['min_dshare']:.4f}, worth {row['worth']:.1f}, {row['wall_s']:.1f} s", "drf rounds")
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    with open(args.csv) as fh:
        rows = list(csv.DictReader(fh))
    loads = list(WORKLOADS)
    rows.sort(key=lambda r: (loads.index(r["workload"]), ALLOCATORS.index(r["allocator"]), VARIANTS.index(r["variant"])))
    prog = bool(rows) and "min_progress" in rows[0]  # CSVs written before the hug variant lack it
    print("| workload | allocator | variant | avg JCT (h) | p99 JCT (h) | makespan (h) | min dominant share | Jain (dominant shares) "
          "| time a tenant starved | worst tenant's mean rho | GPU util | preemptions | solve s / round | wall s (load) |"
          + (" min HUG progress |" if prog else ""))
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if prog else ""))
    for r in rows:
        print(f"| {r['workload']} | {r['allocator']} | {r['variant']} | {float(r['avg_jct_h']):.2f} | {float(r['p99_jct_h']):.1f} | "
              f"{float(r['makespan_h']):.1f} | {float(r['min_dshare']):.3f} | {float(r['jain_dshare']):.2f} | {float(r['starved']):.0%} | "
              f"{float(r['worst_tenant_rho']):.1f} | {float(r['gpu_util']):.0%} | {r['preemptions']} | {float(r['solve_s_mean']):.2f} | "
              f"{float(r['wall_s']):.0f} ({float(r['loadavg']):.1f}) |" + (f" {float(r['min_progress']):.3f} |" if prog else ""))
    return 0


def _rounds_parser(sub: Any) -> None:
    """The ``rounds`` sub-command (single large rounds, :func:`cmd_rounds`)."""
    d = sub.add_parser("rounds")
    d.add_argument("--out", default="benchmarks/results/drf-rounds.csv")
    d.add_argument("--methods", nargs="+", default=["fixed-demand", "fungible-greedy", "lns"])
    d.add_argument("--tenants", type=int, default=8)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--time-limit", type=float, default=10.0)
    d.set_defaults(fn=cmd_rounds)


def main(argv: list[str] | None = None) -> int:
    ap, _, _ = run_table_parser(__doc__, "benchmarks/results/drf.csv", workloads=WORKLOADS, axis=("--variants", VARIANTS, None),
                                allocators=ALLOCATORS, time_limit=1.0, policy=POLICY, run=cmd_run, table=cmd_table, extra=_rounds_parser)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    raise SystemExit(main())
