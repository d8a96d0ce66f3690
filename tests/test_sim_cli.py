"""``optsched simulate`` end to end, the metrics files, and the plots."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from test_sim_support import StandInCatalogue, first_fit, fungible_first_fit

from optsched.errors import InputError
from optsched.sim import cluster, policies
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate
from optsched.sim.metrics import compare, mean_ci, read_run, write_jobs_csv, write_metrics_json
from optsched.sim.result import summarise
from optsched.sim.traces import Trace
from optsched.sim.workload import build_workload, parse_duration

TRACE = """job_id,submit_time_s,duration_s,num_gpus,gpu_fraction,cpu_cores,mem_gib,tenant,user,status,gpu_type,censored
a,0,600,1,1.0,,,vc,,,,0
b,10,1200,2,1.0,,,vc,,,,0
c,20,300,4,1.0,,,vc,,,,0
d,400,900,8,1.0,,,vc,,,,0
e,700,200,1,1.0,,,vc,,,,0
"""


def _runs():
    nodes = cluster.homogeneous(2, gpus=4, cpus=32, mem_gb=256)
    rng = np.random.default_rng(0)
    n = 12
    tr = Trace.from_columns("t", {"job_id": [f"j{i}" for i in range(n)], "submit_s": np.sort(rng.uniform(0, 900, n)),
                                  "duration_s": rng.uniform(100, 800, n), "gpus": rng.choice([1, 2, 4], n)})
    wl = build_workload(tr, nodes, catalogue=StandInCatalogue(), seed=0)
    cfg = SimConfig(round_s=100, progress=False, check=True)
    return {"fixed": simulate(wl, nodes, policies.LAS(), first_fit, cfg),
            "fungible": simulate(wl, nodes, policies.LAS(), fungible_first_fit, cfg)}


def test_metrics_files_round_trip(tmp_path):
    res = _runs()["fungible"]
    j = write_metrics_json(res, tmp_path / "m.json")
    doc = json.loads(j.read_text())
    assert doc["metrics"] == json.loads(json.dumps(summarise(res)))
    assert set(doc["timeline"]) >= {"t_s", "gpu_util", "cpu_util", "mem_util", "solve_s", "gap"}
    assert doc["run"]["policy"] == "las"
    rows = list(csv.DictReader(write_jobs_csv(res, tmp_path / "j.csv").open()))
    assert len(rows) == 12 and float(rows[0]["jct_s"]) == pytest.approx(res.jct_s[0])


def test_read_run_gives_back_what_was_written(tmp_path):
    res = _runs()["fixed"]
    back = read_run(write_metrics_json(res, tmp_path / "m.json"), write_jobs_csv(res, tmp_path / "j.csv"))
    np.testing.assert_allclose(back.jct_s, res.jct_s)
    np.testing.assert_array_equal(back.jobs["id"], res.jobs["id"])
    np.testing.assert_allclose(back.rounds["gpu_util"], res.rounds["gpu_util"])
    s, b = summarise(res), summarise(back)
    for k in ("avg_jct_s", "p99_jct_s", "makespan_s", "gpu_util", "cpu_util", "preemptions", "moves", "solver_calls"):
        assert b[k] == pytest.approx(s[k]), k
    assert back.info["policy"] == "las"
    assert read_run(tmp_path / "m.json").jobs["finish_s"].size == 0  # the JSON alone: no per-job columns


def test_fungible_beats_fixed_on_the_stand_in():
    runs = _runs()
    s = {k: v.summary() for k, v in runs.items()}
    assert s["fungible"]["avg_jct_s"] < s["fixed"]["avg_jct_s"]
    assert compare(s["fungible"]["avg_jct_s"], s["fixed"]["avg_jct_s"]) > 0


def test_plots_write_a_png(tmp_path):
    from optsched.sim.plots import plot_jct_cdf, plot_runs

    p = plot_runs(_runs(), tmp_path / "runs.png")
    assert p.stat().st_size > 10_000
    ax = plot_jct_cdf(_runs())
    assert len(ax.get_lines()) == 2


def test_plots_of_a_run_where_no_job_finished_say_so_without_warnings(tmp_path):
    import warnings

    from optsched.sim.plots import plot_jct_cdf, plot_runs

    nodes = cluster.homogeneous(1, gpus=4, cpus=32, mem_gb=256)
    tr = Trace.from_columns("t", {"job_id": ["a"], "submit_s": [0.0], "duration_s": [5000.0], "gpus": [1]})
    wl = build_workload(tr, nodes, catalogue=StandInCatalogue(), seed=0)
    run = simulate(wl, nodes, policies.LAS(), first_fit, SimConfig(round_s=100, progress=False, horizon_s=300))
    assert not run.finished.any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "No artists with labels found" would fail here
        ax = plot_jct_cdf({"cut": run})
        assert plot_runs({"cut": run}, tmp_path / "cut.png").stat().st_size > 0
    assert [t.get_text() for t in ax.texts] == ["no job finished"]


def test_mean_ci_and_durations():
    m, h = mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and h == pytest.approx(2.484, rel=1e-3)
    assert mean_ci([5.0]) == (5.0, 0.0)
    assert parse_duration("12h") == 43200 and parse_duration("90") == 90 and parse_duration(None) is None
    with pytest.raises(InputError, match="start"):
        parse_duration("soon", "start")


def test_simulate_verb(tmp_path, capsys):
    from optsched.cli import main

    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    out = tmp_path / "out"
    rc = main(["simulate", str(trace), "--cluster", "2x8", "--policy", "fifo,las", "--allocator", "fixed-demand,fungible-greedy",
               "--time-limit", "2", "--round", "5m", "-o", str(out), "--check", "--no-progress", "--plot"])
    assert rc == 0
    table = capsys.readouterr().out
    assert "las/fungible-greedy" in table and "fifo/fixed-demand" in table
    for stem in ("fifo-fixed-demand-s0", "las-fungible-greedy-s0"):
        (path,) = out.glob(f"{stem}-*.metrics.json")  # <policy>-<allocator>-s<seed>-<run id>
        doc = json.loads(path.read_text())
        assert doc["metrics"]["finished"] == 5
        assert path.with_name(path.name.replace(".metrics.json", ".jobs.csv")).exists()
    assert (out / "runs.png").exists()


def _simulate_parser():
    import argparse

    from optsched.commands import simulate

    p = argparse.ArgumentParser()
    simulate.add_arguments(p)
    return p, simulate.run


def test_simulate_verb_refuses_bad_input(tmp_path):
    parser, run = _simulate_parser()
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    with pytest.raises(InputError, match="lottery"):
        run(parser.parse_args([str(trace), "--policy", "lottery", "--no-progress"]))
    with pytest.raises(InputError, match="no such file"):
        run(parser.parse_args([str(tmp_path / "none.csv"), "--no-progress"]))
    with pytest.raises(InputError, match="window holds no jobs"):
        run(parser.parse_args([str(trace), "--start", "1d", "--no-progress"]))
    with pytest.raises(InputError, match="solver"):
        run(parser.parse_args([str(trace), "--allocator", "magic", "--no-progress"]))


def test_simulate_verb_refuses_a_chain_of_a_solver_without_hints_before_any_run(tmp_path, monkeypatch):
    """``fungible-greedy@warm`` cannot run as a round chain: refused naming --allocator before the
    replays start, not after the other allocators' replays ran (and were lost with the error)."""
    from optsched.commands import simulate as cmd

    parser, run = _simulate_parser()
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    monkeypatch.setattr(cmd, "run_grid", lambda *a, **k: pytest.fail("a replay ran"))
    for bad in ("fungible-greedy@warm", "fixed-demand@warm"):
        with pytest.raises(InputError, match="must take a hint") as e:
            run(parser.parse_args([str(trace), "--allocator", f"fixed-demand,{bad}", "-o", str(tmp_path / "o"), "--no-progress"]))
        assert e.value.field == "--allocator" and e.value.value == bad


@pytest.mark.parametrize(("extra", "field", "message"), [
    (["--allocator", "fixed-demand,partitioned", "--packing"], "--allocator", "cannot honour --packing"),
    (["--allocator", "fungible-greedy,scip", "--slo-share", "0.5"], "--allocator", "cannot honour --slo-share"),
    (["--allocator", "maifs", "--elastic-share", "0.5", "--max-moves", "1"], "--allocator", "cannot honour --elastic-share, --max-moves"),
    (["--allocator", "cpsat", "--policy", "las,fifo", "--shadow", "scip"], "--shadow", "cannot keep running jobs where they run, which --policy fifo needs"),
    (["--allocator", "maifs", "--policy", "fifo", "--packing"], "--allocator",
     "cannot honour --packing and keep running jobs where they run, which --policy fifo needs"),
    (["--shadow", "partitioned", "--fairness", "hug"], "--shadow", "cannot honour --fairness hug"),
])
def test_simulate_verb_refuses_an_allocator_without_the_round_policies_before_any_replay(tmp_path, monkeypatch, extra, field, message):
    """An allocator (or shadow) that does not honour a round policy the options switch on is
    refused up front, naming the option: solve_round refused it only at the first round that used
    the policy (an SLO or elastic job's first round may come hours into a replay), as 'solver'."""
    from optsched.commands import simulate as cmd

    parser, run = _simulate_parser()
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    monkeypatch.setattr(cmd, "run_grid", lambda *a, **k: pytest.fail("a replay ran"))
    with pytest.raises(InputError, match=r"allocators that can: .*cpsat, fixed-demand, fungible-greedy, lns") as e:
        run(parser.parse_args([str(trace), *extra, "-o", str(tmp_path / "o"), "--no-progress"]))
    assert e.value.field == field and message in e.value.problem


@pytest.mark.parametrize(("extra", "field", "message"), [
    (["--queue-window", "nan"], "--queue-window", "0 offers every waiting job"),
    (["--queue-window", "inf"], "--queue-window", "0 offers every waiting job"),
    (["--target-load", "inf"], "--target-load", "must be a positive number"),
    (["--backend", "foo"], "--backend", "unknown backend"),
    (["--spread-factor", "2"], "--spread-factor", "must be in (0, 1]"),
])
def test_simulate_verb_names_the_option_a_bad_setting_came_from(tmp_path, extra, field, message):
    parser, run = _simulate_parser()
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    with pytest.raises(InputError) as e:
        run(parser.parse_args([str(trace), *extra, "-o", str(tmp_path / "o"), "--no-progress"]))
    assert e.value.field == field and message in e.value.problem


def test_simulate_verb_with_the_exact_allocator(tmp_path, capsys):
    from optsched.cli import main

    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    out = tmp_path / "out"
    rc = main(["simulate", str(trace), "--cluster", "2x8", "--cpus", "48", "--policy", "las", "--allocator", "cpsat,cpsat@demand",
               "--time-limit", "2", "-o", str(out), "--check", "--no-progress", "--plot", "--seed", "4"])
    assert rc == 0
    assert "las/cpsat@demand" in capsys.readouterr().out
    # plain cpsat solves the rounds as one chain, and its files say so
    docs = {a: json.loads(next(out.glob(f"las-{a}-s4-*.metrics.json")).read_text()) for a in ("cpsat@warm", "cpsat@demand")}
    assert all(d["metrics"]["finished"] == 5 for d in docs.values())
    assert docs["cpsat@warm"]["run"]["checked_rounds"] > 0 and docs["cpsat@warm"]["run"]["chain_paths"]
    assert docs["cpsat@warm"]["manifest"]["allocator"] == "cpsat@warm" and "chain_paths" not in docs["cpsat@demand"]["run"]
    assert (out / "runs.png").exists()


def test_simulate_verb_warns_when_jobs_are_never_started(tmp_path, capsys):
    """3 GPUs of a model asking 62 GB per GPU on two 8-GPU nodes of 64 GB: fixed-demand can never
    place it, the run stops on an idle cluster, and the command says so."""
    from optsched.cli import main

    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus\na,0,600,1\nb,10,900,3\n")
    rc = main(["simulate", str(trace), "--cluster", "2x8", "--mem-gb", "64", "--policy", "fifo", "--allocator", "fixed-demand",
               "-o", str(tmp_path / "runs"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 0 and "warning: fifo/fixed-demand stopped with 1 jobs unfinished" in err
