"""Elastic gangs (contract v2 job ``elastic``; Optimus, Pollux, Sia): the round's gang size as a decision.

Two things live here, both free of any solver:

* :func:`expand`: an elastic round as a *rigid* one with one **variant** job per allowed size of
  each elastic job (:class:`Expansion`). A variant of size ``k`` has ``gpus = k`` and weight
  ``weight x scaling(k)``; for a running job every size but the current one is a move, so those
  variants carry the restart factor in their weight and no placement. A schedule that runs at most
  one variant per job is then worth exactly what the elastic schedule is worth, so the exact model
  reuses all of its rigid machinery with one extra "at most one variant" row per job
  (:mod:`optsched.exact.variants`), and the rigid round *without* that row is a relaxation whose LP
  bound is valid for the elastic round.
* the scaling curves the generator and the simulator give elastic jobs: Amdahl's law with a
  per-model serial fraction (:func:`amdahl_scaling`, :func:`elastic_spec`).

formulations/policies.md ("Elastic gangs") states the rules.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from optsched.errors import InputError
from optsched.model import Elastic, Instance, Job
from optsched.schedule import Assignment, Schedule

__all__ = ["SERIAL_FRACTION", "Expansion", "amdahl_scaling", "elastic_sizes", "elastic_spec", "expand", "has_elastic",
           "mark_elastic"]


def has_elastic(instance: Instance) -> bool:
    """Whether any job of the round is elastic."""
    return any(j.elastic is not None for j in instance.jobs)


@dataclass(frozen=True)
class Expansion:
    """An elastic round (``original``) as a rigid one (``instance``) with one variant per size.

    ``origin[v]`` is the original job index of variant ``v`` (a job index of ``instance``),
    ``size[v]`` its GPU count; ``groups[i]`` lists the variants of original job ``i`` by
    ascending size (a rigid job is its own single variant, under its own id).
    """

    original: Instance
    instance: Instance
    origin: tuple[int, ...]
    size: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]

    @property
    def elastic_groups(self) -> list[int]:
        """Original indices of the elastic jobs (more than one variant, or a resized one)."""
        return [i for i, job in enumerate(self.original.jobs) if job.elastic is not None]

    def variant_id(self, job_id: str, gpus: int) -> str | None:
        """The variant of original ``job_id`` with ``gpus`` GPUs (``None``: no such variant)."""
        for v in self.groups[self.original.job_idx(job_id)]:
            if self.size[v] == gpus:
                return self.instance.jobs[v].id
        return None

    def to_model(self, schedule: Schedule) -> Schedule:
        """An original schedule in variant ids (a job whose size has no variant is left out)."""
        jobs: dict[str, Assignment] = {}
        for jid, a in schedule.jobs.items():
            vid = self.variant_id(jid, a.gpus)
            if vid is not None:
                jobs[vid] = a
        return Schedule(self.instance.name, jobs)

    def to_original(self, schedule: Schedule) -> Schedule:
        """A variant schedule in original ids (at most one variant per job is assumed)."""
        jobs: dict[str, Assignment] = {}
        for vid, a in schedule.jobs.items():
            jid = self.original.jobs[self.origin[self.instance.job_idx(vid)]].id
            if jid in jobs:
                raise RuntimeError(f"elastic: two variants of job {jid} scheduled (a bug)")
            jobs[jid] = a
        return Schedule(self.original.name, jobs)


def _variant(job: Job, vid: str, k: int, factor: float, duration_s: float) -> Job | None:
    """The rigid variant of elastic ``job`` with ``k`` GPUs (``None`` when it can never be worth
    anything: a running job whose move costs the whole round)."""
    current = sum(job.placement.values()) if job.placement is not None else None
    if current is None or current == k:
        return replace(job, id=vid, gpus=k, weight=job.weight * factor, elastic=None)
    keep = 1.0 - job.restart_s / duration_s  # another size is a move: the restart factor always applies
    if keep <= 0:
        return None
    return replace(job, id=vid, gpus=k, weight=job.weight * factor * keep, placement=None, restart_s=0.0, elastic=None)


def expand(instance: Instance) -> Expansion:
    """The rigid variant round of ``instance`` (the identity, job for job, without elastic jobs).
    Sizes larger than the GPUs of the job's allowed types can never run and get no variant."""
    type_gpus: dict[str, int] = {}
    for n in instance.nodes:
        type_gpus[n.gpu_type] = type_gpus.get(n.gpu_type, 0) + n.gpus
    taken = {j.id for j in instance.jobs}
    jobs: list[Job] = []
    origin: list[int] = []
    size: list[int] = []
    groups: list[tuple[int, ...]] = []
    for i, job in enumerate(instance.jobs):
        if job.elastic is None:
            groups.append((len(jobs),))
            jobs.append(job)
            origin.append(i)
            size.append(job.gpus)
            continue
        mine = []
        cap = sum(g for t, g in type_gpus.items() if job.speed(t) is not None)
        for k, f in zip(job.elastic.gpus, job.elastic.scaling, strict=True):
            if k > cap:
                break  # sizes increase
            vid = f"{job.id}@{k}"
            while vid in taken:
                vid += "'"
            v = _variant(job, vid, k, f, instance.round.duration_s)
            if v is None:
                continue
            taken.add(vid)
            mine.append(len(jobs))
            jobs.append(v)
            origin.append(i)
            size.append(k)
        groups.append(tuple(mine))
    rigid = instance.subround(f"{instance.name}/variants", instance.nodes, tuple(jobs))
    return Expansion(instance, rigid, tuple(origin), tuple(size), tuple(groups))


# --- scaling curves ----------------------------------------------------------------------------

#: Assumed serial (non-parallel) fraction of one data-parallel training step per catalogue model,
#: for Amdahl's law: the gradient all-reduce that does not overlap with compute. Rounded guesses
#: in the spirit of the scaling curves measured by Optimus (EuroSys'18, Fig. 3: ResNet-50 scales
#: almost linearly, models with large dense layers do not) and Pollux (OSDI'21, Fig. 2: throughput
#: is concave in the GPU count); not fitted to measurements (the Synergy profiles have none).
SERIAL_FRACTION: Mapping[str, float] = {
    "resnet18": 0.03, "resnet50": 0.02, "mobilenet": 0.03, "shufflenet": 0.03,
    "alexnet": 0.12,  # 61 M parameters, mostly fully connected: communication-bound
    "m5": 0.03, "deepspeech": 0.06,
    "transformer": 0.06, "gnmt": 0.10, "lstm": 0.10, "bert": 0.08,  # large embeddings and dense layers
    "vae": 0.02,
}
#: the serial fraction of a model not in :data:`SERIAL_FRACTION`
DEFAULT_SERIAL_FRACTION = 0.05


def amdahl_scaling(sizes: Iterable[int], nominal: int, serial: float) -> tuple[float, ...]:
    """Throughput at each of ``sizes`` GPUs relative to ``nominal`` GPUs under Amdahl's law:
    ``S(k) = k / (1 + serial (k - 1))`` (speed-up over one GPU), so factor ``S(k) / S(nominal)``
    -- concave and increasing, 1.0 at ``nominal``."""
    if not 0 <= serial < 1:
        raise InputError("serial", serial, "must be in [0, 1)")

    def speedup(k: int) -> float:
        return k / (1.0 + serial * (k - 1))

    base = speedup(nominal)
    return tuple(1.0 if k == nominal else speedup(k) / base for k in sizes)


def elastic_sizes(nominal: int, max_gpus: int, spread: int = 4) -> tuple[int, ...]:
    """The GPU counts an elastic job of ``nominal`` GPUs may use: the powers of two from
    ``nominal / spread`` to ``nominal x spread`` (at most ``max_gpus``), and ``nominal`` itself."""
    if spread < 1:
        raise InputError("spread", spread, "must be >= 1")
    sizes = {nominal}
    k = 1
    while k <= min(nominal * spread, max_gpus):
        if k * spread >= nominal:
            sizes.add(k)
        k *= 2
    return tuple(sorted(sizes))


def elastic_spec(model: str | None, nominal: int, max_gpus: int, spread: int = 4) -> Elastic:
    """An :class:`~optsched.model.Elastic` for a ``model`` job of ``nominal`` GPUs on a cluster
    whose largest GPU type has ``max_gpus``: :func:`elastic_sizes` with :func:`amdahl_scaling` at
    the model's :data:`SERIAL_FRACTION`."""
    sizes = elastic_sizes(nominal, max(max_gpus, nominal), spread)
    serial = SERIAL_FRACTION.get(model or "", DEFAULT_SERIAL_FRACTION)
    return Elastic(sizes, amdahl_scaling(sizes, nominal, serial))


def mark_elastic(jobs: Sequence[tuple[str | None, int]], share: float, seed: int, max_gpus: int,
                 spread: int = 4) -> list[Elastic | None]:
    """Per ``(model, gpus)`` job, an :func:`elastic_spec` with probability ``share`` (a numpy
    generator seeded with ``seed``, one draw per job in order), else ``None``. Jobs of one model and
    size share one spec object."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not math.isfinite(share) or not 0 <= share <= 1:
        raise InputError("elastic_share", share, "must be a share in [0, 1]")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError("elastic_seed", seed, "must be an integer >= 0")
    if share == 0 or not jobs:
        return [None] * len(jobs)
    draw = np.random.default_rng(seed).random(len(jobs))
    cache: dict[tuple[str | None, int], Elastic] = {}
    out: list[Elastic | None] = []
    for (model, g), x in zip(jobs, draw, strict=True):
        if x < share:
            if (model, g) not in cache:
                cache[(model, g)] = elastic_spec(model, g, max_gpus, spread)
            out.append(cache[(model, g)])
        else:
            out.append(None)
    return out
