"""Incumbent and bound trajectories: what a solve knew, and when.

A :class:`Trajectory` records ``(t_s, objective, bound)`` events of one method call: ``t_s`` in
seconds from the call's start, ``objective`` the worth of the best schedule the method holds
(``None`` before its first one), ``bound`` the best proven upper bound (``None`` while it has
none). Recorded points are monotone: the objective never falls, the bound never rises; an event
that improves neither is dropped. :meth:`Trajectory.close` adds the call's final
``(objective, bound)``, so the trajectory ends at the :class:`~optsched.result.Result`'s values.

A method records into the trajectory of its call: decorate its ``solve`` with :func:`recorded`
and record with :func:`current` inside. Methods called on the *same* round inside another method
(cpsat's greedy hints and lns stage, ``cpsat+maifs``'s policy) forward their events to the
caller's trajectory only inside :meth:`Trajectory.nested`; other calls inside a method (lns
sub-problems) never do, and record only their result. :func:`optsched.solve_round` roots the
chain and passes each event to its ``progress`` callback.

A method that holds its incumbent's schedule may record it too (``record(value, schedule=...)``,
a zero-argument callable that builds it: only a listener that asks pays for it); the root passes
it to ``solve_round``'s ``incumbent`` callback, e.g. for the command line to write the first
schedule of a long solve as soon as it exists.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from optsched.model import Instance
    from optsched.result import Result
    from optsched.schedule import Schedule

__all__ = ["Incumbent", "Progress", "Trajectory", "TrajectoryPoint", "current", "recorded"]

#: ``progress(t_s, objective, bound)``: called with each recorded event
Progress = Callable[[float, "float | None", "float | None"], None]
#: ``incumbent(t_s, objective, schedule)``: called with each recorded improving incumbent that
#: came with its schedule; ``schedule()`` builds it (as the method holds it: unchecked)
Incumbent = Callable[[float, float, "Callable[[], Schedule]"], None]

#: objectives within this relative tolerance of the final one count as equal (the CP-SAT
#: incumbents' worths come from a scaled objective; :mod:`optsched.exact.scaling`)
_TOL = 1e-9


class TrajectoryPoint(NamedTuple):
    """One event: seconds from the call's start, the incumbent's worth and the proven bound."""

    t_s: float
    objective: float | None
    bound: float | None


def _better(new: float | None, old: float | None, sign: float) -> bool:
    if new is None or not math.isfinite(new):
        return False
    return old is None or sign * (new - old) > _TOL * max(1.0, abs(old))


class Trajectory:
    """The monotone record of one method call (see the module docstring).

    Parameters
    ----------
    instance:
        The round solved; nested calls forward events only when they solve this very object.
    start:
        The call's start (``time.perf_counter()``); default now.
    listener:
        Called with each recorded point as ``listener(t_s, objective, bound)``.
    parent:
        The caller's trajectory, which receives each event too (on its own clock).
    logger:
        Each recorded point is logged at DEBUG level here.
    incumbent:
        Called as ``incumbent(t_s, objective, schedule)`` with each improving incumbent recorded
        with its schedule.
    """

    def __init__(self, instance: Instance | None = None, *, start: float | None = None, listener: Progress | None = None,
                 parent: Trajectory | None = None, logger: logging.Logger | None = None, incumbent: Incumbent | None = None) -> None:
        self.instance = instance
        self.start = time.perf_counter() if start is None else start
        self._listener = listener
        self._incumbent = incumbent
        self._parent = parent
        self._log = logger
        self._points: list[TrajectoryPoint] = []
        self._muted = False

    # --- recording -------------------------------------------------------------------------------

    @property
    def objective(self) -> float | None:
        """The best objective recorded so far."""
        return self._points[-1].objective if self._points else None

    @property
    def bound(self) -> float | None:
        """The best bound recorded so far."""
        return self._points[-1].bound if self._points else None

    @property
    def points(self) -> tuple[TrajectoryPoint, ...]:
        return tuple(self._points)

    @property
    def active(self) -> bool:
        """Whether events are recorded (not muted)."""
        return not self._muted

    def mute(self) -> None:
        """Record nothing more until :meth:`close`: for a call whose ranking is not worth alone
        (deadline misses, a fairness level or packing first), where a later schedule may be worth
        less than an earlier one."""
        self._muted = True

    def record(self, objective: float | None = None, bound: float | None = None, *, at: float | None = None,
               schedule: Callable[[], Schedule] | None = None) -> None:
        """An incumbent worth ``objective`` and/or a proven ``bound``, known at ``at``
        (``time.perf_counter()``; default now). Events that improve neither are dropped.
        ``schedule`` builds the incumbent's schedule (a feasible one, worth ``objective``) for
        the ``incumbent`` listener, if there is one."""
        if self._muted:
            return
        at = time.perf_counter() if at is None else at
        self._add(at, objective, bound, schedule)
        if self._parent is not None:
            self._parent.record(objective, bound, at=at, schedule=schedule)

    def _add(self, at: float, objective: float | None, bound: float | None, schedule: Callable[[], Schedule] | None = None) -> None:
        better_obj = _better(objective, self.objective, 1.0)
        better_bound = _better(bound, self.bound, -1.0)
        if not (better_obj or better_bound):
            return
        pt = TrajectoryPoint(max(0.0, at - self.start), objective if better_obj else self.objective,
                             bound if better_bound else self.bound)
        if self._points and pt.t_s < self._points[-1].t_s:  # an event stamped earlier than the last: now
            pt = pt._replace(t_s=self._points[-1].t_s)
        self._points.append(pt)
        if self._log is not None and self._log.isEnabledFor(logging.DEBUG):
            self._log.debug("%.3fs incumbent=%s bound=%s", pt.t_s, _fmt(pt.objective), _fmt(pt.bound))
        if self._listener is not None:
            self._listener(*pt)
        if better_obj and schedule is not None and self._incumbent is not None and pt.objective is not None:
            self._incumbent(pt.t_s, pt.objective, schedule)

    def close(self, objective: float, bound: float | None, *, at: float | None = None) -> tuple[TrajectoryPoint, ...]:
        """The trajectory ending at the call's final ``objective`` and ``bound``.

        Recorded objectives above the final one (a CP-SAT incumbent's scaled worth rounds by at
        most :attr:`~optsched.exact.scaling.ValueScale.max_error`) are lowered to it, recorded
        bounds below the final one are raised to it (a looser bound is still proven) and, with
        no final bound, dropped. A method that recorded a schedule worth more than its result
        (more than rounding) ranks by more than worth and should have muted its trajectory: only
        the final point is kept then.
        """
        at = time.perf_counter() if at is None else at
        self._muted = False
        self.record(objective, bound, at=at)  # the listener (and the caller) see it if it improves anything
        pts = self._points
        if any(p.objective is not None and p.objective > objective + 1e-6 * max(1.0, abs(objective)) for p in pts):
            pts = []
        out: list[TrajectoryPoint] = []
        for p in pts:
            obj = None if p.objective is None else min(p.objective, objective)
            b = None if bound is None or p.bound is None else max(p.bound, bound)
            q = TrajectoryPoint(p.t_s, obj, b)
            if out and (out[-1].objective, out[-1].bound) == (q.objective, q.bound):
                continue
            out.append(q)
        end = TrajectoryPoint(max(0.0, at - self.start), objective, bound)
        if not out or (out[-1].objective, out[-1].bound) != (objective, bound):
            out.append(end)
        self._points = out
        return tuple(out)

    # --- nesting ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def nested(self) -> Iterator[None]:
        """Methods called on this round inside the block forward their events here."""
        token = _OPEN.set(None if self._muted else self)
        try:
            yield
        finally:
            _OPEN.reset(token)


#: the trajectory that the next method call on its round forwards to (None: no forwarding)
_OPEN: ContextVar[Trajectory | None] = ContextVar("optsched_open_trajectory", default=None)
#: the trajectory of the method call running now
_CURRENT: ContextVar[Trajectory | None] = ContextVar("optsched_current_trajectory", default=None)


def current() -> Trajectory:
    """The trajectory of the method call running now (a detached one outside any)."""
    rec = _CURRENT.get()
    return rec if rec is not None else Trajectory()


@contextlib.contextmanager
def recording(instance: Instance, *, logger: logging.Logger | None = None, listener: Progress | None = None,
              start: float | None = None, incumbent: Incumbent | None = None) -> Iterator[Trajectory]:
    """A new trajectory for a call on ``instance``, current inside the block; it forwards to the
    caller's when the caller opened :meth:`Trajectory.nested` for this very round."""
    parent = _OPEN.get()
    parent = parent if parent is not None and parent.instance is instance else None
    sub = parent is None and _CURRENT.get() is not None  # inside another call, not forwarding: a sub-problem (lns)
    rec = Trajectory(instance, start=start, listener=listener, logger=None if sub else logger, parent=parent, incumbent=incumbent)
    if sub:  # nobody reads its events: it records its result only (and CP-SAT runs without a callback)
        rec.mute()
    t_open, t_cur = _OPEN.set(None), _CURRENT.set(rec)
    try:
        yield rec
    finally:
        _CURRENT.reset(t_cur)
        _OPEN.reset(t_open)


def recorded(solve: Callable[..., Result]) -> Callable[..., Result]:
    """Decorate a method's ``solve(self, instance, ...)``: the call records into its own
    trajectory (:func:`current`), closed at the result's objective and bound into
    ``Result.trajectory``."""
    logger = logging.getLogger(solve.__module__)

    @functools.wraps(solve)
    def wrapper(self: Any, instance: Instance, *args: Any, **kwargs: Any) -> Result:
        with recording(instance, logger=logger) as rec:
            result = solve(self, instance, *args, **kwargs)
            return replace(result, trajectory=rec.close(result.objective, result.bound))

    return wrapper


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def as_points(rows: Sequence[Sequence[Any]]) -> tuple[TrajectoryPoint, ...]:
    """``[[t, objective, bound?], ...]`` (a results file's JSON) as points."""
    return tuple(TrajectoryPoint(float(r[0]), None if r[1] is None else float(r[1]),
                                 None if len(r) < 3 or r[2] is None else float(r[2])) for r in rows)
