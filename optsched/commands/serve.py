"""``optsched serve``: the HTTP API (docs/service.md) on ``--host``:``--port``.

Solves run in ``--workers`` processes (default: one per core); ``--queue`` more requests may
wait (beyond that: 429); a request's time limit is capped at ``--max-time-limit`` seconds.
Listens on loopback unless ``--host`` says otherwise; there is no authentication.
"""

from __future__ import annotations

import argparse

from optsched.errors import InputError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080)")
    p.add_argument("--workers", type=int, default=None, help="solve worker processes (default: one per core)")
    p.add_argument("--queue", type=int, default=16, help="requests that may wait for a worker before 429 (default 16)")
    p.add_argument("--max-time-limit", type=float, default=60.0, metavar="SEC", help="cap on a request's time limit (default 60)")
    p.add_argument("--default-time-limit", type=float, default=10.0, metavar="SEC",
                   help="time limit of requests that give none (default 10, at most the cap)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"], help="server log level")


def run(args: argparse.Namespace) -> int:
    from optsched.extras import require_extra

    uvicorn = require_extra("uvicorn", "service", "optsched serve")
    from optsched.service import ServiceConfig, create_app

    if not 0 <= args.port <= 65535:
        raise InputError("--port", args.port, "must be in 0..65535")
    kw = {} if args.workers is None else {"workers": args.workers}
    try:
        cfg = ServiceConfig(queue=args.queue, max_time_limit=args.max_time_limit, default_time_limit=args.default_time_limit, **kw)
    except InputError as e:
        raise InputError(f"--{e.field.replace('_', '-')}", e.value, e.problem) from None
    uvicorn.run(create_app(cfg), host=args.host, port=args.port, log_level=args.log_level)
    return 0
