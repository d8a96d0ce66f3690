"""The policy families of contract version 2 as CP-SAT constraints on :class:`~optsched.exact.cpsat.RoundModel`.

One function per family, mirrored by ``formulations/policies.md``: :func:`add_quota_reclaim`,
:func:`add_move_budget`, :func:`add_forced_jobs`. :func:`add_policy_constraints` adds those the
round uses. Every family is linear in the model's mode booleans; ``sel[j]`` (job j runs) is the
sum of its mode literals (at most one is true).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

if TYPE_CHECKING:
    from optsched.exact.cpsat import RoundModel

__all__ = ["add_forced_jobs", "add_move_budget", "add_policy_constraints", "add_quota_reclaim", "selection"]


def selection(m: RoundModel) -> dict[int, cp_model.LinearExprT]:
    """Per job index, the linear expression "job runs" (0 or 1)."""
    return {j: (sum(lits) if lits else 0) for j, lits in m.job_literals().items()}


def add_quota_reclaim(m: RoundModel, sel: dict[int, cp_model.LinearExprT]) -> None:
    """Quotas: ``used_t = sum_j gpus_j sel_j`` over tenant t's jobs; ``borrow`` is true when any
    tenant holds more than its quota or any job without a tenant runs; a job j of tenant t with
    ``gpus_j <= quota_t`` that is left out while ``borrow`` holds forces ``used_t + gpus_j > quota_t``
    (it does not fit in the rest of t's quota)."""
    inst = m.instance
    quotas = inst.round.tenants or {}
    model = m.model
    total = sum(n.gpus for n in inst.nodes)
    members: dict[str | None, list[int]] = {}
    for d in m.data:
        members.setdefault(d.job.tenant if d.job.tenant in quotas else None, []).append(d.index)
    used = {t: sum(m.data[j].job.gpus * sel[j] for j in js) for t, js in members.items()}
    borrow = model.new_bool_var("borrow")
    for t, expr in used.items():
        limit = quotas.get(t, 0) if t is not None else 0
        if isinstance(expr, int) and expr <= limit:
            continue
        model.add(expr <= limit + total * borrow)
    for t, js in members.items():
        if t is None:
            continue
        for j in js:
            g = m.data[j].job.gpus
            if g > quotas[t]:
                continue
            if isinstance(sel[j], int):  # the job has no mode: it is always out
                model.add(used[t] >= quotas[t] + 1 - g).only_enforce_if(borrow)
                continue
            out = model.new_bool_var(f"out[{j}]")
            model.add(sel[j] == 0).only_enforce_if(out)
            model.add(sel[j] == 1).only_enforce_if(out.Not())
            model.add(used[t] >= quotas[t] + 1 - g).only_enforce_if([borrow, out])


def add_move_budget(m: RoundModel, sel: dict[int, cp_model.LinearExprT]) -> None:
    """Moves: ``sum over running j of (sel_j - stay_j) <= max_moves``, where ``stay_j`` is the
    stay-at-home literal of the job's mode (``h[j,p]`` on one node, ``stay[j]`` for a split job
    that keeps its nodes); any other mode of a running job counts as a move (a pooled mode may
    land on the job's node when read back, so the count can only overstate the moves)."""
    inst = m.instance
    home: dict[int, list[cp_model.IntVar]] = {}
    for (j, _p), var in m.h.items():
        home.setdefault(j, []).append(var)
    terms = []
    for d in m.data:
        if d.job.placement is None or isinstance(sel[d.index], int):
            continue
        stays = list(home.get(d.index, []))
        if d.index in m.stay:
            stays.append(m.stay[d.index])
        terms.append(sel[d.index] - sum(stays))
    if terms:
        m.model.add(sum(terms) <= int(inst.round.max_moves or 0))


def add_forced_jobs(m: RoundModel, sel: dict[int, cp_model.LinearExprT], forced: list[int]) -> None:
    """Deadlines: every forced (urgent) job runs, ``sel_j = 1``."""
    for j in forced:
        if isinstance(sel[j], int):  # no mode at all: the forcing is infeasible (the caller relaxes it)
            m.model.add_bool_or([])
        else:
            m.model.add(sel[j] == 1)


def add_policy_constraints(m: RoundModel, forced: list[int]) -> None:
    """The families the round uses (quotas, max_moves) and the forced urgent jobs."""
    sel = selection(m)
    if m.instance.round.tenants is not None:
        add_quota_reclaim(m, sel)
    if m.instance.round.max_moves is not None:
        add_move_budget(m, sel)
    if forced:
        add_forced_jobs(m, sel, forced)
