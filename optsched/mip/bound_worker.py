"""Upper bounds computed in a child process while the caller searches for schedules.

On larger rounds ``cpsat`` spends most of its time in an ``lns`` warm start whose CP-SAT
sub-problems run on one core; a :class:`BoundWorker` uses the other meanwhile: the LP
relaxation (:func:`optsched.mip.bound.lp_bound`), then the configuration LP by column
generation (:func:`optsched.mip.colgen.config_bound`) where it applies (:meth:`BoundWorker.applies`:
contract-v1 rounds up to :data:`CONFIG_MAX_JOBS` jobs; ``cpsat`` and ``lns`` start a worker only
there). :meth:`BoundWorker.collect` returns the smaller. While the configuration LP runs, the
child also sends the prices of its best bound so far (:meth:`BoundWorker.prices`, at most every
:data:`PRICES_EVERY_S`): ``lns`` aims its neighbourhoods with them.

The child is a fresh interpreter (``python -m optsched.mip.bound_worker``, ~0.4 s to import)
fed the instance as JSON on stdin; it answers one JSON line per bound on stdout. A process
rather than a thread: building the LPs is Python work that would hold the interpreter lock
against the caller's own model building (measured: a 0.3 s cpsat call on a 128 x 1,500 round
took 0.69 s with the bounds on a thread, 0.40 s without). Deadlines are wall-clock
(``time.time``), which both processes share; the child is stopped when the caller collects,
and runs the configuration LP niced (:data:`NICE`) so that it only takes CPU time the caller
does not use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

from optsched.mip.bound import lp_bound_within
from optsched.mip.colgen import Prices, config_bound
from optsched.mip.pricing import supported
from optsched.model import Instance
from optsched.schedule import Schedule

__all__ = ["BoundWorker", "CONFIG_MAX_JOBS", "MIN_SECONDS"]

#: the configuration LP only for rounds up to this many jobs: beyond, its pricing tables (one per
#: job and node class) take hundreds of MB and it does not converge in seconds (64 x 256: ~10 s)
CONFIG_MAX_JOBS = 512
#: callers (cpsat, lns) start a worker only with this much time left: starting it costs ~0.1 s of
#: the caller's time and it needs seconds to beat the LP bound
MIN_SECONDS = 2.0
#: the child's niceness: it should use the core the caller leaves idle, not take one from it
#: (measured, shared machine at load ~3: lns inside cpsat fell from 176 to 165 with an un-niced worker)
NICE = 15
#: the child sends the prices of its best bound so far at most this often (and the final ones);
#: ``lns`` aims its targeted steps with them (optsched.heuristics.neighbourhoods.priced_nodes)
PRICES_EVERY_S = 0.3


class BoundWorker:
    """A child process computing upper bounds of ``instance`` for at most ``seconds``."""

    @staticmethod
    def applies(instance: Instance) -> bool:
        """Whether the configuration LP applies: contract-v1 rounds up to CONFIG_MAX_JOBS jobs."""
        return supported(instance) and len(instance.jobs) <= CONFIG_MAX_JOBS

    def __init__(self, instance: Instance, seconds: float, schedules: list[Schedule] | None = None, config: bool = True) -> None:
        self.bounds: dict[str, float] = {}
        self.stats: dict[str, Any] = {}
        self._prices: Prices | None = None
        self._lock = threading.Lock()
        request = {"instance": instance.to_dict(), "until": time.time() + seconds,
                   "schedules": [s.to_dict() for s in schedules or []],
                   "config": config and self.applies(instance)}
        self._proc = subprocess.Popen([sys.executable, "-m", "optsched.mip.bound_worker"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        # the request goes in on a thread too: a big instance fills the pipe before the child reads
        self._writer = threading.Thread(target=self._write, args=(json.dumps(request),), daemon=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._writer.start()
        self._reader.start()

    def _write(self, text: str) -> None:
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write(text)
            self._proc.stdin.close()
        except (BrokenPipeError, OSError):  # the child is gone (stopped early): nothing to send
            pass

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                kind, value, stats = json.loads(line)
                if kind == "prices":  # one object per message: a caller sees new prices as a new object
                    self._prices = Prices(stats.pop("job"), stats.pop("node"))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            with self._lock:
                if value is not None:
                    self.bounds[kind] = float(value)
                self.stats.update(stats)

    def prices(self) -> Prices | None:
        """The prices of the best configuration-LP bound so far (:class:`optsched.mip.colgen.Prices`;
        ``None`` before the first), the same object until newer ones arrive."""
        return self._prices

    def collect(self, wait_until: float | None = None) -> float | None:
        """The smallest bound proven so far, after waiting for the child to finish at most until
        ``wait_until`` (``time.perf_counter`` time; ``None``: no wait); the child is then stopped."""
        if wait_until is not None:
            self._reader.join(timeout=max(0.0, wait_until - time.perf_counter()))
        done = not self._reader.is_alive()
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._reader.join(timeout=1.0)
        with self._lock:
            self.stats["bound_worker_done"] = done
            return min(self.bounds.values()) if self.bounds else None


def _send(kind: str, value: float | None, stats: dict[str, Any]) -> None:
    print(json.dumps([kind, value, stats]), flush=True)


def main() -> None:
    """The child: read the request from stdin, write one JSON line per bound."""
    req = json.loads(sys.stdin.read())
    until = float(req["until"])
    instance = Instance.from_dict(req["instance"])

    # the LP bound first, at normal priority (what lns did itself before, now beside it): the
    # reported bound is never worse than it
    st: dict[str, Any] = {}
    b = lp_bound_within(instance, time.perf_counter() + until - time.time(), st)
    _send("lp", b, {f"lp_{k}": v for k, v in st.items()})  # lp_bound_s, lp_bound_note
    if req["config"] and until - time.time() > 0.2:
        if hasattr(os, "nice"):  # from here idle CPU only: on a busy machine the caller's search comes first
            os.nice(NICE)

        schedules = [Schedule.from_dict(s) for s in req["schedules"]]
        last = [-PRICES_EVERY_S]

        def on_prices(prices: Prices) -> None:  # the caller's lns aims with them
            if time.perf_counter() - last[0] >= PRICES_EVERY_S:
                last[0] = time.perf_counter()
                _send("prices", None, {"job": prices.job, "node": prices.node})

        r = config_bound(instance, time_limit=until - time.time(), schedules=schedules, on_prices=on_prices)
        if r.prices is not None:  # the final ones
            _send("prices", None, {"job": r.prices.job, "node": r.prices.node})
        _send("config", r.bound, {"config_bound": r.bound, "config_lp": r.lp, "config_converged": r.converged,
                                  "config_iterations": r.iterations, "config_s": round(r.seconds, 3)})


if __name__ == "__main__":
    main()
