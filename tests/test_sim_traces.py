"""The loaders on the real traces in ../shared/traces (skipped where they are absent)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_sim_support import fungible_first_fit

from optsched.errors import InputError
from optsched.sim import cluster, policies
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate
from optsched.sim.traces import load_trace
from optsched.sim.workload import build_workload, unit_warning, window

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"
pytestmark = [pytest.mark.traces, pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/traces is absent")]


def test_philly_native_and_normalized_agree():
    native = load_trace(SHARED / "philly-pollux" / "philly.csv")
    norm = load_trace(SHARED / "normalized" / "philly_pollux.csv")
    assert len(native) == len(norm) > 80_000
    assert sorted(native.job_id) == sorted(norm.job_id)
    assert native.gpus.sum() == norm.gpus.sum()
    assert np.isclose(native.duration_s.sum(), norm.duration_s.sum())
    assert np.mean(native.gpus == 1) == pytest.approx(0.932, abs=0.005)


def test_alibaba_pods_have_requests():
    tr = load_trace(SHARED / "alibaba-gpu-v2023" / "openb_pod_list_default.csv")
    assert len(tr) > 6000 and tr.notes["dropped_cpu_only"] > 0 and tr.notes["dropped_never_scheduled"] == 897
    per_gpu = tr.cpu_cores / tr.gpus
    assert 8 < np.median(per_gpu) < 14
    norm = load_trace(SHARED / "normalized" / "alibaba_v2023_default.csv")
    assert len(norm) == len(tr)


def test_pai_inventory():
    nodes = cluster.pai_2020()
    assert len(nodes) == 1897 - 83 and sum(n.gpus for n in nodes) == 6742
    small = cluster.pai_2020(fraction=0.05)
    assert {n.gpu_type for n in small} == {"MISC", "P100", "T4", "V100", "V100M32"}
    assert 80 < len(small) < 100


def test_the_bundled_pai_shapes_are_the_published_spec():
    spec = SHARED / "alibaba-pai-v2020-spec" / "pai_machine_spec.csv"
    for kw in ({}, {"fraction": 0.05}, {"include_cpu_only": True}):
        assert cluster.pai_2020(**kw) == cluster.pai_2020(spec, **kw)


def test_the_alibaba_v2023_nodes_run_with_the_catalogue():
    """Its undisclosed GPU types (G2, G3) and V100M16 / A10 have speeds, so a workload builds."""
    path = SHARED / "alibaba-gpu-v2023" / "openb_node_list_gpu_node.csv"
    nodes = cluster.parse_cluster(f"alibaba2023:{path}:0.05")
    assert {"G2", "G3", "V100M16", "A10", "T4"} <= {n.gpu_type for n in nodes}
    work = build_workload(window(load_trace(SHARED / "normalized" / "alibaba_v2023_default.csv"), 0, 86400), nodes)
    assert len(work) > 0 and all(j.gpu_speed for j in work.jobs)


def test_a_short_alibaba_window_runs_with_the_catalogue():
    tr = window(load_trace(SHARED / "normalized" / "alibaba_v2023_default.csv"), 30 * 86400, 2 * 86400)
    nodes = cluster.homogeneous(4)
    wl = build_workload(tr, nodes, seed=0)
    res = simulate(wl, nodes, policies.LAS(), fungible_first_fit, SimConfig(check=True, progress=False, horizon_s=6 * 86400))
    s = res.summary()
    assert s["finished"] + s["unfinished"] == len(wl) > 0


def test_the_real_traces_raise_no_unit_warning():
    """The time-unit check's limits hold for the real traces, read in seconds."""
    for name in ("philly_pollux.csv", "alibaba_v2023_default.csv"):
        assert unit_warning(load_trace(SHARED / "normalized" / name), schema=False) is None, name


SACCT = """JobID|User|Account|Partition|Submit|Start|End|Elapsed|AllocTRES|State
1001|alice|vision|gpu|2024-03-01T08:00:00|2024-03-01T08:05:00|2024-03-01T10:05:00|02:00:00|billing=16,cpu=16,gres/gpu=2,mem=128G,node=1|COMPLETED
1001.batch|||gpu|2024-03-01T08:05:00|2024-03-01T08:05:00|2024-03-01T10:05:00|02:00:00|cpu=16,gres/gpu=2,mem=128G,node=1|COMPLETED
1002|bob|nlp|gpu|2024-03-01T08:10:00|2024-03-01T09:00:00|2024-03-03T09:00:00|2-00:00:00|cpu=64,gres/gpu:a100=16,gres/gpu=16,mem=1T,node=2|COMPLETED
1003|bob|nlp|cpu|2024-03-01T08:20:00|2024-03-01T08:20:00|2024-03-01T08:30:00|10:00|cpu=4,mem=8000,node=1|COMPLETED
1004|carol|vision|gpu|2024-03-01T08:30:00|Unknown|Unknown|00:00:00||PENDING
1005_1|carol||gpu|2024-03-01T08:40:00|2024-03-01T08:41:00|2024-03-01T08:51:30|10:30|cpu=8,gres/gpu:v100=1,mem=32768,node=1|FAILED
"""


def test_a_slurm_sacct_export_is_read_as_it_comes(tmp_path):
    """``sacct --parsable2``: job steps skipped, jobs that never started and CPU-only ones dropped
    (counted), GPUs, cores, memory and the GPU type from AllocTRES, Elapsed as the run time."""
    p = tmp_path / "slurm.txt"
    p.write_text(SACCT)
    tr = load_trace(p)
    assert tr.job_id == ("1001", "1002", "1005_1")
    assert tr.submit_s.tolist() == [0.0, 600.0, 2400.0] and tr.duration_s.tolist() == [7200.0, 172800.0, 630.0]
    assert tr.gpus.tolist() == [2, 16, 1] and tr.cpu_cores.tolist() == [16, 64, 8] and tr.mem_gib.tolist() == [128, 1024, 32]
    assert tr.gpu_type == ("", "A100", "V100") and tr.tenant == ("vision", "nlp", "carol")
    assert tr.notes == {"skipped_job_steps": 1, "dropped_cpu_only": 1, "dropped_never_scheduled": 1}
    assert load_trace(p, "sacct").job_id == tr.job_id
    p.write_text(SACCT.replace("2-00:00:00", "2-00:xx:00"))
    with pytest.raises(InputError) as e:
        load_trace(p)
    assert e.value.field == "slurm.txt[line 4].Elapsed"
    p.write_text(SACCT.replace("gres/gpu=2,mem=128G", "gres/gpu=two,mem=128G", 1))
    with pytest.raises(InputError) as e:
        load_trace(p)
    assert e.value.field == "slurm.txt[line 2].AllocTRES"


def test_the_original_philly_job_log_is_read_as_it_comes(tmp_path):
    """Philly's cluster_job_log (JSON): arrival submitted_time, run time the attempts' summed,
    GPUs the most an attempt held; jobs that never ran dropped and counted; bad fields named."""
    import json

    def attempt(start, end, *gpus):
        return {"start_time": start, "end_time": end, "detail": [{"ip": f"m{k}", "gpus": [f"gpu{x}" for x in range(g)]}
                                                                 for k, g in enumerate(gpus)]}

    jobs = [
        {"jobid": "a1", "vc": "vc1", "submitted_time": "2017-10-07 11:06:22", "attempts": [attempt("2017-10-07 11:06:25", "2017-10-07 11:07:55", 2)]},
        {"jobid": "a2", "vc": "vc2", "submitted_time": "2017-10-07 11:10:00", "attempts": []},
        {"jobid": "a3", "vc": "vc2", "submitted_time": "2017-10-07 11:20:00", "attempts": [
            attempt("2017-10-07 12:00:00", "2017-10-07 12:10:00", 1, 3), attempt("2017-10-07 13:00:00", "2017-10-07 13:05:00", 1)]},
        {"jobid": "a4", "vc": "vc3", "submitted_time": "2017-10-07 11:30:00", "attempts": [attempt("2017-10-07 12:00:00", None)]},
    ]
    p = tmp_path / "cluster_job_log"
    p.write_text(json.dumps(jobs))
    tr = load_trace(p)
    assert tr.job_id == ("a1", "a3") and tr.submit_s.tolist() == [0.0, 818.0] and tr.duration_s.tolist() == [90.0, 900.0]
    assert tr.gpus.tolist() == [2, 4] and tr.tenant == ("vc1", "vc2") and tr.notes == {"dropped_never_scheduled": 2}
    assert load_trace(p, "philly-json").job_id == tr.job_id
    jobs[2]["attempts"][1]["end_time"] = "yesterday"
    p.write_text(json.dumps(jobs))
    with pytest.raises(InputError) as e:
        load_trace(p)
    assert e.value.field == "cluster_job_log[2].attempts[1].end_time"
    p.write_text('{"jobid": "a1"}')
    with pytest.raises(InputError, match="JSON object"):
        load_trace(p)
