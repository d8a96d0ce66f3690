"""The HTTP service (``optsched serve``): solve, check and validate rounds from any language.

``create_app(ServiceConfig(...))`` builds the FastAPI app (:mod:`optsched.service.app`); request
and response models live in :mod:`optsched.service.schemas`, the bounded pool of solve worker
processes in :mod:`optsched.service.pool` and what a worker runs in :mod:`optsched.service.work`.
Needs the ``service`` extra (fastapi, uvicorn). See ``docs/service.md``.
"""

from optsched.extras import require_extra

require_extra("fastapi", "service", "the HTTP service")

from optsched.service.app import create_app  # noqa: E402
from optsched.service.config import ServiceConfig  # noqa: E402

__all__ = ["ServiceConfig", "create_app"]
