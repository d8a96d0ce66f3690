"""The shared MIP description on contract-v2 rounds (elastic gangs, move budgets, tenant quotas):
every rule-keeping schedule encodes to a feasible vector of at least its worth and every
rule-breaking one to an infeasible vector, and SCIP's and CBC's optima equal brute force."""

from __future__ import annotations

import pytest
from bruteforce import best_with_rules, feasible_schedules, rules_hold, search_size
from hypothesis import HealthCheck, assume, given, settings
from strategies import elastic_rounds

from optsched import solve_round
from optsched.mip.description import MIP_FAMILIES, build
from optsched.registry import methods
from optsched.schedule import Assignment, Schedule

SLOW_OK = [HealthCheck.too_slow, HealthCheck.filter_too_much]


def _schedule(inst, sched):
    return Schedule(inst.name, {j: Assignment(nodes, c, m) for j, (nodes, c, m) in sched.items()})


@settings(max_examples=40, deadline=None, suppress_health_check=SLOW_OK)
@given(elastic_rounds(policies=True))
def test_a_schedule_encodes_to_a_feasible_vector_exactly_when_it_keeps_the_rules(inst):
    assume(search_size(inst) <= 1500)
    mip = build(inst)
    seen = 0
    for total, sched, _load in feasible_schedules(inst):
        try:
            x = mip.encode(_schedule(inst, sched))
        except ValueError:  # a move worth <= 0: the description leaves it out on purpose
            continue
        bad = mip.model.violations(x)
        if rules_hold(inst, sched):
            assert bad == [], (sched, bad[:3])
            assert mip.model.objective_value(x) >= total - 1e-6 * max(1.0, total)
            seen += 1
        else:
            assert bad, sched
    assert seen >= 1  # the empty schedule at least


@settings(max_examples=20, deadline=None, suppress_health_check=SLOW_OK)
@given(elastic_rounds(policies=True))
def test_scip_and_cbc_optima_equal_brute_force(inst):
    assume(search_size(inst) <= 3000)
    best = best_with_rules(inst)
    for solver in ("scip", "cbc"):
        res = solve_round(inst, solver=solver, time_limit=5, greedy=False)  # the bare model: no greedy fallback
        assert res.status.value == "optimal", solver
        assert res.objective == pytest.approx(best, rel=1e-6, abs=1e-6), solver


def test_the_registry_lists_the_families_the_description_models():
    for name in ("scip", "cbc", "pulp"):
        assert {m.policies for m in methods() if m.name == name} == {MIP_FAMILIES}
