"""The policy families of contract version 2 as CP-SAT constraints on :class:`~optsched.exact.cpsat.RoundModel`.

One function per family, mirrored by ``formulations/policies.md``: :func:`add_quota_reclaim`,
:func:`add_move_budget`, :func:`add_forced_jobs`, :func:`add_drf`, :func:`add_hug`, :func:`add_packing`.
:func:`add_policy_constraints` adds those the round uses; :func:`solve_lexicographic` solves a
DRF, HUG or packing round in stages (the smallest dominant share or progress, then worth with that share kept,
then the whole free GPUs with the worth kept within the packing tolerance, then worth again). Every family is linear in the model's mode booleans; ``sel[j]`` (job j runs) is the
sum of its mode literals (at most one is true).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ortools.sat.python import cp_model

from optsched.exact.variants import original_jobs, original_selection, variants_of
from optsched.round_policies import (
    DRF_NO_TENANT,
    drf_capacity,
    drf_scale,
    drf_tenants,
    drf_usage,
    hug_coefficients,
    packing_tolerance,
)

if TYPE_CHECKING:
    from optsched.exact.cpsat import RoundModel

__all__ = ["DEADLINE_STAGE_SHARE", "DRF_STAGE_SHARE", "PACKING_STAGE_SHARE", "add_drf", "add_forced_jobs", "add_hug", "add_move_budget", "add_packing",
           "add_policy_constraints", "add_quota_reclaim", "gpus_in_use", "selection", "solve_lexicographic"]

#: share of CP-SAT's time limit for the first DRF stage (maximise the smallest dominant share)
DRF_STAGE_SHARE = 0.5
#: share of CP-SAT's time limit for the deadline stage of a round that cannot hold its urgent
#: jobs (run as many of them as the round can)
DEADLINE_STAGE_SHARE = 0.5
#: in a packing round, share of the time left that the worth stage gets (the packing stage, and
#: with a tolerance the final worth stage, share the rest)
PACKING_STAGE_SHARE = 0.5


def selection(m: RoundModel) -> dict[int, cp_model.LinearExprT]:
    """Per job index, the linear expression "job runs" (0 or 1)."""
    return {j: (sum(lits) if lits else 0) for j, lits in m.job_literals().items()}


def add_quota_reclaim(m: RoundModel, sel: dict[int, cp_model.LinearExprT]) -> None:
    """Quotas: ``used_t = sum_j gpus_j sel_j`` over tenant t's jobs (an elastic job's variants
    count their own sizes); ``borrow`` is true when any tenant holds more than its quota or any job
    without a tenant runs; a job j of tenant t with ``g_j <= quota_t`` that is left out while
    ``borrow`` holds forces ``used_t + g_j > quota_t`` (it does not fit in the rest of t's quota;
    ``g_j``: its gpus, an elastic job's smallest size)."""
    inst = m.instance
    quotas = inst.round.tenants or {}
    model = m.model
    total = sum(n.gpus for n in inst.nodes)
    # every quota tenant, also one whose jobs have no variant (all too large for their GPU types)
    members: dict[str | None, list[int]] = {t: [] for t in quotas}
    for d in m.data:
        members.setdefault(d.job.tenant if d.job.tenant in quotas else None, []).append(d.index)
    used = {t: sum(m.data[j].job.gpus * sel[j] for j in js) for t, js in members.items()}
    # one variable per group: each reclaim row below names it instead of repeating the whole sum
    # (O(jobs^2) terms on rounds with many quota jobs)
    for k, (t, expr) in enumerate(list(used.items())):
        if not isinstance(expr, int):
            var = model.new_int_var(0, sum(m.data[j].job.gpus for j in members[t]), f"used[{k}]")
            model.add(var == expr)
            used[t] = var
    borrow = model.new_bool_var("borrow")
    for t, expr in used.items():
        limit = quotas.get(t, 0) if t is not None else 0
        if isinstance(expr, int) and expr <= limit:
            continue
        model.add(expr <= limit + total * borrow)
    osel = original_selection(m, sel)  # the rule is about jobs, not an elastic job's variants
    for j, job in enumerate(original_jobs(m)):
        t = job.tenant
        if t not in quotas:
            continue
        g = min(job.sizes)
        if g > quotas[t]:
            continue
        if isinstance(osel[j], int):  # the job has no mode: it is always out
            model.add(used[t] >= quotas[t] + 1 - g).only_enforce_if(borrow)
            continue
        out = model.new_bool_var(f"out[{j}]")
        model.add(osel[j] == 0).only_enforce_if(out)
        model.add(osel[j] == 1).only_enforce_if(out.Not())
        model.add(used[t] >= quotas[t] + 1 - g).only_enforce_if([borrow, out])


def add_move_budget(m: RoundModel, sel: dict[int, cp_model.LinearExprT]) -> None:
    """Moves: ``sum over running j of (sel_j - stay_j) <= max_moves``, where ``stay_j`` is the
    stay-at-home literal of the job's mode (``h[j,p]`` on one node, ``stay[j]`` for a split job
    that keeps its nodes); any other mode of a running job counts as a move (a pooled mode may
    land on the job's node when read back, so the count can only overstate the moves). An elastic
    job runs if any variant does and stays only in the variant of its current size."""
    inst = m.instance
    home: dict[int, list[cp_model.IntVar]] = {}
    for (j, _p), var in m.h.items():
        home.setdefault(j, []).append(var)
    osel = original_selection(m, sel)
    terms = []
    for j, job in enumerate(original_jobs(m)):
        if job.placement is None or isinstance(osel[j], int):
            continue
        stays = []
        for v in variants_of(m, j):
            stays += home.get(v, [])
            if v in m.stay:
                stays.append(m.stay[v])
        terms.append(osel[j] - sum(stays))
    if terms:
        m.model.add(sum(terms) <= int(inst.round.max_moves or 0))


def add_forced_jobs(m: RoundModel, sel: dict[int, cp_model.LinearExprT], forced: list[int]) -> None:
    """Deadlines: every forced (urgent) job runs, ``sel_j = 1`` (``forced``: original job indices;
    an elastic job runs in one of its variants)."""
    osel = original_selection(m, sel)
    for j in forced:
        if isinstance(osel[j], int):  # no mode at all: the forcing is infeasible (the caller relaxes it)
            m.model.add_bool_or([])
        else:
            m.model.add(osel[j] == 1)


def add_pinned(m: RoundModel) -> None:
    """Pinned jobs (``preemptible=False``, running): the job's stay-at-home literal is true,
    ``sum_p h[j,p] = 1`` on one node, ``stay[j] = 1`` for a split job (the literals exist for
    every pinned job). Pinned jobs are never elastic, so the model's job is the round's job."""
    home: dict[int, list[cp_model.IntVar]] = {}
    for (j, _p), var in m.h.items():
        home.setdefault(j, []).append(var)
    for d in m.data:
        if not d.job.pinned:
            continue
        j = d.index
        stays = home.get(j, []) + ([m.stay[j]] if j in m.stay else [])
        if stays:
            m.model.add(sum(stays) == 1)
        else:  # no mode keeps it home (cannot happen on a valid round): the model says so
            m.model.add_bool_or([])


def add_drf(m: RoundModel, sel: dict[int, cp_model.LinearExprT]) -> cp_model.IntVar | None:
    """DRF: per tenant t (with a runnable job) and resource r of capacity ``cap_r > 0``, the fixed
    demand it holds ``U[t,r] = sum_j a[j,r] sel_j``, its scaled share ``x[t,r]`` with
    ``cap_r x[t,r] <= S U[t,r]`` (``x = (S / cap_r) U`` exactly when ``cap_r`` divides ``S``),
    ``D_t = max_r x[t,r]`` and ``drf_min <= D_t``. Returns ``drf_min`` (``None`` without tenants)."""
    inst, model = m.instance, m.model
    tenants = drf_tenants(inst)
    if not tenants:
        return None
    caps, s = drf_capacity(inst), drf_scale(inst)
    dmax = []
    shares = []
    for t, js in tenants.items():
        xs: list[cp_model.LinearExprT] = []
        top = 0
        for r, cap in enumerate(caps):
            if cap <= 0:
                continue
            terms = [(drf_usage(m.data[j].job)[r], sel[j]) for j in js if not isinstance(sel[j], int)]
            used = sum(a * v for a, v in terms if a)
            ub = s * sum(a for a, _v in terms) // cap
            top = max(top, ub)
            if s % cap == 0:
                xs.append(used * (s // cap) if ub else 0)
            else:
                x = model.new_int_var(0, ub, f"drf_x[{t},{r}]")
                model.add(cap * x <= s * used)
                xs.append(x)
        d = model.new_int_var(0, top, f"drf_D[{t}]")
        model.add_max_equality(d, xs or [0])
        shares.append(d)
        dmax.append(top)
    zmin = model.new_int_var(0, min(dmax), "drf_min")
    for d in shares:
        model.add(zmin <= d)
    return zmin


def add_hug(m: RoundModel) -> cp_model.IntVar | None:
    """HUG-style progress: per tenant t and resource r it demands, ``U[t,r]`` = what its jobs get,
    summed over every mode literal (a mode fixes the job's GPUs and grid point, so its GPUs, cores
    and GB are constants), and ``den x hug_min <= num x U[t,r]`` with ``(num, den)`` from
    :func:`~optsched.round_policies.hug_coefficients` (``num / den = S M_t / D[t,r]``, exact or
    rounded down), so ``hug_min <= min_t floor(S P_t)``. Coefficients come from the round as given
    (an elastic job's demand counts once, at its nominal size); each variant counts its own size.
    Returns the level variable (``None`` without tenants); stored as ``m.drf_min``."""
    inst, model = m.instance, m.model
    original = m.elastic.original if m.elastic is not None else inst
    s, coef = hug_coefficients(original)
    if not coef:
        return None

    def tenant(j: int) -> str:
        job = original.jobs[m.elastic.origin[j]] if m.elastic is not None else m.data[j].job
        return job.tenant if job.tenant is not None else DRF_NO_TENANT

    terms: dict[str, list[list[tuple[int, cp_model.IntVar]]]] = {t: [[], [], []] for t in coef}
    modes = [(j, p, v) for (j, _t, p), v in m.z.items()] + [(j, p, v) for (j, p), v in m.h.items()] \
        + [(j, p, v) for (j, _t, p), v in m.sp.items()]
    for j, p, v in modes:
        rows = terms.get(tenant(j))
        if rows is None:
            continue
        g, pt = m.data[j].job.gpus, m.data[j].points[p]
        for r, a in enumerate((g, g * pt.cpus, g * pt.mem)):
            if a:
                rows[r].append((a, v))
    caps = drf_capacity(original)
    zmin = model.new_int_var(0, s, "hug_min")
    aux = []
    for t, rows in coef.items():
        if not rows:
            model.add(zmin == 0)
            continue
        for r, num, den in rows:
            if not terms[t][r]:
                model.add(zmin == 0)
                continue
            top = min(caps[r], sum(a for a, _v in terms[t][r]))
            u = model.new_int_var(0, top, f"hug_U[{t},{r}]")
            model.add(u == cp_model.LinearExpr.weighted_sum([v for _a, v in terms[t][r]], [a for a, _v in terms[t][r]]))
            model.add(den * zmin <= num * u)
            aux.append((u, t, r, top))
    m.hug_aux = (zmin, aux)
    return zmin


def add_packing(m: RoundModel) -> cp_model.LinearExprT:
    """Packing: per node ``n`` with GPUs, a boolean ``f_n`` ("wholly idle") with
    ``usage_n <= gpus_n (1 - f_n)`` (``usage_n``: the GPUs the node's whole, home and split terms
    use, from ``add_node_capacity``); returns ``sum_n gpus_n f_n``, the whole free GPUs. A node no
    job can use is idle in every schedule and counts as a constant."""
    inst, model = m.instance, m.model
    terms: list[cp_model.LinearExprT] = []
    const = 0
    for n, node in enumerate(inst.nodes):
        if node.gpus <= 0:
            continue
        use = m.usage_g.get(n)
        if use is None:
            const += node.gpus
            continue
        f = model.new_bool_var(f"idle[{n}]")
        model.add(use <= node.gpus * (1 - f))
        terms.append(node.gpus * f)
    return sum(terms) + const


def gpus_in_use(m: RoundModel) -> cp_model.LinearExprT:
    """``sum_j g_j sel_j``: the GPUs the schedule runs (each mode literal of a job times its gang)."""
    return sum(m.data[j].job.gpus * sum(lits) for j, lits in m.job_literals().items() if lits)


#: an interleaved CP-SAT search (a deterministic budget) runs on one worker when its wall limit
#: is under this plus ``INTERLEAVED_WALL_PER_DT`` seconds per deterministic second, that is,
#: where the wall limit may cut it. OR-Tools 9.15 at times aborts the whole process ("Check
#: failed: solution->size() == postsolve_mapping.size()") when a wall limit cuts such a search
#: over several workers: measured on one round of a replay cut at 0.054 s on a busy machine, 16
#: of about 6,000 solves, and none of 1,500 with one worker or of 1,500 without the interleaved
#: search (the benchmarks' one-worker rounds, cut the same way, never aborted).
INTERLEAVED_MIN_WALL_S = 1.0
INTERLEAVED_WALL_PER_DT = 4.0


def safe_workers(prm: Any) -> None:
    """One worker for an interleaved search over several (CP-SAT parameters ``prm``) that its
    wall limit may cut before its deterministic limit (see :data:`INTERLEAVED_MIN_WALL_S`)."""
    if prm.interleave_search and prm.num_workers != 1 and math.isfinite(prm.max_deterministic_time):
        if prm.max_time_in_seconds < INTERLEAVED_MIN_WALL_S + INTERLEAVED_WALL_PER_DT * prm.max_deterministic_time:
            prm.num_workers = 1


def _stage(solver: cp_model.CpSolver, m: RoundModel, share: float, budget: dict[str, float]) -> Any:
    """One solve with ``share`` of the wall (and deterministic) time left in ``budget``."""
    prm = solver.parameters
    left = budget["end"] - time.perf_counter()
    prm.max_time_in_seconds = max(0.01, share * left)
    if math.isfinite(budget["dt"]):
        prm.max_deterministic_time = max(0.01, share * (budget["dt"] - budget["dt_used"]))
    safe_workers(prm)
    code = solver.solve(m.model)
    budget["dt_used"] += solver.deterministic_time
    return code


def solve_lexicographic(solver: cp_model.CpSolver, m: RoundModel, stats: dict[str, Any],
                        callback: cp_model.CpSolverSolutionCallback | None = None) -> Any:
    """Solve ``m``; with urgent jobs to run (``m.urgent_met``), a DRF or HUG level (``m.drf_min``)
    or a packing metric (``m.free_gpus``) in stages within the solver's time limit (wall and
    deterministic, split between the stages):

    0. Deadlines relaxed: maximise ``urgent_met`` (``DEADLINE_STAGE_SHARE`` of the time); fix
       ``urgent_met >=`` the count: the fewest misses the round allows.
    1. DRF or HUG: maximise ``drf_min`` (``DRF_STAGE_SHARE`` of the time); fix ``drf_min >=`` the level.
    2. Maximise worth (hinted with the previous stage's schedule).
    3. Packing: fix ``worth >= ceil((1 - tolerance) W)`` (``W``: stage 2's scaled worth) and
       ``gpus_in_use >= U`` (``U``: the GPUs stage 2's schedule runs: the tolerance pays for
       co-location and migration, not for leaving jobs out to idle nodes) and maximise the whole
       free GPUs. 4. With a tolerance > 0: fix ``free >=`` that and maximise worth again. Stages 2 and 3 get ``PACKING_STAGE_SHARE`` of the time left when a stage follows.

    Returns the CP-SAT status of the staged solve: OPTIMAL only when every stage was proven,
    FEASIBLE when a schedule exists but some stage was not proven; ``m.staged_schedule`` is then
    the last stage's schedule (a stage that finds nothing leaves the previous one). Sets
    ``m.worth_bound`` to the worth stage's objective bound: later stages only add constraints, so
    it bounds their schedules' worth, and it bounds the lexicographic optimum's worth even when
    stage 1 stops early (that optimum's level is at least the one fixed). Records
    ``deadline_met_proven`` (whether the most urgent jobs that can run was proven), ``drf_level``,
    ``drf_level_proven`` (``hug_level``, ``hug_level_proven`` in a HUG round), ``packing_worth_level``, ``packing_gpus_level``, ``packing_free_gpus``,
    ``packing_proven`` in ``stats``. ``callback`` sees each solution of a plain (one-stage) solve;
    the stages' objectives are levels, not worth, so it sees none of theirs."""
    zmin, free, met = m.drf_min, m.free_gpus, m.urgent_met
    if not m.staged:
        safe_workers(solver.parameters)
        return solver.solve(m.model, callback)
    prm = solver.parameters
    budget = {"end": time.perf_counter() + prm.max_time_in_seconds, "dt": prm.max_deterministic_time, "dt_used": 0.0}
    solved = (cp_model.OPTIMAL, cp_model.FEASIBLE)
    proven = True

    def done(code: Any) -> Any:
        if m.staged_schedule is None:
            return code
        return cp_model.OPTIMAL if proven and code == cp_model.OPTIMAL else cp_model.FEASIBLE

    if met is not None:
        m.model.maximize(met)
        code = _stage(solver, m, DEADLINE_STAGE_SHARE, budget)
        m.set_objective()
        if code not in solved:
            stats["deadline_met_proven"] = False
            if code in (cp_model.INFEASIBLE, cp_model.MODEL_INVALID):
                return code
            proven = False
        else:
            count = int(round(solver.objective_value))
            stats["deadline_met_proven"] = code == cp_model.OPTIMAL
            proven = code == cp_model.OPTIMAL
            m.model.add(met >= count)
            m.staged_schedule = m.read_schedule(solver)
            m.add_hint(m.staged_schedule)
    if zmin is not None:
        fair = m.instance.round.fairness  # "drf" or "hug": the stats' prefix
        m.model.maximize(zmin)
        code = _stage(solver, m, DRF_STAGE_SHARE, budget)
        stats.update({f"{fair}_stage1_status": solver.status_name(code), f"{fair}_stage1_wall_s": solver.wall_time})
        m.set_objective()
        if code not in solved:
            stats[f"{fair}_level_proven"] = False
            if code in (cp_model.INFEASIBLE, cp_model.MODEL_INVALID):
                return code
            proven = False
        else:
            level = int(solver.value(zmin))
            stats.update({f"{fair}_level": level, f"{fair}_level_proven": code == cp_model.OPTIMAL})
            proven = proven and code == cp_model.OPTIMAL
            m.model.add(zmin >= level)
            m.staged_schedule = m.read_schedule(solver)
            m.add_hint(m.staged_schedule)
    last = free is None
    code = _stage(solver, m, 1.0 if last else PACKING_STAGE_SHARE, budget)
    if code not in solved:
        return code if code in (cp_model.INFEASIBLE, cp_model.MODEL_INVALID) else done(code)
    m.worth_bound = solver.best_objective_bound
    m.staged_schedule = m.read_schedule(solver)
    proven = proven and code == cp_model.OPTIMAL
    if last:
        return done(code)
    tol = packing_tolerance(m.instance)
    worth = int(round(solver.objective_value))
    used = sum(a.gpus for a in m.staged_schedule.jobs.values())
    stats.update(packing_worth_status=solver.status_name(code), packing_worth_level=worth, packing_gpus_level=used)
    m.model.add(m.worth_expr() >= (math.ceil((1.0 - tol) * worth) if tol > 0 else worth))
    m.model.add(gpus_in_use(m) >= used)
    m.model.maximize(free)
    m.add_hint(m.staged_schedule)
    code = _stage(solver, m, PACKING_STAGE_SHARE if tol > 0 else 1.0, budget)
    if code not in solved:  # no schedule in the time left: the worth stage's stands, unproven
        stats["packing_proven"] = False
        proven = False
        return done(code)
    level = int(round(solver.objective_value))
    stats.update(packing_free_gpus=level, packing_proven=code == cp_model.OPTIMAL)
    proven = proven and code == cp_model.OPTIMAL
    m.staged_schedule = m.read_schedule(solver)
    if tol > 0:
        m.model.add(free >= level)
        m.set_objective()
        m.add_hint(m.staged_schedule)
        code = _stage(solver, m, 1.0, budget)
        if code not in solved:
            proven = False
            return done(code)
        m.staged_schedule = m.read_schedule(solver)
        proven = proven and code == cp_model.OPTIMAL
    return done(code)


def add_policy_constraints(m: RoundModel, forced: list[int], relaxed: Sequence[int] = ()) -> None:
    """The families the round uses (quotas, max_moves, DRF, packing), the forced urgent jobs and,
    where the round cannot hold them all, the count of ``relaxed`` ones (original job indices)
    that run (``m.urgent_met``)."""
    sel = selection(m)
    if m.instance.round.tenants is not None:
        add_quota_reclaim(m, sel)
    if m.instance.round.max_moves is not None:
        add_move_budget(m, sel)
    if forced:
        add_forced_jobs(m, sel, forced)
    if relaxed:
        osel = original_selection(m, sel)
        met = [osel[j] for j in relaxed if not isinstance(osel[j], int)]  # an int: no mode at all, never runs
        m.urgent_met = sum(met) if met else None
    if any(j.pinned for j in m.instance.jobs):
        add_pinned(m)
    if m.instance.round.fairness == "drf":
        m.drf_min = add_drf(m, sel)
    if m.instance.round.fairness == "hug":
        m.drf_min = add_hug(m)
    if m.instance.round.packing is not None:
        m.free_gpus = add_packing(m)
