"""The CP-SAT solve of one round: hints, an optional warm-start stage, the CP-SAT stages, the bound.

:func:`solve_cpsat` is what ``cpsat`` runs (:class:`optsched.exact.cpsat.CpSatSolver`, with
``lns`` as its warm-start stage) and what ``lns`` runs on each neighbourhood
(:class:`CpSatCore`, with ``lns`` itself as the warm-start stage of a neighbourhood large enough
for one). The warm-start stage is passed in, so this module imports no search that calls it.

The solve never exceeds its time limit: building checks the clock and, if the budget runs out,
returns the best hint schedule with status ``TIME_LIMIT``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ortools.sat.python import cp_model

from optsched.elastic import expand, has_elastic
from optsched.exact.fixing import config_fixing
from optsched.exact.hint import greedy_schedule
from optsched.exact.model import OutOfTime, build_model, make_scale
from optsched.exact.options import PORTFOLIOS, _check_options
from optsched.exact.policies import solve_lexicographic
from optsched.exact.prep import JobData, hug_keep, hug_points_of, job_data
from optsched.exact.scaling import ValueScale
from optsched.heuristics.fungible_greedy import FungibleGreedy
from optsched.mip.bound import lp_bound_within
from optsched.mip.bound_worker import MIN_SECONDS, BoundWorker
from optsched.model import Instance
from optsched.policy_repair import repair
from optsched.result import Result, Status
from optsched.round_policies import (
    deadline_misses,
    fair_level,
    fair_scale,
    packing_tolerance,
    policy_families,
    urgent_jobs,
    whole_free_gpus,
)
from optsched.schedule import Schedule
from optsched.trajectory import Trajectory, current, recorded
from optsched.values import schedule_value

__all__ = ["LNS_FROM_CELLS", "LNS_MOSTLY_FROM_CELLS", "CpSatCore", "greedy_starts", "solve_cpsat", "start_bound_worker"]

#: the method name results report
NAME = "cpsat"

#: rounds with more job x node cells than this get an lns warm start by default (measured: at
#: 32 x 120 and beyond, lns finds 10-20 % better schedules than CP-SAT in 10 s, and CP-SAT did
#: not improve on a 4 s lns start in the next 6 s)
LNS_FROM_CELLS = 1024
#: ... and above this many cells 97 % of the time: the CP-SAT stage after it is only a chance to
#: polish (measured at 64 x 256, 4 rounds, load 7.5: CP-SAT got 0-0.6 deterministic seconds after
#: a 70 % lns stage and never improved it, a 90 % share found better schedules on all 4, +4 % in
#: sum; with 90 % it got 0.0 deterministic seconds at 64 x 256 and 0.04-0.34 at 32 x 120, where
#: it never improved the lns schedule either: core-quiet.csv, core-run3.csv)
LNS_MOSTLY_FROM_CELLS = 2048

#: seconds kept back from the time limit for reading the solution and building the Result, plus
#: this much per job (measured: at 4,000 jobs reading back and checking take about 0.4 s), but at
#: most half the limit (a short limit still searches: reading back a small round takes
#: milliseconds)
_RESERVE_S = 0.1
_RESERVE_PER_JOB_S = 1e-4
#: time kept for the LP-relaxation bound when CP-SAT ends without a proof (measured: 0.07 s at
#: 64 x 256 once loaded, 0.3 s on first use), but at most this share of the time left for the
#: search: with less than 0.05 s left the knapsack bound stands in for the LP (milliseconds)
_LP_BOUND_S = 0.3
_LP_BOUND_SHARE = 1 / 3


#: rounds without an lns stage (option ``config_fixing``): when CP-SAT has not proven the round
#: after this many seconds, the configuration LP's reduced costs rule out what no schedule at
#: least as good as the incumbent uses (optsched.exact.fixing) and CP-SAT re-solves the restricted
#: model with the time left. Not with ``deterministic_time``: when the stage starts and what the
#: LP (limited by wall time) fixes would depend on the machine's load, and such runs promise the
#: same schedule for the same seed and limit. Measured (formulations/integrated.md, "Configuration
#: fixing"): 8 of the 12 small bench rounds are proven within 2 s anyway; `small/base 8x24 seed 0`
#: is proven in ~30 s with the fixing, not in 60 s without.
FIXING_AFTER_S = 2.0
#: the configuration LP gets at most this many seconds (and a quarter of what is left)
FIXING_BOUND_S = 2.0


def _not_worse(a: tuple, b: tuple) -> bool:
    """``a >= b`` for schedule keys whose last entry is a worth: worths that differ only by float
    summation order (relative 1e-9) tie, so a proven optimum is not beaten by an equal hint."""
    if a[:-1] != b[:-1]:
        return a[:-1] > b[:-1]
    return a[-1] >= b[-1] - 1e-9 * max(1.0, abs(b[-1]))


_STATUS = {cp_model.OPTIMAL: Status.OPTIMAL, cp_model.FEASIBLE: Status.TIME_LIMIT, cp_model.UNKNOWN: Status.TIME_LIMIT}


def _deadline(instance: Instance, start: float, time_limit: float) -> float:
    """When a call started at ``start`` must stop working: the limit less the read-back reserve."""
    return start + max(0.0, time_limit - min(_RESERVE_S + _RESERVE_PER_JOB_S * len(instance.jobs), time_limit / 2))


def _lns_share(instance: Instance, share: float | None) -> float:
    """The share of the time for the lns warm start (option ``lns_share``; None: by size)."""
    if share is not None:
        return share
    cells = len(instance.jobs) * len(instance.nodes)
    return 0.97 if cells > LNS_MOSTLY_FROM_CELLS else 0.7 if cells > LNS_FROM_CELLS else 0.0


def _bound_worker(instance: Instance, deadline: float, schedules: list[Schedule]) -> Any:
    """A started bound worker ending at ``deadline`` (less the LP fallback's time), or None where
    cpsat starts none: too little time left, or a round the configuration LP does not handle."""
    if deadline - time.perf_counter() > MIN_SECONDS and BoundWorker.applies(instance):
        return BoundWorker(instance, max(0.0, deadline - time.perf_counter() - _LP_BOUND_S), schedules)
    return None


def start_bound_worker(instance: Instance, time_limit: float, schedules: list[Schedule] | None = None) -> Any:
    """Start now the bound worker a ``cpsat`` call of ``time_limit`` seconds on ``instance`` would
    start after its greedy hints (None where it would start none: no lns stage, too little time,
    a round the configuration LP does not handle). Pass it as ``bound_worker=`` to that call: a
    caller that spends the first part of the time limit on its own hint (``cpsat+maifs``) gives
    the configuration LP that time too. The call collects (stops) it."""
    if _lns_share(instance, None) == 0:
        return None
    deadline = _deadline(instance, time.perf_counter(), time_limit)
    return _bound_worker(instance, deadline, list(schedules or []))


def greedy_starts(instance: Instance, data: list[JobData] | None = None, *, seed: int = 0) -> list[tuple[str, Schedule]]:
    """The named greedy schedules ``cpsat`` starts from when it builds them itself: ``greedy``
    (:func:`~optsched.exact.hint.greedy_schedule`), ``greedy-dense`` (running jobs by value per
    GPU, not first; only in a round with running jobs) and ``fungible-greedy``'s schedule (elastic:
    sizes chosen by marginal value; HUG: it fills by progress, which the greedy hints know nothing
    of). ``data``: the round's :func:`~optsched.exact.prep.job_data` (default: built here). A
    caller that has built them for the round passes them back as option ``greedy_starts``, and
    ``cpsat`` builds none (the same schedules, so the same answer)."""
    data = job_data(instance) if data is None else data
    out = [("greedy", greedy_schedule(instance, data))]
    if any(j.placement for j in instance.jobs):
        out.append(("greedy-dense", greedy_schedule(instance, data, running_first=False)))
    out.append(("fungible-greedy", FungibleGreedy().solve(instance, time_limit=1.0, seed=seed).schedule))  # (no time limit of its own)
    return out


class _Incumbents(cp_model.CpSolverSolutionCallback):
    """Records each CP-SAT incumbent into a trajectory: its scaled worth less the scale's
    rounding error (:attr:`ValueScale.max_error`, so never above the schedule's true worth) and
    the best bound at that moment."""

    def __init__(self, rec: Trajectory, scale: ValueScale) -> None:
        super().__init__()
        self._rec, self._scale = rec, scale

    def on_solution_callback(self) -> None:
        sc = self._scale
        obj = max(0.0, sc.to_float(self.objective_value) - sc.max_error)
        self._rec.record(obj, max(sc.bound(self.best_objective_bound), obj))


def _ranks_by_worth(instance: Instance) -> bool:
    """Whether cpsat ranks this round's schedules by worth alone (no deadline misses, fairness
    level or packing first): only then is every better incumbent worth more."""
    families = policy_families(instance)
    return not ({"drf", "hug", "packing"} & families) and not (families and urgent_jobs(instance))


#: the warm-start stage: ``LargeNeighbourhoodSearch().solve``'s signature (instance, time_limit,
#: seed, hint, bound, starts, data, bound_worker, deterministic_time)
WarmStart = Callable[..., Result]


def solve_cpsat(instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None,
                warm_start: WarmStart, **options: Any) -> Result:
    """Solve ``instance`` as ``cpsat`` does (options: :data:`optsched.exact.options.DEFAULT_OPTIONS`),
    with ``warm_start`` as the warm-start stage of rounds that get one (option ``lns_share``)."""
    start = time.perf_counter()
    deadline = _deadline(instance, start, time_limit)
    opts = _check_options(options)
    # the trajectory (optsched.trajectory): the hints, the lns stage, CP-SAT's incumbents and
    # bounds as they come, the LP bounds; in rounds ranked by more than worth only the result
    rec = current()
    if not _ranks_by_worth(instance):
        rec.mute()
    # elastic jobs (contract v2): the model is built on the rigid round of their size variants
    exp = expand(instance) if has_elastic(instance) else None
    model_inst = instance if exp is None else exp.instance
    # HUG (or a usage floor): cores and GB count, so dominated points may matter; every point on
    # small rounds, else the Pareto ones, demand points and the candidates' points (prep.hug_keep)
    hugish = instance.round.fairness == "hug" or bool(opts["usage_floor"])
    reduced = hugish and hug_keep(model_inst, ()) is not None
    data = job_data(model_inst, prune=reduced if hugish else None,
                    keep={j.id: {j.demand} for j in model_inst.jobs} if reduced else None)
    scale = make_scale(model_inst, data)
    candidates = []
    if hint is not None:
        candidates.append(hint)
    greedy: list[tuple[str, Schedule]] | None = None  # named, for the lns stage to reuse
    if opts["greedy_hint"] or hint is None:
        if opts["greedy_starts"] is not None and not hugish:  # the caller built them (greedy_starts), on the same job data
            greedy = list(opts["greedy_starts"])
        else:
            with rec.nested():
                greedy = greedy_starts(instance, data if exp is None else None, seed=seed)
        candidates += [s for _name, s in greedy]
    share = _lns_share(instance, opts["lns_share"])
    lp_bound = None
    stats_lns: dict[str, Any] = {}
    # a worker the caller started earlier (start_bound_worker) is used and collected like our own
    worker = None if isinstance(opts["bound_worker"], bool) else opts["bound_worker"]
    if share > 0:
        if worker is None and opts["bound_worker"]:
            # the configuration-LP bound on the core lns leaves free (else lns computes the LP bound)
            worker = _bound_worker(instance, deadline, candidates)
        # a share of what is left: preparing a 1,024 x 4,000 round (greedy hint, job data) takes ~1 s
        lns_limit = share * max(0.0, deadline - time.perf_counter())
        dt = opts["deterministic_time"]
        if dt is not None:  # lns spends share x the deterministic budget; wall time is a safety only
            lns_limit = max(0.0, deadline - time.perf_counter() - _LP_BOUND_S)
        # lns reports a bound only without our worker, and starts none of its own if we may not
        bound = False if worker is not None else True if opts["bound_worker"] else "lp"
        # the greedy starts and job data built above, not built again by lns (~1 s at 1,024 x 4,000)
        with rec.nested():
            warm = warm_start(instance, time_limit=lns_limit, seed=seed, hint=hint, bound=bound,
                                                    starts=greedy, data=data if exp is None else None, bound_worker=worker,
                                                    **({} if dt is None else {"deterministic_time": share * dt}))
        stats_lns = {"lns_deterministic_s": warm.stats.get("deterministic_s"), "lns_price_updates": warm.stats.get("price_updates", 0)}
        candidates.append(warm.schedule)
        lp_bound = warm.bound
    # policy rounds (contract v2): hints keep the rules; fewer deadline misses first, then worth
    policies = policy_families(instance)
    forced: list[int] | None = None
    if policies:
        candidates = [repair(instance, s) for s in candidates]
        forced = [instance.job_idx(j) for j in urgent_jobs(instance)]

    fair = instance.round.fairness if {"drf", "hug"} & policies else None
    packing = "packing" in policies
    #: in a packing round, schedules within the tolerance of the best worth of their class (the
    #: same deadline misses and fair level) that run at least as many GPUs as the worth stage's
    #: schedule of that class rank by whole free GPUs first: class -> worth, GPUs
    worth_ref: dict[tuple[int, int], float] = {}
    gpus_ref: dict[tuple[int, int], int] = {}

    def prefix(s: Schedule) -> tuple[int, int]:
        # misses rank first in every policy round, also after a round that cannot hold its urgent
        # jobs drops the forcing (``forced`` is then empty): the relaxed optimum may miss more
        return (-len(deadline_misses(instance, s)) if policies else 0, fair_level(instance, s.jobs) if fair else 0)

    def key(s: Schedule, v: float) -> tuple[int, int, bool, float, float]:
        p = prefix(s)
        ref = worth_ref.get(p, v)
        close = packing and v >= (1.0 - packing_tolerance(instance)) * ref - 1e-6 * max(1.0, ref) \
            and sum(a.gpus for a in s.jobs.values()) >= gpus_ref.get(p, 0)
        return (*p, close, whole_free_gpus(instance, s.jobs) if close else 0, v)

    if reduced:  # the candidates' points join the model, so each hint keeps its progress
        keep = hug_points_of(instance, candidates)  # not hug_keep: its size test is on the original round
        origin = [exp.original.jobs[exp.origin[v]].id for v in range(len(model_inst.jobs))] if exp is not None \
            else [j.id for j in model_inst.jobs]
        data = job_data(model_inst, prune=True, keep={j.id: keep.get(o, set()) | {j.demand} for j, o in zip(model_inst.jobs, origin, strict=True)})
        scale = make_scale(model_inst, data)
    values = [schedule_value(instance, s) for s in candidates]
    for v in values:  # the hints' worths (the lns stage recorded its own events)
        rec.record(v)
    if packing:
        for c, v in zip(candidates, values, strict=True):
            worth_ref[prefix(c)] = max(v, worth_ref.get(prefix(c), v))
    best_i = max(range(len(candidates)), key=lambda i: key(candidates[i], values[i]))
    incumbent, incumbent_value = candidates[best_i], values[best_i]
    stats: dict[str, Any] = {"hint_objective": incumbent_value, "scale": scale.scale, "lns_share": share,
                             "lp_bound": lp_bound, **stats_lns}
    if hugish:
        stats["hug_points"] = "reduced" if reduced else "all"

    try:
        model = build_model(model_inst, data, scale, opts, deadline, forced, exp)
    except OutOfTime:
        stats["build_s"] = time.perf_counter() - start
        stats["note"] = "time limit reached while building the model; returning the hint"
        if worker is not None:
            lp_bound = worker.collect()
            stats.update(worker.stats, lp_bound=lp_bound)
        return Result(incumbent, Status.TIME_LIMIT, incumbent_value, lp_bound, NAME, "exact",
                      time.perf_counter() - start, stats)
    model.add_hint(incumbent)
    stats["build_s"] = time.perf_counter() - start
    stats.update(model.stats())

    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = opts["num_workers"]
    prm.random_seed = seed
    # CP-SAT overshoots its wall limit by up to ~0.2 s on a loaded 2-core machine (measured)
    # and the LP bound (asked for only when CP-SAT proves nothing) needs up to _LP_BOUND_S
    left = deadline - time.perf_counter()
    keep = min(_LP_BOUND_S, _LP_BOUND_SHARE * max(0.0, left)) if lp_bound is None and opts["lp_fallback"] else 0.0
    left -= keep
    prm.max_time_in_seconds = max(0.01, left - min(0.2, 0.03 * left))
    if opts["deterministic_time"] is not None:
        # the lns stage spent its share of the budget
        prm.max_deterministic_time = float(opts["deterministic_time"]) * (1.0 - share)
        # reproducible: with several workers only the interleaved search is deterministic
        prm.interleave_search = True
    prm.log_search_progress = bool(opts["log"])
    portfolio = opts["portfolio"]
    if portfolio == "auto":
        # the proof portfolio on rounds CP-SAT is meant to close; with an lns warm start (large
        # rounds) CP-SAT's own LNS workers keep improving the incumbent instead
        portfolio = "proof" if opts["num_workers"] == 2 and share == 0 else "default"
    stats["portfolio"] = portfolio
    for name, value in [*PORTFOLIOS[portfolio].items(), *(opts["cp_params"] or {}).items()]:
        if isinstance(value, (list, tuple)):  # a repeated field: the later setting replaces the earlier
            getattr(prm, name).clear()
            getattr(prm, name).extend(value)
        else:
            setattr(prm, name, value)
    dt_total = opts["deterministic_time"]
    fixing = bool(opts["config_fixing"]) and share == 0 and not policies and exp is None \
        and left > 2 * FIXING_AFTER_S and dt_total is None
    if fixing:
        prm.max_time_in_seconds = FIXING_AFTER_S
    callback = None
    if rec.active:  # every incumbent and every better bound, in the result's unit
        callback = _Incumbents(rec, scale)
        solver.best_bound_callback = lambda b: rec.record(bound=max(scale.bound(b), rec.objective or 0.0))
    code = solve_lexicographic(solver, model, stats, callback)
    if fixing and code in (cp_model.FEASIBLE, cp_model.UNKNOWN):
        if code == cp_model.FEASIBLE:
            found = model.read_schedule(solver)
            found_value = schedule_value(instance, found)
            if found_value > incumbent_value:
                incumbent, incumbent_value = found, found_value
        stats["stage1_deterministic_s"] = solver.deterministic_time
        stats["stage1_bound"] = scale.bound(solver.best_objective_bound) if code == cp_model.FEASIBLE else None
        fix = config_fixing(model_inst, data, incumbent_value, schedules=[incumbent],
                            time_limit=min(FIXING_BOUND_S, 0.25 * max(0.0, deadline - time.perf_counter())))
        try:
            model = build_model(model_inst, data, scale, opts, deadline, None, None, fix)
        except OutOfTime:
            stats["note"] = "time limit reached while building the fixed model; returning the incumbent"
            bound = fix.bound if fix is not None else stats["stage1_bound"]
            return Result(incumbent, Status.TIME_LIMIT, incumbent_value, None if bound is None else max(bound, incumbent_value),
                          NAME, "exact", time.perf_counter() - start, stats)
        model.add_hint(incumbent)
        if fix is not None:
            stats["fixing"] = fix.stats
            # valid for every schedule at least as good as the incumbent (the final bound is at least that)
            lp_bound = fix.bound
            keep = 0.0
            rec.record(bound=max(fix.bound, incumbent_value))
        prm.max_time_in_seconds = max(0.01, deadline - time.perf_counter() - keep - 0.2)
        code = solve_lexicographic(solver, model, stats, callback)
    if code == cp_model.INFEASIBLE and forced:
        # the round cannot hold every urgent job: solve without forcing them, report the misses
        stats["forcing_infeasible"] = sorted(instance.jobs[j].id for j in forced)
        relaxed, forced = forced, []
        try:  # as many of them as the round holds, then the rest of the ranking
            model = build_model(model_inst, data, scale, opts, deadline, forced, exp, relaxed=relaxed)
        except OutOfTime:
            stats["note"] = "time limit reached while rebuilding without forced jobs; returning the hint"
            return Result(incumbent, Status.TIME_LIMIT, incumbent_value, lp_bound, NAME, "exact",
                          time.perf_counter() - start, {**stats, "deadline_misses": deadline_misses(instance, incumbent)})
        model.add_hint(incumbent)
        prm.max_time_in_seconds = max(0.01, deadline - time.perf_counter() - keep)
        code = solve_lexicographic(solver, model, stats)
    stats.update(cpsat_status=solver.status_name(code), cpsat_workers=solver.parameters.num_workers, wall_s=solver.wall_time,
                 deterministic_s=solver.deterministic_time + stats.get("stage1_deterministic_s", 0.0),
                 branches=solver.num_branches, conflicts=solver.num_conflicts)
    if code == cp_model.INFEASIBLE and opts["usage_floor"]:  # the floor is the caller's: no schedule keeps it
        stats["usage_floor_infeasible"] = True
        return Result(incumbent, Status.FEASIBLE, incumbent_value, None, NAME, "exact", time.perf_counter() - start, stats)
    if code in (cp_model.INFEASIBLE, cp_model.MODEL_INVALID):
        raise RuntimeError(f"cpsat: the round model is {solver.status_name(code)} for {instance.name} (a bug: the empty schedule is feasible)")
    status = _STATUS[code]
    schedule, objective = incumbent, incumbent_value
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        found = model.staged_schedule if model.staged_schedule is not None else model.read_schedule(solver)
        found_value = schedule_value(instance, found)
        if packing:  # the packing stage's references, for the found schedule's class: the worth stage's worth and GPUs
            p = prefix(found)
            worth_ref[p] = max(worth_ref.get(p, found_value), stats.get("packing_worth_level", 0) / scale.scale, found_value)
            gpus_ref[p] = stats.get("packing_gpus_level", 0)
        found_key, incumbent_key = key(found, found_value), key(incumbent, incumbent_value)
        if _not_worse(found_key, incumbent_key):
            schedule, objective = found, found_value
        elif status is Status.OPTIMAL and found_key[:-1] != incumbent_key[:-1]:
            # a hint with fewer deadline misses (or a higher fair level) beat the relaxed optimum;
            # a hint worth more only by the scaling's rounding stays proven: the bound covers it
            status = Status.FEASIBLE
    if worker is not None:
        # with a deterministic budget the wall-clock limit is only a safety: no waiting for it
        lp_bound = worker.collect(wait_until=deadline if opts["deterministic_time"] is None else None)
        stats.update(worker.stats, lp_bound=lp_bound)
        if lp_bound is not None:
            rec.record(bound=max(lp_bound, objective))
    # a reduced HUG model's worth bound covers only schedules over its points: a schedule at a
    # point it left out may reach the level with more worth, so only the LP bound stands
    hug_reduced = reduced and instance.round.fairness == "hug"
    if (code != cp_model.OPTIMAL or hug_reduced) and lp_bound is None and opts["lp_fallback"]:
        lp_bound = lp_bound_within(instance, deadline, stats)
        stats["lp_bound"] = lp_bound
        if lp_bound is not None:
            rec.record(bound=max(lp_bound, objective))
    bound = None
    # a staged solve bounds the worth only where its worth stage ran to a schedule: the solver's
    # last objective bound may be another stage's, or 0 from a stage that never searched
    raw = model.worth_bound if model.staged else solver.best_objective_bound
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE) and not hug_reduced and raw is not None:
        # a proven bound on the scaled objective, plus the worst-case rounding error
        bound = scale.bound(raw)
    if lp_bound is not None:
        bound = lp_bound if bound is None else min(bound, lp_bound)
    if bound is not None:
        bound = max(bound, objective)
    if forced is not None:
        stats["deadline_misses"] = deadline_misses(instance, schedule)
        stats["deadline_met"] = len(urgent_jobs(instance)) - len(stats["deadline_misses"])
    if fair == "hug" and reduced and "hug_level_proven" in stats:  # proven over the model's points only
        stats["hug_level_proven_reduced"] = stats["hug_level_proven"]
        stats["hug_level_proven"] = False
    if fair:  # the smallest dominant share (progress) is proven maximal only when stage 1 proved it
        stats["drf_min_share" if fair == "drf" else "hug_min_progress"] = fair_level(instance, schedule.jobs) / fair_scale(instance)
        status = Status.TIME_LIMIT if status is Status.OPTIMAL and not stats.get(f"{fair}_level_proven", True) else status
    if packing:
        stats["whole_free_gpus"] = whole_free_gpus(instance, schedule.jobs)
    return Result(schedule, status, objective, bound, NAME, "exact", time.perf_counter() - start, stats)



class CpSatCore:
    """CP-SAT on one round (:func:`solve_cpsat`) with the warm-start stage it is given: what
    ``lns`` solves each neighbourhood with."""

    name = NAME

    def __init__(self, warm_start: WarmStart) -> None:
        self.warm_start = warm_start

    @recorded
    def solve(self, instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None, **options: Any) -> Result:
        return solve_cpsat(instance, time_limit=time_limit, seed=seed, hint=hint, warm_start=self.warm_start, **options)
