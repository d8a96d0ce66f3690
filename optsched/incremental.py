"""Round chains: solve each round of a sequence starting from what the previous round left.

Consecutive scheduling rounds (a simulator's, a cluster manager calling every few minutes) differ
by a few arrivals and completions. :class:`RoundSolver` keeps the previous round's answer (one
round's worth of state, never more) and, for the next round:

1. **reuses** the previous result when the round is identical to the previous one
   (:func:`round_key`: every field of the round except its name), after checking it again;
2. **carries over** the previous schedule: the jobs still present keep their assignment where it
   stays feasible, and fungible-greedy places the others around them (:func:`carry_over`);
3. **stops early**: when the carried-over schedule is within ``gap_target`` of a cheap proven
   bound (:func:`gpu_knapsack_bound`; where running jobs are pinned, after the nodes they leave
   room on are refilled and the squeezed greedy has tried to start what their cores and memory
   kept out, also :func:`~optsched.incremental_bound.fill_bound`) no search runs at
   all; otherwise the exact solver runs with the carried-over schedule as its complete hint and
   CP-SAT's ``relative_gap_limit`` set to ``gap_target``. A warm round is never worth less than
   the carried-over schedule.

What is reused and why it stays valid: ``formulations/incremental.md``.

Example
-------
>>> from optsched.gen import generate
>>> from optsched.incremental import RoundSolver
>>> rounds = RoundSolver("cpsat", time_limit=1.0, options={"num_workers": 1})
>>> inst = generate(nodes=2, jobs=4, seed=0)
>>> first = rounds.solve(inst)
>>> again = rounds.solve(inst)
>>> again.stats["incremental"], again.schedule.jobs == first.schedule.jobs
('reused', True)
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from optsched.checker import CheckReport, check_schedule
from optsched.errors import InputError, safe_text
from optsched.exact.core import greedy_starts
from optsched.gang_prices import GangPrices
from optsched.heuristics.best_response import best_response
from optsched.heuristics.fungible_greedy import fungible_greedy_schedule
from optsched.heuristics.node_refill import gang_ascent, gang_release, node_refill, squeezed_greedy
from optsched.incremental_bound import fill_bound
from optsched.knapsack_bound import BOUND_FAMILIES, gpu_knapsack_bound
from optsched.model import Instance
from optsched.policy_repair import repair
from optsched.registry import get_method
from optsched.result import Result, Status, reaches
from optsched.round_policies import policy_families
from optsched.schedule import Schedule
from optsched.solve import solve_round

__all__ = ["BACKOFF_WIDER", "BOUND_FAMILIES", "GAP_TARGET", "RoundSolver", "RoundState", "carry_over", "check_chain_solver", "gpu_knapsack_bound",
           "round_key"]

#: a round the search backoff would skip searches anyway when its gap is more than this many times
#: the gap the last fruitless search left (a round that changed that much is not the same problem)
BACKOFF_WIDER = 2.0

#: the default relative gap within which a chain's round stops: 0.1 % (0.5 % took less time but gave
#: mean JCTs up to 11 % higher on congested streams: ``benchmarks/README.md``)
GAP_TARGET = 0.001

#: the ``stats["incremental"]`` values: how a round was answered
PATHS = ("cold", "reused", "carried", "searched", "skipped")


def round_key(instance: Instance) -> str:
    """A digest of everything in ``instance`` that a schedule's feasibility or worth depends on:
    the round's settings, the nodes and the jobs (profiles, weights, running placements, policy
    fields), in order. Only the instance's name is left out, so two rounds of a chain that differ
    in nothing else have the same key (and the same optimal schedules)."""
    d = instance.to_dict()
    d.pop("name", None)
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _same_round(a: Instance, b: Instance) -> bool:
    """Whether two rounds are equal in every field but their names: the same :func:`round_key`."""
    return a.version == b.version and a.round == b.round and a.nodes == b.nodes and a.jobs == b.jobs \
        and a._spread_over == b._spread_over


def _feasible_part(instance: Instance, schedule: Schedule) -> Schedule:
    """The largest part of ``schedule`` found by dropping, until the checker accepts the rest,
    the jobs it names and the jobs on the nodes it names (at worst the empty schedule)."""
    jobs = {j: a for j, a in schedule.jobs.items() if j in instance._job_index}
    for _ in range(len(jobs) + 1):
        part = Schedule(instance.name, jobs)
        bad = check_schedule(instance, part)
        if not bad:
            return part
        drop = {v.job for v in bad if v.job is not None}
        nodes = {v.node for v in bad if v.node is not None}
        drop |= {j for j, a in jobs.items() if nodes & set(a.nodes)}
        if not drop:  # a round-wide rule: nothing of the previous schedule is kept
            break
        jobs = {j: a for j, a in jobs.items() if j not in drop}
    return Schedule.empty(instance.name)


def _present(instance: Instance, schedule: Schedule) -> Schedule:
    """``schedule``'s assignments that ``instance`` can read: of its jobs, on its nodes, at a point
    of the job's grid (feasible or not: the caller checks)."""
    jobs = {}
    for jid, a in schedule.jobs.items():
        i = instance._job_index.get(jid)
        job = None if i is None else instance.jobs[i]
        if job is not None and all(n in instance._node_index for n in a.nodes) \
                and a.cpus_per_gpu in job.profile.cpus_per_gpu and a.mem_per_gpu_gb in job.profile.mem_per_gpu_gb:
            jobs[jid] = a
    return Schedule(instance.name, jobs)


def carry_over(instance: Instance, previous: Schedule | None) -> Schedule:
    """The previous round's schedule mapped onto ``instance``: jobs that are gone are dropped,
    assignments that stay feasible are kept (a running job kept where it runs pays no restart),
    and fungible-greedy places the remaining jobs around them and may raise any job's grid point.
    Without a previous schedule, fungible-greedy's own. Not necessarily feasible under the
    round's policy rules (the caller checks)."""
    fixed = None if previous is None else _feasible_part(instance, previous)
    return fungible_greedy_schedule(instance, fixed=fixed if fixed is not None and fixed.jobs else None)


def _carried(instance: Instance, previous: Schedule | None) -> tuple[Schedule, CheckReport]:
    """:func:`carry_over`'s schedule and its checker report, checked once where the previous
    schedule stays feasible (most rounds of a chain): the previous assignments that ``instance``
    can read are completed as they stand, and only where the checker refuses the result is the
    previous schedule's largest feasible part completed instead (the same schedule wherever both
    apply)."""
    present = None if previous is None else _present(instance, previous)
    if present is not None and present.jobs:
        carried = fungible_greedy_schedule(instance, fixed=present)
        report = check_schedule(instance, carried)
        if not report:
            return carried, report
    carried = carry_over(instance, previous)
    return carried, check_schedule(instance, carried)


@dataclass(frozen=True)
class RoundState:
    """What a :class:`RoundSolver` remembers between rounds: the last round's key
    (:func:`round_key`) and its result. One round's worth of memory."""

    key: str
    result: Result

    def __post_init__(self) -> None:
        if not isinstance(self.key, str):
            raise InputError("state.key", self.key, "must be a string (round_key)")
        if not isinstance(self.result, Result):
            raise InputError("state.result", type(self.result).__name__, "must be a Result")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the result as ``Result.to_dict`` writes it)."""
        return {"key": self.key, "result": self.result.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RoundState:
        if not isinstance(d, Mapping) or not isinstance(d.get("key"), str) or not isinstance(d.get("result"), Mapping):
            raise InputError("state", d, "must be {'key': str, 'result': a result object}")
        r = d["result"]
        try:
            schedule = Schedule.from_dict(r)
            result = Result(schedule, Status(r["status"]), float(r["objective"]), None if r.get("bound") is None else float(r["bound"]),
                            str(r["solver"]), str(r["method"]), float(r.get("time_s", 0.0)), dict(r.get("stats") or {}))
        except InputError as e:
            raise e.within("state.result") from None
        except (KeyError, TypeError, ValueError) as e:
            raise InputError("state.result", safe_text(str(e)), "is not a result object (Result.to_dict)") from None
        return cls(d["key"], result)


def _reported(value: float, bound: float, stats: Mapping[str, Any]) -> float:
    """The bound a round reports: ``bound``, or the priced bound (``stats["priced_bound"]``) where
    it is lower, never below the schedule's worth ``value``. The chain's decisions use ``bound``."""
    return max(min(bound, stats.get("priced_bound", math.inf)), value)


class _Backoff:
    """Rounds to skip a step after it found nothing (``RoundSolver.search_backoff``): 1, 2, 4, ...
    up to ``cap`` rounds not closed by the bound, unless a round's gap is more than
    :data:`BACKOFF_WIDER` times the one the last fruitless try left; a try that finds something
    resets it."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.reset()

    def reset(self) -> None:
        self.skip, self.next_skip, self.gap = 0, 1, 0.0

    def skips(self, gap: float) -> bool:
        """Whether a round with this ``gap`` skips the step (counting it when it does)."""
        if self.skip > 0 and gap <= BACKOFF_WIDER * self.gap:
            self.skip -= 1
            return True
        return False

    def record(self, found: bool, gap: float) -> None:
        """After a try: ``found`` something, or not, leaving ``gap``."""
        if found or not self.cap:
            self.skip, self.next_skip = 0, 1
        else:
            self.skip = min(self.next_skip, self.cap)
            self.next_skip = min(2 * self.next_skip, self.cap)
            self.gap = gap


def check_chain_solver(solver: str) -> None:
    """Refuse a solver that cannot solve rounds as a chain (an unknown one, or one that takes no
    hint: a round chain starts each round from the last one's schedule)."""
    if not get_method(solver).takes_hint:
        raise InputError("solver", solver, "must take a hint (a round chain starts each round from the last one's schedule)")


class RoundSolver:
    """Solves a chain of rounds, each from the previous one's answer.

    Parameters
    ----------
    solver
        A registered solver that takes hints (``"cpsat"`` by default; ``optsched.methods()``).
    time_limit
        Wall-clock seconds per searched round.
    seed
        The solver's seed.
    gap_target
        Stop a round as soon as its schedule is within this relative gap of a proven bound
        (``0``: search until proven or out of time). CP-SAT gets it as ``relative_gap_limit``.
    reuse
        Answer an identical round (:func:`round_key`) with the previous result.
    options
        Passed to the solver on searched rounds (e.g. ``{"deterministic_time": 0.5}`` for
        reproducible rounds, ``{"num_workers": 1}``).
    state
        A :class:`RoundState` to resume from (e.g. a service session's).
    search_backoff
        The most rounds in a row that skip the search after searches that found nothing. A round
        whose search (best responses, then the solver) does not improve the carried-over (or
        refilled) schedule makes the chain skip the search in the next 1, 2, 4, ... rounds that
        are not closed by the bound, up to this many, unless a round's gap is more than
        :data:`BACKOFF_WIDER` times the one that search left; a search that improves resets it.
        The solver, which runs after the best responses, has a backoff of its own by the same
        rule, counting only what it adds to their schedule (or a proof). ``0`` searches every
        round.

    ``solve`` returns a :class:`~optsched.result.Result` whose ``stats["incremental"]`` says how
    the round was answered (:data:`PATHS`): ``cold`` (no usable previous round: a plain solve with
    fungible-greedy's hint), ``reused``, ``carried`` (the carried-over schedule, proven within the
    gap target: no search), ``searched`` (the solver ran from the carried-over schedule) or
    ``skipped`` (not proven within the gap target, but searched no further: ``stats["skipped"]`` is
    ``"backoff"`` after fruitless searches, see ``search_backoff``, ``"solver-backoff"`` after
    solver calls that added nothing to the best responses, or ``"time"`` when the steps
    before the best responses used half of ``time_limit``, or the best responses left less than a
    quarter of it for the solver; the time rule is off when
    ``options`` set ``deterministic_time``, so that such chains stay reproducible). A skipped
    round returns the carried-over schedule, improved where the best responses could, with the
    knapsack bound. Every schedule it returns passes the independent checker.

    Where running jobs are pinned and a gang is cut into per-node copies by the fill bound, the
    bound the round reports prices the copies into agreement (:class:`~optsched.gang_prices.GangPrices`,
    the prices kept between rounds; ``stats["priced_bound"]``); the decisions above use the bound
    without prices.
    """

    def __init__(self, solver: str = "cpsat", *, time_limit: float = 1.0, seed: int = 0, gap_target: float = GAP_TARGET,
                 reuse: bool = True, options: Mapping[str, Any] | None = None, state: RoundState | None = None,
                 search_backoff: int = 8) -> None:
        check_chain_solver(solver)
        if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not math.isfinite(time_limit) or time_limit <= 0:
            raise InputError("time_limit", time_limit, "must be a positive number of seconds")
        if isinstance(gap_target, bool) or not isinstance(gap_target, (int, float)) or not 0 <= gap_target < 1:
            raise InputError("gap_target", gap_target, "must be a number in [0, 1)")
        if state is not None and not isinstance(state, RoundState):
            raise InputError("state", state, "must be a RoundState or None")
        if isinstance(search_backoff, bool) or not isinstance(search_backoff, int) or search_backoff < 0:
            raise InputError("search_backoff", search_backoff, "must be an integer >= 0 (rounds)")
        self.solver = solver
        self.time_limit = float(time_limit)
        self.seed = seed
        self.gap_target = float(gap_target)
        self.reuse = bool(reuse)
        self.options = dict(options or {})
        self._state: RoundState | None = state
        self._unkeyed: tuple[Instance, Result] | None = None  # the last round, its key not computed yet
        self._fit_cache: dict[tuple[Any, ...], Any] = {}  # fit factors and pinned jobs' points, between rounds (bounded)
        self.search_backoff = search_backoff
        self._search = _Backoff(search_backoff)  # the search: best responses, then the solver
        self._solver = _Backoff(search_backoff)  # the solver alone, after best responses
        self._prices = GangPrices()  # the pinned gangs' copy prices of the fill bound, between rounds

    @property
    def state(self) -> RoundState | None:
        """The last round's key and result (None before the first round or after :meth:`reset`).
        The key is computed when asked for: a chain whose rounds all differ in their jobs or
        nodes never needs it."""
        if self._unkeyed is not None:
            inst, result = self._unkeyed
            self._state, self._unkeyed = RoundState(round_key(inst), result), None
        return self._state

    @state.setter
    def state(self, value: RoundState | None) -> None:
        if value is not None and not isinstance(value, RoundState):
            raise InputError("state", value, "must be a RoundState or None")
        self._state, self._unkeyed = value, None
        if value is None:
            self._search.reset()
            self._solver.reset()
            self._prices.clear()

    def reset(self) -> None:
        """Forget the previous round."""
        self.state = None

    def _previous(self) -> tuple[Instance | None, Result] | None:
        """The last round (its instance when this solver solved it) and its result, or None."""
        if self._unkeyed is not None:
            return self._unkeyed
        return None if self._state is None else (None, self._state.result)

    def solve(self, instance: Instance | Mapping[str, Any]) -> Result:
        """The next round of the chain (see the class text)."""
        if not isinstance(instance, Instance):
            instance = Instance.from_dict(instance)
        start = time.perf_counter()
        last = self._previous()
        key = None
        if self.reuse and last is not None and last[0] is not None:
            # the last round's instance is at hand: compared field by field, which stops at the
            # first difference (most rounds of a chain differ in some job), with no digest
            if _same_round(last[0], instance):
                out = self._reused(instance, last[1], start)
                if out is not None:
                    self._state, self._unkeyed = None, (instance, out)
                    return out
        elif self.reuse and last is not None:  # resumed from a state: its key is all there is
            key = round_key(instance)
            previous_state = self.state
            if previous_state is not None and previous_state.key == key:
                out = self._reused(instance, previous_state.result, start)
                if out is not None:
                    self.state = RoundState(key, out)
                    return out
        out = self._solve(instance, None if last is None else last[1].schedule, start)
        if key is not None or not self.reuse:
            self.state = RoundState("" if key is None else key, out)
        else:
            self._state, self._unkeyed = None, (instance, out)
        return out

    def _reused(self, instance: Instance, result: Result, start: float) -> Result | None:
        schedule = Schedule(instance.name, dict(result.schedule.jobs))
        report = check_schedule(instance, schedule)
        if report:  # cannot happen for an identical round; solve it afresh rather than trust the key
            return None
        return replace(result, schedule=schedule, objective=report.objective, time_s=time.perf_counter() - start,
                       stats={**{k: v for k, v in result.stats.items() if k != "skipped"}, "incremental": "reused"}, trajectory=())

    def _solve(self, instance: Instance, previous: Schedule | None, start: float) -> Result:
        families = policy_families(instance)
        carried, report = _carried(instance, previous)
        hint: Schedule | None = None if report else carried
        stats: dict[str, Any] = {"incremental": "cold" if previous is None else "searched"}
        starts: list[tuple[str, Schedule]] | None = None  # cpsat's greedy starts, where built here
        if hint is not None:
            stats["carried_objective"] = report.objective
        if hint is not None and families <= BOUND_FAMILIES:
            value = report.objective
            bound = gpu_knapsack_bound(instance, good_enough=value * (1 + 1e-9) + 1e-9, cache=self._fit_cache)
            pinned = any(j.pinned for j in instance.jobs)
            if value < (1.0 - self.gap_target) * bound - 1e-9 and pinned:
                # pinned jobs: refill the nodes they leave room on, then share each node between
                # both in the bound (node_refill, fill_bound)
                hint, value, report = self._take_better(instance, hint, value, report,
                                                        gang_release(instance, node_refill(instance, hint)), stats)
                if value < (1.0 - self.gap_target) * bound - 1e-9:
                    # a waiting job that the pinned jobs' cores and memory keep out (a heavy gang
                    # over the scattered free GPUs): the greedy with them at their leanest points
                    hint, value, report = self._take_better(instance, hint, value, report, squeezed_greedy(instance), stats)
                if value < (1.0 - self.gap_target) * bound - 1e-9:
                    # once with the gangs' copies priced into agreement where the bound cuts them
                    # (optsched.gang_prices, the prices kept from the last round): that bound is
                    # reported, the one without prices decides whether to search on
                    self._prices.gain = 0.0
                    priced = fill_bound(instance, self._fit_cache, refine=self._prices)
                    bound = min(bound, (priced + self._prices.gain) * (1 + 1e-9) + 1e-9)
                    stats["priced_bound"] = priced * (1 + 1e-9) + 1e-9
            stats["knapsack_bound"] = bound
            gap = 1.0 - value / bound if bound > 0 else 0.0
            if value < (1.0 - self.gap_target) * bound - 1e-9:
                stats["open_gap"] = gap
            if value < (1.0 - self.gap_target) * bound - 1e-9 and self._search.skips(gap):
                # the last searches found nothing: skip this one (search_backoff)
                return self._skipped(hint, value, bound, start, stats, "backoff")
            if value < (1.0 - self.gap_target) * bound - 1e-9 and pinned:
                # a round that searches first moves the pinned gangs' grid points (gang_ascent);
                # the backoff then counts from there, so that this cheap step alone does not
                # keep the costly ones below running every round
                hint, value, report = self._take_better(instance, hint, value, report, gang_ascent(instance, hint), stats)
            if value < (1.0 - self.gap_target) * bound - 1e-9 and self._out_of_time(start, 0.5):
                # the steps above used half the round: the greedy starts and best responses
                # below (hundreds of ms on rounds of hundreds of jobs) would overrun it
                self._search.record(value > report.objective * (1 + 1e-9), 1.0 - value / bound)
                return self._skipped(hint, value, bound, start, stats, "time")
            if value < (1.0 - self.gap_target) * bound - 1e-9:
                # before any search: single-job best responses from the carried-over schedule, from
                # fungible-greedy's own (its fixed-demand pass places gangs that the fungible
                # completion leaves out) and from cpsat's greedy hints (built once: a search
                # below starts from the same ones); the checker has the last word
                starts = greedy_starts(instance, seed=self.seed)
                named = dict(starts)
                hint, value = self._best_responses(instance, families, [(hint, report)] + [
                    (named[n], None) for n in ("fungible-greedy", "greedy", "greedy-dense") if n in named], value, stats)
            if value >= (1.0 - self.gap_target) * bound - 1e-9:
                return self._answered(hint, value, bound, start, {**stats, "incremental": "carried"})
            left_gap = 1.0 - value / bound
            if self._out_of_time(start, 0.75):
                self._search.record(value > report.objective * (1 + 1e-9), left_gap)  # report: the carried-over (or refilled) schedule's
                return self._skipped(hint, value, bound, start, stats, "time")
            if self._solver.skips(left_gap):
                # the solver's last calls found nothing the best responses had not (on large
                # congested rounds it rarely does at this budget): skip it, keep theirs
                self._search.record(value > report.objective * (1 + 1e-9), left_gap)
                return self._skipped(hint, value, bound, start, stats, "solver-backoff")
        options = dict(self.options)
        if self.solver == "cpsat":
            if self.gap_target > 0:
                options["cp_params"] = {"relative_gap_limit": self.gap_target, **(options.get("cp_params") or {})}
            # the knapsack bound stands in for the LP bound cpsat would keep 0.3 s for: the time goes to the search
            options.setdefault("lp_fallback", "knapsack_bound" not in stats)
            if starts is not None:  # the same schedules cpsat would build: the same answer, built once
                options.setdefault("greedy_starts", starts)
        left = max(0.01, self.time_limit - (time.perf_counter() - start))
        res = solve_round(instance, "auto", solver=self.solver, time_limit=left, seed=self.seed,
                          hint=hint, **options)
        bound = res.bound
        if "knapsack_bound" in stats:
            bound = stats["knapsack_bound"] if bound is None else min(bound, stats["knapsack_bound"])
        schedule, objective, status = res.schedule, res.objective, res.status
        hint_value = stats.get("improved_objective", stats.get("carried_objective"))
        solver_found = hint is None or objective > hint_value * (1 + 1e-9) or status is Status.OPTIMAL
        if hint is not None and hint_value > objective + 1e-9 * max(1.0, objective) and families <= BOUND_FAMILIES:
            # never worse than the carried-over schedule (rounds ranked by worth alone)
            schedule, objective, status = hint, hint_value, Status.FEASIBLE
        if bound is not None:
            bound = max(bound, objective)
            if status is not Status.OPTIMAL and reaches(objective, bound) and families <= BOUND_FAMILIES:
                status = Status.OPTIMAL
        if "carried_objective" in stats:
            base = stats.get("refilled_objective", stats["carried_objective"])
            left_gap = 1.0 - objective / bound if bound else math.inf
            self._search.record(objective > base * (1 + 1e-9) or status is Status.OPTIMAL, left_gap)
            self._solver.record(solver_found or status is Status.OPTIMAL, left_gap)
        if bound is not None:  # reported with the priced bound, after the backoffs counted
            bound = _reported(objective, bound, stats)
            # worth at its bound proves the round only where worth alone ranks schedules
            if status is not Status.OPTIMAL and reaches(objective, bound) and families <= BOUND_FAMILIES:
                status = Status.OPTIMAL
        return Result(schedule, status, objective, bound, res.solver, res.method, time.perf_counter() - start,
                      {**res.stats, **stats}, res.trajectory)

    def _answered(self, hint: Schedule, value: float, bound: float, start: float, stats: dict[str, Any]) -> Result:
        """A round answered without (further) search: ``hint``, worth ``value``, with ``bound``
        (:func:`_reported`), optimal where it reaches it."""
        bound = _reported(value, bound, stats)
        status = Status.OPTIMAL if reaches(value, bound) else Status.FEASIBLE
        return Result(hint, status, value, bound, self.solver, get_method(self.solver).family, time.perf_counter() - start, stats)

    def _skipped(self, hint: Schedule, value: float, bound: float, start: float, stats: dict[str, Any], why: str) -> Result:
        """:meth:`_answered` for a round the chain stopped short of its gap target
        (``stats["skipped"]`` says ``why``: see the class text)."""
        return self._answered(hint, value, bound, start, {**stats, "incremental": "skipped", "skipped": why})

    def _out_of_time(self, start: float, share: float) -> bool:
        """Whether the round has used more than ``share`` of ``time_limit`` (never under
        ``deterministic_time``, so that such chains stay reproducible)."""
        return "deterministic_time" not in self.options and time.perf_counter() - start > share * self.time_limit

    def _take_better(self, instance: Instance, hint: Schedule, value: float, report: CheckReport, better: Schedule,
                     stats: dict[str, Any]) -> tuple[Schedule, float, CheckReport]:
        """``better`` (a refill or gang ascent of ``hint``, which is worth ``value`` and checked as
        ``report``) with its report where the checker accepts it and it is worth more: the search
        backoff counts from it (``stats["refilled_objective"]``, also ``"improved_objective"``);
        else ``hint``."""
        if better.jobs == hint.jobs:
            return hint, value, report
        checked = check_schedule(instance, better)
        if checked or checked.objective <= value * (1 + 1e-12):
            return hint, value, report
        stats["refilled_objective"] = stats["improved_objective"] = checked.objective
        return better, checked.objective, checked

    def _best_responses(self, instance: Instance, families: frozenset[str], starts: list[tuple[Schedule, CheckReport | None]],
                        value: float, stats: dict[str, Any]) -> tuple[Schedule, float]:
        """The best of single-job best responses from each start (with its checker report where
        known) and the first start, worth ``value``: a schedule is checked once, and a best
        response that changed nothing keeps its start's report."""
        best = starts[0][0]
        for start_from, known in starts:
            if families and known is None:  # the exact greedies may move pinned jobs
                known = check_schedule(instance, start_from)
                if known:
                    start_from, known = repair(instance, start_from), None
            better = best_response(instance, start_from)
            checked = known if known is not None and better.jobs == start_from.jobs else check_schedule(instance, better)
            if not checked and checked.objective > value * (1 + 1e-12):
                best, value = better, checked.objective
                stats["improved_objective"] = value
        return best, value
