"""The benchmark runner: resumable rows, metrics, summary, index and plots (no real solver needed)."""

from __future__ import annotations

import csv
import json

import pytest

from optsched import Instance, Job, Node, Profile, Result, Schedule, Status, save_instance
from optsched.bench import BenchTask, run_bench, summarise
from optsched.bench.index import instance_files, read_index, update_index
from optsched.bench.runner import primal_integral, read_rows, read_trajectories, time_to_gap
from optsched.bench.summary import format_table, size_class
from optsched.registry import _METHODS, register_method
from optsched.schedule import Assignment
from optsched.values import schedule_value

PROFILE = Profile((1, 2), (10, 20), ((1.0, 1.0), (2.0, 2.0)))


def _instance(name: str) -> Instance:
    return Instance(name, (Node("n0", "V100", 2, 4, 40),), (Job("a", 1, PROFILE, (1, 10)), Job("b", 1, PROFILE, (1, 10))))


class _OneJob:
    """Test solver: schedules job 'a' at (2, 10) and reports a two-point trajectory."""

    def solve(self, instance, *, time_limit, seed, hint=None, **options):
        s = Schedule(instance.name, {"a": Assignment({"n0": 1}, 2, 10)})
        obj = schedule_value(instance, s)
        return Result(s, Status.FEASIBLE, obj, 4.0, "test-one", "heuristic", 0.01, trajectory=[(0.0, 0.0, 5.0), (0.01, obj, 4.0)])


@pytest.fixture(scope="module", autouse=True)
def _registered():
    if "test-one" not in _METHODS:
        register_method("test-one", "heuristic", "test only", f"{__name__}:_OneJob")
    yield
    _METHODS.pop("test-one", None)  # other modules iterate the registry's heuristics


def test_time_to_gap_and_primal_integral_by_hand():
    traj = [(1.0, 5.0), (3.0, 9.0), (6.0, 10.0)]
    assert time_to_gap(traj, 10.0, 0.01) == 6.0
    assert time_to_gap(traj, 10.0, 0.15) == 3.0
    assert time_to_gap(traj, None) is None
    # gap 1 on [0,1), 0.5 on [1,3), 0.1 on [3,6), 0 on [6,10]
    assert primal_integral(traj, 10.0, 10.0) == pytest.approx(1.0 + 1.0 + 0.3)


def test_run_bench_writes_rows_and_resumes(tmp_path):
    files = []
    for name in ("i1", "i2"):
        save_instance(_instance(name), tmp_path / f"{name}.json")
        files.append(tmp_path / f"{name}.json")
    out = tmp_path / "res.csv"
    tasks = [BenchTask(str(f), "test-one", 0, 1.0) for f in files]
    rows = run_bench(tasks, out, backend="serial", progress=False)
    assert len(rows) == 2
    assert all(r["feasible"] == 1 and r["status"] == "feasible" for r in rows)
    assert run_bench(tasks, out, backend="serial", progress=False) == []  # resumed: nothing to redo
    stored = read_rows(out)
    assert len(stored) == 2 and float(stored[0]["objective"]) == pytest.approx(2.0)
    assert set(read_trajectories(out)) == {(f.name, "test-one", "0", "1") for f in files}
    with out.open() as f:
        assert next(csv.reader(f))[0] == "instance"


def test_errors_become_rows_and_are_retried(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 9}))
    out = tmp_path / "res.csv"
    rows = run_bench([BenchTask(str(bad), "test-one")], out, backend="serial", progress=False)
    assert rows[0]["status"] == "error" and "version" in rows[0]["error"]
    assert len(run_bench([BenchTask(str(bad), "test-one")], out, backend="serial", progress=False)) == 1


def test_summary_index_and_plots(tmp_path):
    save_instance(_instance("i1"), tmp_path / "i1.json")
    out = tmp_path / "res.csv"
    run_bench([BenchTask(str(tmp_path / "i1.json"), "test-one")], out, backend="serial", progress=False)
    rows = read_rows(out)
    summary = summarise(rows)
    assert summary[0]["class"] == "tiny" and summary[0]["runs"] == 1 and summary[0]["infeasible"] == 0
    assert "test-one" in format_table(summary)
    index = update_index(tmp_path / "index.csv", instance_files([tmp_path]), rows)
    assert index["i1.json"]["best_known"] == pytest.approx(2.0)
    assert read_index(tmp_path / "index.csv")["i1.json"]["proven_optimal"] == "0"  # bound 4 > 2

    from optsched.commands.bench import _plots

    _plots(tmp_path / "plots", rows, read_trajectories(out))
    assert (tmp_path / "plots" / "performance_profile.png").stat().st_size > 1000
    assert (tmp_path / "plots" / "bounds_i1.png").exists()


def test_size_classes():
    assert size_class(4, 8) == "tiny"
    assert size_class(8, 32) == "small"
    assert size_class(64, 256) == "medium"
    assert size_class(1024, 4000) == "large"
    assert size_class(2048, 8000) == "huge"


def test_lp_bound_and_optimal_status_prove_an_instance(tmp_path):
    """An LP bound below the solver's bound becomes the best bound; a run with status optimal
    proves the instance within CP-SAT's scaling resolution; rescore measures old runs against
    the index's best value."""
    from optsched.bench.index import lp_bounds
    from optsched.bench.runner import rescore, write_rows

    save_instance(_instance("i1"), tmp_path / "i1.json")
    files = instance_files([tmp_path])
    out = tmp_path / "res.csv"
    rows = run_bench([BenchTask(str(files[0]), "test-one", 0, 1.0)], out, backend="serial", progress=False)
    lp = lp_bounds(files, progress=False)
    assert lp["i1.json"] == pytest.approx(4.0, rel=1e-5)  # both jobs at 2 cores: 2.0 each
    index = update_index(tmp_path / "index.csv", files, read_rows(out), {"i1.json": 3.9})
    assert float(index["i1.json"]["best_bound"]) == 3.9 and float(index["i1.json"]["lp_bound"]) == 3.9
    assert index["i1.json"]["proven_optimal"] == 0  # best known 2.0 < 3.9

    near = [{**r, "objective": 4.0 * (1 - 5e-6)} for r in read_rows(out)]
    index = update_index(tmp_path / "index2.csv", files, near, lp)
    assert index["i1.json"]["proven_optimal"] == 0  # 5e-6 apart and no run claims optimality
    index = update_index(tmp_path / "index3.csv", files, [{**r, "status": "optimal"} for r in near], lp)
    assert index["i1.json"]["proven_optimal"] == 1  # within 1e-5 and claimed optimal by a run

    rescored = rescore(read_rows(out), read_trajectories(out), {"i1.json": 4.0})
    assert float(rescored[0]["gap_to_best"]) == pytest.approx(0.5)
    assert rescored[0]["time_to_1pct"] == "" and float(rescored[0]["primal_integral"]) > 0
    write_rows(out, rescored)
    assert read_rows(out)[0]["best_known"] == "4.0" and len(rows) == 1


def test_markdown_summary_has_one_row_per_group():
    rows = [{"nodes": "2", "jobs": "4", "solver": s, "status": "optimal", "feasible": "1", "time_s": "0.1", "gap": "0",
             "gap_to_best": "0"} for s in ("a", "b")]
    md = format_table(summarise(rows), markdown=True).splitlines()
    assert md[0].startswith("| class | solver") and md[1].startswith("|---")
    assert len(md) == 4 and md[2].startswith("| tiny | a | 1 |")
