"""How ``partitioned``'s time splits on one large round: reading, partitioning and encoding, the
parts, re-balancing, the final repair and the independent check, with the peak memory.

    optsched gen --nodes 12500 --jobs 50000 --seed 0 -o r100k.json.gz
    python benchmarks/bench_partition_scale.py r100k.json.gz 30
    python benchmarks/bench_partition_scale.py r100k.json.gz 30 --cli

Prints one JSON line (seconds; ``peak_mb`` is the larger of this process and its largest worker).
With ``--cli`` it runs ``optsched solve --solver partitioned --write-first -v -o FILE`` as a new
process instead and reports, from that process's start: when the first checked schedule is in
``FILE`` (``first_file_s``), when the command ends (``exit_s``), and the command's own ``-v``
lines (read time, the first incumbent's solve time and worth, the summary).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
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


def cli(path: str, time_limit: float) -> dict:
    """The command line end to end: process start to the first checked schedule on disk, and to the end."""
    out = os.path.join(tempfile.mkdtemp(), "schedule.json")
    cmd = [sys.executable, "-m", "optsched.cli", "solve", path, "--solver", "partitioned", "--time-limit", str(time_limit),
           "--write-first", "-v", "-o", out]
    first: list[float] = []
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)

    def watch() -> None:
        while proc.poll() is None and not os.path.exists(out):
            time.sleep(0.02)
        if os.path.exists(out):
            first.append(time.perf_counter() - t0)

    watcher = threading.Thread(target=watch)
    watcher.start()
    err = proc.stderr.read() if proc.stderr else ""
    proc.wait()
    exit_s = time.perf_counter() - t0
    watcher.join()
    lines = [ln for ln in err.splitlines() if "incumbent=" not in ln]
    return {"round": path, "time_limit": time_limit, "first_file_s": round(first[0], 2) if first else None,
            "exit_s": round(exit_s, 2), "returncode": proc.returncode, "stderr": lines}


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--cli"]
    run = cli if "--cli" in sys.argv else main
    print(json.dumps(run(args[0], float(args[1]) if len(args) > 1 else 30.0)))
