"""Warm starts of the exact solver from the learned policy.

- :func:`policy_hint`: the policy's decoded (feasible) schedule. Passed as ``hint=`` to the
  ``cpsat`` solver, it becomes a *complete* hint: CP-SAT's model hints every variable, the
  auxiliaries (split counts, node use, spread value) included, from a feasible schedule
  (:meth:`optsched.exact.cpsat.RoundModel.add_hint`), and keeps the better of it and its greedy.
- :func:`warm_solve`: CP-SAT with the policy hint (the proof, hence the bound, is kept).
- :func:`dive_solve`: neural diving: fix the jobs the policy is most confident about where it
  put them, solve the residual round exactly, and join the two. Faster on big rounds, but the
  fixing gives up optimality: the result carries no bound.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from optsched.capacity import residual_round
from optsched.errors import InputError
from optsched.exact.cpsat import CpSatSolver
from optsched.learned.decode import decode
from optsched.learned.features import featurise
from optsched.learned.inference import NumpyPolicy
from optsched.learned.solver import load_policy
from optsched.model import Instance
from optsched.result import Result, Status
from optsched.schedule import Schedule
from optsched.values import schedule_value

__all__ = ["confident_jobs", "dive_solve", "policy_hint", "warm_solve"]


def policy_hint(instance: Instance, net: NumpyPolicy | None = None, *, weights: str | Path | None = None) -> Schedule:
    """The policy's greedy schedule for ``instance`` (feasible), to pass as a CP-SAT ``hint``."""
    net = net if net is not None else load_policy(weights)
    f = featurise(instance)
    return decode(instance, f, net.scores(f))


def confident_jobs(instance: Instance, schedule: Schedule, net: NumpyPolicy, share: float) -> list[str]:
    """The ``share`` of the schedule's jobs with the highest policy confidence: admit probability
    times the probability of the node the job got (its largest part) among the allowed nodes."""
    if not 0.0 <= share <= 1.0:
        raise InputError("share", share, "must be in [0, 1]")
    f = featurise(instance)
    sc = net.scores(f)
    conf = []
    for jid, a in schedule.jobs.items():
        j = instance.job_idx(jid)
        row = sc.node[j]
        p_node = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
        main = max(a.nodes, key=lambda n: a.nodes[n])
        p = 1.0 / (1.0 + np.exp(-sc.admit[j])) * p_node[instance.node_idx(main)]
        conf.append((float(p), jid))
    conf.sort(key=lambda x: (-x[0], x[1]))
    return [jid for _, jid in conf[: int(round(share * len(conf)))]]


def warm_solve(
    instance: Instance, *, time_limit: float, seed: int = 0, weights: str | Path | None = None, **cpsat_options: Any
) -> Result:
    """CP-SAT warm-started with the policy's schedule (a complete hint); keeps CP-SAT's bound."""
    start = time.perf_counter()
    hint = policy_hint(instance, weights=weights)
    t_hint = time.perf_counter() - start
    res = CpSatSolver().solve(instance, time_limit=max(0.01, time_limit - t_hint), seed=seed, hint=hint, **cpsat_options)
    stats = dict(res.stats, policy_hint_objective=schedule_value(instance, hint), policy_hint_s=t_hint)
    return replace(res, solver="cpsat+maifs", stats=stats, time_s=time.perf_counter() - start)


def dive_solve(
    instance: Instance,
    *,
    time_limit: float,
    seed: int = 0,
    share: float = 0.5,
    weights: str | Path | None = None,
    **cpsat_options: Any,
) -> Result:
    """Neural diving: fix the ``share`` most confident jobs of the policy schedule, solve the rest
    exactly (hinted with the policy's own completion), return the joined schedule (no bound)."""
    start = time.perf_counter()
    net = load_policy(weights)
    hint = policy_hint(instance, net)
    fixed_ids = confident_jobs(instance, hint, net, share)
    fixed = Schedule(instance.name, {j: hint.jobs[j] for j in fixed_ids})
    rest = residual_round(instance, fixed, name=f"{instance.name}~dive")
    rest_hint = Schedule(rest.name, {j: a for j, a in hint.jobs.items() if j not in fixed.jobs})
    remaining = max(0.01, time_limit - (time.perf_counter() - start))
    sub = CpSatSolver().solve(rest, time_limit=remaining, seed=seed, hint=rest_hint, **cpsat_options)
    joined = Schedule(instance.name, {**fixed.jobs, **sub.schedule.jobs})
    value = schedule_value(instance, joined)
    hint_value = schedule_value(instance, hint)
    if hint_value > value:  # the sub-solve can only improve the free part, but be exact about it
        joined, value = hint, hint_value
    stats = {"fixed_jobs": len(fixed_ids), "sub_status": sub.status.value, "sub_bound": sub.bound, "policy_hint_objective": hint_value}
    return Result(joined, Status.FEASIBLE, value, None, "maifs-dive", "learned", time.perf_counter() - start, stats)
