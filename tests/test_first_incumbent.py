"""A long solve's first schedule, early: incumbents recorded with their schedules, partitioned's
union of the parts answered so far, and the command line's ``--write-first``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import optsched.commands.solve as solve_cmd
from optsched import load_instance
from optsched.checker import check_schedule
from optsched.cli import main
from optsched.errors import InputError
from optsched.model import Instance, Job, Node, Profile, Round
from optsched.schedule import Schedule
from optsched.solve import solve_round
from optsched.trajectory import Trajectory

ROOT = Path(__file__).resolve().parent.parent
MEDIUM = ROOT / "instances" / "medium" / "m-48n-200j-run-01.json"
OPTIONS = {"parts": 3, "work": 0.1, "backend": "serial"}


def test_an_incumbent_s_schedule_is_built_only_for_a_listener_and_only_when_it_improves():
    built: list[float] = []
    seen: list[tuple[float, Schedule]] = []

    def schedule(v: float):
        def build() -> Schedule:
            built.append(v)
            return Schedule("r", {})
        return build

    root = Trajectory(incumbent=lambda t, obj, get: seen.append((obj, get())))
    child = Trajectory(parent=root)
    child.record(1.0, schedule=schedule(1.0))
    child.record(1.0, schedule=schedule(1.0))  # no better: dropped
    child.record(bound=5.0)  # a bound only: no incumbent
    child.record(2.0, schedule=schedule(2.0))
    child.record(3.0)  # no schedule: nothing to pass on
    assert [obj for obj, _ in seen] == [1.0, 2.0] and built == [1.0, 2.0]
    Trajectory().record(4.0, schedule=schedule(4.0))  # no listener: never built
    assert built == [1.0, 2.0]


def _incumbents(inst: Instance, **kw) -> tuple[list[tuple[float, float, Schedule]], object]:
    got: list[tuple[float, float, Schedule]] = []
    res = solve_round(inst, solver="partitioned", time_limit=30.0, seed=3, incumbent=lambda t, obj, get: got.append((t, obj, get())),
                      **OPTIONS, **kw)
    return got, res


def test_partitioned_passes_each_part_s_union_feasible_and_worth_what_it_says():
    inst = load_instance(MEDIUM)
    got, res = _incumbents(inst)
    assert len(got) >= 2
    for (t, obj, sched), (t_next, obj_next, sched_next) in zip(got, got[1:], strict=False):
        assert t <= t_next and obj < obj_next and set(sched.jobs) < set(sched_next.jobs)
    for _t, obj, sched in got:
        report = check_schedule(inst, sched)
        assert list(report) == [] and report.objective == pytest.approx(obj)
    assert got[-1][1] <= res.objective + 1e-9
    assert got[0][0] < res.time_s
    plain = solve_round(inst, solver="partitioned", time_limit=30.0, seed=3, **OPTIONS)
    assert plain.schedule.to_dict() == res.schedule.to_dict()  # listening changes nothing


def test_no_partial_union_when_a_job_is_pinned():
    prof = Profile((2, 4), (16, 32), ((1.0, 1.2), (1.3, 1.5)))
    nodes = tuple(Node(f"n{i}", "V100", 4, 16, 128) for i in range(6))
    jobs = [Job(f"j{k}", 1 + k % 2, prof, (2, 16)) for k in range(18)]
    jobs[0] = replace(jobs[0], gpus=2, placement={"n1": 2}, preemptible=False)
    inst = Instance("pinned", nodes, tuple(jobs), Round())
    got, res = _incumbents(inst)
    assert got == [] and res.schedule.jobs["j0"].nodes == {"n1": 2}


def test_incumbent_must_be_callable():
    with pytest.raises(InputError, match="incumbent"):
        solve_round(load_instance(MEDIUM), solver="fixed-demand", incumbent="yes")


def test_cli_write_first_writes_the_checked_first_incumbent_then_the_final_schedule(tmp_path, monkeypatch, capsys):
    out = tmp_path / "s.json"
    written: list[dict] = []
    real = solve_cmd.write_json

    def spy(doc, path):
        written.append(doc)
        real(doc, path)

    monkeypatch.setattr(solve_cmd, "write_json", spy)
    args = ["solve", str(MEDIUM), "--solver", "partitioned", "--time-limit", "30", "-o", str(out), "--write-first", "-v",
            *(f"--option={k}={v}" for k, v in OPTIONS.items())]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "first incumbent worth" in err and "checked and written" in err and err.index("first incumbent") < err.index("feasible objective")
    first, final = written
    assert first["stats"] == {"first_incumbent": True} and first["status"] == "feasible" and first["solver"] == "partitioned"
    inst = load_instance(MEDIUM)
    assert check_schedule(inst, Schedule.from_dict(first)).objective == pytest.approx(first["objective"])
    assert first["objective"] < final["objective"] and "first_incumbent" not in final["stats"]
    assert main(["check", str(MEDIUM), str(out)]) == 0


def test_cli_write_first_needs_an_output_file(capsys):
    assert main(["solve", str(MEDIUM), "--write-first"]) == 2
    assert "--write-first" in capsys.readouterr().err
