"""Incumbent/bound trajectories: the recorder, the methods that fill it, solve_round's progress
callback, the literature's metrics on hand-built trajectories, and the CLI's -v."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from optsched import load_instance, solve_round
from optsched.bench.runner import primal_gap, primal_integral, time_to_gap
from optsched.trajectory import Trajectory, TrajectoryPoint, current, recorded, recording

LIB = Path(__file__).resolve().parent.parent / "instances"


def _monotone(points) -> bool:
    objs = [p.objective for p in points if p.objective is not None]
    bounds = [p.bound for p in points if p.bound is not None]
    times = [p.t_s for p in points]
    first_bound = next((i for i, p in enumerate(points) if p.bound is not None), len(points))
    return (all(a <= b for a, b in zip(objs, objs[1:], strict=False))
            and all(a >= b for a, b in zip(bounds, bounds[1:], strict=False))
            and all(a <= b for a, b in zip(times, times[1:], strict=False))
            and all(p.bound is not None for p in points[first_bound:]))


# --- the recorder ------------------------------------------------------------------------------


def test_recorder_keeps_only_improving_events():
    """An event that improves neither the objective nor the bound is dropped; each point carries
    the best of both so far."""
    seen = []
    rec = Trajectory(start=100.0, listener=lambda *a: seen.append(a))
    rec.record(5.0, at=101.0)
    rec.record(4.0, 20.0, at=102.0)  # worse objective, first bound
    rec.record(4.5, at=103.0)  # improves nothing
    rec.record(bound=25.0, at=104.0)  # a looser bound: nothing
    rec.record(6.0, 18.0, at=105.0)
    assert rec.points == (TrajectoryPoint(1.0, 5.0, None), TrajectoryPoint(2.0, 5.0, 20.0), TrajectoryPoint(5.0, 6.0, 18.0))
    assert seen == [tuple(p) for p in rec.points]


def test_close_ends_at_the_result():
    """close() adds the final values, lowers objectives above it (scaling rounding) and raises
    bounds below it, so the trajectory ends at the result's objective and bound."""
    rec = Trajectory(start=0.0)
    rec.record(5.0, 9.0, at=1.0)
    rec.record(6.0 + 1e-9, 7.5, at=2.0)
    pts = rec.close(6.0, 8.0, at=3.0)
    assert pts[-1] == TrajectoryPoint(2.0, 6.0, 8.0)
    assert pts[0] == TrajectoryPoint(1.0, 5.0, 9.0) and _monotone(pts)
    no_bound = Trajectory(start=0.0)
    no_bound.record(5.0, 9.0, at=1.0)
    assert no_bound.close(7.0, None, at=2.0) == (TrajectoryPoint(1.0, 5.0, None), TrajectoryPoint(2.0, 7.0, None))


def test_close_keeps_only_the_result_after_a_worse_final_schedule():
    """A method whose result is worth less than a recorded incumbent ranked by more than worth:
    only the final point is honest then."""
    rec = Trajectory(start=0.0)
    rec.record(9.0, at=1.0)
    assert rec.close(6.0, None, at=2.0) == (TrajectoryPoint(2.0, 6.0, None),)


def test_muted_recorder_records_only_the_result():
    rec = Trajectory(start=0.0)
    rec.mute()
    rec.record(5.0, at=1.0)
    assert not rec.active and rec.points == ()
    assert rec.close(4.0, 5.0, at=2.0) == (TrajectoryPoint(2.0, 4.0, 5.0),)


class _Inner:
    @recorded
    def solve(self, instance, value):
        current().record(value)
        from optsched import Result, Schedule, Status

        return Result(Schedule.empty(instance.name), Status.FEASIBLE, 0.0, None, "inner", "heuristic", 0.0)


def test_nested_calls_forward_only_on_the_same_round():
    """A method called inside nested() on the caller's round forwards its events; on another
    round (a sub-problem) or outside nested() it does not."""
    round_a, round_b = load_instance(LIB / "tiny" / "t-2n-4j-01.json"), load_instance(LIB / "tiny" / "t-2n-4j-01.json")
    with recording(round_a) as outer:
        _Inner().solve(round_a, 1.0)  # not nested: nothing
        with outer.nested():
            _Inner().solve(round_b, 2.0)  # another round object: nothing
            _Inner().solve(round_a, 3.0)
    assert [p.objective for p in outer.points] == [3.0]


# --- metrics -----------------------------------------------------------------------------------


def test_primal_gap_cases():
    """Berthold (2013): 1 without an incumbent or across signs, 0 for two zeros, else relative."""
    assert primal_gap(10.0, None) == 1.0
    assert primal_gap(10.0, -1.0) == 1.0
    assert primal_gap(0.0, 0.0) == 0.0
    assert primal_gap(10.0, 0.0) == 1.0
    assert primal_gap(10.0, 8.0) == pytest.approx(0.2)
    assert primal_gap(8.0, 10.0) == pytest.approx(0.2)  # an incumbent above the reference


def test_primal_integral_known_values():
    """Step functions integrated by hand."""
    # no incumbent on [0, 2), 0.5 on [2, 4), 0.2 on [4, 5), 0 on [5, 10]
    traj = [(0.5, None, 20.0), (2.0, 5.0, 12.0), (4.0, 8.0, 11.0), (5.0, 10.0, 10.0)]
    assert primal_integral(traj, 10.0, 10.0) == pytest.approx(2.0 + 1.0 + 0.2)
    assert primal_integral([], 10.0, 3.0) == pytest.approx(3.0)  # never an incumbent: the horizon
    assert primal_integral([(0.0, 10.0, 10.0)], 10.0, 7.0) == 0.0  # optimal at once
    # events past the horizon do not count
    assert primal_integral([(1.0, 5.0), (20.0, 10.0)], 10.0, 4.0) == pytest.approx(1.0 + 0.5 * 3.0)
    assert primal_integral(traj, None, 10.0) is None and primal_integral(traj, 10.0, 0.0) is None


def test_time_to_gap_skips_bound_only_events():
    traj = [(0.5, None, 20.0), (2.0, 9.8, 12.0), (4.0, 9.95, 10.0)]
    assert time_to_gap(traj, 10.0, 0.01) == 4.0
    assert time_to_gap(traj, 10.0, 0.05) == 2.0
    assert time_to_gap(traj, 100.0) is None


# --- methods -----------------------------------------------------------------------------------


CASES = [
    ("small/s-4n-12j-01.json", "cpsat", {"num_workers": 1, "deterministic_time": 1.0}),
    ("small/s-8n-32j-01.json", "lns", {"deterministic_time": 0.5, "bound": "lp"}),
    ("small/s-8n-32j-01.json", "fungible-greedy", {}),
    ("small/s-8n-32j-01.json", "fixed-demand", {}),
    ("tiny/t-2n-4j-01.json", "scip", {}),
]


@pytest.mark.parametrize(("path", "solver", "options"), CASES, ids=[c[1] for c in CASES])
def test_trajectory_is_monotone_and_ends_at_the_result(path, solver, options):
    """Every method's trajectory (as solve_round returns it) is monotone and ends at the result's
    objective and bound; the progress callback sees the same monotone events."""
    seen: list[tuple[float, float | None, float | None]] = []
    res = solve_round(load_instance(LIB / path), solver=solver, time_limit=10.0, seed=0,
                      progress=lambda *a: seen.append(a), **options)
    pts = res.trajectory
    assert pts and _monotone(pts)
    assert pts[-1].objective == res.objective and pts[-1].bound == res.bound
    assert pts[-1].t_s <= res.time_s + 1e-9
    events = [TrajectoryPoint(*e) for e in seen]
    assert events and _monotone(events)
    assert math.isclose(events[-1].objective, res.objective, rel_tol=1e-6)
    assert res.to_dict()["trajectory"][-1][1:] == [res.objective, res.bound]


def test_cpsat_records_hints_and_incumbents():
    """cpsat on a small round: its greedy hints and CP-SAT's incumbents and bounds, >= 3 points."""
    res = solve_round(load_instance(LIB / "small" / "s-4n-12j-01.json"), solver="cpsat", time_limit=10.0,
                      num_workers=1, deterministic_time=1.0)
    assert len(res.trajectory) >= 3
    assert res.trajectory[0].objective < res.objective  # the greedy hint first
    assert any(p.bound is not None and p.bound > res.objective for p in res.trajectory)  # bounds before the proof


def test_progress_must_be_callable():
    from optsched.errors import InputError

    with pytest.raises(InputError, match="progress"):
        solve_round(load_instance(LIB / "tiny" / "t-2n-4j-01.json"), solver="fixed-demand", progress="yes")


# --- CLI ---------------------------------------------------------------------------------------


def test_cli_verbose_prints_progress_only_with_v(capsys):
    from optsched.cli import main

    inst = str(LIB / "small" / "s-4n-12j-01.json")
    args = ["solve", inst, "--solver", "cpsat", "--option", "num_workers=1", "--option", "deterministic_time=0.5"]
    assert main([*args, "-v"]) == 0
    err = capsys.readouterr().err.splitlines()
    lines = [ln for ln in err if "incumbent=" in ln]
    assert len(lines) >= 2 and all(ln.startswith("optsched: ") and "bound=" in ln for ln in lines)
    assert main(args) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "incumbent=" not in err[0]  # the summary only


def test_cli_solver_log_goes_to_stderr(capfd):
    """--solver-log: CP-SAT's own log on stderr; stdout holds only the schedule JSON."""
    import json

    from optsched.cli import main

    assert main(["solve", str(LIB / "tiny" / "t-2n-4j-01.json"), "--solver", "cpsat", "--solver-log"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["status"] == "optimal"
    assert "CP-SAT" in err
    assert main(["solve", str(LIB / "tiny" / "t-2n-4j-01.json"), "--solver", "fixed-demand", "--solver-log"]) == 0
    assert "no search log" in capfd.readouterr().err


def test_recording_does_not_change_the_search():
    """With a deterministic budget cpsat returns the same schedule whether its trajectory is
    recorded (solution and bound callbacks) or not (a sub-problem's call records nothing)."""
    from optsched.exact.cpsat import CpSatSolver

    inst = load_instance(LIB / "small" / "s-6n-24j-het-01.json")
    opts = {"num_workers": 2, "deterministic_time": 0.5, "config_fixing": False}
    recorded_run = CpSatSolver().solve(inst, time_limit=30.0, seed=0, **opts)
    with recording(load_instance(LIB / "tiny" / "t-2n-4j-01.json")):
        silent = CpSatSolver().solve(inst, time_limit=30.0, seed=0, **opts)
    assert len(silent.trajectory) == 1 and len(recorded_run.trajectory) > 1
    assert recorded_run.schedule == silent.schedule and recorded_run.objective == silent.objective
