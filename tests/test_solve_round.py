"""``solve_round``: argument checks, ``auto``'s choice, the time limit, the checker gate
(:class:`SolverBug`), and what a :class:`Result` reports and serialises to.
"""

from __future__ import annotations

import json
import math
import os
import time

import pytest

import optsched.solve
from optsched.checker import check_schedule
from optsched.errors import InputError
from optsched.gen import generate
from optsched.heuristics.fixed_demand import fixed_demand_schedule
from optsched.model import Instance
from optsched.registry import _METHODS, family_default, register_method
from optsched.result import Result, Status, gap
from optsched.schedule import Assignment, Schedule
from optsched.solve import SolverBug, choose_auto, solve_round
from optsched.values import schedule_value

TINY = "t-2n-4j-01"


@pytest.fixture(scope="module")
def tiny(library) -> Instance:
    return library(TINY)


# --- argument checks: each bad argument is an InputError naming it ------------------------------

_J0 = {"nodes": {"n0": 2}, "cpus_per_gpu": 1, "mem_per_gpu_gb": 21}


@pytest.mark.parametrize(("kwargs", "field", "value"), [
    ({"method": "psychic"}, "method", "psychic"),
    ({"method": None}, "method", None),
    ({"method": "cpsat"}, "method", "cpsat"),  # a solver's name is not a method family
    ({"solver": "no-such-solver"}, "solver", "no-such-solver"),
    ({"solver": "exact"}, "solver", "exact"),  # nor a family a solver's name
    ({"method": "heuristic", "solver": "cpsat"}, "solver", "cpsat"),
    ({"method": "exact", "solver": "lns"}, "solver", "lns"),
    ({"time_limit": 0}, "time_limit", 0),
    ({"time_limit": -1.0}, "time_limit", -1.0),
    ({"time_limit": math.nan}, "time_limit", math.nan),
    ({"time_limit": math.inf}, "time_limit", math.inf),
    ({"time_limit": "10"}, "time_limit", "10"),
    ({"time_limit": True}, "time_limit", True),
    ({"seed": -1}, "seed", -1),
    ({"seed": 1.5}, "seed", 1.5),
    ({"seed": "0"}, "seed", "0"),
    ({"seed": True}, "seed", True),
    ({"hint": [1, 2]}, "hint", [1, 2]),
    ({"hint": {"jobs": {"j0": {"nodes": {"n0": 2}, "cpus_per_gpu": 1}}}}, "hint.jobs.j0.mem_per_gpu_gb", None),
    ({"hint": {"jobs": {"j0": {**_J0, "nodes": {"n0": 0}}}}}, "hint.jobs.j0.nodes.n0", 0),
])
def test_bad_arguments_name_the_argument(tiny, kwargs, field, value):
    with pytest.raises(InputError) as info:
        solve_round(tiny, **{"solver": "fixed-demand", "method": "auto", **kwargs})
    e = info.value
    assert e.field == field, str(e)
    assert e.value is value or e.value == value or (isinstance(value, float) and math.isnan(e.value))
    assert str(e).startswith(field) and repr(value) in str(e)


@pytest.mark.parametrize("hint", [
    {"jobs": {"j0": {**_J0, "nodes": {"n0": 1}}}},  # rule 2: half a gang
    {"jobs": {"zz": _J0}},  # rule 1: no such job
    {"jobs": {"j0": {**_J0, "cpus_per_gpu": 2}}},  # rule 3: off the grid
])
def test_infeasible_hint_refused(tiny, hint):
    with pytest.raises(InputError, match="not a feasible schedule") as info:
        solve_round(tiny, solver="cpsat", time_limit=1.0, hint=hint)
    assert info.value.field == "hint" and "rule" in str(info.value)


def test_bad_instance_and_unknown_option(tiny):
    d = tiny.to_dict()
    d["jobs"][1]["gpus"] = 0
    with pytest.raises(InputError) as info:
        solve_round(d, solver="fixed-demand")
    assert info.value.field == "jobs[1].gpus"
    with pytest.raises(InputError, match="bogus") as info:
        solve_round(tiny, solver="cpsat", time_limit=1.0, bogus=1)
    assert info.value.field == "options.bogus" and info.value.value == 1


def test_instance_as_dict_and_hint_as_schedule(tiny):
    hint = solve_round(tiny, solver="fixed-demand").schedule
    res = solve_round(tiny.to_dict(), solver="cpsat", time_limit=5.0, hint=hint.to_dict(), num_workers=1)
    assert res.objective >= schedule_value(tiny, hint) - 1e-9
    assert solve_round(tiny, "exact", solver="cpsat", time_limit=5.0, hint=hint, num_workers=1).solver == "cpsat"


# --- method="auto" and the family defaults ------------------------------------------------------


def test_auto_picks_exact_for_small_and_heuristic_for_large(tiny, monkeypatch):
    res = solve_round(tiny, "auto", time_limit=5.0)
    assert (res.solver, res.method) == ("cpsat", "exact")
    cells = optsched.solve.AUTO_EXACT_CELLS
    small = Instance("s", (), ())
    assert choose_auto(small, 1.0).family == "exact"
    big = generate(64, cells // 64 + 1, seed=1)
    assert math.prod(big.size) > cells
    for limit in (1.0, 10.0):
        assert choose_auto(big, limit).family in ("heuristic", "learned")
    at_limit = generate(64, cells // 64, seed=1)
    assert math.prod(at_limit.size) == cells and choose_auto(at_limit, 10.0).family == "exact"
    monkeypatch.setattr(optsched.solve, "AUTO_EXACT_CELLS", math.prod(tiny.size) - 1)
    res = solve_round(tiny, "auto", time_limit=1.0)
    assert res.method in ("heuristic", "learned") and res.solver != "cpsat"


def test_auto_partitions_the_largest_rounds(tiny, monkeypatch):
    """Above AUTO_PARTITION_CELLS auto splits the round (partitioned), whatever the time limit,
    unless the round uses a policy family partitioned does not honour; it is then solved as before."""
    monkeypatch.setattr(optsched.solve, "AUTO_PARTITION_CELLS", math.prod(tiny.size) - 1)
    for limit in (0.5, 10.0):
        assert choose_auto(tiny, limit).name == "partitioned"
    res = solve_round(tiny, "auto", time_limit=2.0)
    assert (res.solver, res.method) == ("partitioned", "heuristic")
    assert check_schedule(tiny, res.schedule).feasible
    d = tiny.to_dict()
    d["version"] = 2
    d["jobs"][0].update(deadline_s=900.0, remaining_s=600.0)
    assert choose_auto(Instance.from_dict(d), 10.0).name != "partitioned"
    monkeypatch.setattr(optsched.solve, "AUTO_PARTITION_CELLS", math.prod(tiny.size))
    assert choose_auto(tiny, 10.0).name == "cpsat"


@pytest.mark.parametrize(("method", "solver"), [("exact", "cpsat"), ("heuristic", "lns")])
def test_family_defaults(tiny, method, solver):
    res = solve_round(tiny, method, time_limit=1.0)
    assert (res.solver, res.method) == (solver, method)
    assert family_default("learned").name == "maifs"  # solved in test_learned_solver (torch is slow to load)


# --- the time limit -----------------------------------------------------------------------------

#: overhead allowed beyond time_limit on a shared 2-core machine (measured: see the test's output)
OVERHEAD_S = 1.5


@pytest.fixture(scope="module")
def medium() -> Instance:
    """A medium round (32 nodes, 120 jobs): no solver proves it optimal within a second."""
    return generate(32, 120, seed=5)


@pytest.mark.parametrize("solver", ["cpsat", "lns", "scip", "cbc"])
def test_time_limit_honoured(tiny, medium, solver, capsys):
    solve_round(tiny, solver=solver, time_limit=1.0)  # imports and first-use set-up outside the timing
    t0 = time.perf_counter()
    res = solve_round(medium, solver=solver, time_limit=1.0, seed=0)
    wall = time.perf_counter() - t0
    with capsys.disabled():
        print(f"\n[time limit] {solver}: time_limit=1.0 wall={wall:.3f}s overhead={wall - 1.0:+.3f}s "
              f"status={res.status} load={os.getloadavg()[0]:.2f}")
    assert wall <= 1.0 + OVERHEAD_S, f"{solver} took {wall:.2f}s for a 1 s limit"
    assert res.time_s <= wall
    assert check_schedule(medium, res.schedule).feasible and len(res.schedule) > 0
    assert res.status in (Status.TIME_LIMIT, Status.FEASIBLE)
    if res.bound is not None:
        assert res.bound < 1e6 and res.gap is not None and 0 <= res.gap < 1  # a real bound, not "infinity"


@pytest.mark.parametrize("solver", ["cpsat", "scip", "cbc"])
def test_tiny_time_limit_still_returns_a_feasible_schedule(medium, solver):
    res = solve_round(medium, solver=solver, time_limit=0.01, seed=0)
    assert res.status == Status.TIME_LIMIT and check_schedule(medium, res.schedule).feasible
    assert res.bound is None or res.bound < 1e6  # SCIP's "no bound yet" is 1e20: not a bound


# --- the checker gate: a lying method is a SolverBug, never a result ------------------------------


def _one_job(instance: Instance) -> Schedule:
    """A feasible one-job schedule (the first job fixed-demand places)."""
    first = next(iter(fixed_demand_schedule(instance).jobs.items()))
    return Schedule(instance.name, dict([first]))


class _Infeasible:
    def solve(self, instance, *, time_limit, seed, hint=None, **options):
        s = Schedule(instance.name, {"j0": Assignment({"n0": 1}, 1, 21)})  # j0 needs 2 GPUs
        return Result(s, Status.FEASIBLE, 1.0, None, "test-infeasible", "heuristic", 0.0)


class _WrongObjective:
    def solve(self, instance, *, time_limit, seed, hint=None, **options):
        s = _one_job(instance)
        return Result(s, Status.FEASIBLE, schedule_value(instance, s) * 1.01, None, "test-objective", "heuristic", 0.0)


class _BoundBelow:
    def solve(self, instance, *, time_limit, seed, hint=None, **options):
        s = _one_job(instance)
        v = schedule_value(instance, s)
        return Result(s, Status.OPTIMAL, v, 0.5 * v, "test-bound", "exact", 0.0)


class _Honest:
    def solve(self, instance, *, time_limit, seed, hint=None, **options):
        s = _one_job(instance)
        return Result(s, Status.FEASIBLE, schedule_value(instance, s), None, "test-honest", "heuristic", 123.0)


_FAKES = {"test-infeasible": ("heuristic", "_Infeasible"), "test-objective": ("heuristic", "_WrongObjective"),
          "test-bound": ("exact", "_BoundBelow"), "test-honest": ("heuristic", "_Honest")}


@pytest.fixture
def fakes():
    for name, (family, cls) in _FAKES.items():
        register_method(name, family, "test only", f"{__name__}:{cls}")
    yield
    for name in _FAKES:
        _METHODS.pop(name, None)  # other modules iterate the registry


@pytest.mark.parametrize(("solver", "says"), [
    ("test-infeasible", "infeasible schedule"),
    ("test-objective", "reported objective"),
    ("test-bound", "below its own objective"),
])
def test_lying_method_is_a_solver_bug(tiny, fakes, solver, says):
    with pytest.raises(SolverBug, match=says) as info:
        solve_round(tiny, solver=solver, time_limit=1.0)
    assert solver in str(info.value) and not isinstance(info.value, InputError)


def test_honest_fake_passes_and_time_is_measured(tiny, fakes):
    res = solve_round(tiny, solver="test-honest", time_limit=1.0)
    assert res.solver == "test-honest" and res.time_s < 5.0  # solve_round's clock, not the method's 123 s


def test_fakes_leave_the_registry():
    assert not set(_FAKES) & set(_METHODS)


# --- Result: status, gap, serialisation -----------------------------------------------------------


def test_status_and_gap_semantics(tiny):
    exact = solve_round(tiny, solver="cpsat", time_limit=10.0, num_workers=1)
    assert exact.status == Status.OPTIMAL and exact.bound is not None
    assert exact.gap == pytest.approx(0.0, abs=1e-6)  # bound and objective agree up to CP-SAT's scaling
    heur = solve_round(tiny, solver="fixed-demand")
    assert heur.status == Status.FEASIBLE and heur.bound is None and heur.gap is None
    assert heur.objective <= exact.objective + 1e-9
    s = Schedule.empty("x")
    assert Result(s, "time_limit", 9.0, 10.0, "x", "exact", 1.0).gap == pytest.approx(0.1)
    assert Result(s, Status.OPTIMAL, 0.0, 0.0, "x", "exact", 1.0).gap == 0.0
    assert Result(s, Status.FEASIBLE, 1.0, math.inf, "x", "exact", 1.0).gap is None
    assert gap(2.0, 2.0 - 1e-12) == 0.0  # never negative
    assert str(Status.TIME_LIMIT) == "time_limit" and Status("optimal") is Status.OPTIMAL
    with pytest.raises(ValueError):
        Status("timeout")


def test_scip_infinity_is_no_bound(tiny, monkeypatch):
    """SCIP says 1e20 when stopped before its root LP (seen at 1 s on the medium round): gap None, not 1."""
    from ortools.linear_solver import pywraplp

    monkeypatch.setattr(pywraplp.Objective, "BestBound", lambda self: 1e20)
    res = solve_round(tiny, solver="scip", time_limit=5.0)
    assert res.bound is None and res.gap is None


@pytest.mark.parametrize("solver", ["cpsat", "fungible-greedy"])
def test_result_to_dict_is_the_contract_schedule(tiny, solver):
    res = solve_round(tiny, solver=solver, time_limit=5.0)
    doc = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    assert doc["instance"] == tiny.name and doc["solver"] == solver and doc["status"] == res.status.value
    assert {"jobs", "objective", "bound", "gap", "method", "time_s"} <= set(doc)
    assert Schedule.from_dict(doc) == res.schedule
    report = check_schedule(tiny, doc)
    assert report.feasible and report.objective == pytest.approx(doc["objective"], rel=1e-9)
    assert doc["gap"] == res.gap and doc["bound"] == res.bound
    with pytest.raises(TypeError):
        res.stats["x"] = 1  # type: ignore[index]
    assert res.summary().startswith(f"{tiny.name}: {res.status.value} ")
