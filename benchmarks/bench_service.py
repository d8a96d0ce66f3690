"""Issue-6 service figures: sustained solves/s and latency with concurrent clients, re-runnable.

    .venv/bin/python benchmarks/bench_service.py                       # auto, 2 s limit, 8 clients
    .venv/bin/python benchmarks/bench_service.py --solver fungible-greedy --repeat 10
    .venv/bin/python benchmarks/bench_service.py --url http://host:8080   # a server already running

Starts ``optsched serve`` on a free loopback port (``--workers`` solve processes, default one per
core, and a queue of ``--queue``), waits until its workers answer, then sends every round of
``instances/tiny`` and ``instances/small`` (``--repeat`` times, in a fixed shuffled order) from
``--clients`` concurrent clients, each with one keep-alive connection. Reports solves/s
(successful answers over wall time), p50/p99/max latency of successful answers, answers by status
code, 5xx and lost requests (no HTTP answer at all), and the load average before and after (the
machine may be shared). Writes the figures to ``benchmarks/results/service.json`` (one entry per
run, appended).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from optsched.io import load_json
from optsched.service.loadtest import run_load

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "service.json"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, workers: int, proc: subprocess.Popen | None, timeout_s: float = 120.0) -> None:
    """Wait for /healthz, then for every worker to have answered one tiny solve (imports done)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            httpx.get(f"{url}/healthz", timeout=2).raise_for_status()
            break
        except httpx.HTTPError:
            if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
                raise SystemExit("the server did not come up") from None
            time.sleep(0.2)
    warm = {"instance": load_json(ROOT / "instances" / "tiny" / "t-2n-4j-01.json"), "solver": "fungible-greedy"}
    run_load(url, [warm] * (2 * workers), clients=workers)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", help="use a running server instead of starting one")
    p.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="server solve processes (default: one per core)")
    p.add_argument("--queue", type=int, default=16, help="server queue (default 16)")
    p.add_argument("--repeat", type=int, default=3, help="times each round is sent (default 3)")
    p.add_argument("--method", default="auto", help="method of every request (default auto: exact on these sizes)")
    p.add_argument("--solver", help="solver of every request (overrides --method's default)")
    p.add_argument("--time-limit", type=float, default=2.0, help="time limit of every request (default 2 s)")
    p.add_argument("--sets", nargs="+", default=["tiny", "small"], help="instance folders under instances/ (default tiny small)")
    p.add_argument("--seed", type=int, default=0, help="shuffle seed of the request order")
    p.add_argument("--no-save", action="store_true", help=f"do not append the figures to {RESULTS.relative_to(ROOT)}")
    args = p.parse_args(argv)

    files = sorted(f for s in args.sets for f in (ROOT / "instances" / s).glob("*.json"))
    if not files:
        raise SystemExit(f"no instances in {args.sets}")
    base = {"method": args.method, "time_limit": args.time_limit}
    if args.solver:
        base["solver"] = args.solver
    bodies = [{"instance": load_json(f), **base} for f in files] * args.repeat
    random.Random(args.seed).shuffle(bodies)

    proc = None
    url = args.url
    if url is None:
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "optsched", "serve", "--port", str(port), "--workers", str(args.workers), "--queue",
               str(args.queue), "--max-time-limit", str(max(args.time_limit, 1.0)), "--log-level", "warning"]
        proc = subprocess.Popen(cmd, cwd=ROOT)
    try:
        _wait_ready(url, args.workers, proc)
        load_before = os.getloadavg()
        rep = run_load(url, bodies, clients=args.clients)
        health = httpx.get(f"{url}/healthz", timeout=5).json()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
    print(rep.summary())
    for e in rep.errors[:5]:
        print("  error:", e)
    row = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S"), "sets": args.sets, "rounds": len(files), "repeat": args.repeat,
        "method": args.method, "solver": args.solver, "time_limit": args.time_limit, "workers": health["workers"],
        "queue": health["queue"], "cpu_count": os.cpu_count(), "loadavg_before": list(load_before), **rep.to_dict(),
    }
    print(json.dumps(row))
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        prior = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
        RESULTS.write_text(json.dumps([*prior, row], indent=1) + "\n")
    return 0 if rep.server_errors == 0 and rep.lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
