"""Trace loaders (on tiny files written here), shaping, model assignment, clusters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_sim_support import StandInCatalogue

from optsched.errors import InputError
from optsched.sim import cluster
from optsched.sim.traces import Trace, load_alibaba_pods, load_helios, load_normalized, load_philly, load_trace
from optsched.sim.workload import build_workload, cap_sizes, scale_load, snap, window

CAT = StandInCatalogue()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text.strip() + "\n")
    return p


def test_normalized_loader_sorts_drops_and_reads_optional_columns(tmp_path):
    p = _write(tmp_path, "n.csv", """
job_id,submit_time_s,duration_s,num_gpus,gpu_fraction,cpu_cores,mem_gib,tenant,user,status,gpu_type,censored,model,cpus_per_gpu,mem_per_gpu_gb
b,20,100,2,1.0,,,vcA,,,,0,ResNet-50,2,16
a,10,50,1,0.5,6,12,LS,,Running,V100|T4,1,,,
c,30,70,0,1.0,4,8,BE,,,,0,,,
d,40,0,1,1.0,,,,,,,0,,,
""")
    tr = load_normalized(p)
    assert tr.job_id == ("a", "b")
    assert tr.submit_s.tolist() == [0.0, 10.0]  # rebased: the first arrival is at 0, as in every loader
    assert tr.gpus.tolist() == [1, 2]
    assert tr.cpu_cores[0] == 6 and np.isnan(tr.cpu_cores[1])
    assert tr.model == ("", "resnet50") and tr.gpu_type == ("V100|T4", "")  # the catalogue's name
    assert tr.cpus_per_gpu[1] == 2 and tr.mem_per_gpu_gb[1] == 16
    assert tr.notes == {"fractional_gpu_as_whole": 1, "censored": 1, "dropped_cpu_only": 1, "dropped_zero_duration": 1}


def test_philly_loader_parses_timestamps(tmp_path):
    p = _write(tmp_path, "philly.csv", """
timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,11cb48
2017-10-09 06:13:03,2951.0,8,23608.0,6214e9
""")
    tr = load_philly(p)
    assert tr.job_id == ("philly-1", "philly-0")
    assert tr.submit_s.tolist() == [0.0, 48 * 60 + 52.0]
    assert tr.gpus.tolist() == [8, 1] and tr.tenant == ("6214e9", "11cb48")


def test_alibaba_loader_uses_requests_and_skips_unscheduled(tmp_path):
    p = _write(tmp_path, "pods.csv", """
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,12000,16384,1,1000,,LS,Running,100,1100,100
p1,6000,12288,1,460,V100M16|V100M32,BE,Succeeded,150,500,200
p2,8000,8192,2,1000,,LS,Pending,160,900,
p3,4000,4096,0,0,,BE,Running,170,900,170
""")
    tr = load_alibaba_pods(p)
    assert tr.job_id == ("p0", "p1")
    assert tr.submit_s.tolist() == [0.0, 50.0]
    assert tr.duration_s.tolist() == [1000.0, 300.0]
    assert tr.cpu_cores.tolist() == [12.0, 6.0] and tr.mem_gib.tolist() == [16.0, 12.0]
    assert tr.gpu_type[1] == "V100M16|V100M32"
    assert tr.notes == {"dropped_never_scheduled": 1, "dropped_cpu_only": 1, "fractional_gpu_as_whole": 1}


def test_helios_loader_accepts_dates_and_seconds(tmp_path):
    p = _write(tmp_path, "helios.csv", """
job_id,user,vc,gpu_num,node_num,state,submit_time,duration
j1,u1,vcA,8,1,COMPLETED,2020-04-01 00:00:07,3600
j2,u2,vcB,16,2,FAILED,2020-04-01 00:10:07,60
j3,u3,vcA,0,1,COMPLETED,2020-04-01 00:11:00,60
""")
    tr = load_helios(p)
    assert tr.job_id == ("j1", "j2") and tr.submit_s.tolist() == [0.0, 600.0]
    assert tr.gpus.tolist() == [8, 16] and tr.tenant == ("vcA", "vcB")
    q = _write(tmp_path, "helios2.csv", "job_id,user,vc,gpu_num,node_num,state,submit_time,duration\nx,u,v,1,1,COMPLETED,500,10\ny,u,v,2,1,COMPLETED,400,10")
    assert load_helios(q).submit_s.tolist() == [0.0, 100.0]
    assert load_trace(q).job_id == ("y", "x")  # format sniffed from the header


@pytest.mark.parametrize("sep", [",", ", ", ";", "\t", "|"])
def test_traces_with_other_separators_a_bom_and_padded_names_are_read(tmp_path, sep):
    """A byte-order mark, blanks after the separator, and a semicolon, tab or bar separator (found
    from the header) read as the plain comma-separated file does."""
    rows = ["job_id", "submit_time_s", "duration_s", "num_gpus"], ["a", "0", "60", "1"], ["b", "30", "90", "2"]
    plain = load_trace(_write(tmp_path, "plain.csv", "\n".join(",".join(r) for r in rows)))
    text = "\ufeff" + "\n".join(sep.join(r) for r in rows)
    other = load_trace(_write(tmp_path, "other.csv", text))
    assert other.job_id == plain.job_id and other.gpus.tolist() == plain.gpus.tolist() == [1, 2]
    assert other.duration_s.tolist() == plain.duration_s.tolist()


def test_an_unknown_header_error_is_short_and_json_is_named(tmp_path):
    wide = _write(tmp_path, "wide.csv", ",".join(f"column_{i}_{'x' * 60}" for i in range(500)) + "\n1\n")
    with pytest.raises(InputError, match="unrecognised trace header") as e:
        load_trace(wide)
    assert len(str(e.value)) < 2_000 and "476 more" in str(e.value)
    js = _write(tmp_path, "jobs.json", '[{"job_id": "a", "submit": 0}]')
    with pytest.raises(InputError, match="Philly's job log .* convert other JSON to CSV"):
        load_trace(js)
    js.write_text('{"jobs": [{"job_id": "a", "submit": 0}]}')
    with pytest.raises(InputError, match="looks like a JSON object"):
        load_trace(js)


def test_loaders_name_the_bad_field(tmp_path):
    p = _write(tmp_path, "bad.csv", "job_id,submit_time_s,duration_s,num_gpus\na,0,ten,1")
    with pytest.raises(InputError, match=r"bad.csv\[line 2\].duration_s"):
        load_normalized(p)
    q = _write(tmp_path, "bad2.csv", "job_id,submit_time_s,duration_s\na,0,1")
    with pytest.raises(InputError, match="num_gpus"):
        load_normalized(q)
    r = _write(tmp_path, "bad3.csv", "job_id,user,vc,gpu_num,node_num,state,submit_time,duration\nx,u,v,1,1,C,yesterday,10")
    with pytest.raises(InputError, match="submit_time"):
        load_helios(r)
    with pytest.raises(InputError, match="no such file"):
        load_trace(tmp_path / "missing.csv")
    s = _write(tmp_path, "odd.csv", "a,b\n1,2")
    with pytest.raises(InputError, match="unrecognised"):
        load_trace(s)
    with pytest.raises(InputError, match="format"):
        load_trace(s, "parquet")


def _trace(n=10):
    return Trace.from_columns("t", {
        "job_id": [f"j{i}" for i in range(n)], "submit_s": [100.0 * i for i in range(n)],
        "duration_s": [50.0] * n, "gpus": [1, 2, 4, 8, 16, 32, 1, 1, 1, 1][:n],
    })


def test_window_scale_and_cap():
    tr = _trace()
    w = window(tr, 200, 500)
    assert w.job_id == ("j2", "j3", "j4", "j5", "j6") and w.submit_s.tolist() == [0, 100, 200, 300, 400]
    assert window(tr, 200, 500, max_jobs=2).job_id == ("j2", "j3")
    assert window(tr).job_id == tr.job_id
    s = scale_load(w, 2.0)
    assert s.submit_s.tolist() == [0, 50, 100, 150, 200]
    c = cap_sizes(tr, 8)
    assert c.gpus.max() == 8 and c.notes["capped"] == 2 and len(c) == 10
    d = cap_sizes(tr, 8, mode="drop")
    assert len(d) == 8 and d.notes["dropped_too_big"] == 2
    for bad in (lambda: window(tr, -1), lambda: window(tr, 0, 0), lambda: scale_load(tr, 0), lambda: cap_sizes(tr, 8, "shrink")):
        with pytest.raises(InputError):
            bad()


def test_trace_validation():
    with pytest.raises(InputError, match="duplicate"):
        Trace.from_columns("t", {"job_id": ["a", "a"], "submit_s": [0, 1], "duration_s": [1, 1], "gpus": [1, 1]})
    with pytest.raises(InputError, match="gpus"):
        Trace.from_columns("t", {"job_id": ["a"], "submit_s": [0], "duration_s": [1], "gpus": [0]})


def test_snap_picks_the_nearest_grid_value():
    assert snap(2.9, (1, 2, 3, 4)) == 3
    assert snap(2.5, (1, 2, 3, 4)) == 2
    assert snap(100, (1, 2, 3, 4)) == 4
    assert snap(0.2, (1, 2)) == 1


def test_build_workload_models_demands_and_gpu_types():
    tr = Trace.from_columns("t", {
        "job_id": ["a", "b", "c", "d"], "submit_s": [0, 1, 2, 3], "duration_s": [100, 100, 100, 100],
        "gpus": [2, 1, 1, 1], "cpu_cores": [6.0, np.nan, np.nan, np.nan], "mem_gib": [70.0, np.nan, np.nan, np.nan],
        "cpus_per_gpu": [np.nan, 1.2, np.nan, np.nan], "mem_per_gpu_gb": [np.nan, 60, np.nan, np.nan],
        "model": ["cpu", "flat", "cpu", ""], "gpu_type": ["", "", "SLOW", "K80"],
    })
    nodes = cluster.heterogeneous([(1, "FAST", 4, 32, 256), (1, "SLOW", 4, 32, 256)])
    wl = build_workload(tr, nodes, catalogue=CAT, seed=1)
    a, b, c, d = wl.jobs
    assert a.demand == (2, 32)  # 6 cores / 2 GPUs = 3, equidistant from 2 and 4: the smaller; 35 GB -> 32
    assert b.demand == (1, 64)
    assert c.demand == (4, 32) and c.gpu_speed == {"SLOW": 0.5}
    assert d.gpu_speed == {"FAST": 1.0, "SLOW": 0.5} and wl.notes["gpu_type_unmatched"] == 1
    assert a.work == pytest.approx(100 * a.profile.at(*a.demand))
    same = build_workload(tr, nodes, catalogue=CAT, seed=1)
    assert [j.model for j in same.jobs] == [j.model for j in wl.jobs]
    bad = tr.with_columns(model=("cpu", "nope", "cpu", ""))
    with pytest.raises(InputError, match="nope"):
        build_workload(bad, nodes, catalogue=CAT)


def test_clusters():
    h = cluster.homogeneous(16)
    assert len(h) == 16 and h[0].gpus == 8 and h[0].cpus == 64 and h[0].mem_gb == 512 and h[15].rack == "r0"
    m = cluster.mix("v100-p100-k80", 10)
    assert sorted({n.gpu_type for n in m}) == ["K80", "P100", "V100"] and len(m) == 10
    assert len(cluster.parse_cluster("4x8:A100")) == 4 and cluster.parse_cluster("4x8:A100")[0].gpu_type == "A100"
    assert len(cluster.parse_cluster("mix:a100-v100:6")) == 6
    with pytest.raises(InputError, match="cluster"):
        cluster.parse_cluster("lots")
    with pytest.raises(InputError, match="mix"):
        cluster.mix("nope", 3)


def test_pai_inventory_from_a_tiny_spec(tmp_path):
    p = _write(tmp_path, "spec.csv", """
m1,CPU,96,512,0
m2,P100,64,512,2
m3,P100,64,512,2
m4,V100M32,96,384,8
""")
    nodes = cluster.pai_2020(p)
    assert [(n.gpu_type, n.gpus, n.cpus, n.mem_gb) for n in nodes] == [("V100M32", 8, 96, 384), ("P100", 2, 64, 512), ("P100", 2, 64, 512)]
    assert len(cluster.pai_2020(p, fraction=0.1)) == 2  # at least one of each shape
    assert len(cluster.pai_2020(p, include_cpu_only=True)) == 4


def test_the_pai_inventory_is_bundled_and_the_v2023_one_is_named_where_missing(tmp_path):
    """``pai2020`` needs no file (its machine shapes ship with the package); ``alibaba2023`` reads
    the node list it is given, and says where to get it when it is missing."""
    nodes = cluster.parse_cluster("pai2020:0.02")
    assert {n.gpu_type for n in nodes} == {"MISC", "P100", "T4", "V100", "V100M32"}
    assert sum(n.gpus for n in cluster.pai_2020()) == 6742
    with pytest.raises(InputError, match="not bundled; download openb_node_list_gpu_node.csv"):
        cluster.parse_cluster(f"alibaba2023:{tmp_path / 'none.csv'}:0.5")
    p = _write(tmp_path, "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\na,96000,786432,8,G2\nb,64000,262144,2,T4\nc,8000,8192,0,\n")
    nodes = cluster.parse_cluster(f"alibaba2023:{p}")
    assert [(n.gpu_type, n.gpus, n.cpus, n.mem_gb) for n in nodes] == [("G2", 8, 96, 768), ("T4", 2, 64, 256)]
    # a short row, a GPU node without cores, a directory, a binary file: refused naming the file
    for name, text, field in [("short.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,96000\n", "short.csv[line 2]"),
                              ("bare.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,0,0,8,G2\n", "bare.csv[line 2]"),
                              ("neg.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,96000,786432,-8,G2\n", "neg.csv[line 2]")]:
        with pytest.raises(InputError) as e:
            cluster.parse_cluster(f"alibaba2023:{_write(tmp_path, name, text)}")
        assert e.value.field == field
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00\x01" * 10)
    for bad in (tmp_path, tmp_path / "bin.csv"):
        with pytest.raises(InputError, match="is not a readable CSV node list") as e:
            cluster.parse_cluster(f"alibaba2023:{bad}")
        assert e.value.field == "path"


def test_filter_durations_and_offered_load():
    from optsched.sim.workload import filter_durations, offered_load

    tr = Trace.from_columns("t", {"job_id": ["a", "b", "c"], "submit_s": [0, 50, 100], "duration_s": [30, 100, 5000],
                                  "gpus": [1, 2, 1]})
    f = filter_durations(tr, 60, 1000)
    assert f.job_id == ("b",) and f.notes["dropped_duration"] == 2
    # (30 + 200 + 5000) GPU-s over 100 s x 4 GPUs
    assert offered_load(tr, 4) == pytest.approx(5230 / 400)
    assert offered_load(scale_load(tr, 2.0), 4) == pytest.approx(2 * 5230 / 400)
    with pytest.raises(InputError):
        filter_durations(tr, 100, 10)


def test_prepare_hits_the_target_load(tmp_path):
    from optsched.sim.experiment import prepare
    from optsched.sim.workload import offered_load

    rows = "\n".join(f"j{i},{i * 100},{600 + 10 * i},{1 + i % 2}" for i in range(30))
    p = _write(tmp_path, "n.csv", "job_id,submit_time_s,duration_s,num_gpus\n" + rows)
    s = prepare(p, cluster="2x4", target_load=0.9, catalogue=CAT, seed=3)
    assert s.settings["offered_load"] == pytest.approx(0.9)
    assert len(s.workload) == 30 and s.settings["cluster_summary"].startswith("2 nodes, 8 GPUs")
    tr = load_normalized(p)
    assert offered_load(tr, 8) * s.settings["load"] == pytest.approx(0.9)
