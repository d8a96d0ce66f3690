"""Round policy families over a whole trace: deadlines (SLO jobs with admission control) and
tenant quotas, on bench_policies.py's Philly window (``--workloads alibaba``: its Alibaba window,
bench_sim.WORKLOADS), with fungible and fixed-demand allocation (docs/results.md, "Scheduling
policies from the literature").

    python benchmarks/bench_round_policies.py run --out benchmarks/results/round_policies.csv
    python benchmarks/bench_round_policies.py run --workloads alibaba --out benchmarks/results/round_policies_alibaba.csv
    python benchmarks/bench_round_policies.py table benchmarks/results/round_policies.csv benchmarks/results/round_policies_fifo.csv

Variants per allocator (queue policy LAS unless ``--policy``; ``--preemption`` sets every run's
``SimConfig.preemption``, default ``auto``: FIFO pins running jobs in ``plain``, while deadlines
and quotas, which work by preempting, make it ``allowed``):

* ``plain``: no round policy. Its deadline and quota columns are measured against the same SLO
  marking and quotas as the other variants, i.e. what a scheduler unaware of them achieves.
* ``deadlines``: ``SLO_SHARE`` of the jobs (seeded) must finish by ``submit + SLO_SLACK x
  duration`` (optsched.sim.deadlines: admission, due jobs first, demotion).
* ``quotas``: every trace tenant (the loader's ``tenant``: Philly's virtual clusters, Alibaba's
  QoS classes, the only tenant field the v2023 trace fills) has a guaranteed GPU quota proportional
  to its GPU-time in the window (90 % of the cluster guaranteed in all, at least 1 GPU each).

Quota metrics, per round from the allocator's schedules (time-weighted over rounds with active
jobs): for each tenant with jobs offered, ``s_t = held_t / e_t`` where ``e_t`` is the most GPUs
whole gangs of its offered jobs can make within its quota (subset sum; >= 1: it has its guarantee); ``min share`` is the time average of ``min_t min(1, s_t)``, ``below`` the
share of time some tenant is below its guarantee, ``Jain`` the time average of Jain's index of
``min(1, s_t)`` across tenants. Load average is recorded beside wall time (shared machine).
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
from bench_policies import LOAD, fairness, isolated_s, policy_label, run_resumable, run_table_parser, summary_columns  # noqa: E402
from bench_sim import setup_window  # noqa: E402

ALLOCATORS = ("cpsat@cold", "fungible-greedy", "fixed-demand")
VARIANTS = ("plain", "deadlines", "quotas")
POLICY = "las"
SLO_SHARE = 0.3
SLO_SLACK = 2.0
GUARANTEED = 0.9
FIELDS = ("workload", "policy", "preemption", "variant", "allocator", "jobs", "finished", "avg_jct_h", "p99_jct_h", "makespan_h", "max_rho", "jain_jobs",
          "slo_jobs", "slo_admitted", "slo_rejected", "slo_demoted", "deadline_sat", "admitted_sat", "be_avg_jct_h",
          "min_share", "below_quota", "jain_tenants", "gpu_util", "preemptions", "solver_calls", "wall_s", "loadavg")


def quotas_for(jobs: Any, total_gpus: int, guaranteed: float = GUARANTEED) -> dict[str, int]:
    """Per tenant: ``max(1, floor(guaranteed x total x its share of the window's GPU-time))``."""
    use: dict[str, float] = {}
    for j in jobs:
        if j.tenant:
            use[j.tenant] = use.get(j.tenant, 0.0) + j.gpus * j.duration_s
    tot = sum(use.values())
    q = {t: max(1, int(guaranteed * total_gpus * v / tot)) for t, v in use.items()}
    assert sum(q.values()) <= total_gpus
    return q


def entitled(gangs: list[int], quota: int) -> int:
    """The most GPUs a tenant can hold within its quota with whole gangs of its offered jobs
    (subset sum): its guarantee this round, whatever the placement."""
    reach = 1  # bit i: i GPUs reachable
    for g in gangs:
        reach |= reach << g
    reach &= (1 << (quota + 1)) - 1
    return reach.bit_length() - 1


class Recorder:
    """Wraps an allocator; keeps each solved round's ``(t, held GPUs, offered gangs)`` per tenant,
    and in ``usage`` what each tenant holds at its jobs' fixed demand (GPUs, cores, GB: DRF's
    :func:`optsched.round_policies.drf_usage`, the GPUs a job got)."""

    def __init__(self, inner: Any, tenant_of: dict[str, str]) -> None:
        self.inner, self.tenant_of, self.name = inner, tenant_of, getattr(inner, "name", "alloc")
        self.rounds: list[tuple[float, dict[str, int], dict[str, int]]] = []
        self.usage: list[dict[str, np.ndarray]] = []

    def __call__(self, inst: Any) -> Any:
        from optsched.round_policies import drf_usage

        out = self.inner(inst)
        sched = getattr(out, "schedule", out)
        held: dict[str, int] = {}
        offered: dict[str, list[int]] = {}
        usage: dict[str, np.ndarray] = {}
        for j in inst.jobs:
            t = self.tenant_of[j.id] or "-"
            offered.setdefault(t, []).append(j.gpus)
            row = usage.setdefault(t, np.zeros(3))
            if j.id in sched.jobs:
                held[t] = held.get(t, 0) + j.gpus
                row += drf_usage(j, sched.jobs[j.id].gpus)
        self.rounds.append((float(re.search(r"-t(\d+)$", inst.name).group(1)), held, offered))
        self.usage.append(usage)
        return out


def solved_rounds(res: Any, rec: Recorder) -> Any:
    """``(span_s, k)`` per simulated round from the first solved one on: the round's length and the
    index in ``rec`` of the schedule in force (rounds that reuse the previous schedule keep its ``k``)."""
    r = res.rounds
    solved_t = [t for t, _, _ in rec.rounds]
    k = -1
    for t, span, solved in zip(r["t_s"], r["span_s"], r["solved"], strict=True):
        if solved > 0:
            k += 1
            assert abs(solved_t[k] - t) < 1.0
        if k >= 0:
            yield span, k


def jain_index(x: np.ndarray) -> float:
    """Jain's index ``(sum x)^2 / (n sum x^2)`` (1: all equal; 0 when every x is 0)."""
    sq = float((x ** 2).sum())
    return float(x.sum() ** 2 / (x.size * sq)) if sq > 0 else 0.0


def quota_metrics(res: Any, rec: Recorder, quotas: dict[str, int]) -> dict[str, float]:
    """Time-weighted min share vs quota, time below a guarantee and Jain's index across tenants."""
    tot = mins = below = jain = 0.0
    for span, k in solved_rounds(res, rec):
        _, held, offered = rec.rounds[k]
        ent = {tn: entitled(gangs, quotas[tn]) for tn, gangs in offered.items() if tn in quotas}
        s = np.array([min(1.0, held.get(tn, 0) / e) for tn, e in ent.items() if e > 0])
        if s.size == 0:
            continue
        tot += span
        mins += span * s.min()
        below += span * float(s.min() < 1.0 - 1e-9)
        jain += span * jain_index(s)
    return {"min_share": mins / tot, "below_quota": below / tot, "jain_tenants": jain / tot}


def run_one(workload: str, variant: str, allocator: str, seed: int, time_limit: float, policy: str = POLICY,
            preemption: str | None = None) -> dict[str, Any]:
    from optsched.sim.config import SimConfig
    from optsched.sim.deadlines import deadline_metrics, mark_deadlines
    from optsched.sim.engine import simulate
    from optsched.sim.experiment import make_allocator, parse_allocator
    from optsched.sim.policies import get_policy

    preemption = preemption or SimConfig.preemption  # None: the simulator's default
    setup = setup_window(workload, LOAD, seed)
    jobs = setup.workload.jobs
    quotas = quotas_for(jobs, sum(nd.gpus for nd in setup.nodes))
    solver, how = parse_allocator(allocator)
    if how == "demand":
        raise SystemExit(f"{allocator}: this benchmark takes SOLVER, SOLVER@warm or SOLVER@cold")
    opts = {"num_workers": 1} if solver == "cpsat" else {}
    rec = Recorder(make_allocator(allocator, time_limit=time_limit, seed=seed, **opts), {j.id: j.tenant for j in jobs})
    cfg = SimConfig(name=f"{workload}-{variant}-{allocator}", progress=False, preemption=preemption,
                    slo_share=SLO_SHARE if variant == "deadlines" else 0.0, slo_slack=SLO_SLACK, slo_seed=seed,
                    tenant_quotas=quotas if variant == "quotas" else None)
    t0 = time.perf_counter()
    res = simulate(setup.workload, setup.nodes, get_policy(policy), rec, cfg)
    wall = time.perf_counter() - t0
    s = res.summary()
    fin = res.finished
    row: dict[str, Any] = {
        "workload": workload, "policy": policy, "preemption": preemption, "variant": variant, "allocator": allocator, **summary_columns(s),
        "gpu_util": s["gpu_util"], "solver_calls": s["solver_calls"], "wall_s": wall, "loadavg": os.getloadavg()[0],
    }
    f = fairness(res.jct_s[fin], isolated_s(setup)[fin])
    row.update(max_rho=f["max_rho"], jain_jobs=f["jain"])
    cols = dict(res.jobs)
    if variant != "deadlines":  # measure against the same marking, unaware of it
        cols["deadline_s"] = mark_deadlines(jobs, SLO_SHARE, SLO_SLACK, seed)
        cols["slo"] = np.where(np.isfinite(cols["deadline_s"]), 1, 0)
    d = deadline_metrics(cols)
    row.update(slo_jobs=d["slo_jobs"], slo_admitted=d["slo_admitted"] if variant == "deadlines" else "",
               slo_rejected=d["slo_rejected"] if variant == "deadlines" else "", slo_demoted=d["slo_demoted"] if variant == "deadlines" else "",
               deadline_sat=d["deadline_satisfaction"], admitted_sat=d["admitted_deadline_satisfaction"] if variant == "deadlines" else "",
               be_avg_jct_h=d["best_effort_avg_jct_s"] / 3600)
    row.update(quota_metrics(res, rec, quotas))
    return row


def cmd_run(args: argparse.Namespace) -> int:
    grid = [(w, v, a) for w in args.workloads for v in args.variants for a in args.allocators]
    run_resumable(Path(args.out), FIELDS, ("workload", "variant", "allocator"), grid,
                  lambda w, v, a: run_one(w, v, a, args.seed, args.time_limit, args.policy, args.preemption),
                  lambda row: f"avg JCT {row['avg_jct_h']:.2f} h, deadlines met {row['deadline_sat']:.2f}, min share {row['min_share']:.2f}",
                  "round-policy runs")
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    rows = []
    for path in args.csv:
        with open(path) as fh:
            rows += csv.DictReader(fh)
    def setting(r: dict[str, str]) -> tuple[str, str]:
        return r.get("policy", POLICY), r.get("preemption", "auto")

    order = {k: i for i, k in enumerate(dict.fromkeys(map(setting, rows)))}  # settings in the files' order
    rows.sort(key=lambda r: (r["workload"], order[setting(r)], VARIANTS.index(r["variant"]),
                              ALLOCATORS.index(r["allocator"]) if r["allocator"] in ALLOCATORS else len(ALLOCATORS)))

    def f(x: str, fmt: str) -> str:
        return "–" if x == "" else format(float(x), fmt)

    print("| policy | variant | allocator | avg JCT (h) | best-effort avg JCT (h) | p99 JCT (h) | makespan (h) | SLO jobs admitted / rejected / demoted "
          "| deadlines met (all SLO) | deadlines met (admitted) | min share vs quota | time below quota | Jain (tenants) | GPU util | preemptions |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        adm = "–" if r["slo_admitted"] == "" else f"{r['slo_admitted']} / {r['slo_rejected']} / {r['slo_demoted']} of {r['slo_jobs']}"
        print(f"| {policy_label(*setting(r))} | {r['variant']} | {r['allocator']} | {f(r['avg_jct_h'], '.2f')} | {f(r['be_avg_jct_h'], '.2f')} | {f(r['p99_jct_h'], '.1f')} | "
              f"{f(r['makespan_h'], '.1f')} | {adm} | {f(r['deadline_sat'], '.0%')} | {f(r['admitted_sat'], '.0%')} | "
              f"{f(r['min_share'], '.2f')} | {f(r['below_quota'], '.0%')} | {f(r['jain_tenants'], '.3f')} | {f(r['gpu_util'], '.0%')} | "
              f"{r['preemptions']} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap, _, _ = run_table_parser(__doc__, "benchmarks/results/round_policies.csv", workloads=["philly"], axis=("--variants", VARIANTS, None),
                                 allocators=ALLOCATORS, time_limit=1.0, policy=POLICY, run=cmd_run, table=cmd_table,
                                 table_nargs="+", table_help="results files (rows of all, sorted)", preemption=True)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    raise SystemExit(main())
