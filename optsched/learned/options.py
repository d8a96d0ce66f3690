"""The options of ``maifs`` (:class:`~optsched.learned.solver.LearnedSolver`) and of ``cpsat+maifs``
(what ``auto`` runs on medium rounds: :class:`~optsched.learned.auto.WarmCpSat`), validated once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from optsched.exact.options import CpsatOptions
from optsched.learned.inference import INFERENCE_THREADS
from optsched.limits import MAX_THREADS
from optsched.options import Check, MethodOptions, option

__all__ = ["MaifsOptions", "WarmCpsatOptions"]

_WEIGHTS = "the policy's weights file, .npz or a torch checkpoint .pt (null: the shipped weights)"


@dataclass(frozen=True)
class MaifsOptions(MethodOptions):
    """Options of ``maifs``. ``None`` stands for a default that depends on the round
    (``samples``, ``repair``) or on the installation (``weights``)."""

    method: ClassVar[str] = "maifs"

    weights: str | None = option(None, _WEIGHTS, Check.path().or_none(), remote=False)
    samples: int | None = option(
        None, "extra sampled decodes within the time limit (null: 16 on rounds of at most 4,096 nodes x jobs, else 0)",
        Check.integer(ge=0).or_none())
    temperature: float = option(1.0, "the sampling temperature", Check.number(gt=0, le=1_000_000, problem="must be in (0, 1000000]"))
    threads: int = option(INFERENCE_THREADS, "BLAS threads for the forward pass", Check.integer(ge=1, le=MAX_THREADS))
    repair: bool | None = option(
        None, "the price-guided repair after the greedy decode (null: on every round without contract-v2 "
        "policies)", Check.boolean().or_none())


@dataclass(frozen=True)
class WarmCpsatOptions(CpsatOptions):
    """Options of ``cpsat+maifs``: those of ``cpsat`` and the policy's ``weights``."""

    method: ClassVar[str] = "cpsat+maifs"

    weights: str | None = option(None, _WEIGHTS, Check.path().or_none(), remote=False)
