"""Ray backend: the same ``imap_unordered`` as :class:`~optsched.parallel.LocalPool`, on a Ray cluster.

Needs the optional extra ``ray`` (from a clone: ``pip install '.[ray]'``). With no ``address`` it joins a Ray
instance already started in this process, else starts a local one (``workers`` CPUs, or all of
them); with ``address`` (``"auto"``, ``"ray://head:10001"``, ``"10.0.0.5:6379"``) it joins that
cluster, whose workers must be able to import ``optsched`` (install it there, or pass a
``runtime_env``). Each task asks for one CPU; at most ``2 x workers`` are in flight, so a long
task list is never submitted at once, and results are yielded as they complete.

A task that raises re-raises the same exception type in the caller (as the process pool does);
the Ray instance is left running for later sweeps in this process (``ray.shutdown()`` ends it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from optsched.errors import InputError
from optsched.extras import require_extra

ray = require_extra("ray", "ray", "the ray backend (--backend ray)")

__all__ = ["RayBackend"]


class RayBackend:
    """Map a picklable function over tasks on Ray, with at most ``2 x workers`` tasks in flight."""

    def __init__(self, address: str | None = None, workers: int | None = None, runtime_env: Mapping[str, Any] | None = None) -> None:
        if workers is not None and workers < 1:
            raise InputError("workers", workers, "must be >= 1")
        self.address = address
        self.runtime_env = dict(runtime_env) if runtime_env else None
        self._workers = workers

    def _connect(self) -> None:
        if ray.is_initialized():
            return
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if self.runtime_env:
            kwargs["runtime_env"] = self.runtime_env
        if self.address:
            ray.init(address=self.address, **kwargs)
        else:
            ray.init(num_cpus=self._workers, **kwargs)

    @property
    def workers(self) -> int:
        """Tasks run at once: ``workers`` if given, else the cluster's CPU count."""
        self._connect()
        if self._workers is not None:
            return self._workers
        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    def imap_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        self._connect()
        remote = ray.remote(num_cpus=1, max_retries=0)(_call)
        fn_ref = ray.put(fn)
        limit = 2 * self.workers
        todo = iter(tasks)
        running: list[Any] = []
        for t in todo:
            running.append(remote.remote(fn_ref, t))
            if len(running) >= limit:
                break
        try:
            while running:
                done, running = ray.wait(running, num_returns=1)
                for ref in done:
                    yield _get(ref)
                    for nxt in todo:
                        running.append(remote.remote(fn_ref, nxt))
                        break
        finally:
            for ref in running:  # the caller stopped early (or a task failed): drop what is left
                ray.cancel(ref, force=True)


def _call(fn: Callable[[Any], Any], task: Any) -> Any:
    return fn(task)


def _get(ref: Any) -> Any:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        raise e.as_instanceof_cause() from None
