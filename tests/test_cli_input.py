"""Bad input on the command line, as a user meets it: ``python -m optsched VERB ...`` exits 2,
names the field (and the value) on stderr, and prints no traceback, for every verb that reads
an instance or options: solve, check, export, validate and gen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
TINY = REPO / "instances" / "tiny" / "t-2n-4j-01.json"
OK_SCHEDULE = {"instance": "t-2n-4j-01", "jobs": {"j0": {"nodes": {"n0": 2}, "cpus_per_gpu": 1, "mem_per_gpu_gb": 21}}}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """Bad instance files, each the tiny round broken once, and a feasible schedule for it."""
    d = tmp_path_factory.mktemp("cli")
    text = TINY.read_text()
    doc = json.loads(text)
    neg = json.loads(text)
    neg["jobs"][1]["profile"]["throughput"][0][1] = -1.0
    (d / "neg.json").write_text(json.dumps(neg))
    vtrue = json.loads(text)
    vtrue["version"] = True
    (d / "vtrue.json").write_text(json.dumps(vtrue))
    nan = json.dumps(doc).replace('"weight": 1.42', '"weight": NaN')
    assert "NaN" in nan
    (d / "nan.json").write_text(nan)
    dup = json.dumps(doc).replace('"id": "j1"', '"id": "j1", "id": "j0"')
    assert dup.count('"id": "j0"') == 2
    (d / "dup.json").write_text(dup)
    (d / "ok.json").write_text(json.dumps(OK_SCHEDULE))
    (d / "junk.json").write_text('{"jobs": ')
    (d / "named5.json").write_text(json.dumps({**OK_SCHEDULE, "instance": 5}))
    (d / "namednull.json").write_text(json.dumps({**OK_SCHEDULE, "instance": None}))
    return d


def optsched(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optsched", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


CASES = [
    # (verb and arguments; files by name from the fixture's directory, {tiny} for the valid round), what stderr names
    ("solve neg.json", ["jobs[1].profile.throughput[0][1]", "-1.0"]),
    ("solve vtrue.json", ["version", "True"]),
    ("solve nan.json", ["jobs[0].weight", "NaN"]),
    ("solve dup.json", ["'id' twice", "dup.json"]),
    ("solve {tiny} --hint neg.json", ["--hint.version", "unknown field of a schedule"]),  # a round passed as a schedule
    ("solve {tiny} --time-limit nan", ["time_limit", "nan"]),
    ("solve {tiny} --solver cpsat --option num_workers=0", ["num_workers", "0"]),
    ("solve {tiny} --solver cpsat --option num_workers=" + "[" * 2000 + "]" * 2000, ["--option", "deeper than 64"]),
    ("validate {tiny} nan.json", ["decision.jobs[0].weight", "NaN", "nan.json"]),
    ("check neg.json ok.json", ["jobs[1].profile.throughput[0][1]"]),
    ("check {tiny} junk.json", ["schedule", "not valid JSON"]),
    ("check {tiny} absent.json", ["schedule.path", "absent.json"]),
    # an instance name that is not a string, refused by every reader as the HTTP service refuses it
    ("check {tiny} named5.json", ["schedule.instance", "must be a string", "5"]),
    ("check {tiny} namednull.json", ["schedule.instance", "None"]),
    ("validate {tiny} named5.json", ["decision.instance", "must be a string"]),
    ("solve {tiny} --hint named5.json", ["--hint.instance", "must be a string"]),
    ("export nan.json", ["jobs[0].weight", "NaN"]),
    ("export absent.json", ["path", "absent.json"]),
    ("export {tiny} --format xyz", ["--format", "xyz"]),
    ("validate neg.json ok.json", ["jobs[1].profile.throughput[0][1]"]),
    ("validate {tiny} ok.json --time-limit -1", ["--time-limit", "-1"]),
    ("validate {tiny} ok.json --solver nope", ["solver", "nope"]),
    ("validate {tiny} absent.json", ["decision", "absent.json"]),
    ("validate {tiny} ok.json --weights x.npz", ["--weights", "only with --loglik"]),  # was ignored
    ("gen --nodes 2 --jobs 3 --tightness -1", ["tightness", "-1"]),
    ("gen --nodes 2 --jobs 3 --running-fraction 2", ["running_fraction", "2"]),
    ("gen --nodes 2 --jobs 3 --grid huge", ["grid", "huge"]),
    ("gen --nodes 2 --jobs 3 --duration 0", ["duration_s", "0"]),
    # seeds beyond the solvers' 32-bit seed parameters
    ("solve {tiny} --seed 2147483648", ["seed", "2147483648", "2147483647"]),
    ("validate {tiny} ok.json --seed 2147483648", ["seed", "2147483648"]),
    ("simulate sample --allocator fungible-greedy --seed 2147483648 --no-progress", ["seed", "2147483648"]),
    # outputs that cannot be written, refused before any work (ok.json is a file, . a directory)
    ("solve {tiny} -o .", ["-o", "is a directory"]),
    ("solve {tiny} -o ok.json/s.json", ["-o", "ok.json/s.json", "cannot be written"]),
    ("validate {tiny} ok.json -o ok.json/r.json", ["-o", "cannot be written"]),
    ("export {tiny} -o ok.json/m.lp", ["-o", "cannot be written"]),
    ("gen --nodes 2 --jobs 3 -o ok.json/g.json", ["-o", "cannot be written"]),
    ("gen --nodes 2 --jobs 3 --count 2 -o ok.json/d", ["-o", "cannot be written"]),
    ("workload gang-heavy --jobs 10 -o ok.json/t.csv", ["-o", "cannot be written"]),
    ("simulate sample --allocator fungible-greedy -o ok.json --no-progress", ["-o", "is a file"]),
    # sizes beyond optsched.limits, refused before anything of that size is built
    ("simulate sample --cluster 99999999x8 --no-progress", ["--cluster", "99999999", "100,000 nodes"]),
    ("simulate sample --cluster mix:a100-v100:99999999 --no-progress", ["--cluster", "100,000 nodes"]),
    ("simulate sample --cluster 4x2000000 --no-progress", ["--cluster", "2000000", "1,000,000"]),
    ("simulate sample --cluster 4x8 --mem-gb 2000000 --no-progress", ["--mem-gb", "2000000", "1,000,000"]),
    ("gen --nodes 99999999 --jobs 3", ["nodes", "99999999", "100,000 nodes"]),
    ("gen --nodes 2 --jobs 99999999", ["jobs", "99999999", "500,000 jobs"]),
    ("gen --nodes 2 --tightness 1e9", ["tightness", "1e+09", "500,000 jobs"]),
    ("gen --nodes 2 --jobs 3 --count 1e9", ["--count", "1000000000", "10,000"]),
    ("gen --class small --count 1e9", ["--count", "10,000"]),
    ("gen --nodes 2 --jobs 3 --gpus-per-node 2000000", ["gpus_per_node", "2000000", "1,000,000"]),
    ("gen --nodes 2 --jobs 3 --cpus-per-node 2000000", ["cpus_per_node", "2000000", "1,000,000"]),
    ("gen --nodes 2 --jobs 3 --mem-per-node 2000000", ["mem_per_node_gb", "2000000", "1,000,000"]),
    ("workload parametric --jobs 1e11", ["jobs", "100000000000", "10,000,000 jobs"]),
    ("workload parametric --jobs 100000000000", ["jobs", "100000000000", "10,000,000 jobs"]),
    ("workload parametric --span 100000d --rate 1e9", ["span_s", "10,000,000"]),
    ("workload gang-heavy --span 100000d --load 1e6 --gpus 1000000", ["span_s", "10,000,000"]),
    ("simulate synthetic:parametric:jobs=1e11 --no-progress", ["jobs", "10,000,000"]),
    ("workload parametric --span 1d --rate 1e300", ["span_s", "about 2.4e+301 jobs"]),
    # the options themselves, before the trace is read (once named slo_seed, after the cluster line)
    ("simulate sample --seed -1 --no-progress", ["--seed", "-1", "must be >= 0"]),
    ("simulate sample --time-limit nan --no-progress", ["--time-limit", "nan", "positive number of seconds"]),
]


@pytest.mark.parametrize(("line", "named"), CASES, ids=[c[0].replace("{tiny}", "tiny") for c in CASES])
def test_bad_input_exits_2_naming_the_field(files, line, named):
    args = [a.replace("{tiny}", str(TINY)) for a in line.split()]
    p = optsched(*args, cwd=files)
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    for text in named:
        assert text in p.stderr, p.stderr
    assert p.stdout == ""  # nothing half-written on stdout
    assert not list(files.rglob("*.tmp")) and not list(files.rglob("*.probe"))


def _piped(*args, stdin, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optsched", *map(str, args)], capture_output=True, cwd=cwd, timeout=120,
                          input=stdin)


def test_solve_and_check_read_a_dash_from_stdin(files):
    """``-`` names stdin: ``optsched gen ... | optsched solve -``, plain or gzip-compressed."""
    import gzip

    text = TINY.read_bytes()
    for data in (text, gzip.compress(text)):
        p = _piped("solve", "-", "--time-limit", 2, stdin=data, cwd=files)
        assert p.returncode == 0, p.stderr.decode()[-2000:]
        assert json.loads(p.stdout)["instance"] == "t-2n-4j-01"
    schedule = p.stdout
    (files / "solved.json").write_bytes(schedule)
    both = [_piped("check", TINY, "-", stdin=schedule, cwd=files), _piped("check", "-", "solved.json", stdin=text, cwd=files)]
    for p in both:
        assert p.returncode == 0 and p.stdout.decode().startswith("feasible"), p.stderr.decode()[-2000:]


@pytest.mark.parametrize(("args", "stdin", "named"), [
    (["solve", "-"], b"", ["stdin", "is empty"]),
    (["solve", "-"], b'{"jobs": ', ["stdin", "not valid JSON"]),
    (["solve", "-"], b'{"version": 1, "name": "x", "nodes": [], "jobs": 5}', ["jobs"]),
    (["solve", "-", "--hint", "-"], b"{}", ["--hint", "stdin holds the round already"]),
    (["check", "-", "-"], b"{}", ["schedule", "stdin holds the instance already"]),
    (["check", str(TINY), "-"], b"[", ["schedule.stdin", "not valid JSON"]),
])
def test_bad_input_on_stdin_exits_2_naming_it(files, args, stdin, named):
    p = _piped(*args, stdin=stdin, cwd=files)
    err = p.stderr.decode()
    assert p.returncode == 2 and "Traceback" not in err, err[-2000:]
    for text in named:
        assert text in err, err


def test_a_dash_on_a_terminal_is_refused_not_waited_on(files):
    import pty

    leader, follower = pty.openpty()
    try:
        p = subprocess.run([sys.executable, "-m", "optsched", "solve", "-"], stdin=follower, capture_output=True, text=True,
                           cwd=files, timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
    assert p.returncode == 2 and "stdin: is a terminal" in p.stderr, p.stderr


def test_validate_help_says_what_it_compares_with_and_its_exit_status(capsys):
    """The reference is a solve within --time-limit (not always the optimum); the help says so, names
    its units and gives the exit statuses."""
    from optsched.cli import main

    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for phrase in ("--time-limit SEC", "reference schedule solved by --solver within --time-limit", "optimal when the solver proves it",
                   "Exit status: 0 when every decision is feasible, 1 when any breaks a rule, 2 on bad input"):
        assert phrase in text, text
    assert "exact optimum" not in text and "Evaluate mode" not in text


@pytest.mark.parametrize(("line", "named"), [
    # shares each finite whose sum is not: were a traceback (NaN probabilities, NaN node counts) or, for the
    # synthetic sizes, "must give some GPU count a positive share" after every share read 0
    ("gen --nodes 2 --jobs 3 --gpu-types V100:1e308,K80:1e308", "gpu_types: the shares add up"),
    ("gen --nodes 2 --jobs 3 --job-sizes 1:1e308,2:1e308", "job_sizes: the shares add up"),
    ("gen --nodes 2 --jobs 3 --mix image:1e308,language:1e308", "mix: the weights add up"),
    ("workload parametric --jobs 10 --mix image=1e308,language=1e308", "mix: the weights add up"),
    ("workload parametric --jobs 10 --sizes 1:1e308,2:1e308", "sizes: the shares add up"),
    ("simulate sample --mix resnet18=1e308,image=1e308 --allocator fungible-greedy --no-progress -o out", "mix: the weights add up"),
])
def test_shares_whose_sum_overflows_are_refused_in_one_line(files, line, named):
    p = optsched(*line.split(), cwd=files)
    assert p.returncode == 2 and named in p.stderr, p.stderr[-2000:]
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr[-2000:]  # no traceback, no numpy overflow warning


@pytest.mark.parametrize(("line", "named"), [
    # a name given twice: the later share or value silently replaced the earlier one
    ("gen --nodes 2 --jobs 3 --gpu-types V100,V100", ["--gpu-types", "gives V100 twice"]),
    ("gen --nodes 2 --jobs 3 --job-sizes 1:1,1:2", ["--job-sizes", "gives 1 twice"]),
    ("simulate sample --mix image=1,image=2 --no-progress -o out", ["--mix", "gives image twice"]),
    ("simulate synthetic:parametric:jobs=10,jobs=20 --no-progress -o out", ["synthetic", "sets jobs twice"]),
])
def test_a_name_given_twice_is_refused(files, line, named):
    p = optsched(*line.split(), cwd=files)
    assert p.returncode == 2 and all(n in p.stderr for n in named), p.stderr[-2000:]
    assert len(p.stderr.strip().splitlines()) == 1 and p.stdout == "", p.stderr[-2000:]


@pytest.mark.parametrize(("line", "named"), [
    ("workload parametric --jobs 10 --sizes 1:1,1:2", ["--sizes", "gives 1 twice"]),
    ("simulate synthetic:parametric:jobs=10,sizes=1:1/1:2 --no-progress -o out", ["sizes", "gives a name twice"]),
    ("simulate synthetic:parametric:jobs=10,mix=image:1/image:2 --no-progress -o out", ["mix", "gives a name twice"]),
])
def test_a_size_or_model_given_twice_is_refused(files, line, named):
    test_a_name_given_twice_is_refused(files, line, named)
