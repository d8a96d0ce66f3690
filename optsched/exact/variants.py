"""Elastic gangs in the CP-SAT round model: the variant rows (formulations/policies.md, "Elastic gangs").

The model is built on the rigid variant round of :func:`optsched.elastic.expand`, whose variants
of one job would otherwise be independent jobs. :func:`add_variant_selection` lets at most one of
them run; :func:`original_selection` is "job runs" per *original* job (the policy families count
jobs, not variants); :func:`variant_classes` and :func:`add_elastic_symmetry` break the symmetry
of interchangeable elastic jobs by their chosen size, and :func:`canonical_jobs` puts a hint in
the order those rows ask.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

from optsched.elastic import Expansion
from optsched.exact.prep import JobData, job_classes
from optsched.model import Job
from optsched.schedule import Assignment

if TYPE_CHECKING:
    from optsched.exact.cpsat import RoundModel

__all__ = ["add_elastic_symmetry", "add_variant_selection", "canonical_jobs", "elastic_classes", "original_jobs",
           "original_selection", "variant_classes", "variants_of"]


def original_jobs(m: RoundModel) -> list[Job]:
    """The round's jobs as given (an elastic job once, not per variant), by original index."""
    return list(m.elastic.original.jobs) if m.elastic is not None else [d.job for d in m.data]


def variants_of(m: RoundModel, j: int) -> tuple[int, ...]:
    """The model's job indices (variants) of original job ``j``."""
    return m.elastic.groups[j] if m.elastic is not None else (j,)


def add_variant_selection(m: RoundModel) -> None:
    """Per elastic job, at most one mode over all its variants: ``sum_v sum_modes(v) <= 1``."""
    exp = m.elastic
    if exp is None:
        return
    lits = m.job_literals()
    for group in exp.groups:
        if len(group) > 1:
            both = [x for v in group for x in lits[v]]
            if len(both) > 1:
                m.model.add_at_most_one(both)


def original_selection(m: RoundModel, sel: dict[int, cp_model.LinearExprT]) -> dict[int, cp_model.LinearExprT]:
    """Per original job index, "it runs" (0 or 1): the sum of its variants' ``sel``."""
    exp = m.elastic
    if exp is None:
        return sel
    out: dict[int, cp_model.LinearExprT] = {}
    for i, group in enumerate(exp.groups):
        terms = [sel[v] for v in group if not isinstance(sel[v], int)]
        out[i] = sum(terms) if terms else 0
    return out


def variant_classes(m: RoundModel, data: list[JobData]) -> list[list[int]]:
    """The rigid job classes of the model's round, without the variants of elastic jobs (two
    elastic jobs may differ in the size they pick, so their variants are not interchangeable)."""
    exp = m.elastic
    classes = job_classes(m.instance, data)
    if exp is None:
        return classes
    elastic = {v for i in exp.elastic_groups for v in exp.groups[i]}
    return [c for c in classes if not elastic.intersection(c)]


def elastic_classes(exp: Expansion) -> list[list[int]]:
    """Groups (of size >= 2) of interchangeable elastic jobs (original indices): same everything
    but the id, elastic curve included, not running."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i in exp.elastic_groups:
        j = exp.original.jobs[i]
        if j.placement is not None or not exp.groups[i]:
            continue
        key = (j.gpus, j.weight, j.profile, j.demand, tuple(sorted((j.gpu_speed or {}).items())), j.spread_factor,
               j.tenant, j.deadline_s, j.remaining_s, j.elastic)
        groups[key].append(i)
    return [g for g in groups.values() if len(g) >= 2]


def add_elastic_symmetry(m: RoundModel) -> None:
    """Of interchangeable elastic jobs, an earlier one runs with at least the size of a later one:
    ``sum_k (k+1) sel[a_k] >= sum_k (k+1) sel[b_k]`` over the variants ``a_k``, ``b_k`` by size
    (0 when not running). Valid: swapping two such jobs' assignments keeps worth and feasibility."""
    exp = m.elastic
    if exp is None:
        return
    lits = m.job_literals()

    def rank(i: int) -> cp_model.LinearExprT:
        return sum((r + 1) * x for r, v in enumerate(exp.groups[i]) for x in lits[v])

    for cls in elastic_classes(exp):
        for a, b in zip(cls, cls[1:], strict=False):
            m.model.add(rank(a) >= rank(b))


def canonical_jobs(exp: Expansion, jobs: dict[str, Assignment]) -> dict[str, Assignment]:
    """``jobs`` (variant ids) with the assignments of interchangeable elastic jobs handed out by
    size, largest to the first job of each class (what :func:`add_elastic_symmetry` asks)."""
    out = dict(jobs)
    inst = exp.instance
    for cls in elastic_classes(exp):
        given: list[tuple[int, Assignment]] = []
        for i in cls:
            for r, v in enumerate(exp.groups[i]):
                vid = inst.jobs[v].id
                if vid in out:
                    given.append((r, out.pop(vid)))
        given.sort(key=lambda ra: -ra[0])
        for i, (r, a) in zip(cls, given, strict=False):
            out[inst.jobs[exp.groups[i][r]].id] = a
    return out
