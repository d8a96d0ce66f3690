"""``optsched serve``: the HTTP API (docs/service.md) on ``--host``:``--port``.

Solves run in ``--workers`` processes (default: one per core); ``--queue`` more requests may
wait (beyond that: 429); a request's time limit is capped at ``--max-time-limit`` seconds and its
body at ``--max-body-mb`` MB (413). With ``--token`` (or ``OPTSCHED_TOKEN``) every request but
``GET /healthz`` needs ``Authorization: Bearer <token>`` (401). Listens on loopback unless
``--host`` says otherwise; a non-loopback address without a token is refused unless
``--insecure`` says that something else (a proxy, a private network) guards it.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import socket

from optsched.errors import InputError
from optsched.extras import require_extra

#: environment variables read when the flag is not given
TOKEN_ENV = "OPTSCHED_TOKEN"
MAX_BODY_ENV = "OPTSCHED_MAX_BODY_MB"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080)")
    p.add_argument("--workers", type=int, default=None, help="solve worker processes (default: one per core)")
    p.add_argument("--queue", type=int, default=16, help="requests that may wait for a worker before 429 (default 16)")
    p.add_argument("--max-time-limit", type=float, default=60.0, metavar="SEC", help="cap on a request's time limit (default 60)")
    p.add_argument("--default-time-limit", type=float, default=10.0, metavar="SEC",
                   help="time limit of requests that give none (default 10, at most the cap)")
    p.add_argument("--max-body-mb", type=float, default=None, metavar="MB",
                   help=f"largest request body in MB; larger ones get 413 (default ${MAX_BODY_ENV}, else 16)")
    p.add_argument("--token", default=None, help=f"require 'Authorization: Bearer TOKEN' on every request but GET /healthz "
                   f"(default ${TOKEN_ENV}; prefer the variable: a flag shows in the process list)")
    p.add_argument("--insecure", action="store_true", help="allow a non-loopback --host without a token")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"], help="server log level")


def run(args: argparse.Namespace) -> int:
    uvicorn = require_extra("uvicorn", "service", "optsched serve")
    from optsched.service import create_app  # lazy: the service imports fastapi, an optional extra

    cfg = service_config(args)
    check_bindable(args.host, args.port)
    uvicorn.run(create_app(cfg), host=args.host, port=args.port, log_level=args.log_level)
    return 0


def check_bindable(host: str, port: int) -> None:
    """Refuse, as bad input, a ``--host``/``--port`` this process cannot listen on (a busy port,
    a foreign address) before the server starts: uvicorn would log it and exit 3, the code of
    a solver bug."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, addr = infos[0]
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a port in TIME_WAIT is free
            s.bind(addr)
    except OSError as e:
        raise InputError("--port" if e.errno == errno.EADDRINUSE else "--host", f"{host}:{port}",
                         f"cannot listen there: {e.strerror or e}") from None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable from this machine only."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def service_config(args: argparse.Namespace):
    """The :class:`~optsched.service.ServiceConfig` of the command line (and its environment
    variables); refuses a non-loopback ``--host`` without a token unless ``--insecure``."""
    from optsched.service import ServiceConfig  # lazy: optsched.service imports fastapi, an optional extra

    if not 0 <= args.port <= 65535:
        raise InputError("--port", args.port, "must be in 0..65535")
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    max_body = args.max_body_mb
    if max_body is None and os.environ.get(MAX_BODY_ENV):
        try:
            max_body = float(os.environ[MAX_BODY_ENV])
        except ValueError:
            raise InputError(MAX_BODY_ENV, os.environ[MAX_BODY_ENV], "must be a number of MB") from None
    kw = {} if args.workers is None else {"workers": args.workers}
    if max_body is not None:
        kw["max_body_mb"] = max_body
    try:
        cfg = ServiceConfig(queue=args.queue, max_time_limit=args.max_time_limit, default_time_limit=args.default_time_limit,
                            token=token, **kw)
    except InputError as e:
        raise InputError(f"--{e.field.replace('_', '-')}", e.value, e.problem) from None
    if token is None and not is_loopback(args.host) and not args.insecure:
        raise InputError("--host", args.host, f"is not a loopback address and no token is set: give --token (or ${TOKEN_ENV}) "
                                              "so that only clients with it are served, or --insecure if a proxy or a private network guards it")
    return cfg
