"""Shared helpers for the simulator tests: a tiny stand-in model catalogue and simple allocators.

The stand-in keeps the simulator tests independent of the real catalogue's numbers, so the
hand-computed JCTs below stay exact whatever the catalogue ships.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from optsched.model import Instance, Profile
from optsched.schedule import Assignment, Schedule

CPUS = (1, 2, 4, 8)
MEMS = (16, 32, 64)


class StandInCatalogue:
    """Two models: ``cpu`` speeds up with cores (1.5x at 8 per GPU vs its demand of 4), ``flat`` not."""

    MODELS = ("cpu", "flat")

    def profile(self, model: str, gpus: int) -> Profile:
        if model == "cpu":
            rows = [[f * m for m in (0.5, 1.0, 1.0)] for f in (0.4, 0.7, 1.0, 1.5)]
        else:
            rows = [[1.0] * len(MEMS) for _ in CPUS]
        return Profile(CPUS, MEMS, rows)

    def demand(self, model: str, gpus: int) -> tuple[int, int]:
        return (4, 32)

    def gpu_speeds(self, model: str, gpu_types: Sequence[str]) -> Mapping[str, float]:
        return {t: (0.5 if t == "SLOW" else 1.0) for t in gpu_types}

    def sample_models(self, rng: np.random.Generator, n: int, mix: object = None) -> list[str]:
        return [str(m) for m in rng.choice(self.MODELS, size=n)]


def first_fit(instance: Instance, *, fungible: bool = False) -> Schedule:
    """Weight order; each job on the first single node with room at its demand, else spread over
    the first nodes of one type with room (the gang at its demand everywhere). With
    ``fungible``, a job alone on its node then takes the largest grid point that fits there."""
    free = {n.id: [n.gpus, n.cpus, n.mem_gb] for n in instance.nodes}
    out: dict[str, Assignment] = {}
    for job in sorted(instance.jobs, key=lambda j: (-j.weight, j.id)):
        c, m = job.demand
        for nd in instance.nodes:
            if job.speed(nd.gpu_type) is None:
                continue
            f = free[nd.id]
            if f[0] >= job.gpus and f[1] >= c * job.gpus and f[2] >= m * job.gpus:
                if fungible and f[0] == nd.gpus:
                    pts = [(t, cc, mm) for cc, mm, t in job.profile.points() if cc * job.gpus <= f[1] and mm * job.gpus <= f[2]]
                    _, c, m = max(pts)
                f[0] -= job.gpus
                f[1] -= c * job.gpus
                f[2] -= m * job.gpus
                out[job.id] = Assignment({nd.id: job.gpus}, c, m)
                break
        else:
            spread = _spread(instance, job, free)
            if spread:
                out[job.id] = spread
    return Schedule(instance.name, out)


def _spread(instance: Instance, job, free: dict[str, list[int]]) -> Assignment | None:
    """Gang over several nodes of one GPU type at the demand, taking nodes in order; or None."""
    c, m = job.demand
    for t in instance.gpu_types:
        if job.speed(t) is None:
            continue
        take: dict[str, int] = {}
        need = job.gpus
        for nd in instance.nodes:
            if nd.gpu_type != t or need == 0:
                continue
            f = free[nd.id]
            k = min(need, f[0], f[1] // max(c, 1), f[2] // max(m, 1))
            if k > 0:
                take[nd.id] = k
                need -= k
        if need == 0:
            for nid, k in take.items():
                free[nid][0] -= k
                free[nid][1] -= k * c
                free[nid][2] -= k * m
            return Assignment(take, c, m)
    return None


def fungible_first_fit(instance: Instance) -> Schedule:
    return first_fit(instance, fungible=True)
