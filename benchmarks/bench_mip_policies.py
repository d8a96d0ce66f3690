"""Cross-check of the exact methods on contract-v2 rounds: cpsat against the shared MIP (scip, cbc).

    .venv/bin/python benchmarks/bench_mip_policies.py              # 6 rounds per shape
    .venv/bin/python benchmarks/bench_mip_policies.py --seeds 3 --time-limit 10

Rounds from ``optsched.gen.generate`` (half the jobs running, a share elastic), then two tenants
with quotas of a third of the GPUs each (jobs alternate between them, every fifth has none) and a
budget of one move. Each method solves each round through ``solve_round`` (so the independent
checker sees every schedule); the table says, per method, how many rounds it proved, its time and
whether the proven optima agree (to 1e-6 relative). Rows go to ``benchmarks/results/mip-policies.csv``.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import time
from pathlib import Path

from tqdm import tqdm

from optsched.gen import generate
from optsched.model import Instance
from optsched.solve import solve_round

RESULTS = Path(__file__).parent / "results" / "mip-policies.csv"
SHAPES = [(4, 12), (6, 18)]
METHODS = ("cpsat", "scip", "cbc")
FIELDS = ["round", "method", "status", "objective", "bound", "seconds", "load"]


def policy_round(nodes: int, jobs: int, seed: int) -> Instance:
    """A generated v2 round with elastic jobs, two quota'd tenants and a move budget of 1."""
    inst = generate(nodes, jobs, seed=seed, running_fraction=0.5, elastic_share=0.4, tightness=1.3, grid="coarse",
                    name=f"pol-{nodes}n-{jobs}j-s{seed}")
    d = inst.to_dict()
    gpus = sum(n["gpus"] for n in d["nodes"])
    d["version"] = 2
    d["round"]["tenants"] = {"a": {"quota_gpus": gpus // 3}, "b": {"quota_gpus": gpus // 3}}
    d["round"]["max_moves"] = 1
    for i, j in enumerate(d["jobs"]):
        if i % 5 != 4:
            j["tenant"] = "ab"[i % 2]
    return Instance.from_dict(d)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("-o", "--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    rounds = [policy_round(n, j, s) for n, j in SHAPES for s in range(args.seeds)]
    rows = []
    for inst in tqdm(rounds, desc="rounds"):
        for m in METHODS:
            opts = {"num_workers": 1} if m == "cpsat" else {}
            t0 = time.perf_counter()
            res = solve_round(inst, solver=m, time_limit=args.time_limit, **opts)
            rows.append({"round": inst.name, "method": m, "status": res.status.value, "objective": res.objective,
                         "bound": res.bound, "seconds": round(time.perf_counter() - t0, 3), "load": round(os.getloadavg()[0], 2)})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        wr = csv.DictWriter(fh, FIELDS)
        wr.writeheader()
        wr.writerows(rows)
    by_round: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_round.setdefault(r["round"], {})[r["method"]] = r
    agree = sum(1 for rs in by_round.values()
                if len({round(r["objective"], 6) for r in rs.values() if r["status"] == "optimal"}) <= 1)
    print(f"| method | proven | median s | max s |   ({len(by_round)} rounds; proven optima agree on {agree})")
    print("|---|---:|---:|---:|")
    for m in METHODS:
        mine = [r for r in rows if r["method"] == m]
        secs = [r["seconds"] for r in mine if r["status"] == "optimal"]
        print(f"| {m} | {len(secs)}/{len(mine)} | {statistics.median(secs) if secs else float('nan'):.2f} | "
              f"{max(secs, default=float('nan')):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
