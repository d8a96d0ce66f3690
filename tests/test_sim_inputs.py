"""The simulator on real traces of any shape: CSV schemas, window starts, model aliases, the bundled
sample, deterministic budgets and run files that never overwrite each other."""

from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from optsched import catalogue
from optsched.cli import main
from optsched.errors import InputError
from optsched.incremental import GAP_TARGET, PATHS
from optsched.sim import cluster
from optsched.sim import experiment as ex
from optsched.sim.metrics import read_run, run_id
from optsched.sim.solving import SolveRoundAllocator
from optsched.sim.traces import CsvSchema, Trace, load_csv, load_trace
from optsched.sim.workload import build_workload, unit_warning, window

NORMALIZED = """job_id,submit_time_s,duration_s,num_gpus,tenant,model
a,1000,600,1,vc,res18
b,1010,1200,2,vc,resnet50
c,1100,300,4,vc,res50
d,1400,900,8,vc,gnmt
e,1700,200,1,vc,
"""

# a TPU-style export: microsecond submit times, chips, comments and a date-time end column
CHIPS = """# exported 2026-01-01 by some scheduler
# submit in microseconds since the epoch
job,submitted_at,num_chips,run_s,owner
j1,1700000000000000,4,600,alice
# a comment between rows
j2,1700000005000000,1,30,bob
j3,1700000002500000,0,50,bob
j4,1700000009000000,8,0,carol
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# --- CSV layouts -----------------------------------------------------------------------------------


def test_a_schema_reads_microseconds_chips_and_comments(tmp_path):
    p = _write(tmp_path, "chips.csv", CHIPS)
    tr = load_csv(p, CsvSchema({"id": "job", "submit": "submitted_at", "gpus": "num_chips", "duration": "run_s", "tenant": "owner"},
                               time_unit="us", duration_unit="s"))
    assert tr.job_id == ("j1", "j2")  # j3 asks for no chip, j4 runs 0 s: dropped and counted
    np.testing.assert_allclose(tr.submit_s, [0.0, 5.0])
    np.testing.assert_allclose(tr.duration_s, [600, 30])
    assert tr.gpus.tolist() == [4, 1] and tr.tenant == ("alice", "bob")
    assert tr.notes == {"dropped_cpu_only": 1, "dropped_zero_duration": 1}


# an Alibaba PAI 2020 task table: tasks of a job (inst_num), GPUs and cores in percent, a type column
PAI = """job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type
a,worker,4,Terminated,1590000000,1590003600,600,29.3,200,V100
b,worker,1,Failed,1590000100,1590000200,1200,120,25,T4
c,ps,2,Terminated,1590000300,1590000900,400,10,,MISC
d,worker,2,Terminated,1590000400,1590000500,400,10,0,MISC
e,worker,8,Terminated,1590000500,1590001500,800,60,800,T4
"""


def test_a_schema_reads_tasks_and_units_of_percent(tmp_path):
    """PAI 2020's layout: ``instances`` tasks per job, each with ``plan_gpu`` percent of a GPU and
    ``plan_cpu`` percent of a core (``gpu_unit`` / ``cpu_unit`` 0.01); a fraction of a GPU is one
    whole GPU, counted; a blank GPU cell is required, a zero one is a CPU-only job (dropped)."""
    p = _write(tmp_path, "pai.csv", PAI.replace(",400,10,,MISC", ",400,10,0,MISC"))
    schema = CsvSchema({"id": "job_name", "submit": "start_time", "end": "end_time", "gpus": "plan_gpu", "instances": "inst_num",
                        "cpu_cores": "plan_cpu", "mem_gib": "plan_mem", "gpu_type": "gpu_type"}, gpu_unit=0.01, cpu_unit=0.01)
    tr = load_csv(p, schema)
    assert tr.job_id == ("a", "b", "e") and tr.gpus.tolist() == [8, 1, 64]
    np.testing.assert_allclose(tr.cpu_cores, [24.0, 12.0, 64.0])
    np.testing.assert_allclose(tr.mem_gib, [4 * 29.3, 120.0, 480.0])
    assert tr.notes == {"fractional_gpu_as_whole": 1, "dropped_cpu_only": 2}
    with pytest.raises(InputError, match=r"pai2.csv\[line 4\].plan_gpu: is required"):
        load_csv(_write(tmp_path, "pai2.csv", PAI), schema)
    with pytest.raises(InputError, match="gpu_unit"):
        CsvSchema(schema.columns, gpu_unit=0)


def test_the_workload_counts_what_it_cannot_honour(tmp_path, capsys):
    """A per-GPU request above the profile grid takes the grid's top, and a GPU-type constraint
    whose types hold fewer GPUs than the job is ignored: both counted in the notes, which
    ``optsched simulate`` prints. A job that ends before it starts is dropped, counted apart."""
    p = _write(tmp_path, "t.csv", "job_id,submit_time_s,duration_s,num_gpus,cpus_per_gpu,gpu_type\n"
                                  "a,0,60,1,500,\nb,10,60,16,,P100\nc,20,60,1,,\nd,30,-5,1,,\n")
    tr = load_trace(p)
    assert tr.notes == {"dropped_negative_duration": 1}
    nodes = cluster.heterogeneous([(1, "V100", 8, 64, 512), (1, "P100", 8, 64, 512)])
    work = build_workload(tr, nodes)
    assert work.notes["demand_above_grid"] == 1 and work.notes["gpu_type_too_small"] == 1
    assert {j.id: sorted(j.gpu_speed or {}) for j in work.jobs}["b"] == ["P100", "V100"]
    assert main(["simulate", str(p), "--cluster", "2x8", "--allocator", "fungible-greedy", "--no-progress", "-o", str(tmp_path / "o")]) == 0
    assert "demand_above_grid" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "extra", "message"), [
    ("job_id,submit_time_s,duration_s,num_gpus\n", [], "trace: holds no job to replay"),
    ("job_id,submit_time_s,duration_s,num_gpus\na,0,60,0\n", [], "dropped_cpu_only"),
    ("job_id,submit_time_s,duration_s,num_gpus\na,0,60,1\n", ["--start", "2d"], "--start/--length: the window holds no jobs"),
    ("job_id,submit_time_s,duration_s,num_gpus\na,0,60,1\n", ["--min-duration", "1h"], "--min-duration/--max-duration: keep no job"),
    ("job_id,submit_time_s,duration_s,num_gpus\na,0,60,64\n", ["--cap-mode", "drop", "--cluster", "2x8"], "--cap-mode: drops every job"),
    ("job_id,submit_time_s,duration_s,num_gpus\na,0,60,1\n", ["--cpus", "0"], "--cpus: must be >= 1"),
    ("job_id,submit_time_s,duration_s,num_gpus\na,0,60,1\n", ["--cluster", "4x0"], "--cluster: needs at least one node"),
    ("job_id,submit_time_s,duration_s,num_gpus\na,0,60,1\n", ["--round", "0"], "--round: must be > 0"),
    ("job_id,submit_time_s,duration_s,num_gpus\na,0,60,1\n", ["--policy", "fifo", "--allocator", "fungible-greedy,maifs"],
     "--allocator: cannot keep running jobs where they run, which --policy fifo needs"),
    ("job_id,submit_time_s,duration_s,num_gpus\na,0,60,1\n", ["--start-min-throughput", "2"], "--start-min-throughput: must be a share"),
    ("job_id,submit_time_s,duration_s,num_gpus\na,0,60,1\n", ["--horizon", "9" * 400], "--horizon: must be a finite duration"),
])
def test_simulate_says_why_nothing_is_left_to_replay(tmp_path, capsys, text, extra, message):
    p = _write(tmp_path, "t.csv", text)
    assert main(["simulate", str(p), "--allocator", "fungible-greedy", "--no-progress", "-o", str(tmp_path / "o"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_synthetic_load_without_gpus_is_on_the_cluster_of_the_run(tmp_path, capsys):
    """``load=`` with neither the text nor the preset giving a GPU count takes the cluster's; a
    note says that EASY backfilling does not change a queue that preempts."""
    args = ["simulate", "synthetic:parametric:jobs=60,load=1.5", "--cluster", "2x8", "--policy", "las", "--backfill", "easy",
            "--allocator", "fungible-greedy", "--no-progress", "-o", str(tmp_path / "o")]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "60 jobs" in err and "--backfill easy applies to queues that do not preempt" in err
    # the default (easy) is not the user's choice: no note
    assert main([a for a in args if a not in ("--backfill", "easy")]) == 0
    assert "--backfill" not in capsys.readouterr().err


def test_simulate_warns_when_times_look_like_another_unit(tmp_path, capsys):
    p = _write(tmp_path, "us.csv", "job,t,g,d\n" + "".join(f"j{i},{1_700_000_000_000_000 + i * 10**9},1,{600 * 10**6}\n" for i in range(5)))
    args = ["simulate", str(p), "--columns", "id=job,submit=t,gpus=g,duration=d", "--allocator", "fungible-greedy", "--no-progress",
            "--horizon", "1d", "-o", str(tmp_path / "o")]
    assert main(args) == 0
    assert "another unit" in capsys.readouterr().err
    assert main([*args, "--time-unit", "us"]) == 0
    assert "another unit" not in capsys.readouterr().err


def test_a_schema_file_with_datetimes_and_end_times(tmp_path):
    p = _write(tmp_path, "dt.csv", "name,queued,started,finished,chips\n"
                                   "x,01/02/2024 10:00:00,01/02/2024 10:05:00,01/02/2024 11:05:00,2\n"
                                   "y,01/02/2024 10:30:00,01/02/2024 10:30:00,01/02/2024 10:40:00,1\n")
    sp = _write(tmp_path, "s.json", json.dumps({"columns": {"id": "name", "submit": "queued", "start": "started", "end": "finished",
                                                            "gpus": "chips"}, "datetime_format": "%d/%m/%Y %H:%M:%S"}))
    tr = load_csv(p, CsvSchema.from_file(sp))
    np.testing.assert_allclose(tr.submit_s, [0, 1800])
    np.testing.assert_allclose(tr.duration_s, [3600, 600])  # end - start, not end - submit
    toml = _write(tmp_path, "s.toml", 'time_unit = "min"\n[columns]\nsubmit = "t"\ngpus = "g"\nduration = "d"\n')
    assert CsvSchema.from_file(toml).time_unit == "min"


@pytest.mark.parametrize(("kw", "field"), [
    ({"columns": {"gpus": "g", "duration": "d"}}, "columns.submit"),
    ({"columns": {"submit": "s", "gpus": "g"}}, "columns.duration"),
    ({"columns": {"submit": "s", "gpus": "g", "duration": "d", "colour": "c"}}, "columns.colour"),
    ({"columns": {"submit": "s", "gpus": "g", "duration": "d"}, "time_unit": "days"}, "time_unit"),
    ({"columns": {"submit": "s", "gpus": "g", "duration": "d"}, "datetime_format": "YYYY"}, "datetime_format"),
    # a JSON schema's null, list or object as a unit: was a KeyError as the trace was read, or a TypeError
    ({"columns": {"submit": "s", "gpus": "g", "duration": "d"}, "time_unit": None}, "time_unit"),
    ({"columns": {"submit": "s", "gpus": "g", "duration": "d"}, "time_unit": ["s"]}, "time_unit"),
    ({"columns": {"submit": "s", "gpus": "g", "duration": "d"}, "duration_unit": {}}, "duration_unit"),
    ({"columns": {"submit": "s", "gpus": "g", "duration": "d"}, "gpu_unit": 10**400}, "gpu_unit"),  # was an OverflowError
])
def test_bad_schemas_are_refused_by_name(kw, field):
    with pytest.raises(InputError) as e:
        CsvSchema(**kw)
    assert e.value.field == field


def test_a_schema_names_the_missing_column_and_the_bad_cell(tmp_path):
    p = _write(tmp_path, "chips.csv", CHIPS)
    with pytest.raises(InputError, match="num_gpus"):
        load_csv(p, CsvSchema({"submit": "submitted_at", "gpus": "num_gpus", "duration": "run_s"}))
    bad = _write(tmp_path, "bad.csv", "# a comment\nt,g,d\n1,1,5\n\nsoon,1,5\n")
    with pytest.raises(InputError) as e:
        load_csv(bad, CsvSchema({"submit": "t", "gpus": "g", "duration": "d"}))
    assert e.value.field == "bad.csv[line 5].t"  # the line an editor shows: comment, header and blank lines counted


def test_simulate_reads_a_csv_through_columns(tmp_path, capsys):
    p = _write(tmp_path, "chips.csv", CHIPS)
    out = tmp_path / "out"
    rc = main(["simulate", str(p), "--columns", "id=job,submit=submitted_at,gpus=num_chips,duration=run_s", "--time-unit", "us",
               "--cluster", "2x8", "--allocator", "fixed-demand", "--no-progress", "-o", str(out)])
    # run_s is in microseconds too under --time-unit: 600 us rounds up into the first round
    assert rc == 0
    assert "2 jobs" in capsys.readouterr().err
    doc = json.loads(next(out.glob("*.metrics.json")).read_text())
    assert doc["manifest"]["setup"]["schema"]["columns"]["gpus"] == "num_chips"
    schema = _write(tmp_path, "s.json", json.dumps({"columns": {"submit": "submitted_at", "gpus": "num_chips"}, "time_unit": "us",
                                                     "duration_unit": "s"}))
    rc = main(["simulate", str(p), "--schema", str(schema), "--columns", "duration=run_s,id=job", "--cluster", "2x8",
               "--allocator", "fixed-demand", "--no-progress", "-o", str(out)])
    assert rc == 0
    assert main(["simulate", str(p), "--time-unit", "us", "--no-progress", "-o", str(out)]) == 2
    assert "--time-unit" in capsys.readouterr().err


def test_comment_lines_are_skipped_by_every_loader(tmp_path):
    p = _write(tmp_path, "n.csv", "# a normalized trace\n" + NORMALIZED)
    assert len(load_trace(p)) == 5


# --- the window starts at the first arrival --------------------------------------------------------


def test_every_format_counts_start_from_the_first_arrival(tmp_path):
    """The normalized trace's first job arrives at 1000 s; Helios' at a date: --start 400 keeps
    the jobs arriving 400 s or more after the first, rebased to the window."""
    norm = load_trace(_write(tmp_path, "n.csv", NORMALIZED))
    assert norm.submit_s[0] == 0.0
    w = window(norm, 400)
    assert w.job_id == ("d", "e") and w.submit_s.tolist() == [0.0, 300.0]
    helios = _write(tmp_path, "h.csv", "job_id,user,vc,gpu_num,node_num,state,submit_time,duration\n"
                                       "h1,u,v,1,1,COMPLETED,2020-04-01 00:16:40,600\n"
                                       "h2,u,v,1,1,COMPLETED,2020-04-01 00:23:20,600\n")
    assert window(load_trace(helios), 400).job_id == ("h2",)
    sch = window(load_csv(_write(tmp_path, "c.csv", CHIPS), CsvSchema({"id": "job", "submit": "submitted_at", "gpus": "num_chips",
                                                                        "duration": "run_s"}, time_unit="us", duration_unit="s")), 4)
    assert sch.job_id == ("j2",)


def test_simulate_start_counts_from_the_first_arrival(tmp_path, capsys):
    p = _write(tmp_path, "n.csv", NORMALIZED)
    rc = main(["simulate", str(p), "--start", "400", "--cluster", "2x8", "--allocator", "fixed-demand", "--no-progress",
               "-o", str(tmp_path / "o")])
    assert rc == 0 and "2 jobs" in capsys.readouterr().err


# --- model aliases ---------------------------------------------------------------------------------


def test_synergy_model_names_are_aliases():
    assert catalogue.ALIASES == {"res18": "resnet18", "res50": "resnet50"}
    assert catalogue.canonical_model("res18") == "resnet18"
    assert catalogue.profile("res50", 2) == catalogue.profile("resnet50", 2)
    assert catalogue.gpu_speeds("res18", ["V100"]) == {"V100": 1.0}
    rng = np.random.default_rng(0)
    assert set(catalogue.sample_models(rng, 5, {"res18": 1.0})) == {"resnet18"}
    with pytest.raises(InputError, match="res101"):
        catalogue.profile("res101")
    synergy_names = {"alexnet", "bert", "deepspeech", "gnmt", "lstm", "m5", "mobilenet", "res18", "res50", "shufflenet", "transformer",
                     "vae"}  # the models of Synergy's profiles
    assert {catalogue.canonical_model(m) for m in synergy_names} == set(catalogue.MODELS)


def test_a_trace_may_name_synergy_models_and_unknown_ones_are_refused(tmp_path):
    tr = load_trace(_write(tmp_path, "n.csv", NORMALIZED))
    w = build_workload(tr, cluster.homogeneous(2), seed=0)
    assert [j.model for j in w.jobs][:4] == ["resnet18", "resnet50", "resnet50", "gnmt"]
    with pytest.raises(InputError) as e:  # refused as the file is read, naming the cell and the close names
        load_trace(_write(tmp_path, "b.csv", NORMALIZED.replace("gnmt", "res101")))
    assert e.value.field == "b.csv[line 5].model" and e.value.value == "res101" and "close: ['resnet18', 'resnet50']" in e.value.problem
    coded = tr.with_columns(model=("res18", "ResNet-50", "res101", "", ""))
    with pytest.raises(InputError) as e:  # a trace built in code: named by job
        build_workload(coded, cluster.homogeneous(2), seed=0)
    assert e.value.field == "n[c].model" and e.value.value == "res101"


@pytest.mark.parametrize(("name", "model"), [
    ("MobileNet", "mobilenet"), ("Transformer", "transformer"), ("GNMT", "gnmt"), ("ResNet-50 (batch size 64)", "resnet50"),
    ("resnet_18", "resnet18"), ("RES 50", "resnet50"), ("DeepSpeech (v2) (fp16)", "deepspeech"),
])
def test_model_names_match_whatever_their_case_and_punctuation(tmp_path, name, model):
    p = _write(tmp_path, "m.csv", f'{HEAD4},model\na,0,60,1,"{name}"\n')
    assert load_trace(p).model == (model,)
    assert catalogue.match_model(name) == model


def test_simulate_reads_model_names_as_traces_spell_them(tmp_path, capsys):
    p = _write(tmp_path, "m.csv", f'{HEAD4},model\na,0,600,1,MobileNet\nb,5,600,2,"ResNet-50 (batch size 64)"\nc,9,600,1,GNMT\n')
    args = ["simulate", str(p), "--allocator", "fixed-demand", "--no-progress", "-o", str(tmp_path / "o")]
    assert main(args) == 0
    jobs = next((tmp_path / "o").glob("*.jobs.csv")).read_text()
    assert all(m in jobs for m in ("mobilenet", "resnet50", "gnmt"))
    _write(tmp_path, "m.csv", f"{HEAD4},model\na,0,600,1,MobileNet\nb,5,600,2,res101\n")
    assert main(args) == 2
    assert "m.csv[line 3].model: is not a catalogue model; close: ['resnet18', 'resnet50']" in capsys.readouterr().err


def test_a_schema_maps_trace_model_names_and_refuses_unknown_ones(tmp_path):
    p = _write(tmp_path, "m.csv", "t,g,d,arch\n0,1,60,vgg16\n5,1,60,BERT-large\n9,1,60,MobileNet\n")
    cols = {"submit": "t", "gpus": "g", "duration": "d", "model": "arch"}
    with pytest.raises(InputError) as e:
        load_csv(p, CsvSchema(cols))
    assert e.value.field == "m.csv[line 2].arch" and "models can map it" in e.value.problem
    sp = _write(tmp_path, "s.json", json.dumps({"columns": cols, "models": {"vgg16": "ResNet-50", "BERT-large": "bert"}}))
    schema = CsvSchema.from_file(sp)
    assert dict(schema.models) == {"vgg16": "ResNet-50", "BERT-large": "bert"} and schema.to_dict()["models"] == schema.models
    matched = schema.for_catalogue()  # the targets as the catalogue's names (the catalogue the trace is read with)
    assert dict(matched.models) == {"vgg16": "resnet50", "BERT-large": "bert"} and matched.to_dict()["models"] == matched.models
    assert load_csv(p, schema).model == ("resnet50", "bert", "mobilenet")
    assert "models" not in CsvSchema(cols).to_dict()  # run ids of schemas without one stay as they were
    vgg = CsvSchema(cols, models={"vgg16": "vgg"})
    for check in (vgg.for_catalogue, lambda: load_csv(p, vgg)):
        with pytest.raises(InputError) as e:
            check()
        assert e.value.field == "models.vgg16" and "is not a catalogue model" in e.value.problem
    with pytest.raises(InputError, match="models.vgg16: must be a model name"):
        CsvSchema(cols, models={"vgg16": 16})
    with pytest.raises(InputError, match="columns.model"):
        CsvSchema({"submit": "t", "gpus": "g", "duration": "d"}, models={"vgg16": "resnet50"})
    toml = _write(tmp_path, "s.toml", '[columns]\nsubmit = "t"\ngpus = "g"\nduration = "d"\nmodel = "arch"\n[models]\nvgg16 = "res50"\n'
                                      '"BERT-large" = "bert"\n')
    assert load_csv(p, CsvSchema.from_file(toml)).model == ("resnet50", "bert", "mobilenet")


# --- the bundled sample ----------------------------------------------------------------------------


def test_the_sample_is_bundled_with_its_notice():
    p = ex.sample_trace_path()
    assert p.is_file() and (p.parent / "philly-sample.NOTICE.md").is_file()
    notice = (p.parent / "philly-sample.NOTICE.md").read_text()
    assert "CC BY 4.0" in notice and "Jeon" in notice and "Changes made" in notice
    tr = ex.open_trace("sample")
    assert 300 <= len(tr) <= 700 and tr.submit_s[0] == 0 and tr.submit_s[-1] < 2 * 86400
    assert tr.gpus.max() > 8 and set(tr.tenant) - {""}


def test_simulate_sample_runs_out_of_the_box(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["simulate", "sample", "--length", "6h", "--allocator", "fixed-demand", "--no-progress", "-o", str(out)]) == 0
    assert "las/fixed-demand" in capsys.readouterr().out
    doc = json.loads(next(out.glob("*.metrics.json")).read_text())
    assert doc["manifest"]["setup"]["trace"] == "sample" and len(doc["manifest"]["setup"]["trace_sha256"]) == 64


# --- deterministic budgets -------------------------------------------------------------------------


def test_deterministic_time_reaches_cpsat_and_lns_only(tmp_path, monkeypatch):
    seen: list[dict] = []

    class Spy(SolveRoundAllocator):
        def __init__(self, solver, **kw):
            seen.append({"solver": solver, **kw})
            super().__init__(solver, **kw)

    monkeypatch.setattr(ex, "SolveRoundAllocator", Spy)
    setup = ex.prepare(_write(tmp_path, "n.csv", NORMALIZED), cluster="2x8")
    res = ex.run(setup, allocator="cpsat", time_limit=5, deterministic_time=0.2)
    ex.run(setup, allocator="fungible-greedy", deterministic_time=0.2)
    assert seen[0]["deterministic_time"] == 0.2 and "deterministic_time" not in seen[1]
    assert res.info["manifest"]["deterministic_time"] == 0.2
    for bad in ("scip", "maifs", "cbc@demand"):
        with pytest.raises(InputError) as e:
            ex.run(setup, allocator=bad, deterministic_time=0.2)
        assert e.value.field == "deterministic_time" and bad in str(e.value)
    with pytest.raises(InputError, match="positive"):
        ex.run(setup, allocator="cpsat", deterministic_time=0)


def test_simulate_refuses_deterministic_time_for_a_wall_clock_allocator(tmp_path, capsys):
    p = _write(tmp_path, "n.csv", NORMALIZED)
    assert main(["simulate", str(p), "--allocator", "fixed-demand,scip", "--deterministic-time", "1", "--no-progress",
                 "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--deterministic-time" in err and "scip" in err


def test_a_gap_target_reaches_the_round_chain_and_its_run_id_only(tmp_path, monkeypatch):
    import optsched.sim.solving as solving

    seen = []

    class Recording(solving.RoundSolver):
        def __init__(self, *a, **kw):
            seen.append(kw["gap_target"])
            super().__init__(*a, **kw)

    monkeypatch.setattr(solving, "RoundSolver", Recording)
    setup = ex.prepare(_write(tmp_path, "n.csv", NORMALIZED), cluster="2x8")
    kw = {"policy": "fifo", "time_limit": 5, "deterministic_time": 0.1, "num_workers": 1}
    default, loose = (ex.run(setup, allocator="cpsat@warm", gap_target=g, **kw) for g in (None, 0.05))
    assert seen == [GAP_TARGET, 0.05]
    assert "gap_target" not in default.info["manifest"]["solver_options"]
    assert loose.info["manifest"]["solver_options"]["gap_target"] == 0.05 and loose.info["run_id"] != default.info["run_id"]
    for res in (default, loose):  # how the chain answered its rounds: one count per solver call
        assert sum(res.info["chain_paths"].values()) == int((res.rounds["solved"] > 0).sum()) > 0
        assert {k.partition(":")[0] for k in res.info["chain_paths"]} <= set(PATHS)
    greedy = [ex.run(setup, allocator="fungible-greedy", policy="fifo", gap_target=g) for g in (None, 0.05)]
    assert "chain_paths" not in greedy[0].info
    assert greedy[0].info["run_id"] == greedy[1].info["run_id"]  # not a chain: the target changes nothing


@pytest.mark.parametrize("allocators, target, needle", [
    ("fungible-greedy,cpsat@cold", "0.01", "round chains"), ("cpsat", "1.5", "[0, 1)"), ("cpsat@warm", "nan", "[0, 1)")])
def test_simulate_refuses_a_gap_target_it_cannot_use(tmp_path, capsys, allocators, target, needle):
    p = _write(tmp_path, "n.csv", NORMALIZED)
    assert main(["simulate", str(p), "--allocator", allocators, "--gap-target", target, "--no-progress",
                 "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--gap-target" in err and needle in err


@pytest.mark.parametrize("allocator, solver, variant, canonical", [
    ("cpsat", "cpsat", "warm", "cpsat@warm"), ("cpsat@warm", "cpsat", "warm", "cpsat@warm"),
    ("cpsat@cold", "cpsat", "cold", "cpsat@cold"), ("cpsat@demand", "cpsat", "demand", "cpsat@demand"),
    ("fungible-greedy", "fungible-greedy", "cold", "fungible-greedy"), ("fungible-greedy@cold", "fungible-greedy", "cold", "fungible-greedy"),
    ("lns", "lns", "cold", "lns"), ("lns@warm", "lns", "warm", "lns@warm")])
def test_allocator_names_resolve_to_one_variant(allocator, solver, variant, canonical):
    assert ex.parse_allocator(allocator) == (solver, variant)
    assert ex.canonical_allocator(allocator) == canonical


@pytest.mark.parametrize("allocator", ["cpsat@", "cpsat@hot", "cpsat@warm@cold", 3])
def test_unknown_allocator_variants_are_refused(allocator):
    with pytest.raises(InputError, match="allocator"):
        ex.parse_allocator(allocator)


def test_plain_cpsat_is_a_round_chain_and_cold_is_asked_for(tmp_path):
    """The simulator's cpsat solves the rounds as one chain (the same run as cpsat@warm, the same
    run id); cpsat@cold solves each afresh, recorded under its own name."""
    setup = ex.prepare(_write(tmp_path, "n.csv", NORMALIZED), cluster="2x8")
    plain, warm, cold = (ex.run(setup, allocator=a, policy="fifo", time_limit=5, deterministic_time=0.2, num_workers=1)
                         for a in ("cpsat", "cpsat@warm", "cpsat@cold"))
    assert plain.info["chain_paths"] and plain.info["manifest"]["allocator"] == "cpsat@warm"
    assert plain.info["run_id"] == warm.info["run_id"] != cold.info["run_id"]
    assert "chain_paths" not in cold.info and cold.info["manifest"]["allocator"] == "cpsat@cold"
    np.testing.assert_array_equal(plain.jobs["finish_s"], warm.jobs["finish_s"])


def test_cpsat_runs_under_deterministic_time_repeat(tmp_path):
    setup = ex.prepare(_write(tmp_path, "n.csv", NORMALIZED), cluster="2x8")
    a, b = (ex.run(setup, allocator="cpsat", time_limit=30, deterministic_time=0.3, num_workers=2) for _ in range(2))
    np.testing.assert_array_equal(a.jobs["finish_s"], b.jobs["finish_s"])
    assert a.info["run_id"] == b.info["run_id"]


# --- run files -------------------------------------------------------------------------------------


def test_runs_differing_only_in_fair_both_survive(tmp_path):
    p = _write(tmp_path, "n.csv", NORMALIZED)
    out = tmp_path / "o"
    base = ["simulate", str(p), "--cluster", "2x8", "--allocator", "fungible-greedy", "--no-progress", "-o", str(out)]
    assert main(base) == 0
    assert main([*base, "--fair"]) == 0
    assert main(base) == 0  # the same run again: same name, rewritten
    files = sorted(out.glob("*.metrics.json"))
    assert len(files) == 2 and len(list(out.glob("*.jobs.csv"))) == 2
    docs = [json.loads(f.read_text()) for f in files]
    assert {d["manifest"]["config"]["fair"] for d in docs} == {False, True}
    for f, d in zip(files, docs, strict=True):
        assert f.name == f"las-fungible-greedy-s0-{d['run_id']}.metrics.json" and d["run_id"] == run_id(d["manifest"])
        back = read_run(f, f.with_name(f.name.replace(".metrics.json", ".jobs.csv")))
        assert back.info["manifest"] == d["manifest"]
    with (out / files[0].name.replace(".metrics.json", ".jobs.csv")).open() as fh:
        assert len(list(csv.DictReader(fh))) == 5


def test_the_run_id_covers_results_and_ignores_labels(tmp_path):
    p = _write(tmp_path, "n.csv", NORMALIZED)
    setup = ex.prepare(p, cluster="2x8")
    cfg = ex.SimConfig(progress=False)
    kw = {"policy": "las", "allocator": "fixed-demand", "time_limit": 5.0, "seed": 0}
    m = ex.manifest(setup, config=cfg, **kw)
    assert run_id(m) == run_id(ex.manifest(setup, config=ex.SimConfig(progress=True, check=True, name="x"), **kw))
    for change in ({"time_limit": 2.0}, {"seed": 1}, {"deterministic_time": 1.0}):
        assert run_id(ex.manifest(setup, config=cfg, **{**kw, **change})) != run_id(m), change
    for cfg2 in (ex.SimConfig(round_s=60), ex.SimConfig(queue_window=None), ex.SimConfig(slo_share=0.1)):
        assert run_id(ex.manifest(setup, config=cfg2, **kw)) != run_id(m)
    moved = tmp_path / "elsewhere.csv"
    moved.write_bytes(p.read_bytes())
    assert run_id(ex.manifest(ex.prepare(moved, cluster="2x8"), config=cfg, **kw)) == run_id(m)  # same bytes, same id
    other = ex.prepare(p, cluster="2x8", mix={"image": 1.0})
    assert run_id(ex.manifest(other, config=cfg, **kw)) != run_id(m)
    for node_change in ({"cpus": 24}, {"mem_gb": 256}, {"cluster": "2x8:A100"}):
        other = ex.prepare(p, **{"cluster": "2x8", **node_change})
        assert run_id(ex.manifest(other, config=cfg, **kw)) != run_id(m), node_change


def test_a_shadowed_run_has_its_own_files(tmp_path, capsys):
    p = _write(tmp_path, "n.csv", NORMALIZED)
    out = tmp_path / "o"
    base = ["simulate", str(p), "--cluster", "2x8", "--allocator", "fungible-greedy", "--no-progress", "-o", str(out)]
    assert main(base) == 0 and main([*base, "--shadow", "fixed-demand"]) == 0
    (rounds,) = out.glob("*.rounds.csv")
    stem = rounds.name.removesuffix(".rounds.csv")
    assert (out / f"{stem}.metrics.json").exists() and len(list(out.glob("*.metrics.json"))) == 2
    assert json.loads((out / f"{stem}.metrics.json").read_text())["manifest"]["shadow"] == "fixed-demand"
    assert main([*base, "--shadow", "scip", "--deterministic-time", "1"]) == 2
    assert "scip" in capsys.readouterr().err
    # a shadow solves each round afresh: SOLVER@cold is the same shadow, a chain is refused
    assert main([*base, "--shadow", "fixed-demand@cold"]) == 0
    assert len(list(out.glob("*.rounds.csv"))) == 1
    for bad in ("cpsat@warm", "cpsat@demand", "magic"):
        assert main([*base, "--shadow", bad]) == 2
        assert "--shadow" in capsys.readouterr().err


def test_a_synthetic_run_id_covers_its_text_and_its_source_file(tmp_path):
    src = _write(tmp_path, "src.csv", NORMALIZED)
    kw = {"policy": "las", "allocator": "fixed-demand", "time_limit": 5.0, "seed": 0, "config": ex.SimConfig()}

    def rid(text):
        return run_id(ex.manifest(ex.prepare(text, cluster="2x8"), **kw))

    a = rid(f"synthetic:parametric:jobs=20,duration=trace,sizes=trace,source={src}")
    assert a != rid(f"synthetic:parametric:jobs=21,duration=trace,sizes=trace,source={src}")
    src.write_text(NORMALIZED.replace("600,1", "700,1"))
    assert a != rid(f"synthetic:parametric:jobs=20,duration=trace,sizes=trace,source={src}")


# --- bad input named by file, line and column -------------------------------------------------------


def test_a_cell_beyond_the_csv_field_limit_is_refused_with_its_line(tmp_path):
    p = _write(tmp_path, "big.csv", "job_id,submit_time_s,duration_s,num_gpus,tenant\na,0,60,1,x\n# note\nb,5,60,1," + "y" * 200_000 + "\n")
    with pytest.raises(InputError) as e:
        load_trace(p)
    assert e.value.field == "big.csv[line 4]" and "131,072 characters" in e.value.problem
    wide = _write(tmp_path, "wide.csv", "# a comment\n" + "z" * 200_000 + ",b\n1,2\n")
    with pytest.raises(InputError) as e:
        load_trace(wide)
    assert e.value.field == "wide.csv[line 2]"


def test_a_header_naming_a_column_twice_is_refused(tmp_path):
    p = _write(tmp_path, "dup.csv", "# x\njob_id,submit_time_s,duration_s,num_gpus,tenant,tenant\na,0,60,1,v,w\n")
    with pytest.raises(InputError) as e:
        load_trace(p)
    assert e.value.field == "dup.csv[line 2].tenant" and "twice" in e.value.problem
    assert len(load_trace(_write(tmp_path, "blank.csv", "job_id,submit_time_s,duration_s,num_gpus,,\na,0,60,1,,\n"))) == 1


def test_a_field_mapped_twice_is_refused_naming_the_option(tmp_path, capsys):
    with pytest.raises(InputError) as e:
        CsvSchema.parse_columns("submit=a,gpus=g,submit=b")
    assert e.value.field == "--columns" and "submit twice" in e.value.problem
    p = _write(tmp_path, "chips.csv", CHIPS)
    assert main(["simulate", str(p), "--columns", "submit=submitted_at,gpus=num_chips,duration=run_s,gpus=num_chips",
                 "--no-progress", "-o", str(tmp_path / "o")]) == 2
    assert "--columns: maps gpus twice" in capsys.readouterr().err
    s = _write(tmp_path, "s.json", '{"columns": {"submit": "a", "gpus": "g", "duration": "d", "gpus": "h"}}')
    with pytest.raises(InputError, match="'gpus' is given twice"):
        CsvSchema.from_file(s)


HEAD4 = "job_id,submit_time_s,duration_s,num_gpus"


@pytest.mark.parametrize(("extra", "row", "column", "needle"), [
    ("", "b,10,nan,1", "duration_s", "finite"),  # was dropped as if it ran backwards
    ("", "b,10,inf,1", "duration_s", "finite"),
    ("", "b,10,,1", "duration_s", "is required"),
    ("", "b,NaN,60,1", "submit_time_s", "finite"),
    ("", "b,-inf,60,1", "submit_time_s", "finite"),
    (",cpus_per_gpu", "b,10,60,1,-2", "cpus_per_gpu", ">= 0"),
    (",mem_per_gpu_gb", "b,10,60,1,-1", "mem_per_gpu_gb", ">= 0"),
    (",cpu_cores", "b,10,60,1,nan", "cpu_cores", "finite"),
    (",mem_gib", "b,10,60,1,inf", "mem_gib", "finite"),
    (",gpu_fraction", "b,10,60,1,0", "gpu_fraction", "(0, 1]"),
    (",gpu_fraction", "b,10,60,1,2", "gpu_fraction", "(0, 1]"),
    (",censored", "b,10,60,1,yes", "censored", "0 or 1"),
])
def test_bad_cells_are_refused_naming_file_line_and_column(tmp_path, extra, row, column, needle):
    """NaN, infinities, negative requests, shares of a GPU outside (0, 1] and non-boolean flags are
    refused, naming the cell; an empty optional cell means "not recorded"."""
    fill = ",".join([""] * extra.count(","))
    p = _write(tmp_path, "t.csv", f"# header next\n{HEAD4}{extra}\na,0,60,1{',' + fill if extra else ''}\n{row}\n")
    with pytest.raises(InputError) as e:
        load_trace(p)
    assert e.value.field == f"t.csv[line 4].{column}" and needle in e.value.problem


def test_flags_and_empty_optional_cells_are_read(tmp_path):
    p = _write(tmp_path, "t.csv", f"{HEAD4},censored,cpu_cores,gpu_fraction\na,0,60,1,TRUE,,0.5\nb,5,60,1,false,4,1\nc,9,60,2,1,,\n")
    tr = load_trace(p)
    assert tr.notes == {"censored": 2, "fractional_gpu_as_whole": 1} and np.isnan(tr.cpu_cores[0]) and tr.cpu_cores[1] == 4


@pytest.mark.parametrize(("text", "columns", "field"), [
    ("t,g,d\n1,1,5\nnan,1,5\n", "submit=t,gpus=g,duration=d", "s.csv[line 3].t"),
    ("t,g,d\n1,1,5\n2,1,inf\n", "submit=t,gpus=g,duration=d", "s.csv[line 3].d"),
    ("t,g,d\n1,1,5\n2,1,1e308\n", "submit=t,gpus=g,duration=d", "s.csv[line 3].d"),  # 1e308 hours overflow
    ("t,g,e\n1,1,5\n2,1,NaN\n", "submit=t,gpus=g,end=e", "s.csv[line 3].e"),
    ("id,t,g,d\nx,1,1,5\ny,2\n", "id=id,submit=t,gpus=g,duration=d", "s.csv[line 3].g"),  # a short row
    ("t,g,d,c\n1,1,5,2\n2,1,5,-4\n", "submit=t,gpus=g,duration=d,cpu_cores=c", "s.csv[line 3].c"),
    ("t,g,d,n\n1,1,5,2\n2,1,5,nan\n", "submit=t,gpus=g,duration=d,instances=n", "s.csv[line 3].n"),
])
def test_a_schema_refuses_bad_cells_naming_the_line_and_column(tmp_path, text, columns, field):
    p = _write(tmp_path, "s.csv", text)
    with pytest.raises(InputError) as e:
        load_csv(p, CsvSchema(CsvSchema.parse_columns(columns), time_unit="h"))
    assert e.value.field == field


def test_helios_and_philly_times_must_be_finite(tmp_path):
    h = _write(tmp_path, "h.csv", "job_id,user,vc,gpu_num,node_num,state,submit_time,duration\nh1,u,v,1,1,C,nan,600\n")
    with pytest.raises(InputError) as e:
        load_trace(h)
    assert e.value.field == "h.csv[line 2].submit_time"
    ph = _write(tmp_path, "p.csv", "timestamp,duration,num_gpus\n2017-10-03 10:00:00,nan,1\n")
    with pytest.raises(InputError) as e:
        load_trace(ph)
    assert e.value.field == "p.csv[line 2].duration"


def test_a_repeated_job_id_is_refused_naming_both_lines(tmp_path):
    p = _write(tmp_path, "n.csv", f"{HEAD4}\na,0,60,1\n# a comment\nb,5,60,0\nb,9,60,1\n")
    with pytest.raises(InputError) as e:
        load_trace(p)
    assert e.value.field == "n.csv[line 5].job_id" and "line 4" in e.value.problem and e.value.value == "b"  # line 4 is CPU-only
    with pytest.raises(InputError, match=r"n3.csv\[line 3\].job_id: is also the job id of line 2"):
        load_trace(_write(tmp_path, "n3.csv", f"{HEAD4}\na,0,60,1\na,5,60,1\n"))
    with pytest.raises(InputError, match=r"n2.csv\[line 3\].job_id: is required"):
        load_trace(_write(tmp_path, "n2.csv", f"{HEAD4}\na,0,60,1\n,5,60,1\n"))


# one PAI 2020 job (j1) with a parameter-server and a worker task row
PAI_TASKS = """job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type
j1,ps,1,Terminated,1590000000,1590003600,600,29.3,50,V100
j1,worker,4,Terminated,1590000000,1590003600,600,29.3,100,V100
j2,worker,1,Terminated,1590000100,1590000700,400,10,100,T4
"""


def test_the_documented_pai_command_reads_tasks_of_one_job(tmp_path, capsys):
    """The PAI 2020 command of docs/simulator.md runs on a task table whose job has several task
    rows (each replayed as a job, ids the row numbers); mapping id=job_name is refused naming both lines."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "simulator.md").read_text()
    cmd = next(b for b in (c.split("```")[0] for c in doc.split("```bash\n")[1:]) if "pai_task_table.csv" in b).replace("\\\n", " ")
    args = shlex.split(cmd)[1:]
    assert args[:2] == ["simulate", "pai_task_table.csv"]
    p = _write(tmp_path, "pai_task_table.csv", PAI_TASKS)
    args[1] = str(p)
    assert main([*args, "--allocator", "fixed-demand", "--no-progress", "-o", str(tmp_path / "o")]) == 0
    assert "3 jobs" in capsys.readouterr().err
    i = args.index("--columns")
    args[i + 1] = "id=job_name," + args[i + 1]
    assert main([*args, "--no-progress", "-o", str(tmp_path / "o")]) == 2
    assert "pai_task_table.csv[line 3].job_name: is also the job id of line 2" in capsys.readouterr().err


def test_the_origin_is_the_first_job_kept(tmp_path, capsys):
    """A zero-length or backwards job first in the trace is dropped and sets no origin: time 0 is
    the first kept arrival, so --start/--length windows count from it."""
    p = _write(tmp_path, "n.csv", f"{HEAD4}\nz,0,0,1\nneg,100,-5,1\na,1000,60,1\nb,1500,60,1\n")
    tr = load_trace(p)
    assert tr.job_id == ("a", "b") and tr.submit_s.tolist() == [0.0, 500.0]
    assert tr.notes == {"dropped_zero_duration": 1, "dropped_negative_duration": 1}
    s = _write(tmp_path, "s.csv", "t,g,d\n0,1,0\n1000,1,60\n")
    assert load_csv(s, CsvSchema({"submit": "t", "gpus": "g", "duration": "d"})).submit_s.tolist() == [0.0]
    args = ["simulate", str(p), "--length", "10m", "--allocator", "fixed-demand", "--no-progress", "-o", str(tmp_path / "o")]
    assert main(args) == 0  # the window [0, 600 s) of the jobs kept holds a and b
    assert "2 jobs" in capsys.readouterr().err


def test_gpu_counts_rounded_up_are_counted(tmp_path):
    """With gpu_unit 0.01, 150 and 250 are 1.5 and 2.5 GPUs: replayed on 2 and 3, counted as
    rounded_gpus (a share of one GPU as fractional_gpu_as_whole); whole counts are not."""
    p = _write(tmp_path, "g.csv", "t,g,d,n\n0,150,60,1\n1,250,60,1\n2,50,60,1\n3,300,60,1\n4,50,60,3\n")
    tr = load_csv(p, CsvSchema({"submit": "t", "gpus": "g", "duration": "d", "instances": "n"}, gpu_unit=0.01))
    assert tr.gpus.tolist() == [2, 3, 1, 3, 2]
    assert tr.notes == {"rounded_gpus": 3, "fractional_gpu_as_whole": 1}


def test_the_time_unit_is_checked_on_the_whole_trace(tmp_path, capsys):
    """A trace in ms read as seconds: 30-minute jobs look like 21 days, arriving a minute apart
    looks like 17 hours. The whole trace is checked before the window (one day read as seconds
    holds two jobs), and the warning names the option that reads it right."""
    rows = "".join(f"j{i},{1_590_000_000_000 + i * 60_000},1,{1_800_000 + i}\n" for i in range(20))
    p = _write(tmp_path, "ms.csv", "job,t,g,d\n" + rows)
    args = ["simulate", str(p), "--columns", "id=job,submit=t,gpus=g,duration=d", "--length", "1d", "--allocator", "fixed-demand",
            "--no-progress", "--horizon", "1h", "-o", str(tmp_path / "o")]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "the median job runs 20.8 days" in err and "Pass --time-unit ms" in err
    assert main([*args, "--time-unit", "ms"]) == 0
    assert "another unit" not in capsys.readouterr().err
    # microseconds read as milliseconds: the same 1,000 times too long, and us is the unit to pass
    us = _write(tmp_path, "us.csv", "job,t,g,d\n" + rows.replace(",1,", "000,1,").replace("\n", "000\n"))
    setup = ex.prepare(us, schema=CsvSchema({"id": "job", "submit": "t", "gpus": "g", "duration": "d"}, time_unit="ms"), cluster="2x8")
    assert len(setup.warnings) == 1 and "read in milliseconds" in setup.warnings[0] and "Pass --time-unit us" in setup.warnings[0]


def test_the_unit_warning_reads_gaps_and_spans():
    def trace(submit, duration):
        return Trace.from_columns("t", {"job_id": [f"j{i}" for i in range(len(submit))], "submit_s": submit,
                                        "duration_s": duration, "gpus": [1] * len(submit)})

    sparse = unit_warning(trace([i * 2 * 86_400.0 for i in range(12)], [600.0] * 12), schema=False)
    assert sparse is not None and "2.0 days apart" in sparse and "--time-unit ms (with --columns/--schema)" in sparse
    assert "duration_unit" not in sparse
    assert unit_warning(trace([0.0, 6 * 365 * 86_400.0], [60.0, 60.0])) is not None
    assert unit_warning(trace([i * 100.0 for i in range(12)], [4 * 86_400.0] * 12), "s") is not None
    assert unit_warning(trace([i * 100.0 for i in range(12)], [2 * 86_400.0] * 12)) is None
    assert ex.prepare("sample").warnings == ()


def test_times_that_overflow_once_subtracted_are_refused_with_their_line(tmp_path):
    p = _write(tmp_path, "far.csv", f"{HEAD4}\na,-1e308,60,1\nb,1e308,60,1\n")
    with pytest.raises(InputError) as e:
        load_trace(p)
    assert e.value.field == "far.csv[line 3]" and "overflows" in e.value.problem
    q = _write(tmp_path, "long.csv", "t,s,e,g\n0,-1e308,1e308,1\n")
    with pytest.raises(InputError) as e:
        load_csv(q, CsvSchema({"submit": "t", "start": "s", "end": "e", "gpus": "g"}))
    assert e.value.field == "long.csv[line 2]"


@pytest.mark.parametrize(("data", "name", "needle"), [
    (b"{}", "dir.json", "cannot be read"),  # a directory: was an IsADirectoryError
    (b'{"columns": {"submit": "t\xff"}}', "latin.json", "cannot be read"),  # was a UnicodeDecodeError
    (b"[" * 100_000 + b"]" * 100_000, "deep.json", "too deeply"),  # was a RecursionError
])
def test_a_schema_file_that_cannot_be_read_is_refused_by_name(tmp_path, data, name, needle):
    p = tmp_path / name
    if name == "dir.json":
        p.mkdir()
    else:
        p.write_bytes(data)
    with pytest.raises(InputError) as e:
        CsvSchema.from_file(p)
    assert e.value.field == "schema" and needle in e.value.problem


SACCT_HEAD = "JobID|Account|Submit|Start|Elapsed|AllocTRES\n"
SACCT_ROW = "7|lab|2024-03-01T08:00:00|2024-03-01T08:05:00|{elapsed}|{tres}\n"


@pytest.mark.parametrize(("elapsed", "tres", "column"), [
    ("-5:00", "gres/gpu=1", "Elapsed"),  # was read as 5 minutes
    ("1-05:00", "gres/gpu=1", "Elapsed"),  # Slurm's D-HH:MM: was read as a day and 5 minutes
    ("1-25:00:00", "gres/gpu=1", "Elapsed"),
    ("10:75", "gres/gpu=1", "Elapsed"),
    ("1e3:00", "gres/gpu=1", "Elapsed"),  # was read as 1,000 minutes
    ("1" * 400 + "-00:00:00", "gres/gpu=1", "Elapsed"),  # was an OverflowError
    ("10:00", "gres/gpu=nan", "AllocTRES"),  # was dropped as CPU-only
    ("10:00", "gres/gpu:a100=2,gres/gpu:v100=-2", "AllocTRES"),  # was dropped as CPU-only
    ("10:00", "cpu=-4,gres/gpu=1", "AllocTRES"),  # was read as -4 cores
    ("10:00", "mem=nanG,gres/gpu=1", "AllocTRES"),
    ("10:00", "mem=1e308T,gres/gpu=1", "AllocTRES"),  # was infinite memory
    ("10:00", "gres/gpu=1e20", "AllocTRES"),  # was an OverflowError building the trace
    ("10:00", "gres/gpu:a=1.5e308,gres/gpu:b=1.5e308", "AllocTRES"),  # typed counts summing to inf: was dropped as CPU-only
])
def test_sacct_cells_out_of_range_are_refused_naming_the_cell(tmp_path, elapsed, tres, column):
    p = _write(tmp_path, "slurm.txt", SACCT_HEAD + SACCT_ROW.format(elapsed="01:00", tres="gres/gpu=1").replace("7|", "6|")
               + SACCT_ROW.format(elapsed=elapsed, tres=tres))
    with pytest.raises(InputError) as e:
        load_trace(p)
    assert e.value.field == f"slurm.txt[line 3].{column}"


def test_sacct_lines_of_another_length_are_refused_and_gpu_types_kept(tmp_path):
    """A line cut short was dropped as a job that never started (its Start missing); one with a
    field too many read its cells shifted. Several GPU types of one job were only the last one."""
    good = SACCT_ROW.format(elapsed="1-02:00:00.5", tres="cpu=8,gres/gpu:a100=1,gres/gpu:v100=2,gres/gpu:t4=0")
    tr = load_trace(_write(tmp_path, "ok.txt", SACCT_HEAD + good))
    assert tr.gpus.tolist() == [3] and tr.gpu_type == ("A100|V100",) and tr.duration_s.tolist() == [93600.5]
    for name, line, what in (("short.txt", "7|lab|2024-03-01T08:00:00\n", "fewer"), ("long.txt", good.replace("|lab|", "|lab|x|"), "more")):
        with pytest.raises(InputError) as e:
            load_trace(_write(tmp_path, name, SACCT_HEAD + line))
        assert e.value.field == f"{name}[line 2]" and f"has {what} fields than the header" in e.value.problem


PHILLY_JOB = {"jobid": "a1", "vc": "vc1", "submitted_time": "2017-10-07 11:06:22",
              "attempts": [{"start_time": "2017-10-07 11:06:25", "end_time": "2017-10-07 11:07:55",
                            "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]}


@pytest.mark.parametrize(("text", "field", "needle"), [
    ("[" * 100_000 + "]" * 100_000, "path", "deeper than 64"),  # was a RecursionError
    (json.dumps([PHILLY_JOB]).replace('"m1"', "1" * 5000), "cluster_job_log[0].attempts[0].detail[0].ip", "4,300 digits"),  # a ValueError
    (json.dumps([PHILLY_JOB]).replace('"gpu0"', "NaN"), "cluster_job_log[0].attempts[0].detail[0].gpus[0]", "NaN"),
    (json.dumps([{**PHILLY_JOB, "attempts": {}}]), "cluster_job_log[0].attempts", "must be a list"),  # was a job never run
    (json.dumps([{**PHILLY_JOB, "attempts": [{**PHILLY_JOB["attempts"][0], "detail": {}}]}]),  # was a job on no GPU
     "cluster_job_log[0].attempts[0].detail", "must be a list"),
])
def test_a_philly_job_log_out_of_shape_is_refused_by_name(tmp_path, text, field, needle):
    with pytest.raises(InputError) as e:
        load_trace(_write(tmp_path, "cluster_job_log", text))
    assert e.value.field == field and needle in e.value.problem


def test_a_philly_job_with_an_attempt_ending_before_it_starts_is_dropped(tmp_path):
    """Its run time is unknown: it was the attempts' sum, the backwards one taken off the others."""
    back = {"start_time": "2017-10-07 12:00:00", "end_time": "2017-10-07 11:59:00", "detail": []}
    jobs = [{**PHILLY_JOB, "attempts": [*PHILLY_JOB["attempts"], back]}, {**PHILLY_JOB, "jobid": "a2"}]
    tr = load_trace(_write(tmp_path, "cluster_job_log", json.dumps(jobs)))
    assert tr.job_id == ("a2",) and tr.duration_s.tolist() == [90.0] and tr.notes == {"dropped_negative_duration": 1}


def test_gpu_counts_and_run_times_beyond_what_the_simulator_computes_with_are_refused(tmp_path, capsys):
    """A GPU count above a million was an OverflowError building the trace (or rounding it); a run
    time whose work overflows crashed the simulation with a traceback."""
    with pytest.raises(InputError) as e:
        load_trace(_write(tmp_path, "g.csv", f"{HEAD4}\na,0,60,1\nb,5,60,1e20\n"))
    assert e.value.field == "g.csv[line 3].num_gpus" and "1,000,000" in e.value.problem
    s = _write(tmp_path, "s.csv", "t,g,d,n\n0,1,60,1\n5,1e300,60,1e300\n")
    with pytest.raises(InputError) as e:
        load_csv(s, CsvSchema({"submit": "t", "gpus": "g", "duration": "d", "instances": "n"}))
    assert e.value.field == "s.csv[line 3].g"
    long = _write(tmp_path, "long.csv", f"{HEAD4}\na,0,1e308,8\nb,10,60,1\n")
    assert main(["simulate", str(long), "--cluster", "4x8", "--allocator", "fungible-greedy", "--no-progress", "-o", str(tmp_path / "o")]) == 2
    assert "long.csv[line 2]: the job runs more than 1e+15 seconds" in capsys.readouterr().err


@pytest.mark.parametrize(("source", "args", "named"), [
    # a trace arrival 1e300 s after the first: its jobs' ends were rounded onto their arrivals (JCT 0) and the unit
    # warning printed a 300-digit number of years; 1e17 s: JCTs off by the double's 16-second steps there
    ("far.csv", [], ["far.csv[line 3]", "arrives more than 1e+15 seconds"]),
    ("near.csv", [], ["near.csv[line 3]", "arrives more than 1e+15 seconds"]),
    # an arrival-rate multiplier that stretches the arrivals as far: --target-load 1e-300 hung the replay
    ("sample", ["--target-load", "1e-300"], ["--target-load", "1e-300", "multiplier", "more than 1e+15 seconds"]),
    ("sample", ["--load", "1e-12"], ["load", "1e-12", "more than 1e+15 seconds"]),
    # a synthetic trace whose rate or load spreads its jobs as far: replayed with JCTs of 0
    ("synthetic:parametric:jobs=10,load=1e-300,gpus=8", [], ["load", "1e-300", "more than 1e+15 seconds"]),
    ("synthetic:parametric:jobs=10,rate_per_h=1e-300", [], ["rate_per_h", "more than 1e+15 seconds"]),
])
def test_arrivals_beyond_what_the_simulator_computes_with_are_refused(tmp_path, capsys, source, args, named):
    _write(tmp_path, "far.csv", f"{HEAD4}\na,0,600,2\nb,1e300,10,1\n")
    _write(tmp_path, "near.csv", f"{HEAD4}\na,0,600,2\nb,1e17,10,1\n")
    trace = str(tmp_path / source) if source.endswith(".csv") else source
    code = main(["simulate", trace, "--cluster", "2x8", "--allocator", "fungible-greedy", "--no-progress", "-o", str(tmp_path / "o"), *args])
    err = capsys.readouterr().err
    assert code == 2 and all(n in err for n in named), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_trace_arrival_at_the_limit_is_replayed(tmp_path):
    tr = load_trace(_write(tmp_path, "edge.csv", f"{HEAD4}\na,0,600,2\nb,1e15,10,1\n"))
    assert tr.submit_s.tolist() == [0.0, 1e15]


def test_a_negative_alibaba_gpu_share_is_refused_with_its_cell(tmp_path):
    """gpu_milli -500 was read as a share of one GPU (replayed on a whole one, counted as fractional)."""
    head = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    p = _write(tmp_path, "pods.csv", head + "p1,8000,1024,1,1000,,LS,Running,0,100,10\np2,8000,1024,1,-500,,LS,Running,5,100,50\n")
    with pytest.raises(InputError) as e:
        load_trace(p)
    assert e.value.field == "pods.csv[line 3].gpu_milli" and ">= 0" in e.value.problem


def test_a_nul_byte_in_a_cell_and_a_philly_job_beyond_the_gpu_limit_are_refused(tmp_path, monkeypatch):
    # Python's csv module reads NUL bytes: "j1" and "j1\0" were two jobs
    p = _write(tmp_path, "t.csv", "job_id,submit_time_s,duration_s,num_gpus\nj1,0,600,1\nj1\x00,0,600,1\n")
    with pytest.raises(InputError, match="cannot be read as a CSV row") as e:
        load_trace(p)
    assert e.value.field == "t.csv[line 3]"
    import optsched.sim.philly_json as pj

    monkeypatch.setattr(pj, "MAX_COUNT", 4)  # the real limit, 1,000,000 GPUs, takes a 10 MB log to pass
    job = {"jobid": "a", "submitted_time": "2017-10-01 00:00:00", "vc": "v",
           "attempts": [{"start_time": "2017-10-01 00:01:00", "end_time": "2017-10-01 01:00:00",
                         "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1", "gpu2"]}, {"ip": "m2", "gpus": ["gpu0", "gpu1"]}]}]}
    with pytest.raises(InputError, match="at most 4 GPUs") as e:
        load_trace(_write(tmp_path, "log.json", json.dumps([job])))
    assert e.value.field == "log.json[0].attempts"


@pytest.mark.parametrize(("extra", "option"), [
    (["--max-jobs", "0"], "--max-jobs"), (["--length", "0"], "--length"), (["--start", "-1"], "--start"),
    (["--restart", "-5"], "--restart"), (["--cluster", "4x8:Z9"], "--cluster"), (["--cluster", "pai2020:2"], "--cluster"),
    (["--cluster", "mix:nope:3"], "--cluster"), (["--gpu-unit", "0"], "--gpu-unit"), (["--min-duration", "x"], "--min-duration"),
])
def test_simulate_errors_name_the_option_not_the_setting_behind_it(tmp_path, capsys, extra, option):
    p = _write(tmp_path, "t.csv", "job_id,submit_time_s,duration_s,num_gpus\na,0,60,1\n")
    assert main(["simulate", str(p), "--allocator", "fungible-greedy", "--no-progress", "-o", str(tmp_path / "o"), *extra]) == 2
    assert f"bad input: {option}: " in capsys.readouterr().err


def test_a_stray_quote_and_a_bracketed_header_are_named_for_what_they_are(tmp_path):
    # an unbalanced quote swallowed the next lines into one cell: the error blamed a later line's
    # missing column; a CSV header starting with '[' is read as Philly's JSON log: say why
    p = _write(tmp_path, "q.csv", 'job_id,submit_time_s,duration_s,num_gpus\nj0,0,600,1\n"j1,0,600,1\nj2,0,600,1\nj3,0,600,1\n')
    with pytest.raises(InputError, match="a quoted cell runs from line 3 to 5: is a quote unbalanced") as e:
        load_trace(p)
    assert e.value.field == "q.csv[line 3]"
    with pytest.raises(InputError, match="starts with '\\['"):
        load_trace(_write(tmp_path, "b.csv", "[job_id],submit_time_s,duration_s,num_gpus\na,0,60,1\n"))


def test_a_schema_file_with_a_byte_order_mark_is_read_like_every_other_input(tmp_path):
    trace = _write(tmp_path, "t.csv", "name,queued,gpus,secs\na,0,1,60\nb,5,2,90\n")
    schema = tmp_path / "s.json"
    schema.write_bytes(b"\xef\xbb\xbf" + json.dumps({"columns": {"id": "name", "submit": "queued", "gpus": "gpus",
                                                                      "duration": "secs"}}).encode())
    tr = load_csv(trace, CsvSchema.from_file(schema))
    assert list(tr.gpus) == [1, 2]


def test_a_datetime_format_strptime_does_not_know_is_refused_up_front():
    # '%Q' failed every cell as "must be a date-time in '%Q'", hiding strptime's own reason
    cols = {"id": "a", "submit": "b", "gpus": "c", "duration": "d"}
    with pytest.raises(InputError, match="bad directive") as e:
        CsvSchema(cols, datetime_format="%Q")
    assert e.value.field == "datetime_format"
    assert CsvSchema(cols, datetime_format="%d/%m/%Y %H:%M").datetime_format == "%d/%m/%Y %H:%M"


def test_a_unit_is_named_as_the_option_only_where_the_option_gave_it(tmp_path, capsys):
    trace = _write(tmp_path, "t.csv", "name,queued,gpus,secs\na,0,1,60\n")
    schema = _write(tmp_path, "s.json", json.dumps({"columns": {"id": "name", "submit": "queued", "gpus": "gpus", "duration": "secs"},
                                                    "time_unit": "parsecs"}))
    base = ["simulate", str(trace), "--schema", str(schema), "--allocator", "fungible-greedy", "--no-progress", "-o", str(tmp_path / "o")]
    assert main(base) == 2
    assert "bad input: time_unit: unknown time unit" in capsys.readouterr().err  # the schema file's, not --time-unit's
    assert main([*base, "--time-unit", "h", "--gpu-unit", "-1"]) == 2
    assert "bad input: --gpu-unit: must be a number > 0" in capsys.readouterr().err
