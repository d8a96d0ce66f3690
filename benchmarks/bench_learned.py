"""Re-runnable benchmark of the learned policy: ``python benchmarks/bench_learned.py``.

- **small**: held-out rounds: the library's ``instances/small`` and fresh rounds from the
  training distribution (:func:`optsched.learned.train.training_round`, seeds from 900,000,000 on,
  disjoint from every training, DAgger and validation seed), labelled by CP-SAT (cached). Over
  the rounds CP-SAT proves optimal: the gap of the policy's greedy decode, of the best of it and
  16 samples (both without the repair) and of ``method="learned"`` with its defaults to the
  optimum, and their latency (the greedy decode is the pure
  inference path: featurise, one forward pass, one decode; its forward and decode parts are
  reported apart), beside the CP-SAT greedy hint (:func:`optsched.exact.hint.greedy_schedule`).
- **large**: the library's 1,024-node x 4,000-job rounds: ``maifs`` (the policy's greedy decode,
  then the price-guided repair of :mod:`optsched.learned.repair`) with the time limit and with
  2 s, and the policy alone (``repair=False``): wall and CPU time, feasibility, objective and gap
  to the LP bound (:func:`optsched.mip.bound.lp_bound`), beside fungible-greedy, time-limited
  cpsat and lns, and the maifs schedule improved by lns for the rest of the time limit
  (``maifs+lns``).
- **warm**: rounds the policy never saw (``instances/medium`` and the trace rounds, all larger than
  any training round): CP-SAT's incumbent trajectory (a solution callback) with no hint, the
  greedy hint and the policy hint (complete hints; ``lns_share=0`` so that only the hint differs),
  and the time each takes to come within 0.5 % of the reference (the best of the index's best
  known value and every run here). Then the same rounds at a fixed time limit: default cpsat,
  cpsat with the policy hint (``method="auto"``'s choice there) and the policy alone.

Timings depend on the machine and its load: every section records ``os.getloadavg()``; compare
ratios measured in one run. The JSON output records wall and CPU time.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from optsched.checker import check_schedule
from optsched.errors import InputError
from optsched.exact.hint import greedy_schedule
from optsched.exact.model import build_model, make_scale
from optsched.exact.options import _check_options
from optsched.exact.prep import job_data
from optsched.heuristics.lns import LargeNeighbourhoodSearch
from optsched.io import load_instance
from optsched.learned.labels import label_rounds
from optsched.learned.solver import DEFAULT_WEIGHTS, LearnedSolver, load_policy
from optsched.learned.train import training_round
from optsched.learned.warmstart import policy_hint, warm_solve
from optsched.mip.bound import choose_relaxation, lp_bound
from optsched.mip.data import RoundData
from optsched.model import Instance
from optsched.schedule import Schedule
from optsched.solve import solve_round
from optsched.values import schedule_value

_ROOT = Path(__file__).resolve().parents[1]
#: first seed of the fresh held-out rounds (training uses 1,000,000 x (seed + 1) + offsets)
HELD_OUT_SEED = 900_000_000


def _q(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {}
    a = np.asarray(xs, dtype=float)
    return {"mean": float(a.mean()), "median": float(np.median(a)), "p90": float(np.quantile(a, 0.9)), "max": float(a.max()), "n": len(xs)}


def _ms(xs: list[float]) -> dict[str, float]:
    return {k: 1000 * v for k, v in _q(xs).items() if k != "n"}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def best_known(index: str | Path = _ROOT / "instances" / "index.csv") -> dict[str, float]:
    """Instance file name -> best known objective in the library index (empty if absent)."""
    p = Path(index)
    if not p.is_file():
        return {}
    with p.open(newline="") as f:
        return {r["instance"]: float(r["best_known"]) for r in csv.DictReader(f) if r.get("best_known")}


# --- small rounds --------------------------------------------------------------------------------


def small_rounds(library: str, fresh: int, sizes: list[tuple[int, int]], seed: int) -> list[Instance]:
    """The library rounds matching ``library`` (a glob) and ``fresh`` held-out training-distribution rounds."""
    insts = [load_instance(p) for p in sorted(glob.glob(library))] if library else []
    s = HELD_OUT_SEED + seed * 10_000
    for i in range(fresh):
        while True:  # a few draws cannot be generated (e.g. more jobs than GPUs demanded): next seed
            s += 1
            try:
                insts.append(training_round(*sizes[i % len(sizes)], seed=s))
                break
            except InputError:
                continue
    return insts


def bench_small(weights: str, insts: list[Instance], cache: str, samples: int, label_time: float) -> dict[str, Any]:
    labels = label_rounds(insts, cache, time_limit=label_time, seed=0, workers=2, options={"num_workers": 1}, desc="labelling bench")
    solver = LearnedSolver()
    solver.solve(insts[0], time_limit=10.0, seed=0, weights=weights, samples=0)  # load weights outside the timing
    load0 = _load()
    gaps, gaps_s, gaps_h, times, fwd, dec, times_s, by_size, rows = [], [], [], [], [], [], [], {}, []
    gaps_d: list[float] = []
    times_d: list[float] = []
    all_gaps = []  # every round, against CP-SAT's label whether proven or not
    for lab in labels:
        if lab.status != "optimal":
            r = solver.solve(lab.instance, time_limit=10.0, seed=0, weights=weights, samples=0, repair=False)
            all_gaps.append((lab.objective - r.objective) / max(lab.objective, 1e-9))
            continue
        inst = lab.instance
        t = time.perf_counter()
        r = solver.solve(inst, time_limit=10.0, seed=0, weights=weights, samples=0, repair=False)
        times.append(time.perf_counter() - t)
        fwd.append(r.stats["featurise_forward_s"])
        dec.append(r.stats["decode_s"])
        assert check_schedule(inst, r.schedule).feasible
        g = max(0.0, (lab.objective - r.objective) / max(lab.objective, 1e-9))
        gaps.append(g)
        all_gaps.append(g)
        size = f"{len(inst.nodes)}x{len(inst.jobs)}"
        by_size.setdefault(size, []).append(g)
        t = time.perf_counter()
        rs = solver.solve(inst, time_limit=10.0, seed=0, weights=weights, samples=samples, repair=False)
        times_s.append(time.perf_counter() - t)
        gs = max(0.0, (lab.objective - rs.objective) / max(lab.objective, 1e-9))
        gaps_s.append(gs)
        t = time.perf_counter()
        rd = solver.solve(inst, time_limit=10.0, seed=0, weights=weights)  # method="learned" as users get it
        times_d.append(time.perf_counter() - t)
        gaps_d.append(max(0.0, (lab.objective - rd.objective) / max(lab.objective, 1e-9)))
        h = greedy_schedule(inst)
        gaps_h.append(max(0.0, (lab.objective - schedule_value(inst, h)) / max(lab.objective, 1e-9)))
        rows.append({"instance": inst.name, "size": size, "optimum": lab.objective, "greedy_gap": g, f"best_of_{samples}_gap": gs,
                     "default_gap": gaps_d[-1]})
    return {
        "rounds": len(insts),
        "proven_optimal": len(gaps),
        "label_time_limit": label_time,
        "policy_greedy_gap": _q(gaps),
        f"policy_best_of_{samples}_gap": _q(gaps_s),
        "default_gap": _q(gaps_d),
        "cpsat_greedy_hint_gap": _q(gaps_h),
        "policy_greedy_gap_to_label_all_rounds": _q(all_gaps),
        "policy_greedy_gap_by_size": {k: _q(v) for k, v in sorted(by_size.items())},
        "greedy_decode_ms": _ms(times),
        "greedy_featurise_forward_ms": _ms(fwd),
        "greedy_decode_only_ms": _ms(dec),
        f"best_of_{samples}_ms": _ms(times_s),
        "default_ms": _ms(times_d),
        "loadavg": [load0, _load()],
        "rows": rows,
    }


# --- large rounds --------------------------------------------------------------------------------


def bench_large(weights: str, paths: list[str], time_limit: float, lp: bool) -> list[dict[str, Any]]:
    LearnedSolver().solve(training_round(8, 24, seed=1), time_limit=5.0, seed=0, weights=weights)  # load weights outside the timing
    out = []
    for path in paths:
        inst = load_instance(path)
        row: dict[str, Any] = {"instance": Path(path).name, "size": f"{len(inst.nodes)}x{len(inst.jobs)}", "loadavg": [_load()]}
        for key, limit, opts in (("maifs-policy", time_limit, {"repair": False}), ("maifs-2s", 2.0, {}), ("maifs", time_limit, {})):
            t, c = time.perf_counter(), time.process_time()
            r = LearnedSolver().solve(inst, time_limit=limit, seed=0, weights=weights, samples=0, **opts)
            wall, cpu = time.perf_counter() - t, time.process_time() - c
            row[key] = {"objective": r.objective, "wall_s": wall, "cpu_s": cpu, "feasible": check_schedule(inst, r.schedule).feasible,
                        "time_limit": limit, "loadavg": _load(), "source": r.stats["source"],
                        **{k: r.stats[k] for k in ("featurise_forward_s", "decode_s", "greedy_objective", "repair_s", "repair_tried") if k in r.stats}}
        t = time.perf_counter()
        imp = LargeNeighbourhoodSearch().solve(inst, time_limit=max(0.1, time_limit - wall), seed=0, hint=r.schedule)
        row["maifs+lns"] = {"objective": imp.objective, "wall_s": wall + time.perf_counter() - t,
                            "feasible": check_schedule(inst, imp.schedule).feasible}
        for name in ("fungible-greedy", "cpsat", "lns"):
            t, c = time.perf_counter(), time.process_time()
            res = solve_round(inst, solver=name, time_limit=time_limit, seed=0)
            row[name] = {"objective": res.objective, "wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c, "status": res.status.value}
        row["loadavg"].append(_load())
        if lp:
            t = time.perf_counter()
            b = lp_bound(inst)
            row["lp_bound"], row["lp_s"] = b, time.perf_counter() - t
            # the relaxation auto took before the staying and whole-node variants (formulations/mip.md, "LP bounds")
            plain = {"full": "full", "pooled": "pooled-plain", "type": "type-plain"}[choose_relaxation(inst, RoundData(inst))]
            t = time.perf_counter()
            b0 = lp_bound(inst, relaxation=plain)
            row["lp_bound_plain"], row["lp_plain_s"], row["lp_plain"] = b0, time.perf_counter() - t, plain
            for name in ("maifs-policy", "maifs-2s", "maifs", "maifs+lns", "fungible-greedy", "cpsat", "lns"):
                row[name]["gap_to_lp"] = (b - row[name]["objective"]) / max(b, 1e-9)
                row[name]["gap_to_lp_plain"] = (b0 - row[name]["objective"]) / max(b0, 1e-9)
        out.append(row)
        print(json.dumps(row), flush=True)
    return out


# --- warm starts ---------------------------------------------------------------------------------


def cpsat_trajectory(
    instance: Instance, hint: str, *, horizon: float, seed: int, num_workers: int, weights: str | None = None
) -> dict[str, Any]:
    """CP-SAT on the round model for ``horizon`` seconds with ``hint`` (``"none"``, ``"greedy"`` or
    ``"policy"``; a complete hint), recording every incumbent: ``[(seconds since start, objective)]``.
    The clock starts before the hint is computed (the policy's inference counts, torch's import
    and the weights' loading do not). Objectives are CP-SAT's scaled ones (within the scale's
    rounding error of the true value)."""
    start = time.perf_counter()
    traj: list[tuple[float, float]] = []
    sched: Schedule | None = None
    if hint == "policy":
        sched = policy_hint(instance, weights=weights)
    elif hint == "greedy":
        sched = greedy_schedule(instance)
    elif hint != "none":
        raise ValueError(hint)
    if sched is not None:
        traj.append((time.perf_counter() - start, schedule_value(instance, sched)))
    opts = _check_options({"num_workers": num_workers})
    data = job_data(instance)
    scale = make_scale(instance, data)
    model = build_model(instance, data, scale, opts, start + horizon)
    if sched is not None:
        model.add_hint(sched)

    class _Recorder(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            traj.append((time.perf_counter() - start, scale.to_float(self.objective_value)))

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = num_workers
    solver.parameters.random_seed = seed
    solver.parameters.max_time_in_seconds = max(0.01, horizon - (time.perf_counter() - start))
    code = solver.solve(model.model, _Recorder())
    bound = scale.bound(solver.best_objective_bound) if code in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None
    return {"trajectory": traj, "bound": bound, "status": solver.status_name(code), "wall_s": time.perf_counter() - start}


def _time_to(traj: list[tuple[float, float]], ref: float, gap: float) -> float | None:
    for t, v in traj:
        if ref - v <= gap * ref:
            return t
    return None


def bench_warm(
    weights: str, paths: list[str], horizon: float, fixed_limit: float, gap: float, num_workers: int
) -> dict[str, Any]:
    known = best_known()
    load_policy(weights)
    rows = []
    for path in paths:
        inst = load_instance(path)
        name = Path(path).name
        row: dict[str, Any] = {"instance": name, "size": f"{len(inst.nodes)}x{len(inst.jobs)}", "loadavg": [_load()]}
        for hint in ("none", "greedy", "policy"):
            row[f"hint={hint}"] = cpsat_trajectory(inst, hint, horizon=horizon, seed=0, num_workers=num_workers, weights=weights)
        fixed: dict[str, Any] = {}
        t = time.perf_counter()
        res = solve_round(inst, solver="cpsat", time_limit=fixed_limit, seed=0, num_workers=num_workers)
        fixed["cpsat"] = {"objective": res.objective, "wall_s": time.perf_counter() - t}
        t = time.perf_counter()
        res = warm_solve(inst, time_limit=fixed_limit, seed=0, weights=weights, num_workers=num_workers)
        fixed["cpsat+policy_hint"] = {"objective": res.objective, "wall_s": time.perf_counter() - t}
        t = time.perf_counter()
        res = LearnedSolver().solve(inst, time_limit=fixed_limit, seed=0, weights=weights)
        fixed["maifs"] = {"objective": res.objective, "wall_s": time.perf_counter() - t, "samples": res.stats["samples"]}
        row[f"fixed_{fixed_limit:g}s"] = fixed
        row["loadavg"].append(_load())
        seen = [v for h in ("none", "greedy", "policy") for _, v in row[f"hint={h}"]["trajectory"]]
        seen += [f["objective"] for f in fixed.values()]
        ref = max([known.get(name, 0.0), *seen])
        row["reference"], row["index_best_known"] = ref, known.get(name)
        for h in ("none", "greedy", "policy"):
            row[f"hint={h}"]["time_to_gap"] = _time_to(row[f"hint={h}"]["trajectory"], ref, gap)
            row[f"hint={h}"]["final_gap"] = (ref - max((v for _, v in row[f"hint={h}"]["trajectory"]), default=0.0)) / ref
        for f in fixed.values():
            f["gap"] = (ref - f["objective"]) / ref
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if not k.startswith("hint=")} | {
            h: (row[h]["time_to_gap"], row[h]["final_gap"]) for h in row if h.startswith("hint=")}), flush=True)
    return {"gap": gap, "horizon_s": horizon, "num_workers": num_workers, "rows": rows, "summary": warm_summary(rows, horizon)}


def warm_summary(rows: list[dict[str, Any]], horizon: float) -> dict[str, Any]:
    """Speed-ups in time to the gap; a run that never got there counts as ``horizon`` (so a
    ratio against it is a lower bound, flagged ``censored``)."""
    out: dict[str, Any] = {}
    for base in ("none", "greedy"):
        ratios, censored = [], 0
        for r in rows:
            tp, tb = r["hint=policy"]["time_to_gap"], r[f"hint={base}"]["time_to_gap"]
            if tp is None and tb is None:
                continue
            censored += tb is None or tp is None
            ratios.append((tb if tb is not None else horizon) / max(tp if tp is not None else horizon, 1e-3))
        out[f"policy_vs_{base}"] = {"ratios": ratios, "geomean": float(np.exp(np.mean(np.log(ratios)))) if ratios else None,
                                   "median": float(np.median(ratios)) if ratios else None, "censored": censored}
    return out


# --- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_learned.py", description=__doc__.split("\n")[0])
    p.add_argument("--weights", default=str(DEFAULT_WEIGHTS))
    p.add_argument("--small", type=int, default=40, help="fresh held-out small rounds (0: none)")
    p.add_argument("--small-library", default=str(_ROOT / "instances" / "small" / "*.json"), help="glob of library small rounds ('': none)")
    p.add_argument("--sizes", default="4x12,6x16,6x24,8x24,8x32", help="nodes x jobs of the fresh small rounds")
    p.add_argument("--samples", type=int, default=16, help="sampled decodes of the best-of-k mode")
    p.add_argument("--label-time-limit", type=float, default=20.0, help="CP-SAT seconds per small-round label")
    p.add_argument("--large", default=str(_ROOT / "instances" / "large" / "l-1024n-4000j-*.json.gz"), help="glob of large rounds ('': skip)")
    p.add_argument("--large-time-limit", type=float, default=10.0, help="seconds for cpsat, lns and maifs+lns on large rounds")
    p.add_argument("--no-lp", action="store_true", help="skip the LP bound of large rounds")
    p.add_argument("--warm", default=",".join([str(_ROOT / "instances" / "medium" / "*.json"), str(_ROOT / "instances" / "traces" / "*.json")]),
                   help="globs (comma-separated) of unseen rounds for the warm-start comparison ('': skip)")
    p.add_argument("--warm-horizon", type=float, default=20.0, help="CP-SAT seconds per trajectory")
    p.add_argument("--warm-fixed", type=float, default=10.0, help="time limit of the fixed-time comparison")
    p.add_argument("--warm-gap", type=float, default=0.005)
    p.add_argument("--workers", type=int, default=2, help="CP-SAT workers in the warm-start runs")
    p.add_argument("--skip", default="", help="sections to skip (comma-separated: small,large,warm)")
    p.add_argument("--cache", default="runs/label-cache-bench")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--out", default="runs/learned-benchmark.json")
    a = p.parse_args(argv)
    skip = set(filter(None, a.skip.split(",")))
    sizes = [tuple(int(x) for x in s.split("x")) for s in a.sizes.split(",")]
    result: dict[str, Any] = {"weights": a.weights, "cpu_count": os.cpu_count(), "argv": argv, "loadavg_start": _load()}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        out.write_text(json.dumps(result, indent=1) + "\n")

    if "small" not in skip:
        insts = small_rounds(a.small_library, a.small, sizes, a.seed)
        result["small"] = bench_small(a.weights, insts, a.cache, a.samples, a.label_time_limit)
        print(json.dumps({k: v for k, v in result["small"].items() if k != "rows"}, indent=1), flush=True)
        save()
    if "large" not in skip and a.large:
        result["large"] = bench_large(a.weights, sorted(glob.glob(a.large)), a.large_time_limit, not a.no_lp)
        save()
    if "warm" not in skip and a.warm:
        paths = sorted(p for g in a.warm.split(",") if g for p in glob.glob(g))
        result["warm"] = bench_warm(a.weights, paths, a.warm_horizon, a.warm_fixed, a.warm_gap, a.workers)
        print(json.dumps(result["warm"]["summary"], indent=1), flush=True)
        save()
    result["loadavg_end"] = _load()
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
