"""How ``partitioned``'s time splits on one large round: reading, partitioning and encoding, the
parts, re-balancing, the final repair and the independent check, with the peak memory.

    optsched gen --nodes 12500 --jobs 50000 --seed 0 -o r100k.json.gz
    python benchmarks/bench_partition_scale.py r100k.json.gz 30

Prints one JSON line (seconds; ``peak_mb`` is the larger of this process and its largest worker).
"""

from __future__ import annotations

import json
import resource
import sys
import time


def main(path: str, time_limit: float) -> dict:
    from optsched import load_instance
    from optsched.checker import check_schedule
    from optsched.partition import PartitionedSolver

    t = time.perf_counter()
    inst = load_instance(path)
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    res = PartitionedSolver().solve(inst, time_limit=time_limit, seed=0)
    solve_s = time.perf_counter() - t
    t = time.perf_counter()
    feasible = check_schedule(inst, res.schedule).feasible
    check_s = time.perf_counter() - t
    st = res.stats
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return {"round": path, "time_limit": time_limit, "read_s": round(read_s, 2), "solve_s": round(solve_s, 2),
            "partition_s": round(st["prep_s"], 2), "encode_s": round(st.get("encode_s", 0.0), 2),
            "pass_s": [round(x, 2) for x in st["pass_s"]], "rebalance_s": round(st.get("rebalance_s", 0.0), 2),
            "repair_s": round(st["repair_s"], 2), "check_s": round(check_s, 2),
            "feasible": feasible, "objective": res.objective, "parts": st["parts"], "greedy_parts": st["greedy_parts"],
            "cut_parts": st["cut_parts"], "skipped_passes": st["skipped_passes"], "moved": st["moved"],
            "jobs_placed": st["jobs_placed"], "peak_mb": round(peak)}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 30.0)))
