"""The HTTP service (``optsched serve``): solve, check and validate rounds from any language.

``create_app(ServiceConfig(...))`` builds the FastAPI app (:mod:`optsched.service.app`); request
and response models live in :mod:`optsched.service.schemas`, the bounded pool of solve worker
processes in :mod:`optsched.service.pool` and what a worker runs in :mod:`optsched.service.work`.
See ``docs/service.md``.
"""

from optsched.service.app import create_app
from optsched.service.config import ServiceConfig

__all__ = ["ServiceConfig", "create_app"]
