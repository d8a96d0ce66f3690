"""Parallel execution: one protocol, a local process pool by default, and Ray as an extra.

A backend maps a picklable function over tasks and yields results as they complete, so a caller
(benchmark sweeps, simulation grids, label generation) can keep each result the moment it exists
(nothing lost on a crash). The Ray backend is :mod:`optsched.parallel.ray_backend`.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Protocol

from optsched.errors import InputError
from optsched.extras import MissingExtra, require_extra

__all__ = ["Backend", "LocalPool", "Serial", "check_backend", "get_backend"]


class Backend(Protocol):
    def imap_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]: ...


class Serial:
    """Run in this process, one task after another (deterministic order; for tests and debugging)."""

    def imap_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        for t in tasks:
            yield fn(t)


class LocalPool:
    """A local process pool with at most ``workers`` tasks in flight."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)

    def imap_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        todo = iter(tasks)
        with ProcessPoolExecutor(max_workers=self.workers) as pool:
            running: set[Future] = set()
            for t in todo:
                running.add(pool.submit(fn, t))
                if len(running) >= 2 * self.workers:
                    break
            while running:
                done, running = wait(running, return_when=FIRST_COMPLETED)
                for f in done:
                    yield f.result()
                    nxt = next(todo, None)
                    if nxt is not None:
                        running.add(pool.submit(fn, nxt))


#: the backends :func:`get_backend` knows
BACKENDS = ("local", "serial", "ray")


def check_backend(name: str, field: str = "backend") -> None:
    """Refuse (:class:`InputError` naming ``field``) a backend that is not one of
    :data:`BACKENDS`, or ``"ray"`` without its optional extra, before any work starts."""
    if name not in BACKENDS:
        raise InputError(field, name, f"unknown backend; known: {list(BACKENDS)}")
    if name == "ray":
        try:
            require_extra("ray", "ray", "the ray backend (--backend ray)")
        except MissingExtra as e:
            raise InputError(field, name, str(e)) from None


def get_backend(name: str, *, workers: int | None = None, address: str | None = None) -> Backend:
    """``"local"`` (process pool, the default), ``"serial"``, or ``"ray"`` (optional extra).

    ``"local"`` runs serially where a pool cannot start: with one worker, and inside a daemonic
    process (a worker of the HTTP service's pool, which may not have children). Callers' results
    do not depend on the backend, only their wall time does.
    """
    check_backend(name)
    if name == "local":
        return LocalPool(workers) if (workers or 0) != 1 and not multiprocessing.current_process().daemon else Serial()
    if name == "serial":
        return Serial()
    from optsched.parallel.ray_backend import RayBackend  # lazy: the module imports ray, an optional extra

    return RayBackend(address=address, workers=workers)
