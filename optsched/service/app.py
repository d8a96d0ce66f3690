"""The FastAPI application: routes, and one error format for every failure.

``create_app(config)`` builds the app; its lifespan starts and stops the solve pool
(:class:`~optsched.service.pool.SolvePool`). Solves and validations run in the pool's worker
processes, never on the event loop; checks (fast, no solver) run in the server's thread pool.
Every error answer is an :class:`~optsched.service.schemas.ErrorBody`:

====  ==================  ====================================================================
401   ``unauthorized``    a token is configured and the request does not carry it
413   ``too_large``       the body is larger than the configured cap
422   ``bad_input``       malformed JSON (as :func:`optsched.io.parse_json` refuses it), a schema
                          violation, or the ``InputError`` of ``Instance.from_dict`` (``field`` is
                          a JSON path such as ``instance.jobs[3].demand``)
429   ``over_capacity``   every worker busy and the queue full; retry after ``Retry-After`` s
503   ``unavailable``     the pool is not running (starting or stopping)
500   ``solver_error``    the solver raised, returned an infeasible schedule, or its process died
504   ``solver_timeout``  the solve overran its time limit by far; its worker was replaced
500   ``internal``        anything else (a bug in the service)
====  ==================  ====================================================================
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from optsched import __version__
from optsched.checker import check_schedule
from optsched.errors import InputError, jsonable, safe_text
from optsched.registry import family_default, get_method, methods
from optsched.service.config import ServiceConfig
from optsched.service.guard import RequestGuard
from optsched.service.pool import OverCapacity, PoolError, SolvePool, Unavailable, WorkerCrashed, WorkerTimeout
from optsched.service.schemas import (
    CheckRequest,
    CheckResponse,
    ErrorBody,
    Health,
    MethodModel,
    SolveRequest,
    SolveResponse,
    ValidateRequest,
    ValidateResponse,
)
from optsched.service.sessions import add_session_routes
from optsched.solve import AUTO_LARGE, AUTO_WARM, method_options

__all__ = ["create_app"]

log = logging.getLogger("optsched.service")

API_DESCRIPTION = """\
Solve, check and validate GPU-cluster scheduling rounds (the optsched round contract, versions 1 to 3).

Solves run in a bounded pool of worker processes: a request beyond the pool's capacity gets 429
at once. Every error body has `error` (a stable code) and `message`; a 422 names the bad `field`
as a JSON path with its `value`.
"""


class SolverFailed(RuntimeError):
    """The solver raised (or returned something the checker refused) for this request."""


def _err(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return ErrorBody(error=code, message=message, **extra).model_dump(exclude_none=True)


_E = {"model": ErrorBody}
POOL_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {**_E, "description": "the server requires a bearer token and the request lacks it"},
    413: {**_E, "description": "the body is larger than the server's cap (the message names it)"},
    422: {**_E, "description": "bad input (the field is named)"},
    429: {**_E, "description": "over capacity: every worker busy and the queue full"},
    500: {**_E, "description": "the solver failed for this request"},
    503: {**_E, "description": "the solve pool is not running"},
    504: {**_E, "description": "the solve overran its time limit by far"},
}
CHECK_ERRORS: dict[int | str, dict[str, Any]] = {k: POOL_ERRORS[k] for k in (401, 413, 422)} | {500: {**_E, "description": "internal error"}}


def _field_path(loc: tuple[Any, ...]) -> str:
    """Pydantic's ``("body", "instance", "jobs", 3, "gpus")`` as ``instance.jobs[3].gpus``."""
    parts = list(loc[1:] if loc and loc[0] == "body" else loc)
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "body"


def _schema_error_item(e: dict[str, Any]) -> dict[str, Any]:
    """One pydantic error as ``{field, value, problem}``: the contract's own ``InputError`` (raised
    by ``Instance.from_dict`` inside the model) keeps its field, value and problem."""
    cause = e.get("ctx", {}).get("error")
    if isinstance(cause, InputError):
        return cause.within(_field_path(tuple(e.get("loc", ())))).to_dict()
    if e.get("type") == "json_invalid":
        return {"field": "body", "value": None, "problem": f"invalid JSON ({safe_text(str(e.get('ctx', {}).get('error', 'decode error')))})"}
    return {"field": safe_text(_field_path(tuple(e.get("loc", ())))), "value": None if e.get("type") == "missing" else jsonable(e.get("input")),
            "problem": safe_text(str(e.get("msg", "")))}


def _method_info(solver: str | None, field: str = "solver"):
    if solver is None:
        return None
    try:
        return get_method(solver)
    except InputError as e:
        raise InputError(field, e.value, e.problem) from None


def _check_options(req: SolveRequest, info: Any) -> None:
    """Refuse bad ``options`` before queueing: by name an option that no method accepts over HTTP
    (a path on the server's disk, the server's own output, an in-process object:
    ``OptionInfo.remote``), then, when the request names the method (a solver or a family), what
    ``solve_round`` would refuse, through the same options class (``auto`` picks its method by
    the round: its worker checks them, with the same messages)."""
    local = {o.name for m in [*methods(), AUTO_WARM, AUTO_LARGE] for o in m.options_class().describe() if not o.remote}
    for key, value in req.options.items():
        if key in local:
            raise InputError(f"options.{key}", value, "is not accepted over HTTP (for Python and CLI callers only)")
    if info is None and req.method != "auto":
        info = family_default(req.method)
    if info is not None and req.method in ("auto", info.family):  # else solve_round refuses the pair first
        method_options(info, req.options)


async def _run(pool: SolvePool, kind: str, payload: dict[str, Any], deadline_s: float) -> dict[str, Any]:
    tag, value = await pool.run(kind, payload, deadline_s)
    if tag == "input_error":
        raise InputError(value["field"], value["value"], value["problem"])
    if tag == "error":
        raise SolverFailed(value)
    return value


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _schema_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [_schema_error_item(e) for e in exc.errors()]
        first = errors[0] if errors else {"field": "body", "value": None, "problem": "invalid request"}
        return JSONResponse(status_code=422, content=_err("bad_input", f"{first['field']}: {first['problem']}", **first, errors=errors))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # a body that is not even text (FastAPI's "error parsing the body")
            return JSONResponse(status_code=422, content=_err("bad_input", f"body: {exc.detail}", field="body", problem=str(exc.detail)))
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, f"http_{exc.status_code}")
        return JSONResponse(status_code=exc.status_code, content=_err(code, str(exc.detail)), headers=exc.headers)

    @app.exception_handler(InputError)
    async def _input_error(request: Request, exc: InputError) -> JSONResponse:
        return JSONResponse(status_code=422, content=_err("bad_input", str(exc), **exc.to_dict()))

    @app.exception_handler(OverCapacity)
    async def _busy(request: Request, exc: OverCapacity) -> JSONResponse:
        return JSONResponse(status_code=429, content=_err("over_capacity", str(exc)), headers={"Retry-After": "1"})

    @app.exception_handler(Unavailable)
    async def _down(request: Request, exc: Unavailable) -> JSONResponse:
        return JSONResponse(status_code=503, content=_err("unavailable", str(exc)), headers={"Retry-After": "5"})

    @app.exception_handler(SolverFailed)
    @app.exception_handler(WorkerCrashed)
    async def _solver_error(request: Request, exc: Exception) -> JSONResponse:
        log.warning("solver error on %s: %s", request.url.path, exc)
        return JSONResponse(status_code=500, content=_err("solver_error", str(exc)))

    @app.exception_handler(WorkerTimeout)
    async def _timeout(request: Request, exc: WorkerTimeout) -> JSONResponse:
        log.warning("solver timeout on %s: %s", request.url.path, exc)
        return JSONResponse(status_code=504, content=_err("solver_timeout", str(exc)))

    @app.exception_handler(PoolError)
    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s", request.url.path)
        return JSONResponse(status_code=500, content=_err("internal", f"{type(exc).__name__}: {exc}"))


def create_app(config: ServiceConfig | None = None) -> FastAPI:
    """The HTTP service over ``config`` (defaults: one worker per core, queue 16, time limits 10/60 s)."""
    cfg = config or ServiceConfig()
    pool = SolvePool(cfg.workers, cfg.queue)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pool.start()
        try:
            yield
        finally:
            pool.close()

    app = FastAPI(title="optsched", version=__version__, description=API_DESCRIPTION, lifespan=lifespan)
    app.state.config, app.state.pool = cfg, pool
    app.add_middleware(RequestGuard, token=cfg.token, max_body_bytes=cfg.max_body_bytes)
    _install_error_handlers(app)

    @app.get("/healthz", response_model=Health, tags=["service"])
    async def healthz() -> dict[str, Any]:
        """Liveness and load: worker processes alive, requests in flight, time limits."""
        return {"status": "ok", "version": __version__, "workers": pool.workers, "workers_alive": pool.alive, "queue": pool.queue,
                "in_flight": pool.in_flight, "default_time_limit": cfg.default_time_limit, "max_time_limit": cfg.max_time_limit}

    @app.get("/v1/methods", response_model=list[MethodModel], tags=["rounds"])
    async def list_methods() -> list[dict[str, Any]]:
        """The registered solve methods (as ``optsched methods --json``)."""
        return [m.to_dict() for m in methods()]

    @app.post("/v1/solve", response_model=SolveResponse, responses=POOL_ERRORS, tags=["rounds"])
    async def solve(req: SolveRequest) -> dict[str, Any]:
        """Solve one round (``solve_round``): the schedule with objective, bound, gap, status and time.

        The schedule always passes the independent checker. ``time_limit`` is capped at the
        server's maximum; the answer says which limit applied. ``options`` go through the
        method's options class, as in Python and the CLI (same refusals, same messages).
        """
        info = _method_info(req.solver)
        _check_options(req, info)
        tl = cfg.time_limit(req.time_limit)
        payload = {"instance": req.instance.to_dict(), "method": req.method, "solver": req.solver, "time_limit": tl,
                   "seed": req.seed, "hint": None if req.hint is None else req.hint.contract_dict(), "method_info": info,
                   "options": req.options}
        out = await _run(pool, "solve", payload, cfg.deadline(tl))
        out["time_limit"] = tl
        return out

    @app.post("/v1/check", response_model=CheckResponse, responses=CHECK_ERRORS, tags=["rounds"])
    def check(req: CheckRequest) -> dict[str, Any]:
        """The independent checker: feasibility (every violated rule) and the recomputed objective."""
        return check_schedule(req.instance, req.schedule.contract_dict()).to_dict()

    @app.post("/v1/validate", response_model=ValidateResponse, responses=POOL_ERRORS, tags=["rounds"])
    async def validate(req: ValidateRequest) -> dict[str, Any]:
        """Judge an external decision (``optsched validate``): violations, gap to a reference solve, per-job diff."""
        info = _method_info(req.solver)
        tl = cfg.time_limit(req.time_limit)
        payload = {"instance": req.instance.to_dict(), "decision": req.decision.contract_dict(), "solver": req.solver,
                   "time_limit": tl, "seed": req.seed, "loglik": req.loglik, "method_info": info}
        out = await _run(pool, "validate", payload, cfg.deadline(tl))
        out["time_limit"] = tl
        return out

    add_session_routes(app, pool, cfg, run=_run, method_info=_method_info, responses=POOL_ERRORS)
    return app
