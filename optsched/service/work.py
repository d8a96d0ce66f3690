"""What runs inside a solve worker process: one loop, one task at a time, answers as tagged tuples.

A task is ``(kind, payload)`` with ``kind`` in :data:`TASKS`; the answer is ``("ok", dict)``,
``("input_error", InputError.to_dict())`` or ``("error", message)``. Every exception is caught
here and turned into an answer, so a solver that raises costs its own request only; a solver that
kills the process (a crash in native code, ``os._exit``) is noticed by the pool, which starts a
new worker (:mod:`optsched.service.pool`).
"""

from __future__ import annotations

import signal
import traceback
from typing import Any

from optsched import registry
from optsched.commands.validate import validate_decision
from optsched.errors import InputError
from optsched.incremental import RoundSolver, RoundState
from optsched.model import Instance
from optsched.registry import MethodInfo
from optsched.solve import solve_round

__all__ = ["TASKS", "run_task", "serve_forever"]


def _sync_method(info: MethodInfo | None) -> None:
    """Make this process's registry know ``info`` as the serving process does.

    Methods registered in the serving process after the workers started (plugins, tests) exist
    only there; the request carries the entry so the worker resolves the same class.
    """
    if info is None:
        return
    if registry._METHODS.get(info.name) != info:
        registry._METHODS[info.name] = info


def _solve(p: dict[str, Any]) -> dict[str, Any]:
    _sync_method(p.get("method_info"))
    result = solve_round(p["instance"], p["method"], solver=p["solver"], time_limit=p["time_limit"], seed=p["seed"], hint=p["hint"],
                         options=p.get("options"))
    return result.to_dict()


def _validate(p: dict[str, Any]) -> dict[str, Any]:
    _sync_method(p.get("method_info"))
    return validate_decision(Instance.from_dict(p["instance"]), p["decision"], time_limit=p["time_limit"], solver=p["solver"],
                             seed=p["seed"], loglik=p["loglik"])


def _round(p: dict[str, Any]) -> dict[str, Any]:
    """The next round of a session's chain (optsched.service.sessions): its result and new state."""
    _sync_method(p.get("method_info"))
    state = None if p["state"] is None else RoundState.from_dict(p["state"])
    chain = RoundSolver(p["solver"], time_limit=p["time_limit"], seed=p["seed"], gap_target=p["gap_target"], state=state)
    result = chain.solve(p["instance"])  # its method is the solver's family, however the round was answered
    return {"result": result.to_dict(), "state": chain.state.to_dict()}


def _ping(p: dict[str, Any]) -> dict[str, Any]:
    return {"pong": True}


#: task kinds a worker runs
TASKS = {"solve": _solve, "validate": _validate, "round": _round, "ping": _ping}


def run_task(kind: str, payload: dict[str, Any]) -> tuple[str, Any]:
    """Run one task and return its tagged answer; never raises."""
    try:
        return "ok", TASKS[kind](payload)
    except InputError as e:
        return "input_error", e.to_dict()
    except Exception as e:  # noqa: BLE001 - a solver's failure is this request's answer, not the worker's end
        tb = traceback.extract_tb(e.__traceback__)
        where = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
        return "error", f"{type(e).__name__}: {e}{where}"


#: methods whose modules a worker loads before its first request (OR-Tools and all)
_WARM = ("cpsat", "lns")


def _warm() -> None:
    """Load the default solvers' classes now (through the registry, by name), so the first
    request does not pay for importing OR-Tools."""
    for name in _WARM:
        registry.get_method(name).load()


def serve_forever(conn: Any) -> None:
    """A worker process's main loop over its end of a ``multiprocessing`` pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the server, which stops us
    _warm()
    conn.send(("ready", None))
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(run_task(*task))
