"""What every request passes before routing: the bearer token, the body-size cap, strict JSON.

:class:`RequestGuard` is plain ASGI middleware, so a refused request costs no route, no pydantic
model and no worker:

- with a token configured, every path but ``/healthz`` needs ``Authorization: Bearer <token>``
  (compared in constant time, :func:`hmac.compare_digest`), else 401;
- a body larger than the cap is refused with 413 naming the cap, from ``Content-Length`` before
  anything is read, or as soon as the bytes read pass it;
- a body is parsed by :func:`optsched.io.parse_json`, the parser of every optsched input, so NaN,
  infinities, huge integers, lone surrogates, non-UTF-8 text and deep nesting get the same 422 as
  on the command line, with a body that is always valid JSON. The route then reads the same bytes.
"""

from __future__ import annotations

import hmac
from typing import Any

from starlette.responses import JSONResponse

from optsched.errors import InputError
from optsched.io import parse_json

__all__ = ["OPEN_PATHS", "RequestGuard"]

#: paths served without the token (liveness probes)
OPEN_PATHS = frozenset({"/healthz"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class RequestGuard:
    """ASGI middleware over ``app``: token (``None``: none required), body cap in bytes, strict JSON."""

    def __init__(self, app: Any, *, token: str | None, max_body_bytes: int) -> None:
        self.app = app
        self._token = None if token is None else token.encode("utf-8")
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        if self._token is not None and scope.get("path") not in OPEN_PATHS and not self._authorised(headers.get("authorization")):
            await _answer(scope, receive, send, 401, "unauthorized",
                          "this service needs the header 'Authorization: Bearer <token>' (optsched serve --token)",
                          headers={"WWW-Authenticate": "Bearer"})
            return
        if scope.get("method") not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        declared = headers.get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self.max_body_bytes:
            await self._too_large(scope, receive, send, f"Content-Length {int(declared):,}")
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._too_large(scope, receive, send, f"more than {self.max_body_bytes:,} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body:
            try:
                parse_json(body)
            except InputError as e:
                await _answer(scope, receive, send, 422, "bad_input", str(e), **e.to_dict())
                return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _authorised(self, header: bytes | None) -> bool:
        scheme, _, given = (header or b"").partition(b" ")
        # compare_digest on equal-length inputs is constant time; unequal lengths fail (in time
        # that depends on the lengths only), and the token itself is never compared byte by byte
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token or b"")

    async def _too_large(self, scope: dict[str, Any], receive: Any, send: Any, got: str) -> None:
        mb = self.max_body_bytes / 2**20
        await _answer(scope, receive, send, 413, "too_large",
                      f"body: larger than this service takes ({mb:g} MB: optsched serve --max-body-mb); got {got}",
                      field="body", value=got, problem=f"is larger than {mb:g} MB")


async def _answer(scope: dict[str, Any], receive: Any, send: Any, status: int, code: str, message: str,
                  headers: dict[str, str] | None = None, **extra: Any) -> None:
    body = {"error": code, "message": message, **{k: v for k, v in extra.items() if v is not None or k == "value"}}
    await JSONResponse(body, status_code=status, headers=headers)(scope, receive, send)
