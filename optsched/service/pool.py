"""A bounded pool of solve worker processes, off the event loop.

``workers`` processes each run one task at a time (:mod:`optsched.service.work`); at most
``queue`` more requests wait for one. A request beyond ``workers + queue`` is refused at once
with :class:`OverCapacity` (HTTP 429) instead of piling up; a closed pool refuses with
:class:`Unavailable` (503). Each worker has a dispatcher thread in the serving process that
hands it tasks and waits for its answer with a deadline, so:

- a solver that raises answers its own request with an error (HTTP 500);
- a worker process that dies (native crash, ``os._exit``) fails only the request it was running
  (:class:`WorkerCrashed`, 500) and is replaced by a fresh process;
- a solve that overruns its deadline (its time limit plus a grace period; solvers honour their
  time limits, so this means a hung solver) is killed, its request gets :class:`WorkerTimeout`
  (504), and the worker is replaced.

Processes are started with ``spawn`` (the serving process runs threads, so ``fork`` is unsafe).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import queue as queue_mod
import threading
import time
from dataclasses import dataclass
from typing import Any

from optsched.service.work import serve_forever

__all__ = ["OverCapacity", "PoolError", "SolvePool", "Unavailable", "WorkerCrashed", "WorkerTimeout"]

#: seconds a new worker may take to import its solvers and say it is ready
READY_TIMEOUT_S = 180.0


class PoolError(RuntimeError):
    """Base of the pool's refusals and failures."""


class OverCapacity(PoolError):
    """Every worker is busy and the queue is full (HTTP 429)."""


class Unavailable(PoolError):
    """The pool is not running (starting up or shutting down) (HTTP 503)."""


class WorkerCrashed(PoolError):
    """The worker process died while running this request (HTTP 500)."""


class WorkerTimeout(PoolError):
    """The task overran its deadline; its worker was killed and replaced (HTTP 504)."""


@dataclass
class _Task:
    kind: str
    payload: dict[str, Any]
    deadline_s: float
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop


class _Worker:
    """One worker process and its pipe; used by exactly one dispatcher thread."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self.proc: Any = None
        self.conn: Any = None
        self.ready = False
        self.restarts = -1
        self.spawn()

    def spawn(self) -> None:
        parent, child = self._ctx.Pipe()
        self.proc = self._ctx.Process(target=serve_forever, args=(child,), daemon=True, name="optsched-solve-worker")
        self.proc.start()
        child.close()
        self.conn, self.ready = parent, False
        self.restarts += 1

    def kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
        if self.proc is not None:
            self.proc.join(timeout=5)
        if self.conn is not None:
            self.conn.close()

    def respawn(self) -> None:
        self.kill()
        self.spawn()

    def wait_ready(self) -> bool:
        if self.ready:
            return True
        try:
            if self.conn.poll(READY_TIMEOUT_S):
                self.ready = self.conn.recv()[0] == "ready"
        except (EOFError, OSError):
            self.ready = False
        return self.ready

    def run(self, kind: str, payload: dict[str, Any], deadline_s: float) -> tuple[str, Any]:
        """Send one task and wait for its answer: ``(tag, value)`` with tags of work.py plus crash/timeout."""
        try:
            self.conn.send((kind, payload))
        except (BrokenPipeError, EOFError, OSError) as e:
            self.respawn()
            return "crash", f"the worker process was gone ({e}); a new one was started, please retry"
        try:
            if not self.conn.poll(deadline_s):
                self.respawn()
                return "timeout", f"no answer within {deadline_s:.3g} s; the solve was stopped and its worker replaced"
            return self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(timeout=5)
            code = self.proc.exitcode
            self.respawn()
            return "crash", f"the worker process died while solving (exit code {code}); a new one was started"


class SolvePool:
    """``workers`` solve processes plus a queue of at most ``queue`` waiting requests (see module doc)."""

    def __init__(self, workers: int, queue: int) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        if queue < 0:
            raise ValueError("queue must be >= 0")
        self.workers, self.queue = workers, queue
        self._tasks: queue_mod.Queue[_Task | None] = queue_mod.Queue()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._open = False
        self._pool: list[_Worker] = []
        self._threads: list[threading.Thread] = []

    @property
    def capacity(self) -> int:
        return self.workers + self.queue

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def alive(self) -> int:
        return sum(1 for w in self._pool if w.proc is not None and w.proc.is_alive())

    @property
    def restarts(self) -> int:
        return sum(w.restarts for w in self._pool)

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        self._pool = [_Worker(ctx) for _ in range(self.workers)]
        for i, w in enumerate(self._pool):
            t = threading.Thread(target=self._dispatch, args=(w,), daemon=True, name=f"optsched-dispatch-{i}")
            t.start()
            self._threads.append(t)
        self._open = True

    def close(self) -> None:
        """Refuse new requests, stop the dispatchers and the worker processes."""
        self._open = False
        for _ in self._threads:
            self._tasks.put(None)
        for t in self._threads:
            t.join(timeout=5)
        for w in self._pool:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
            w.proc.join(timeout=2)
            w.kill()

    async def run(self, kind: str, payload: dict[str, Any], deadline_s: float) -> tuple[str, Any]:
        """Queue one task and wait for its answer; raises :class:`OverCapacity` or :class:`Unavailable`."""
        if not self._open:
            raise Unavailable("the solve pool is not running")
        with self._lock:
            if self._in_flight >= self.capacity:
                raise OverCapacity(f"all {self.workers} workers are busy and {self.queue} requests are waiting")
            self._in_flight += 1
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._tasks.put(_Task(kind, payload, deadline_s, fut, loop))
        tag, value = await fut
        if tag == "crash":
            raise WorkerCrashed(value)
        if tag == "timeout":
            raise WorkerTimeout(value)
        return tag, value

    def _release(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _dispatch(self, worker: _Worker) -> None:
        while True:
            while not worker.wait_ready():
                time.sleep(1.0)
                worker.respawn()
            task = self._tasks.get()
            if task is None:
                return
            try:
                if task.future.cancelled():  # the client went away while it waited
                    continue
                answer = worker.run(task.kind, task.payload, task.deadline_s)
            finally:
                self._release()  # before the answer goes out, so the client's next request finds room
            try:
                task.loop.call_soon_threadsafe(_settle, task.future, answer)
            except RuntimeError:  # the event loop is closed: the server is stopping
                return


def _settle(fut: asyncio.Future, answer: tuple[str, Any]) -> None:
    if not fut.done():
        fut.set_result(answer)
