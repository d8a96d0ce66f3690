"""Optional dependencies: each lives in a named extra of the package, imported only where used.

The core install (``pip install .``) solves, checks, generates and simulates rounds and runs the
shipped learned policy (numpy inference). The rest comes with an extra:

=========  ==============================  ==============================================
extra      brings                          for
=========  ==============================  ==============================================
train      torch                           ``optsched train``, ``learned.train``, log-likelihoods
service    fastapi, uvicorn                ``optsched serve``, :mod:`optsched.service`
plot       matplotlib                      plots (``--plot``, :mod:`optsched.sim.plots`, ...)
rl         gymnasium, pettingzoo           :mod:`optsched.envs`
ray        ray                             ``--backend ray``
cvxpy      cvxpy                           ``lp_bound(backend="cvxpy")``
docs       mkdocs, mkdocstrings            building the documentation site
dev        all of the above but ray,       the test suite (``make test``)
           plus pytest, ruff, mypy, ...
=========  ==============================  ==============================================

:func:`require_extra` imports a module of an extra or raises :class:`MissingExtra`, an
``ImportError`` whose message names the extra and how to install it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRAS", "MissingExtra", "require_extra"]

#: the optional extras of ``pyproject.toml`` and the top-level modules they bring
EXTRAS: dict[str, tuple[str, ...]] = {
    "train": ("torch",),
    "service": ("fastapi", "uvicorn"),
    "plot": ("matplotlib",),
    "rl": ("gymnasium", "pettingzoo"),
    "ray": ("ray",),
    "cvxpy": ("cvxpy",),
    "docs": ("mkdocs", "mkdocstrings"),
}


class MissingExtra(ImportError):
    """A module of an optional extra is not installed; the message says which extra brings it."""

    def __init__(self, module: str, extra: str, purpose: str) -> None:
        self.module = module
        self.extra = extra
        self.purpose = purpose
        super().__init__(
            f"{purpose} needs {module}, which comes with optsched's optional extra '{extra}': "
            f"pip install \".[{extra}]\" in a clone of optsched, or pip install \"optsched[{extra}] @ <repository-url>\"",
            name=module,
        )


def require_extra(module: str, extra: str, purpose: str) -> ModuleType:
    """``import module``, or :class:`MissingExtra` naming ``extra`` when it (or its top-level
    package) is not installed. Errors raised inside an installed module propagate unchanged."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {sorted(EXTRAS)}")
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        top = module.partition(".")[0]
        if e.name is None or e.name.partition(".")[0] != top:
            raise
        raise MissingExtra(module, extra, purpose) from e


def pyplot(purpose: str = "plotting") -> ModuleType:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (files only), from the ``plot`` extra."""
    matplotlib = require_extra("matplotlib", "plot", purpose)
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")
