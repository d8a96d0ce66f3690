"""The round's MIP (:mod:`optsched.mip.description`) solved by SCIP, CBC (both via OR-Tools MPSolver) and PuLP's CBC.

All three solve the very same :class:`~optsched.mip.linear.LinearModel`; only the translation and
the reading of statuses differ. Each solver:

- honours ``time_limit`` (model building counts against it; the solver gets what is left),
- maps its status to :class:`~optsched.result.Status`: ``OPTIMAL`` when optimality is proven,
  ``TIME_LIMIT`` with the incumbent (possibly the empty schedule) otherwise,
- reads integers with ``round`` and refuses (``SolverBug``) to return a schedule the independent
  checker rejects: that would be a formulation bug, never something to hide,
- reports ``objective`` recomputed from the schedule by :mod:`optsched.values` and ``bound`` as the
  solver's proven dual bound (MPSolver ``Objective().BestBound()``); PuLP exposes no dual bound, so
  its ``bound`` is the optimum when CBC proved optimality and ``None`` otherwise. A final bound
  below the objective is no bound: it is reported as ``None`` with ``stats["warning"]``, and an
  ``optimal`` claim with it becomes ``feasible``,
- refuses (``InputError``) rounds whose value span exceeds :data:`optsched.limits.MAX_VALUE_SPAN` and
  rounds above its size in :data:`optsched.limits.MAX_CELLS` (it would not answer within its time limit).

Greedy (option ``greedy``, default on): the greedy schedule of :mod:`optsched.exact.hint` (the
one that seeds CP-SAT) is computed first; SCIP gets it as hint when the caller gave none (or a
worse one), and every solver returns it when time runs out with a worse incumbent or none
(``stats["incumbent_from"]`` says ``"greedy"``). ``greedy=False`` measures the bare solver.

Trajectories (:mod:`optsched.trajectory`): MPSolver's Python interface has no incumbent
callback and PuLP runs CBC as a separate program, so a MIP solve's trajectory is the greedy
schedule (when computed) and the final result.

Contract-v2 rounds: the description holds elastic gangs, the move budget and tenant quotas
(:data:`~optsched.mip.description.MIP_FAMILIES`), so these solvers solve those rounds exactly too.

Hints: SCIP takes them (``MPSolver.SetHint``, the hint schedule encoded column by column). CBC
through MPSolver silently drops hints, so :class:`CbcSolver` does not pass them and says
``hint: "ignored (MPSolver's CBC interface drops hints)"`` in ``stats``. PuLP is registered without
hints. Seeds: SCIP ``randomization/randomseedshift``; PuLP's CBC ``randomSeed``/``randomCbcSeed``;
MPSolver's CBC accepts no solver-specific parameters, so its seed is ignored (and ``stats`` say so).
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

from optsched.checker import check_schedule
from optsched.errors import InputError, SolverBug
from optsched.exact.hint import greedy_schedule
from optsched.limits import check_size, check_value_span
from optsched.mip.backends import to_mpsolver, to_pulp
from optsched.mip.description import RoundMip, build
from optsched.mip.options import MipOptions
from optsched.model import Instance
from optsched.policy_repair import repair
from optsched.result import Result, Status
from optsched.round_policies import policy_families
from optsched.schedule import Schedule
from optsched.trajectory import current, recorded
from optsched.values import schedule_value

__all__ = ["CbcSolver", "PulpSolver", "ScipSolver"]

#: relative MIP gap at which the solvers stop (their defaults, 1e-4, would break 1e-6 agreement)
MIP_GAP = 1e-9
#: seconds kept back from the time limit for reading the solution and checking it, at most half the limit
_RESERVE_S = 0.05
#: a dual bound this large is a solver's stand-in for infinity (SCIP's is 1e20), not a bound
_NO_BOUND = 1e19


class _MipSolver:
    name = "mip"
    takes_hint = False

    @recorded
    def solve(self, instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None, **options: Any) -> Result:
        opts = MipOptions.from_mapping(options, method=self.name)
        num_threads = opts.num_threads
        # what solve_round checks before every method, again for direct callers: a value span the
        # solver's tolerances cannot keep apart, or a round too large to answer within the time limit
        check_value_span(instance)
        check_size(instance, self.name)
        start = time.perf_counter()
        stats: dict[str, Any] = {}
        fallback = Schedule.empty(instance.name)
        if opts.greedy:
            fallback = greedy_schedule(instance)
            if policy_families(instance):  # the greedy ignores quotas and the move budget
                fallback = repair(instance, fallback)
            stats["greedy_value"] = schedule_value(instance, fallback)
            current().record(stats["greedy_value"])  # the trajectory's start: MPSolver and PuLP report no incumbents while solving
            stats["greedy_s"] = time.perf_counter() - start
        t0 = time.perf_counter()
        mip = build(instance)
        stats.update(build_s=time.perf_counter() - t0, **mip.model.stats())
        if mip.model.num_vars == 0:  # no job fits anywhere: the empty schedule is optimal
            return self._result(instance, Schedule.empty(instance.name), Status.OPTIMAL, 0.0, start, stats)
        left = time_limit - (time.perf_counter() - start) - min(_RESERVE_S, time_limit / 2)
        if left <= 0:
            stats["stopped"] = "time limit reached while building the model"
            return self._result(instance, fallback, Status.TIME_LIMIT, None, start, stats, "greedy")
        if self.takes_hint and len(fallback) and (hint is None or schedule_value(instance, hint) < stats["greedy_value"]):
            hint, stats["hint_from"] = fallback, "greedy"
        elif hint is not None:
            stats["hint_from"] = "caller"
        schedule, status, bound = self._solve(mip, left, seed, hint, num_threads, opts.log, stats)
        if status is not Status.OPTIMAL and len(fallback) and schedule_value(instance, schedule) < stats["greedy_value"]:
            return self._result(instance, fallback, status, bound, start, stats, "greedy")
        return self._result(instance, schedule, status, bound, start, stats)

    def _solve(
        self, mip: RoundMip, time_limit: float, seed: int, hint: Schedule | None, num_threads: int, log: bool, stats: dict[str, Any]
    ) -> tuple[Schedule, Status, float | None]:
        raise NotImplementedError

    def _result(
        self,
        instance: Instance,
        schedule: Schedule,
        status: Status,
        bound: float | None,
        start: float,
        stats: dict[str, Any],
        source: str = "solver",
    ) -> Result:
        stats["incumbent_from"] = source
        report = check_schedule(instance, schedule)
        if report:

            raise SolverBug(f"{self.name}: the MIP solution decodes to an infeasible schedule: {[str(v) for v in report[:3]]}")
        objective = schedule_value(instance, schedule)
        if bound is not None:
            tol = 1e-6 * max(1.0, abs(objective))
            if bound < objective - tol:
                # not a bound (the backend lost precision): report none, and no proof either
                stats["warning"] = f"{self.name} ended with dual bound {bound!r} below the objective {objective!r}; no bound is reported"
                bound = None
                if status is Status.OPTIMAL:
                    status = Status.FEASIBLE
            else:
                bound = max(bound, objective)  # below it only within the solver's tolerances
        return Result(schedule, status, objective, bound, self.name, "exact", time.perf_counter() - start, stats)


#: a solve that took this share of its time limit or more was stopped by it (MPSolver's wall
#: limit is in milliseconds and backends check it between steps)
_STOPPED_SHARE = 0.9


class _MpSolverMip(_MipSolver):
    backend = ""

    def _configure(self, solver: Any, seed: int, num_threads: int, stats: dict[str, Any]) -> None:
        raise NotImplementedError

    def _hint(self, mip: RoundMip, solver: Any, xs: list[Any], hint: Schedule | None, stats: dict[str, Any]) -> None:
        if hint is None:
            stats["hint"] = "none"
            return
        values = mip.encode(hint, skip_unencodable=True)
        solver.SetHint(xs, values)
        stats["hint"] = "used"
        stats["hint_value"] = mip.model.objective_value(values)

    def _solve(self, mip, time_limit, seed, hint, num_threads, log, stats):
        from ortools.linear_solver import pywraplp  # lazy: MPSolver loads only when a MIP is solved

        t0 = time.perf_counter()
        solver, xs = to_mpsolver(mip.model, self.backend)
        stats["translate_s"] = time.perf_counter() - t0
        stats["backend_version"] = solver.SolverVersion()
        if log:
            solver.EnableOutput()
        remaining = time_limit - (time.perf_counter() - t0)
        if remaining <= 0:
            stats["stopped"] = "time limit reached while translating the model"
            return Schedule.empty(mip.original.name), Status.TIME_LIMIT, None
        solver.SetTimeLimit(max(1, int(remaining * 1000)))
        self._configure(solver, seed, num_threads, stats)
        self._hint(mip, solver, xs, hint, stats)
        params = pywraplp.MPSolverParameters()
        params.SetDoubleParam(params.RELATIVE_MIP_GAP, MIP_GAP)
        t1 = time.perf_counter()
        code = solver.Solve(params)
        stats["solve_s"] = time.perf_counter() - t1
        stats["nodes"] = solver.nodes()
        stats["mpsolver_status"] = {
            pywraplp.Solver.OPTIMAL: "optimal",
            pywraplp.Solver.FEASIBLE: "feasible",
            pywraplp.Solver.INFEASIBLE: "infeasible",
            pywraplp.Solver.UNBOUNDED: "unbounded",
            pywraplp.Solver.ABNORMAL: "abnormal",
            pywraplp.Solver.MODEL_INVALID: "model_invalid",
            pywraplp.Solver.NOT_SOLVED: "not_solved",
        }.get(code, str(code))
        if code in (pywraplp.Solver.INFEASIBLE, pywraplp.Solver.ABNORMAL) and stats["solve_s"] >= _STOPPED_SHARE * remaining:
            # CBC stopped by its time limit before its first solution sometimes says "infeasible"
            # (seen on a 32 x 120 round at 1 s in the test suite on a loaded 2-core machine): at the limit
            # that means no incumbent, and no bound either; the caller falls back to greedy
            stats["stopped"] = f"time limit without incumbent (the backend said {stats['mpsolver_status']})"
            return Schedule.empty(mip.original.name), Status.TIME_LIMIT, None
        if code in (pywraplp.Solver.INFEASIBLE, pywraplp.Solver.UNBOUNDED, pywraplp.Solver.MODEL_INVALID, pywraplp.Solver.ABNORMAL):

            # the all-zero vector (empty schedule) is feasible and every column is bounded
            raise SolverBug(f"{self.name}: MPSolver says {stats['mpsolver_status']} for {mip.original.name}")
        bound = solver.Objective().BestBound()
        # SCIP reports its "infinity" (1e20) when it has no dual bound yet: that is no bound
        bound = bound if math.isfinite(bound) and abs(bound) < _NO_BOUND else None
        if code == pywraplp.Solver.NOT_SOLVED:  # stopped without an incumbent
            stats["stopped"] = "time limit without incumbent"
            return Schedule.empty(mip.original.name), Status.TIME_LIMIT, bound
        schedule = mip.decode([x.solution_value() for x in xs])
        if code == pywraplp.Solver.OPTIMAL:
            return schedule, Status.OPTIMAL, bound
        stats["stopped"] = "time limit"
        return schedule, Status.TIME_LIMIT, bound


class ScipSolver(_MpSolverMip):
    """SCIP through OR-Tools MPSolver; takes hints (``SetHint``) and seeds (``randomization/randomseedshift``)."""

    name = "scip"
    backend = "scip"
    takes_hint = True

    def _configure(self, solver, seed, num_threads, stats):
        params = [f"randomization/randomseedshift = {seed}"]
        if not solver.SetSolverSpecificParametersAsString("\n".join(params)):
            raise RuntimeError("SCIP refused its parameters: " + "; ".join(params))
        stats["seed"] = "applied"
        stats["threads"] = num_threads
        solver.SetNumThreads(num_threads)


class CbcSolver(_MpSolverMip):
    """COIN-OR CBC through OR-Tools MPSolver. MPSolver's CBC interface drops hints and solver-specific
    parameters (so also seeds): this solver does not pretend to use them and says so in ``stats``."""

    name = "cbc"
    backend = "cbc"
    takes_hint = False

    def _configure(self, solver, seed, num_threads, stats):
        stats["seed"] = "ignored (MPSolver's CBC interface takes no solver-specific parameters)"
        stats["time_limit_clock"] = "cpu (CBC counts CPU seconds: wall time can exceed the limit on a busy machine)"
        stats["threads"] = num_threads
        solver.SetNumThreads(num_threads)

    def _hint(self, mip, solver, xs, hint, stats):
        stats["hint"] = "none" if hint is None else "ignored (MPSolver's CBC interface drops hints)"


class PulpSolver(_MipSolver):
    """The same MIP through PuLP with its bundled CBC (``PULP_CBC_CMD``).

    PuLP reports no dual bound: ``bound`` is the optimum when CBC proves optimality, else ``None``.
    Hints are not passed (the method is registered without them).

    Caveat (measured): PuLP bundles CBC 2.10.3 (2019), which sometimes declares optimality too
    early: on ``instances/small/s-8n-32j-het-run-01.json`` it reports 43.4118 "optimal" (seed 0)
    while SCIP finds a schedule worth 43.5884 that the independent checker accepts. Its
    ``optimal``/``bound`` are therefore CBC's claim, not a certificate; prefer ``scip`` for bounds.
    """

    name = "pulp"

    def _solve(self, mip, time_limit, seed, hint, num_threads, log, stats):
        import pulp  # lazy: PuLP loads only for the pulp method

        if "PULP_CBC_CMD" not in pulp.listSolvers(onlyAvailable=True):
            raise InputError("solver", "pulp", "PuLP's bundled CBC (PULP_CBC_CMD) is not available on this machine")
        t0 = time.perf_counter()
        prob, xs = to_pulp(mip.model)
        stats["translate_s"] = time.perf_counter() - t0
        stats["hint"] = "none" if hint is None else "ignored (pulp is registered without hints)"
        stats["seed"] = "applied"
        stats["threads"] = num_threads
        remaining = time_limit - (time.perf_counter() - t0)
        if remaining <= 0.05:
            stats["stopped"] = "time limit reached while translating the model"
            return Schedule.empty(mip.original.name), Status.TIME_LIMIT, None
        with warnings.catch_warnings():
            # PuLP 3.x announces that PULP_CBC_CMD (its bundled CBC) goes away in PuLP 4.0; it is the
            # backend this method promises, so the notice is silenced here and not hidden elsewhere
            warnings.simplefilter("ignore", DeprecationWarning)
            cmd = pulp.PULP_CBC_CMD(
                msg=log,
                timeLimit=remaining,
                gapRel=MIP_GAP,
                # CBC's "-threads 1" is one worker thread beside the main one, not a serial search:
                # CBC 2.10.3 then at times never starts the worker and waits out the whole time limit
                # on a round it had solved at the root (measured: about 1 in 1,000 tiny rounds with two
                # solves at once; none in 8,000 without the option). One thread: CBC's serial default.
                threads=num_threads if num_threads > 1 else None,
                options=[f"randomSeed {seed + 1}", f"randomCbcSeed {seed + 1}"],
            )
        t1 = time.perf_counter()
        prob.solve(cmd)
        stats["solve_s"] = time.perf_counter() - t1
        sol = prob.sol_status
        stats["pulp_status"] = pulp.LpStatus.get(prob.status, str(prob.status))
        stats["pulp_solution_status"] = pulp.LpSolution.get(sol, str(sol))
        if sol == pulp.LpSolutionOptimal:
            schedule = mip.decode([x.varValue or 0.0 for x in xs])
            return schedule, Status.OPTIMAL, pulp.value(prob.objective)
        if sol == pulp.LpSolutionIntegerFeasible:
            stats["stopped"] = "time limit"
            return mip.decode([x.varValue or 0.0 for x in xs]), Status.TIME_LIMIT, None
        if sol == pulp.LpSolutionNoSolutionFound:
            stats["stopped"] = "time limit without incumbent"
            return Schedule.empty(mip.original.name), Status.TIME_LIMIT, None

        raise SolverBug(f"pulp: CBC says {stats['pulp_solution_status']} for {mip.original.name}")
