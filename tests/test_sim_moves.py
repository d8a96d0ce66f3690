"""Bounded moves over a trace: ``optsched simulate --max-moves K`` (``SimConfig.max_moves``,
contract-v2 ``round.max_moves``, Gandiva's migration budget)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _trace(path: Path) -> Path:
    """24 jobs of 1-4 GPUs over 50 minutes on a 2 x 4-GPU cluster: under LAS, new jobs displace
    running ones, and without a budget some running jobs change nodes."""
    rng = np.random.default_rng(1)
    n = 24
    sub, dur, g = np.sort(rng.uniform(0, 3000, n)), rng.uniform(300, 4000, n), rng.choice([1, 1, 2, 4], n)
    rows = ["job_id,submit_time_s,duration_s,num_gpus,gpu_fraction,cpu_cores,mem_gib,tenant,user,status,gpu_type,censored"]
    rows += [f"j{i},{sub[i]:.0f},{dur[i]:.0f},{g[i]},1.0,,,vc,,,,0" for i in range(n)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_simulate_max_moves_bounds_the_moves_and_is_recorded(tmp_path, capsys):
    from optsched.cli import main

    trace = _trace(tmp_path / "t.csv")
    docs = {}
    for cap in (None, 0):
        out = tmp_path / f"out-{cap}"
        extra = [] if cap is None else ["--max-moves", str(cap)]
        rc = main(["simulate", str(trace), "--cluster", "2x4", "--cpus", "32", "--policy", "las", "--allocator", "fungible-greedy",
                   "--round", "200", "-o", str(out), "--check", "--no-progress", *extra])
        assert rc == 0
        docs[cap] = json.loads(next(out.glob("las-fungible-greedy-s0-*.metrics.json")).read_text())  # -<run id>
    capsys.readouterr()
    assert docs[None]["metrics"]["moves"] > 0  # the trace makes moves when they are free
    assert docs[0]["metrics"]["moves"] == 0
    assert docs[0]["metrics"]["finished"] == docs[None]["metrics"]["finished"] == 24
    assert docs[0]["run"]["checked_rounds"] > 0
    assert docs[0]["run"]["round_policies"]["max_moves"] == 0 and docs[None]["run"]["round_policies"]["max_moves"] is None


def test_cli_simulate_refuses_a_negative_move_budget_by_name():
    proc = subprocess.run([sys.executable, "-m", "optsched", "simulate", "no-such-trace.csv", "--max-moves", "-1"], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2 and "--max-moves" in proc.stderr and "must be >= 0" in proc.stderr and "Traceback" not in proc.stderr
