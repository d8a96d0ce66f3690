"""``optsched validate``: judge an external scheduler's decision (e.g. an RL agent's) for a round.

For each (instance, decision) pair it reports feasibility with every violation (independent
checker), the decision's objective, the exact optimum or the best bound found within the time
budget, the gap, and a per-job diff against the optimal schedule: jobs left out, jobs added,
jobs placed elsewhere (identical nodes count as the same place) and jobs given a worse (or
better) grid point. With ``--loglik`` it also scores the decision under the learned policy
(Evaluate mode). Given two directories, it pairs decisions with instances by the decision's
``instance`` field (else by file name), runs them all and ends with a summary table.

Exit status: 0 when every decision is feasible, 1 when any has violations, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tqdm import tqdm

from optsched.bench.index import instance_files
from optsched.checker import check_schedule
from optsched.errors import InputError
from optsched.io import check_writable, load_instance, load_json, write_json
from optsched.learned.decode import log_likelihood, target_arrays
from optsched.learned.features import featurise
from optsched.learned.labels import _node_class_key
from optsched.registry import get_method
from optsched.schedule import Schedule, instance_name
from optsched.solve import solve_round


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Judge a decision: a round's schedule made by another scheduler (a heuristic, an RL agent, a person). Reports "
        "whether it is feasible (every violated rule, by the independent checker), its objective, a reference schedule "
        "solved by --solver within --time-limit (optimal when the solver proves it, else the best found and its bound), "
        "the gap between the two, and the jobs the decision places differently from the reference. Given two "
        "directories, each decision is paired with the instance its 'instance' field names (else the one with its file "
        "name) and a summary table ends the report.")
    p.epilog = ("Exit status: 0 when every decision is feasible, 1 when any breaks a rule, 2 on bad input (files, options, "
                "invalid JSON). A decision that is valid JSON but not a schedule object breaks rule 1, as check says.")
    p.add_argument("instance", help="round instance JSON (.json or .json.gz), or a directory of them")
    p.add_argument("decision", help="the decision: a schedule JSON in the contract's format, or a directory of them")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="SEC",
                   help="seconds for each round's reference solve (default 10)")
    p.add_argument("--solver", default="cpsat", metavar="NAME",
                   help="the solver that computes the reference schedule (default cpsat; see `optsched methods`)")
    p.add_argument("--seed", type=int, default=0, help="seed of the reference solve (default 0)")
    p.add_argument("--loglik", action="store_true",
                   help="also report the decision's log-likelihood under the learned policy: how close it is to what "
                        "maifs would choose (needs the train extra)")
    p.add_argument("--weights", metavar="FILE.npz", help="policy weights for --loglik (default: the shipped maifs-small.npz)")
    p.add_argument("--json", action="store_true", help="print the full reports as JSON instead of text")
    p.add_argument("-o", "--out", metavar="FILE.json", help="also write the JSON reports to this file")


def validate_decision(
    instance: Any, decision: Any, *, time_limit: float, solver: str = "cpsat", seed: int = 0, loglik: bool = False, weights: str | None = None
) -> dict[str, Any]:
    """The validation report of one decision (raw schedule JSON) for one round (see module doc).
    A decision whose ``instance`` is not a string is refused (``decision.instance``)."""
    if isinstance(decision, Mapping):
        try:
            instance_name(decision)
        except InputError as e:
            raise e.within("decision") from None
    report = check_schedule(instance, decision)
    feasible = report.feasible
    ref = solve_round(instance, solver=solver, time_limit=time_limit, seed=seed)
    out: dict[str, Any] = {
        "instance": instance.name,
        "feasible": feasible,
        "violations": [v.to_dict() for v in report],
        "objective": report.objective if feasible else None,
        "reference": {"solver": solver, "status": ref.status.value, "objective": ref.objective, "bound": ref.bound, "time_s": ref.time_s},
    }
    if feasible:
        best = max(ref.objective, report.objective)
        out["gap_to_reference"] = (ref.objective - report.objective) / max(abs(ref.objective), 1e-9)
        out["gap_to_bound"] = None if ref.bound is None else max(0.0, (ref.bound - report.objective) / max(abs(ref.bound), 1e-9))
        out["beats_reference"] = report.objective > ref.objective + 1e-9 * max(1.0, best)
    # per-job diff, from the readable part of the decision
    try:
        dec = Schedule.from_dict(decision)
    except InputError as e:
        out["diff"] = None
        out["diff_error"] = str(e)
        return out
    keys = _node_class_key(instance)
    cls = {n.id: keys[i] for i, n in enumerate(instance.nodes)}
    node_ids = {n.id for n in instance.nodes}
    diff: list[dict[str, Any]] = []
    for job in instance.jobs:
        a, o = dec.jobs.get(job.id), ref.schedule.jobs.get(job.id)
        if a is None and o is None:
            continue
        row: dict[str, Any] = {"job": job.id}
        if a is None:
            row["kind"] = "left_out"
        elif o is None:
            row["kind"] = "added"
        else:
            kinds = []
            if not set(a.nodes) <= node_ids or Counter((cls[n], k) for n, k in a.nodes.items()) != Counter((cls[n], k) for n, k in o.nodes.items()):
                kinds.append("placed_elsewhere")
            try:
                tp_a = job.profile.at(a.cpus_per_gpu, a.mem_per_gpu_gb)
            except KeyError:
                tp_a = None
            tp_o = job.profile.at(o.cpus_per_gpu, o.mem_per_gpu_gb)
            if tp_a is None:
                kinds.append("off_grid_point")
            elif tp_a < tp_o - 1e-12:
                kinds.append("worse_point")
            elif tp_a > tp_o + 1e-12:
                kinds.append("better_point")
            if not kinds:
                continue
            row["kind"] = "+".join(kinds)
        row["decision"] = None if a is None else a.to_dict()
        row["reference"] = None if o is None else o.to_dict()
        diff.append(row)
    out["diff"] = diff
    out["diff_counts"] = dict(Counter(k for r in diff for k in r["kind"].split("+")))
    if loglik:
        out["loglik"] = _loglik(instance, dec, weights) if feasible else None
    return out


def _loglik(instance: Any, schedule: Any, weights: str | None) -> dict[str, float]:
    from optsched.learned.policy import PolicyNet, collate, torch  # lazy: torch, the `train` extra
    from optsched.learned.solver import (
        load_policy,  # lazy: loads OR-Tools (~0.6 s), which every CLI verb would pay otherwise
    )

    net = PolicyNet.from_weights(load_policy(weights)).eval()
    f = featurise(instance)
    with torch.inference_mode():
        out = net(collate([f]))
        ll = log_likelihood(out, 0, f, *target_arrays(instance, f, schedule))
    return {k: float(v) for k, v in ll.items()}


def _load_decision(path: Path) -> Any:
    """A decision file's JSON; an error names the field under ``decision`` and the file, which a
    batch of many decisions needs."""
    try:
        return load_json(path)
    except InputError as e:
        err = e.within("decision")
        raise InputError(err.field, err.value, f"{err.problem} (in {path})") from None


def _pairs(inst_arg: str, dec_arg: str) -> list[tuple[Path, Path]]:
    ip, dp = Path(inst_arg), Path(dec_arg)
    for p, name in ((ip, "instance"), (dp, "decision")):
        if not p.exists():
            raise InputError(name, str(p), "no such file or directory")
    if ip.is_file() and dp.is_file():
        return [(ip, dp)]
    if ip.is_dir() != dp.is_dir():
        raise InputError("decision", str(dp), "give two files or two directories")
    insts = instance_files([str(ip)])
    by_name: dict[str, Path] = {}
    by_stem: dict[str, Path] = {}
    for f in insts:
        d = load_json(f)
        if isinstance(d, dict) and isinstance(d.get("name"), str):
            by_name[d["name"]] = f
        by_stem[f.name.split(".")[0]] = f
    pairs = []
    for f in sorted(dp.rglob("*.json*")):
        d = _load_decision(f)
        name = d.get("instance") if isinstance(d, dict) else None
        match = by_name.get(name) if isinstance(name, str) else None
        match = match or by_stem.get(f.name.split(".")[0])
        if match is None:
            raise InputError("decision", str(f), f"matches no instance in {ip} (by its 'instance' field or file name)")
        pairs.append((match, f))
    if not pairs:
        raise InputError("decision", str(dp), "no decision files found")
    return pairs


def _text(r: dict[str, Any]) -> str:
    ref = r["reference"]
    lines = [f"{r['instance']}: {'feasible' if r['feasible'] else 'INFEASIBLE'}"]
    for v in r["violations"]:
        lines.append(f"  violation rule {v['rule']}: {v['message']}")
    b = "-" if ref["bound"] is None else f"{ref['bound']:.6g}"
    lines.append(f"  reference ({ref['solver']}, {ref['status']}): objective={ref['objective']:.6g} bound={b}")
    if r["feasible"]:
        gb = "-" if r["gap_to_bound"] is None else f"{100 * r['gap_to_bound']:.3f}%"
        lines.append(f"  decision objective={r['objective']:.6g} gap to reference={100 * r['gap_to_reference']:.3f}% gap to bound={gb}")
    if r.get("loglik"):
        lines.append("  policy log-likelihood: " + " ".join(f"{k}={v:.3f}" for k, v in r["loglik"].items()))
    for row in r.get("diff") or []:
        lines.append(f"  job {row['job']}: {row['kind']}  decision={json.dumps(row['decision'])}  optimal={json.dumps(row['reference'])}")
    return "\n".join(lines)


def _table(reports: list[dict[str, Any]]) -> str:
    head = ["instance", "feasible", "viol", "objective", "ref", "ref_status", "gap_ref%", "gap_bound%", "left_out", "elsewhere", "worse_pt"]
    rows = []
    for r in reports:
        c = r.get("diff_counts") or {}
        f = lambda x, s=1.0: "-" if x is None else f"{s * x:.3f}"  # noqa: E731
        rows.append([
            r["instance"], "yes" if r["feasible"] else "NO", str(len(r["violations"])), f(r["objective"]), f(r["reference"]["objective"]),
            r["reference"]["status"], f(r.get("gap_to_reference"), 100), f(r.get("gap_to_bound"), 100),
            str(c.get("left_out", 0)), str(c.get("placed_elsewhere", 0)), str(c.get("worse_point", 0)),
        ])
    feas = [r for r in reports if r["feasible"]]
    gaps = sorted(r["gap_to_reference"] for r in feas)
    w = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w[i]) for i, h in enumerate(head))]
    out += ["  ".join(c.ljust(w[i]) for i, c in enumerate(row)) for row in rows]
    med = "-" if not gaps else f"{100 * gaps[len(gaps) // 2]:.3f}%"
    out.append(f"{len(reports)} decisions, {len(feas)} feasible; median gap to reference {med}")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    if not args.time_limit > 0:
        raise InputError("--time-limit", args.time_limit, "must be positive")
    if args.weights is not None and not args.loglik:
        raise InputError("--weights", args.weights, "applies only with --loglik (the weights the log-likelihood is scored by)")
    get_method(args.solver)
    if args.out:
        check_writable(args.out)
    pairs = _pairs(args.instance, args.decision)
    batch = Path(args.instance).is_dir()
    reports = []
    iterator: Any = pairs
    if batch:
        iterator = tqdm(pairs, desc="validating", unit="round", file=sys.stderr)
    for ip, dp in iterator:
        inst = load_instance(ip)
        rep = validate_decision(inst, _load_decision(dp), time_limit=args.time_limit, solver=args.solver, seed=args.seed,
                                loglik=args.loglik, weights=args.weights)
        rep["instance_file"], rep["decision_file"] = str(ip), str(dp)
        reports.append(rep)
    out = reports if batch else reports[0]
    if args.out:
        write_json(out, args.out)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for r in reports:
            print(_text(r))
        if batch:
            print(_table(reports))
    return 0 if all(r["feasible"] for r in reports) else 1
