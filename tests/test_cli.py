"""The solve, check, gen and methods verbs, run as a user runs them: ``python -m optsched``.

Solving tests use the ``fixed-demand`` heuristic (fast) and ``cpsat`` on a tiny round.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from optsched.checker import check_schedule
from optsched.io import load_instance

REPO = Path(__file__).parents[1]
SMALL = REPO / "instances" / "small" / "s-4n-12j-01.json"
TINY = REPO / "instances" / "tiny" / "t-2n-4j-01.json"


def optsched(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optsched", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=120)


def bad_input(proc: subprocess.CompletedProcess, field: str) -> None:
    """Exit 2, the field named on stderr, no traceback."""
    assert proc.returncode == 2, proc.stderr
    assert field in proc.stderr
    assert "Traceback" not in proc.stderr


# --- solve -----------------------------------------------------------------------------------------


def test_solve_check_round_trip(tmp_path):
    """solve writes the contract's schedule JSON with its reports, and check agrees with it."""
    out = tmp_path / "sched.json"
    p = optsched("solve", SMALL, "--solver", "fixed-demand", "--time-limit", "5", "-o", out)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert "s-4n-12j-01" in p.stderr and "objective=" in p.stderr
    doc = json.loads(out.read_text())
    assert doc["instance"] == "s-4n-12j-01" and doc["solver"] == "fixed-demand" and doc["method"] == "heuristic"
    assert doc["status"] in ("optimal", "feasible", "time_limit")
    assert {"objective", "bound", "gap", "time_s", "jobs"} <= set(doc)
    c = optsched("check", SMALL, out)
    assert c.returncode == 0, c.stdout
    word, value = c.stdout.split()
    assert word == "feasible" and float(value) == pytest.approx(doc["objective"], rel=1e-9)
    report = check_schedule(load_instance(SMALL), doc)
    assert report.feasible and report.objective == pytest.approx(doc["objective"])


def test_solve_to_stdout():
    p = optsched("solve", TINY, "--method", "heuristic", "--solver", "fixed-demand", "--seed", "3")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["instance"] == "t-2n-4j-01"


def test_solve_names_the_jobs_no_schedule_can_run(tmp_path):
    """A gang larger than its GPU type, and a job allowed only a type the cluster lacks: valid
    input, solved, and named on stderr as never schedulable; a round without such jobs gets no note."""
    d = json.loads(SMALL.read_text())
    d["jobs"][0]["gpus"] = 64
    d["jobs"][1]["gpu_speed"] = {"K80": 0.3}
    f = tmp_path / "never.json"
    f.write_text(json.dumps(d))
    p = optsched("solve", f, "--method", "heuristic", "-o", tmp_path / "s.json")
    assert p.returncode == 0, p.stderr
    assert "2 job(s) fit no allowed GPU type even on the empty cluster and can never be scheduled: j0, j1" in p.stderr
    q = optsched("solve", SMALL, "--method", "heuristic", "-o", tmp_path / "t.json")
    assert q.returncode == 0 and "never be scheduled" not in q.stderr


def test_solve_exact_with_hint(tmp_path):
    """cpsat proves the tiny round optimal, warm-started from the fixed-demand schedule, and is
    no worse than it."""
    hint = tmp_path / "hint.json"
    assert optsched("solve", TINY, "--solver", "fixed-demand", "-o", hint).returncode == 0
    out = tmp_path / "exact.json.gz"
    p = optsched("solve", TINY, "--method", "exact", "--time-limit", "20", "--hint", hint, "-o", out,
                 "--option", "num_workers=2")
    assert p.returncode == 0, p.stderr
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert doc["status"] == "optimal" and doc["gap"] == pytest.approx(0.0, abs=1e-6)
    assert doc["objective"] >= json.loads(hint.read_text())["objective"] - 1e-9


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--time-limit", "-1"], "time_limit"),
        (["--solver", "no-such-solver"], "solver"),
        (["--method", "psychic"], "method"),
        (["--seed", "-4"], "seed"),
        (["--option", "novalue"], "--option"),
    ],
)
def test_solve_bad_options(args, field):
    bad_input(optsched("solve", TINY, *args), field)


def test_solve_bad_instance(tmp_path):
    doc = json.loads(TINY.read_text())
    doc["nodes"][1]["gpus"] = -4
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    bad_input(optsched("solve", bad), "nodes[1].gpus")
    doc = json.loads(TINY.read_text())
    doc["jobs"][2]["demand"]["cpus_per_gpu"] = 5
    bad.write_text(json.dumps(doc))
    bad_input(optsched("solve", bad), "jobs[2].demand.cpus_per_gpu")
    bad_input(optsched("solve", tmp_path / "missing.json"), "path")
    (tmp_path / "junk.json").write_text("{not json")
    bad_input(optsched("solve", tmp_path / "junk.json"), "not valid JSON")


def test_solve_bad_hint(tmp_path):
    hint = tmp_path / "hint.json"
    hint.write_text(json.dumps({"jobs": {"j0": {"nodes": {"n0": 1}, "cpus_per_gpu": 3}}}))
    bad_input(optsched("solve", TINY, "--hint", hint), "--hint.jobs.j0.mem_per_gpu_gb")


# --- check -----------------------------------------------------------------------------------------


def test_check_feasible_and_infeasible(tmp_path):
    inst = load_instance(SMALL)
    j = next(j for j in inst.jobs if j.gpus == 1)
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps({"instance": inst.name, "jobs": {j.id: {"nodes": {"n0": 1}, "cpus_per_gpu": 3, "mem_per_gpu_gb": 62}}}))
    p = optsched("check", SMALL, ok)
    assert p.returncode == 0 and p.stdout.startswith("feasible ")
    assert float(p.stdout.split()[1]) == pytest.approx(j.weight)  # demand point, one node, not running
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"instance": inst.name, "jobs": {j.id: {"nodes": {"n0": 9}, "cpus_per_gpu": 3, "mem_per_gpu_gb": 62}}}))
    p = optsched("check", SMALL, bad)
    assert p.returncode == 1
    assert p.stdout.startswith("infeasible") and "rule 2" in p.stdout and "rule 4" in p.stdout
    p = optsched("check", SMALL, bad, "--json")
    assert p.returncode == 1
    report = json.loads(p.stdout)
    assert report["feasible"] is False and {v["rule"] for v in report["violations"]} == {2, 4}


def test_check_empty_schedule_and_bad_files(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"instance": "t-2n-4j-01", "jobs": {}}))
    p = optsched("check", TINY, empty)
    assert p.returncode == 0 and p.stdout.strip() == "feasible 0"
    (tmp_path / "junk.json").write_text("[1, 2")
    bad_input(optsched("check", TINY, tmp_path / "junk.json"), "schedule")
    bad_input(optsched("check", tmp_path / "nope.json", empty), "path")


# --- gen -------------------------------------------------------------------------------------------


def test_gen_one_file_and_stdout(tmp_path):
    out = tmp_path / "r.json"
    p = optsched("gen", "--nodes", "4", "--jobs", "10", "--seed", "2", "--running-fraction", "0.3",
                 "--gpu-types", "V100:1,P100:1", "--fair", "--name", "demo", "-o", out)
    assert p.returncode == 0, p.stderr
    inst = load_instance(out)
    assert inst.name == "demo" and inst.size == (4, 10) and inst.round.fair
    assert set(inst.gpu_types) == {"V100", "P100"}
    same = optsched("gen", "--nodes", "4", "--jobs", "10", "--seed", "2", "--running-fraction", "0.3",
                    "--gpu-types", "V100:1,P100:1", "--fair", "--name", "demo")
    assert same.returncode == 0 and json.loads(same.stdout) == json.loads(out.read_text())


def test_gen_size_class_into_directory(tmp_path):
    p = optsched("gen", "--class", "tiny", "--count", "2", "--gz", "-o", tmp_path / "lib")
    assert p.returncode == 0, p.stderr
    files = sorted((tmp_path / "lib").glob("*.json.gz"))
    assert [f.name for f in files][:2] == ["t-2n-4j-01.json.gz", "t-2n-4j-02.json.gz"] and len(files) == 6
    for f in files:
        inst = load_instance(f)
        assert sum(j.gpus for j in inst.jobs) == round(1.25 * sum(n.gpus for n in inst.nodes))
    p = optsched("gen", "--nodes", "2", "--tightness", "1.5", "--count", "3", "-o", tmp_path / "many")
    assert p.returncode == 0 and len(list((tmp_path / "many").glob("*.json"))) == 3


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--nodes", "4", "--jobs", "5", "--gpu-types", "V100,Volta"], "gpu_types"),
        (["--nodes", "0", "--jobs", "5"], "nodes"),
        (["--jobs", "5"], "--nodes"),
        (["--nodes", "2", "--jobs", "5", "--job-sizes", "1:1,big:2"], "--job-sizes"),
        (["--nodes", "2", "--jobs", "5", "--spread-factor", "0.5,0.2"], "spread_factor"),
        (["--nodes", "2", "--jobs", "5", "--mix", "resnet9:1"], "mix"),
        (["--nodes", "2", "--jobs", "5", "--count", "2"], "--out"),
        (["--class", "tiny", "--nodes", "3"], "--class"),
        (["--class", "gigantic"], "size_class"),
    ],
)
def test_gen_bad_input(args, field):
    bad_input(optsched("gen", *args), field)


# --- methods ---------------------------------------------------------------------------------------


def test_methods_lists_the_registry():
    p = optsched("methods")
    assert p.returncode == 0
    names = [line.split()[0] for line in p.stdout.splitlines()]
    assert {"cpsat", "fixed-demand", "fungible-greedy", "lns"} <= set(names)
    rows = json.loads(optsched("methods", "--json", "--family", "exact").stdout)
    assert rows and {r["family"] for r in rows} == {"exact"}
    assert sum(r["default"] for r in rows) == 1


def test_unknown_verb_and_option_exit_2():
    assert optsched("frobnicate").returncode == 2
    p = optsched("solve", TINY, "--no-such-flag")
    assert p.returncode == 2 and "Traceback" not in p.stderr


def test_a_reader_that_stops_early_is_not_an_error():
    """``optsched gen ... | head``: the closed pipe ends the command quietly, exit 0."""
    p = subprocess.Popen([sys.executable, "-m", "optsched", "gen", "--nodes", "64", "--jobs", "256"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read().decode() if p.stderr else ""
    assert p.wait(timeout=120) == 0 and "Traceback" not in err, err
