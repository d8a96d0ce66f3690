"""A small load generator for the HTTP service: concurrent clients, latency percentiles, lost requests.

Used by ``benchmarks/bench_service.py`` and the service's tests. Each of ``clients`` threads
keeps one HTTP connection and takes request bodies from a shared queue until it is empty, so
at most ``clients`` requests are in flight. A request that gets no HTTP answer at all
(connection refused or reset, client timeout) is *lost*. Needs ``httpx`` (a dev dependency).
"""

from __future__ import annotations

import math
import os
import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LoadReport", "percentile", "run_load"]


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in [0, 100]); ``None`` for no values."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


@dataclass
class LoadReport:
    """What a load run saw: answers by status code, lost requests, throughput and latency (seconds)."""

    requests: int
    clients: int
    wall_s: float
    statuses: dict[int, int]
    lost: int
    latencies_ok: list[float] = field(repr=False)
    loadavg: tuple[float, float, float]
    solve_times: list[float] = field(default_factory=list, repr=False)  #: the answers' own ``time_s`` (solver time)
    errors: list[str] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> int:
        return sum(n for s, n in self.statuses.items() if 200 <= s < 300)

    @property
    def server_errors(self) -> int:
        return sum(n for s, n in self.statuses.items() if s >= 500)

    @property
    def solves_per_s(self) -> float:
        return self.ok / self.wall_s if self.wall_s > 0 else 0.0

    def latency(self, q: float) -> float | None:
        return percentile(self.latencies_ok, q)

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests, "clients": self.clients, "ok": self.ok, "statuses": dict(sorted(self.statuses.items())),
            "server_errors": self.server_errors, "lost": self.lost, "wall_s": round(self.wall_s, 3),
            "solves_per_s": round(self.solves_per_s, 3), "p50_s": self.latency(50), "p99_s": self.latency(99),
            "max_s": max(self.latencies_ok, default=None), "loadavg": list(self.loadavg),
            "solve_time_mean_s": sum(self.solve_times) / len(self.solve_times) if self.solve_times else None,
        }

    def summary(self) -> str:
        p50, p99 = self.latency(50), self.latency(99)
        mean = sum(self.solve_times) / len(self.solve_times) if self.solve_times else None
        f = lambda x: "-" if x is None else f"{1000 * x:.0f} ms"  # noqa: E731
        return (f"{self.requests} requests from {self.clients} clients in {self.wall_s:.2f} s: {self.solves_per_s:.2f} solves/s, "
                f"p50 {f(p50)}, p99 {f(p99)}; statuses {dict(sorted(self.statuses.items()))}, "
                f"5xx {self.server_errors}, lost {self.lost}; mean solver time {f(mean)}; load average {self.loadavg[0]:.2f}")


def run_load(base_url: str, bodies: list[dict[str, Any]], *, path: str = "/v1/solve", clients: int = 8,
             timeout_s: float = 120.0) -> LoadReport:
    """POST every body in ``bodies`` once to ``base_url + path`` from ``clients`` concurrent clients."""
    import httpx  # lazy: httpx is no dependency of optsched; only load tests need it

    todo: queue.Queue[dict[str, Any]] = queue.Queue()
    for b in bodies:
        todo.put(b)
    lock = threading.Lock()
    statuses: Counter[int] = Counter()
    latencies: list[float] = []
    solve_times: list[float] = []
    errors: list[str] = []
    lost = 0

    def client() -> None:
        nonlocal lost
        with httpx.Client(base_url=base_url, timeout=timeout_s) as http:
            while True:
                try:
                    body = todo.get_nowait()
                except queue.Empty:
                    return
                t0 = time.perf_counter()
                try:
                    r = http.post(path, json=body)
                except httpx.HTTPError as e:
                    with lock:
                        lost += 1
                        errors.append(f"{type(e).__name__}: {e}")
                    continue
                dt = time.perf_counter() - t0
                with lock:
                    statuses[r.status_code] += 1
                    if r.is_success:
                        latencies.append(dt)
                        t = r.json().get("time_s")
                        if isinstance(t, (int, float)):
                            solve_times.append(float(t))
                    elif len(errors) < 20:
                        errors.append(f"{r.status_code}: {r.text[:300]}")

    threads = [threading.Thread(target=client, name=f"load-client-{i}") for i in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return LoadReport(len(bodies), clients, wall, dict(statuses), lost, latencies, os.getloadavg(), solve_times=solve_times, errors=errors)
