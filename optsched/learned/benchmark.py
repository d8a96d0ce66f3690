"""Re-runnable benchmark of the learned policy (issue 5's figures): ``python -m optsched.learned.benchmark``.

- **small**: unseen rounds from the training distribution (:func:`optsched.learned.train.training_round`,
  seeds disjoint from training), labelled exactly by CP-SAT (cached); the greedy policy's and
  the best-of-``k``-samples gap to the proven optimum (rounds CP-SAT proves optimal only), its
  inference time, and the same for the CP-SAT greedy hint (:func:`optsched.exact.hint.greedy_schedule`).
- **large**: 1,024 nodes x 4,000 jobs rounds from :func:`optsched.gen.generate` (coarse grid,
  two GPU types, 30 % running): the solver's wall and CPU time, feasibility, objective, the
  gap to the LP bound (:func:`optsched.mip.bound.lp_bound`) and the greedy's.
- **warm**: medium rounds (32 x 120): CP-SAT's gap after fixed time limits, cold (its own
  greedy hint) vs warm-started with the policy hint.

Timings depend on the machine and its load; the JSON output records both wall and CPU time.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from optsched.checker import check_schedule
from optsched.learned.labels import label_rounds
from optsched.learned.solver import DEFAULT_WEIGHTS, LearnedSolver
from optsched.learned.train import training_round
from optsched.values import schedule_value


def _q(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {}
    a = np.asarray(xs)
    return {"mean": float(a.mean()), "median": float(np.median(a)), "p90": float(np.quantile(a, 0.9)), "max": float(a.max()), "n": len(xs)}


def bench_small(weights: str, rounds: int, sizes: list[tuple[int, int]], cache: str, samples: int, seed: int) -> dict[str, Any]:
    from optsched.exact.hint import greedy_schedule

    insts = [training_round(*sizes[i % len(sizes)], seed=900_000_000 + seed * 10_000 + i) for i in range(rounds)]
    labels = label_rounds(insts, cache, time_limit=20.0, seed=0, workers=2, options={"num_workers": 1}, desc="labelling bench")
    solver = LearnedSolver()
    gaps, gaps_s, gaps_h, times, times_s, by_size = [], [], [], [], [], {}
    for lab in labels:
        if lab.status != "optimal":
            continue
        inst = lab.instance
        t = time.perf_counter()
        r = solver.solve(inst, time_limit=10.0, seed=0, weights=weights, samples=0)
        times.append(time.perf_counter() - t)
        g = (lab.objective - r.objective) / max(lab.objective, 1e-9)
        gaps.append(g)
        by_size.setdefault(f"{len(inst.nodes)}x{len(inst.jobs)}", []).append(g)
        if samples:
            t = time.perf_counter()
            rs = solver.solve(inst, time_limit=10.0, seed=0, weights=weights, samples=samples)
            times_s.append(time.perf_counter() - t)
            gaps_s.append((lab.objective - rs.objective) / max(lab.objective, 1e-9))
        h = greedy_schedule(inst)
        gaps_h.append((lab.objective - schedule_value(inst, h)) / max(lab.objective, 1e-9))
    return {
        "rounds": rounds,
        "proven_optimal": len(gaps),
        "policy_gap": _q(gaps),
        f"policy_best_of_{samples}_gap": _q(gaps_s),
        "greedy_hint_gap": _q(gaps_h),
        "policy_gap_by_size": {k: _q(v) for k, v in sorted(by_size.items())},
        "inference_ms": {k: 1000 * v for k, v in _q(times).items() if k != "n"},
        f"inference_best_of_{samples}_ms": {k: 1000 * v for k, v in _q(times_s).items() if k != "n"},
    }


def bench_large(weights: str, count: int, seed: int, lp: bool) -> list[dict[str, Any]]:
    from optsched.exact.hint import greedy_schedule
    from optsched.gen import generate

    out = []
    for k in range(count):
        inst = generate(1024, 4000, seed=seed + k, grid="coarse", gpu_types=("V100", "P100"), running_fraction=0.3, tightness=1.25)
        LearnedSolver().solve(generate(8, 24, seed=1), time_limit=5.0, seed=0, weights=weights)  # load weights outside the timing
        t, c = time.perf_counter(), time.process_time()
        r = LearnedSolver().solve(inst, time_limit=10.0, seed=0, weights=weights, samples=0)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        feasible = check_schedule(inst, r.schedule).feasible
        t = time.perf_counter()
        h = greedy_schedule(inst)
        greedy_s = time.perf_counter() - t
        row = {
            "instance": inst.name, "feasible": feasible, "objective": r.objective, "wall_s": wall, "cpu_s": cpu,
            "stats": {k2: v for k2, v in r.stats.items() if isinstance(v, (int, float))},
            "greedy_hint_objective": schedule_value(inst, h), "greedy_hint_s": greedy_s,
        }
        if lp:
            from optsched.mip.bound import lp_bound

            t = time.perf_counter()
            b = lp_bound(inst)
            row.update(lp_bound=b, lp_s=time.perf_counter() - t, gap_to_lp=(b - r.objective) / max(b, 1e-9),
                       greedy_gap_to_lp=(b - row["greedy_hint_objective"]) / max(b, 1e-9))
        out.append(row)
    return out


def bench_warm(weights: str, count: int, seed: int, time_limits: list[float]) -> list[dict[str, Any]]:
    """CP-SAT's gap to its own bound after each time limit, cold (greedy hint) vs policy hint."""
    from optsched.exact.cpsat import CpSatSolver
    from optsched.gen import generate
    from optsched.learned.warmstart import warm_solve

    rows = []
    for k in range(count):
        inst = generate(32, 120, seed=seed + k, gpu_types=("V100", "P100"), running_fraction=0.3, tightness=1.25)
        row: dict[str, Any] = {"instance": inst.name}
        for tl in time_limits:
            cold = CpSatSolver().solve(inst, time_limit=tl, seed=0, num_workers=2)
            warm = warm_solve(inst, time_limit=tl, seed=0, weights=weights, num_workers=2)
            best_bound = min(b for b in (cold.bound, warm.bound) if b is not None)
            row[f"t={tl:g}"] = {
                "cold_objective": cold.objective, "warm_objective": warm.objective, "bound": best_bound,
                "cold_gap": (best_bound - cold.objective) / best_bound, "warm_gap": (best_bound - warm.objective) / best_bound,
                "greedy_hint_objective": cold.stats.get("hint_objective"), "policy_hint_objective": warm.stats.get("policy_hint_objective"),
            }
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m optsched.learned.benchmark", description=__doc__.split("\n")[0])
    p.add_argument("--weights", default=str(DEFAULT_WEIGHTS))
    p.add_argument("--small", type=int, default=60, help="small rounds (0: skip)")
    p.add_argument("--sizes", default="4x12,6x16,8x24")
    p.add_argument("--samples", type=int, default=16, help="sampled decodes for best-of-k")
    p.add_argument("--large", type=int, default=2, help="1024x4000 rounds (0: skip)")
    p.add_argument("--no-lp", action="store_true", help="skip the LP bound of large rounds")
    p.add_argument("--warm", type=int, default=0, help="medium rounds for the warm-start comparison (0: skip)")
    p.add_argument("--warm-time-limits", default="1,3,10", help="CP-SAT seconds, comma-separated")
    p.add_argument("--cache", default="runs/label-cache-bench")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--out", default="runs/learned-benchmark.json")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    sizes = [tuple(int(x) for x in s.split("x")) for s in a.sizes.split(",")]
    result: dict[str, Any] = {"weights": a.weights, "threads": a.threads}
    if a.small:
        result["small"] = bench_small(a.weights, a.small, sizes, a.cache, a.samples, a.seed)
        print(json.dumps(result["small"], indent=1))
    if a.large:
        result["large"] = bench_large(a.weights, a.large, 7_000 + a.seed, not a.no_lp)
        print(json.dumps(result["large"], indent=1))
    if a.warm:
        limits = [float(x) for x in a.warm_time_limits.split(",")]
        result["warm"] = bench_warm(a.weights, a.warm, 8_000 + a.seed, limits)
        print(json.dumps(result["warm"], indent=1))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
