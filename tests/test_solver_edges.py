"""Solver edges on valid rounds: honest statuses and bounds, one numeric range, size limits.

- a round where nothing can run is answered by every method with objective 0, bound 0, optimal;
- a round whose job values span more than ``limits.MAX_VALUE_SPAN`` is refused by every method
  with the same ``InputError`` (before any model is built);
- scip, cbc and pulp refuse rounds above their ``limits.MAX_CELLS`` (fast: nothing is built);
- a MIP backend whose final bound is below its objective reports no bound and no proof.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from optsched import Instance, solve_round
from optsched.errors import InputError
from optsched.exact.cpsat import CpSatSolver
from optsched.exact.scaling import ValueScale
from optsched.gen import generate
from optsched.mip.solvers import CbcSolver, PulpSolver, ScipSolver
from optsched.result import Status
from optsched.schedule import Schedule

ROOT = Path(__file__).resolve().parents[1]
DOC = json.loads((ROOT / "instances" / "tiny" / "t-2n-4j-01.json").read_text())
#: the MIP size limits (optsched.limits.MAX_CELLS), written out so that the test runs where the table is missing
MIP_CELLS = {"scip": 65_536, "cbc": 65_536, "pulp": 65_536}
METHODS = ["cpsat", "lns", "scip", "cbc", "pulp", "fungible-greedy", "fixed-demand", "maifs", "partitioned"]


def _round(edit) -> Instance:
    d = copy.deepcopy(DOC)
    edit(d)
    return Instance.from_dict(d)


def _no_jobs(d):
    d["jobs"] = []


def _unknown_types(d):
    for j in d["jobs"]:
        j["gpu_speed"] = {"TPU-X": 1.0}
        j.pop("placement", None)


def _no_memory(d):
    for n in d["nodes"]:
        n["mem_gb"] = 0


def _no_nodes(d):
    d["nodes"] = []
    for j in d["jobs"]:
        j.pop("placement", None)


def _no_gpus(d):
    for n in d["nodes"]:
        n["gpus"] = 0


NOTHING_RUNS = {"no-jobs": _no_jobs, "unknown-gpu-types": _unknown_types, "no-memory": _no_memory, "no-gpus": _no_gpus, "no-nodes": _no_nodes}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", sorted(NOTHING_RUNS))
def test_nothing_can_run_is_optimal_at_zero(case, method):
    res = solve_round(_round(NOTHING_RUNS[case]), solver=method, time_limit=1.0)
    assert (res.status, res.objective, res.bound, res.gap) == (Status.OPTIMAL, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("case", sorted(NOTHING_RUNS))
def test_cpsat_bound_is_zero_when_called_directly(case):
    """Not only solve_round: cpsat's own bound is 0 (it was 0.5 or 2 from the rounding slack)."""
    res = CpSatSolver().solve(_round(NOTHING_RUNS[case]), time_limit=1.0, seed=0)
    assert (res.status, res.objective, res.bound) == (Status.OPTIMAL, 0.0, 0.0)


def test_value_scale_without_values_bounds_at_zero():
    scale = ValueScale.for_values([], 0.0, 0)
    assert scale.max_error == 0.0 and scale.bound(0) == 0.0


def _wide(d):
    # throughputs spanning 1e-3 .. 1e3 on one job: relative values up to 1e6 x apart, times weights
    d["jobs"][0]["profile"]["throughput"][0][0] = 1e-3
    d["jobs"][0]["profile"]["throughput"][-1][-1] = 1e4
    d["jobs"][1]["weight"] = 1e-3


@pytest.mark.parametrize("method", METHODS)
def test_value_span_refused_the_same_way_by_every_method(method):
    from optsched.limits import MAX_VALUE_SPAN, check_value_span

    inst = _round(_wide)
    with pytest.raises(InputError) as info:
        check_value_span(inst)
    with pytest.raises(InputError) as by_method:
        solve_round(inst, solver=method, time_limit=0.5)
    assert (by_method.value.field, by_method.value.problem) == (info.value.field, info.value.problem)
    assert f"{MAX_VALUE_SPAN:g}" in by_method.value.problem


def test_value_span_within_limit_is_solved_by_every_mip():
    """Values 1e4 x apart and more (inside the span) are solved alike, the bound never below the objective."""
    def edit(d):
        d["jobs"][1]["weight"] = 0.05
        d["jobs"][2]["weight"] = 500.0
    from optsched.limits import check_value_span

    inst = _round(edit)
    check_value_span(inst)
    objectives = []
    for method in ("cpsat", "scip", "cbc", "pulp"):
        res = solve_round(inst, solver=method, time_limit=5.0)
        assert res.bound is None or res.bound >= res.objective - 1e-6 * res.objective
        objectives.append(res.objective)
    assert max(objectives) - min(objectives) <= 1e-6 * max(objectives)


@pytest.mark.parametrize("method", sorted(MIP_CELLS))
def test_mip_refuses_rounds_above_its_size_limit(method):
    limit = MIP_CELLS[method]
    nodes = 128
    jobs = limit // nodes + 1
    inst = generate(nodes, jobs, seed=0)
    with pytest.raises(InputError) as info:
        solve_round(inst, solver=method, time_limit=0.5)
    assert f"{limit:,}" in info.value.problem and f"{nodes * jobs:,}" in str(info.value.value)
    from optsched.limits import MAX_CELLS

    assert MAX_CELLS[method] == limit  # the table and the docs say the same
    solver = {"scip": ScipSolver, "cbc": CbcSolver, "pulp": PulpSolver}[method]()
    with pytest.raises(InputError):  # a direct call too, before anything is built
        solver.solve(inst, time_limit=0.5, seed=0)


def test_bound_below_objective_is_no_bound(monkeypatch):
    """A backend that ends with a bound below its own objective: no bound, no proof, a warning."""
    inst = Instance.from_dict(DOC)
    good = solve_round(inst, solver="cpsat", time_limit=2.0)
    assert good.objective > 0

    def lying(self, mip, time_limit, seed, hint, num_threads, log, stats):
        return Schedule.from_dict(good.schedule.to_dict()), Status.OPTIMAL, 0.5 * good.objective

    monkeypatch.setattr(ScipSolver, "_solve", lying)
    res = solve_round(inst, solver="scip", time_limit=2.0)
    assert res.bound is None and res.status is Status.FEASIBLE and "below the objective" in res.stats["warning"]


def test_range_checked_for_rounds_built_in_python():
    """A round built from the dataclasses skips ``Instance.from_dict``: ``solve_round`` checks the
    range itself, before any method (10^400 GPUs crashed float conversions in the solvers)."""
    from dataclasses import replace

    inst = Instance.from_dict(DOC)
    huge = replace(inst, nodes=(replace(inst.nodes[0], gpus=10**400), *inst.nodes[1:]))
    heavy = replace(inst, jobs=(replace(inst.jobs[0], weight=1e308), *inst.jobs[1:]))
    for bad, field in ((huge, "nodes[0].gpus"), (heavy, "jobs[0].weight")):
        for method in ("cpsat", "fungible-greedy"):
            with pytest.raises(InputError) as info:
                solve_round(bad, solver=method, time_limit=0.5)
            assert info.value.field == field
