"""Round chains over HTTP: ``POST /v1/sessions/{session_id}/solve`` solves the next round of a
session from the previous round's answer (:class:`optsched.incremental.RoundSolver`), so an
outside scheduler that calls every few minutes gets the warm start a simulator gets.

The server keeps one :class:`~optsched.incremental.RoundState` per session (one round's schedule
and its key) in a :class:`SessionStore`, with the settings it was solved under (:func:`settings`:
the solver and the gap target): at most ``max_sessions`` sessions, the least recently used evicted
first, and a session unused for ``ttl_s`` seconds forgotten. A forgotten or unknown session simply
starts cold, and so does a request with other settings than the session's last round (its state
is replaced): a round solved by one solver is never reused or carried over as another's answer. Two concurrent requests on one session both start from the state
before them and the later answer's state is kept. ``DELETE /v1/sessions/{session_id}`` forgets a
session at once.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Path
from pydantic import BaseModel, Field

from optsched.errors import InputError
from optsched.incremental import GAP_TARGET
from optsched.service.config import ServiceConfig
from optsched.service.pool import SolvePool
from optsched.service.schemas import _REQUEST, ContractInstance, NonEmpty, Seed, SolveResponse, TimeLimit

__all__ = ["MAX_SESSIONS", "SESSION_TTL_S", "SessionSolveRequest", "SessionSolveResponse", "SessionStore", "add_session_routes",
           "settings"]

#: sessions kept at most (least recently used evicted first); each holds one round's schedule
MAX_SESSIONS = 256
#: a session unused this long is forgotten (seconds)
SESSION_TTL_S = 3600.0
#: what a session id may look like
SESSION_ID = r"^[A-Za-z0-9_.-]{1,64}$"


class SessionStore:
    """A bounded map of session id -> the session's state (a JSON-ready dict): LRU with a TTL."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, ttl_s: float = SESSION_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise InputError("max_sessions", max_sessions, "must be an integer >= 1")
        if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or not ttl_s > 0:
            raise InputError("ttl_s", ttl_s, "must be a positive number of seconds")
        self.max_sessions = max_sessions
        self.ttl_s = float(ttl_s)
        self._clock = clock
        self._items: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._items)

    def _expire(self) -> None:
        now = self._clock()
        while self._items:
            sid, (used, _) = next(iter(self._items.items()))
            if now - used <= self.ttl_s:
                break
            del self._items[sid]

    def get(self, sid: str) -> dict[str, Any] | None:
        """The session's state, or ``None`` when it is unknown, evicted or expired."""
        with self._lock:
            self._expire()
            item = self._items.get(sid)
            if item is None:
                return None
            self._items.move_to_end(sid)
            self._items[sid] = (self._clock(), item[1])
            return item[1]

    def put(self, sid: str, state: dict[str, Any]) -> None:
        """Keep ``state`` as the session's (evicting the least recently used beyond the cap)."""
        with self._lock:
            self._items.pop(sid, None)
            self._items[sid] = (self._clock(), state)
            self._expire()
            while len(self._items) > self.max_sessions:
                self._items.popitem(last=False)

    def drop(self, sid: str) -> bool:
        """Forget a session; whether it was there."""
        with self._lock:
            return self._items.pop(sid, None) is not None


class SessionSolveRequest(BaseModel):
    """``POST /v1/sessions/{session_id}/solve``: the session's next round."""

    model_config = _REQUEST
    instance: ContractInstance
    solver: NonEmpty = Field("cpsat", description="a registered solver that takes hints (GET /v1/methods)")
    time_limit: TimeLimit = None
    seed: Seed = 0
    gap_target: float = Field(GAP_TARGET, ge=0, lt=1, description="stop once the schedule is within this relative gap of a proven bound")


def settings(req: SessionSolveRequest) -> dict[str, Any]:
    """What a session's state belongs to: the settings that shape a round's answer beyond its
    time limit (a later round with other settings starts cold)."""
    return {"solver": req.solver, "gap_target": req.gap_target}


class SessionSolveResponse(SolveResponse):
    """The round's schedule with its reports, plus the session and how the round was answered."""

    session_id: str
    incremental: str = Field(description="cold, reused, carried (no search: proven within the gap target), searched or skipped (not proven, searched no further: after fruitless searches, after solver calls that added nothing, or for time)")


def add_session_routes(app: FastAPI, pool: SolvePool, cfg: ServiceConfig, *, run: Callable[..., Awaitable[dict[str, Any]]],
                       method_info: Callable[[str | None], Any], store: SessionStore | None = None,
                       responses: dict[int | str, dict[str, Any]] | None = None) -> SessionStore:
    """Register the session routes on ``app`` (``run``: the app's pool call, ``method_info``: its
    solver lookup); the store they use (a new one by default)."""
    store = store if store is not None else SessionStore()
    app.state.sessions = store

    @app.post("/v1/sessions/{session_id}/solve", response_model=SessionSolveResponse, responses=responses, tags=["rounds"])
    async def session_solve(req: SessionSolveRequest, session_id: str = Path(pattern=SESSION_ID)) -> dict[str, Any]:
        """Solve the session's next round from its previous one (a new session starts cold).

        The same answer as ``/v1/solve`` (the schedule always passes the independent checker),
        plus ``incremental``: how the round was answered."""
        info = method_info(req.solver)
        tl = cfg.time_limit(req.time_limit)
        held, own = store.get(session_id), settings(req)
        state = held["state"] if held is not None and held.get("settings") == own else None
        payload = {"instance": req.instance.to_dict(), "solver": req.solver, "time_limit": tl, "seed": req.seed,
                   "gap_target": req.gap_target, "state": state, "method_info": info}
        out = await run(pool, "round", payload, cfg.deadline(tl))
        store.put(session_id, {"settings": own, "state": out["state"]})
        result = out["result"]
        return {**result, "time_limit": tl, "session_id": session_id, "incremental": result.get("stats", {}).get("incremental", "cold")}

    @app.delete("/v1/sessions/{session_id}", tags=["rounds"])
    async def session_drop(session_id: str = Path(pattern=SESSION_ID)) -> dict[str, Any]:
        """Forget a session's state; ``deleted`` says whether there was one."""
        return {"session_id": session_id, "deleted": store.drop(session_id)}

    return store
