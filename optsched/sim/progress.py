"""A replay that runs jobs but never gets any of them past its restart: the livelock check.

A job that is started, resumed or moved makes no progress for its restart time. Rounds that
preempt or move every running job again before that time has passed (a policy that keeps
rotating jobs, with restarts longer than a round) run forever without finishing a job. Once
every job has arrived, :class:`ProgressWatch` ends such a replay after twice the longest restart
plus ten rounds without any work done: a job left running that long gets past its restart.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ProgressWatch"]


class ProgressWatch:
    """Whether a replay whose jobs have all arrived still does work (:meth:`stall`)."""

    def __init__(self, restart_s: np.ndarray, round_s: float) -> None:
        #: simulated seconds without work done after which the replay is stuck
        self.limit_s = 2.0 * float(restart_s.max(initial=0.0)) + 10.0 * round_s
        self._mark: tuple[int, float] | None = None
        self._since = 0.0

    def stall(self, t: float, done: np.ndarray, remaining: np.ndarray) -> str | None:
        """``"no progress"`` when no job finished and no work was done from ``limit_s`` before
        ``t`` to ``t`` (``done``: finished jobs; ``remaining``: work left per job), else None."""
        mark = (int(done.sum()), float(remaining.sum()))
        if mark != self._mark:
            self._mark, self._since = mark, t
            return None
        return "no progress" if t - self._since > self.limit_s else None
