"""``solve_round``: the one entry point that every caller (Python, CLI, HTTP, simulator) uses."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from optsched.checker import check_schedule
from optsched.errors import InputError, SolverBug
from optsched.exact.placeable import nothing_can_run
from optsched.learned.solver import load_policy
from optsched.limits import check_ranges, check_seed, check_size, check_value_span
from optsched.model import Instance
from optsched.options import MethodOptions
from optsched.policy_repair import repair
from optsched.registry import FAMILIES, MethodInfo, family_default, get_method, methods
from optsched.result import Result, Status
from optsched.round_policies import policy_families
from optsched.schedule import Schedule
from optsched.trajectory import Incumbent, Progress, recording

__all__ = ["SolverBug", "choose_auto", "method_options", "solve_round"]

#: where ``solve_round`` reports what callers should know but that is not an error (``auto`` not
#: running the learned policy it would choose, because the policy's weights do not load)
log = logging.getLogger("optsched")

#: ``method="auto"`` solves exactly when jobs x nodes is at most this (measured: see docs/benchmarking.md)
AUTO_EXACT_CELLS = 16_384
#: ... and warm-starts CP-SAT from the learned policy above this many cells (where CP-SAT no longer
#: proves small rounds quickly and the policy's schedule beats its greedy hint: docs/results.md)
AUTO_HINT_CELLS = 1_024
#: ... and splits the round into parts (``partitioned``) above this many cells: on generated rounds
#: at a 30 s limit, ``maifs`` is ahead at 2,048 x 8,000 (16.4M cells) and ``partitioned`` at
#: 4,096 x 16,000 (65.5M cells: half the gap to the LP bound, two thirds of the time, an eighth
#: of the memory) and above (docs/results.md, "Decomposition: partitioned")
AUTO_PARTITION_CELLS = 32_000_000
#: the learned policy is used only with at least this time limit (measured when inference ran in
#: torch: its import and the forward pass needed up to about a second on a loaded 2-core machine)
AUTO_LEARNED_MIN_S = 2.0

#: what ``auto`` runs with the learned policy (not registered methods: only ``auto`` picks them)
AUTO_WARM = MethodInfo("cpsat+maifs", "exact", "CP-SAT warm-started with the learned policy's schedule",
                       "optsched.learned.auto:WarmCpSat", takes_hint=True, options="optsched.learned.options:WarmCpsatOptions")
AUTO_LARGE = MethodInfo("maifs", "learned", "the learned policy, its loading counted in the time limit",
                        "optsched.learned.auto:TimedLearned", takes_hint=True, options="optsched.learned.options:MaifsOptions")


#: what ``auto`` runs above ``AUTO_PARTITION_CELLS``
AUTO_PARTITIONED = get_method("partitioned")


def learned_problem() -> str | None:
    """Why the shipped learned policy cannot run here (its weights, package data, do not load),
    or ``None`` when it can. Loads the weights once per process (numpy; no torch)."""
    try:
        load_policy()
    except InputError as e:
        return str(e)
    return None


def _choose(instance: Instance, time_limit: float) -> tuple[MethodInfo, str | None]:
    """``auto``'s method, and a warning when it is not the learned one it would have chosen."""
    n_nodes, n_jobs = instance.size
    cells = n_nodes * n_jobs
    wanted = family_default("exact")
    if cells > AUTO_PARTITION_CELLS and policy_families(instance) <= set(AUTO_PARTITIONED.policies):
        return AUTO_PARTITIONED, None
    if cells > AUTO_HINT_CELLS and time_limit >= AUTO_LEARNED_MIN_S and not policy_families(instance):
        wanted = AUTO_WARM if cells <= AUTO_EXACT_CELLS else AUTO_LARGE
    elif cells > AUTO_EXACT_CELLS:
        wanted = family_default("heuristic")
    if wanted not in (AUTO_WARM, AUTO_LARGE):
        return wanted, None
    problem = learned_problem()
    if problem is None:
        return wanted, None
    plain = family_default("exact" if wanted is AUTO_WARM else "heuristic")
    return plain, f"auto ran {plain.name} instead of {wanted.name}: the learned policy is unavailable ({problem})"


def choose_auto(instance: Instance, time_limit: float) -> MethodInfo:
    """``auto``: the exact model where it is small enough to help, otherwise a heuristic.

    On rounds without contract-v2 policy families and with a time limit of at least
    ``AUTO_LEARNED_MIN_S``, the learned policy joins in: CP-SAT warm-started from the policy
    above ``AUTO_HINT_CELLS`` cells, and above ``AUTO_EXACT_CELLS`` the policy itself (``maifs``
    with its price-guided repair: on 1,024 x 4,000 rounds 1.6-2.0 % from the LP bound in about 1 s,
    where cpsat and lns need their whole 10 s to end 0.03-1.5 % away; docs/results.md).
    Above ``AUTO_PARTITION_CELLS`` cells ``auto`` runs ``partitioned`` (parts solved in parallel
    by lns) whatever the time limit, on rounds whose only policy family is ``preemption``.
    The choice depends only on the round and the time limit, except that when the policy's
    weights do not load (:func:`learned_problem`) ``auto`` runs the plain method (``cpsat``
    resp. ``lns``) and :func:`solve_round` says so: ``Result.stats["warnings"]`` and a warning
    on the ``optsched`` logger. It never changes method silently.
    """
    return _choose(instance, time_limit)[0]


def _resolve(instance: Instance, method: str, solver: str | None, time_limit: float) -> tuple[MethodInfo, str | None]:
    if method != "auto" and method not in FAMILIES:
        raise InputError("method", method, f"unknown method; known: {['auto', *FAMILIES]}")
    if solver is not None:
        info = get_method(solver)
        if method not in ("auto", info.family):
            raise InputError("solver", solver, f"is a {info.family} solver, not a {method} one")
        return info, None
    if method == "auto":
        return _choose(instance, time_limit)
    return family_default(method), None


#: checker rules that belong to the policy families of contract version 2 (quotas, max_moves, pinned jobs)
_POLICY_RULES = (6, 7, 8)


def _check_policies(instance: Instance, info: MethodInfo) -> None:
    """Refuse a method that does not honour a policy family the round uses (never ignore one)."""
    missing = sorted(policy_families(instance) - set(info.policies))
    if missing:
        able = [m.name for m in methods() if set(missing) <= set(m.policies)]
        raise InputError("solver", info.name, f"does not support the round's {', '.join(missing)}; methods that do: {able}")


def method_options(info: MethodInfo, options: MethodOptions | Mapping[str, Any] | None = None) -> MethodOptions:
    """``options`` as the typed options of the method ``info`` (validated once, here).

    ``options`` is an options object of the method's class (or of a base class, e.g.
    ``CpsatOptions`` for ``cpsat+maifs``, which adds ``weights``), a mapping of option names to
    values, or ``None`` (every default).

    Raises
    ------
    InputError
        ``options.NAME`` naming an unknown option (with the known ones) or a bad value;
        ``options`` for an options object of another method.
    """
    cls = info.options_class()
    if isinstance(options, MethodOptions):
        if isinstance(options, cls):
            return options
        if issubclass(cls, type(options)):
            return cls.from_mapping(options.to_dict(), method=info.name)
        raise InputError("options", type(options).__name__, f"are not options of {info.name}, which takes {cls.__name__}")
    return cls.from_mapping(options, method=info.name)


def solve_round(
    instance: Instance | Mapping[str, Any],
    method: str = "auto",
    *,
    solver: str | None = None,
    time_limit: float = 10.0,
    seed: int = 0,
    hint: Schedule | Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    incumbent: Incumbent | None = None,
    options: MethodOptions | Mapping[str, Any] | None = None,
    **keywords: Any,
) -> Result:
    """Solve one scheduling round.

    ``method`` is a family (``"exact"``, ``"heuristic"``, ``"learned"``) or ``"auto"``;
    ``solver`` picks a registered solver by name (``optsched.methods()`` lists them). The call
    returns within ``time_limit`` seconds plus a small overhead, always with a schedule that the
    independent checker accepts: the best one found when time runs out, the empty one at worst.
    ``hint`` (a schedule) seeds methods that take one. ``progress`` is called as
    ``progress(t_s, objective, bound)`` with each event of the solve's trajectory as it comes
    (seconds since the call started, the best schedule's worth or ``None`` before the first, the
    best proven bound or ``None``): the objective never falls and the bound never rises.
    ``Result.trajectory`` holds the same events, ending at the result's objective and bound.
    ``incumbent`` is called as ``incumbent(t_s, objective, schedule)`` with each of those
    incumbents that the method recorded with its schedule (``partitioned`` does, as its parts
    answer); ``schedule()`` builds it, as the method holds it: check it
    (:func:`~optsched.checker.check_schedule`) before relying on it, as ``solve_round`` checks
    the final one (the command line's ``--write-first`` does).

    ``options`` are the solver's options: an options object of its class (``CpsatOptions``,
    ``LnsOptions``, ``MipOptions``, ``MaifsOptions``; :attr:`MethodInfo.options
    <optsched.registry.MethodInfo.options>` names each method's, ``optsched methods --options``
    lists them) or a mapping of option names to values. Extra keyword arguments are a shorthand
    for that mapping (``solve_round(inst, solver="cpsat", num_workers=1)`` is
    ``solve_round(inst, solver="cpsat", options={"num_workers": 1})`` and
    ``options=CpsatOptions(num_workers=1)``); give one or the other, not both. They are validated
    (:func:`method_options`) before the method runs: an unknown name or a bad value raises
    :class:`~optsched.errors.InputError` naming ``options.NAME``, for every method (one that
    takes no options refuses any).

    Before any method runs, the round must be in the numeric range and value span of
    :mod:`optsched.limits` and within the method's size limit (``MAX_CELLS``), else
    :class:`~optsched.errors.InputError`. On a round where no job can be placed every method
    reports the empty schedule, objective 0, bound 0, ``optimal``.

    What the caller should know but is no error is listed in ``Result.stats["warnings"]`` and
    logged as a warning on the ``optsched`` logger (e.g. ``auto`` not running the learned policy
    because its weights do not load: see :func:`choose_auto`).
    """
    if not isinstance(instance, Instance):
        instance = Instance.from_dict(instance)
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not math.isfinite(time_limit) or time_limit <= 0:
        raise InputError("time_limit", time_limit, "must be a positive number of seconds")
    check_seed(seed)
    if hint is not None and not isinstance(hint, Schedule):
        if not isinstance(hint, Mapping):
            raise InputError("hint", hint, "must be a Schedule or a schedule JSON object")
        try:
            hint = Schedule.from_dict(hint)
        except InputError as e:
            raise e.within("hint") from None
    if hint is not None:
        bad = check_schedule(instance, hint)
        if bad and all(v.rule in _POLICY_RULES for v in bad):
            # breaks only the round's policy rules (e.g. last round's schedule once a quota owner
            # arrives): the nearest schedule that keeps them seeds the solver instead
            hint = repair(instance, hint)
            bad = check_schedule(instance, hint)
        if bad:
            raise InputError("hint", str(bad[0]), "is not a feasible schedule for this instance")
    info, warning = _resolve(instance, method, solver, float(time_limit))
    if warning is not None:
        log.warning("%s: %s", instance.name, warning)
    _check_policies(instance, info)
    if options is not None and keywords:
        raise InputError("options", sorted(keywords), "give the options either as options= or as keyword arguments, not both")
    opts = method_options(info, keywords if options is None else options)
    if progress is not None and not callable(progress):
        raise InputError("progress", progress, "must be a callable progress(t_s, objective, bound) or None")
    if incumbent is not None and not callable(incumbent):
        raise InputError("incumbent", incumbent, "must be a callable incumbent(t_s, objective, schedule) or None")
    check_ranges(instance)  # a round built in Python has not been through Instance.from_dict
    check_value_span(instance)
    check_size(instance, info.name)
    start = time.perf_counter()
    with recording(instance, listener=progress, start=start, incumbent=incumbent) as root, root.nested():
        result = info.load()().solve(instance, time_limit=float(time_limit), seed=seed, hint=hint, **opts.to_dict())
    end = time.perf_counter()
    elapsed = end - start
    report = check_schedule(instance, result.schedule)
    if report:
        raise SolverBug(f"{info.name} returned an infeasible schedule for {instance.name}: {report[:3]}")
    if report.deadline_misses and "deadline_misses" not in result.stats:
        result = replace(result, stats={**result.stats, "deadline_misses": list(report.deadline_misses)})
    if not math.isclose(report.objective, result.objective, rel_tol=1e-6, abs_tol=1e-6):
        raise SolverBug(f"{info.name} reported objective {result.objective} but the checker finds {report.objective}")
    if result.bound is not None and result.bound < report.objective - 1e-6 * max(1.0, abs(report.objective)):
        raise SolverBug(f"{info.name} reported bound {result.bound} below its own objective {report.objective}")
    if (result.bound != 0.0 or result.status is not Status.OPTIMAL) and nothing_can_run(instance):
        # no job fits anywhere (exact.placeable's proof): 0 is a proven bound and the (empty) schedule
        # optimal, whatever the method knew; heuristics report no bound, lns one with LP slack
        result = replace(result, status=Status.OPTIMAL, bound=0.0,
                         stats={**result.stats, "proof": "no job can be placed on the round's nodes"})
    if warning is not None:
        result = replace(result, stats={**result.stats, "warnings": [*result.stats.get("warnings", []), warning]})
    # a method that records into no trajectory of ours but returns one of its own keeps it
    own = result.trajectory if result.trajectory and not root.points else ()
    closed = root.close(result.objective, result.bound, at=end)
    return replace(result, time_s=elapsed, trajectory=own or closed)
