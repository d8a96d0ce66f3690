"""Every registered method: feasible, honest objective/bound, and exact == brute force on tiny rounds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings

import optsched
from optsched.checker import check_schedule
from optsched.result import Status

sys.path.insert(0, str(Path(__file__).parent))
from bruteforce import brute_force, search_size  # noqa: E402
from strategies import tiny_instances  # noqa: E402

METHODS = list(optsched.methods())


def _solver(info):
    return info.load()()


def _opts(info) -> dict:
    return {"num_workers": 1} if info.name == "cpsat" else {}


@pytest.mark.parametrize("info", METHODS, ids=lambda i: i.name)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_instances())
def test_method_feasible_honest_and_optimal(info, inst):
    assume(search_size(inst) <= 20000)
    solver = _solver(info)
    res = solver.solve(inst, time_limit=2.0, seed=0, **_opts(info))
    report = check_schedule(inst, res.schedule)
    assert list(report) == [], f"{info.name} infeasible: {list(report)}"
    assert res.objective == pytest.approx(report.objective, rel=1e-6, abs=1e-9)
    if res.bound is not None:
        assert res.bound >= res.objective - 1e-6
    best, _ = brute_force(inst)
    assert res.objective <= best + 1e-6
    if info.family == "exact" and res.status == Status.OPTIMAL:
        assert res.objective == pytest.approx(best, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("info", METHODS, ids=lambda i: i.name)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_instances())
def test_method_deterministic_by_seed(info, inst):
    solver = _solver(info)
    a = solver.solve(inst, time_limit=2.0, seed=3, **_opts(info))
    b = _solver(info).solve(inst, time_limit=2.0, seed=3, **_opts(info))
    assert a.schedule.to_dict() == b.schedule.to_dict()
