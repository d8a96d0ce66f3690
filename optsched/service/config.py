"""The service's settings: worker processes, queue length and time limits."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from optsched.errors import InputError

__all__ = ["ServiceConfig"]


def _default_workers() -> int:
    return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class ServiceConfig:
    """How much the service takes on at once and for how long.

    ``workers`` solve processes run one request each; ``queue`` more may wait; beyond that a
    request gets 429. A request's ``time_limit`` (default ``default_time_limit``) is capped at
    ``max_time_limit``. A solve whose worker has not answered ``grace_s`` seconds (or half its time
    limit, whichever is longer) after its time limit ran out is stopped (504); time spent waiting
    in the queue does not count. A request body larger than ``max_body_mb`` MB is refused (413);
    with a ``token``, every request but ``GET /healthz`` must carry ``Authorization: Bearer
    <token>`` (401 otherwise).
    """

    workers: int = field(default_factory=_default_workers)
    queue: int = 16
    max_time_limit: float = 60.0
    default_time_limit: float = 10.0
    grace_s: float = 30.0
    max_body_mb: float = 16.0
    token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name, lo in (("workers", 1), ("queue", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise InputError(name, v, f"must be an integer >= {lo}")
        for name in ("max_time_limit", "default_time_limit", "grace_s", "max_body_mb"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise InputError(name, v, "must be a positive number" + (" of seconds" if name != "max_body_mb" else " of MB"))
        if self.token is not None and (not isinstance(self.token, str) or not self.token or not self.token.isascii()
                                       or not self.token.isprintable() or " " in self.token):
            raise InputError("token", "<hidden>", "must be non-empty printable ASCII without spaces")
        if self.default_time_limit > self.max_time_limit:
            object.__setattr__(self, "default_time_limit", float(self.max_time_limit))

    @property
    def max_body_bytes(self) -> int:
        """The body-size cap in bytes."""
        return int(self.max_body_mb * 2**20)

    def time_limit(self, requested: float | None) -> float:
        """The time limit a request gets: its own (or the default), capped at the maximum."""
        return float(min(self.default_time_limit if requested is None else requested, self.max_time_limit))

    def deadline(self, time_limit: float) -> float:
        """Seconds a worker may take to answer a task with this time limit before it is stopped."""
        return time_limit + max(self.grace_s, 0.5 * time_limit)
