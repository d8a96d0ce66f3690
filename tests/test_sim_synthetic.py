"""Synthetic traces: what is asked is what comes out (within sampling tolerance), seeds, refusals."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from optsched.cli import main
from optsched.errors import InputError
from optsched.sim import cluster
from optsched.sim.synthetic import (
    PRESETS,
    SYNERGY_MIX,
    describe,
    parse_spec,
    size_shares,
    spliced_lognormal_quantile,
    synthetic_trace,
)
from optsched.sim.traces import Trace, load_trace
from optsched.sim.workload import build_workload, offered_load, scale_load, window

PHILLY = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces" / "philly-pollux" / "philly.csv"


def _shares(tr: Trace) -> dict[int, float]:
    return {int(g): float(np.mean(tr.gpus == g)) for g in np.unique(tr.gpus)}


def test_gang_heavy_sizes_durations_and_load():
    """The preset's size buckets, gang share, median / p90 / p99 and offered load, on 6,000 jobs."""
    tr = synthetic_trace("gang-heavy", jobs=6000, gpus=176, load=1.1, seed=3)
    assert len(tr) == 6000 and tr.submit_s[0] == 0.0
    g = tr.gpus
    asked = {(1, 1): 4, (2, 7): 12, (8, 8): 37, (9, 32): 12, (33, 64): 3, (65, 128): 29}
    for (lo, hi), pct in asked.items():
        share = float(np.mean((g >= lo) & (g <= hi)))
        assert share == pytest.approx(pct / 97, abs=0.015), (lo, hi)  # the stated shares add up to 97 %
    assert float(np.mean(g > 8)) == pytest.approx(44 / 97, abs=0.015)
    d = tr.duration_s
    assert np.median(d) == pytest.approx(93, rel=0.12)
    assert np.percentile(d, 90) == pytest.approx(42 * 60, rel=0.15)
    assert np.percentile(d, 99) == pytest.approx(45 * 3600, rel=0.35)
    assert d.max() <= 7 * 86400
    assert offered_load(tr, 176) == pytest.approx(1.1, rel=1e-6)
    big = g > 64
    assert (g * d)[big].sum() > 0.5 * (g * d).sum()  # the 65-128 bucket holds most of the GPU-time


def test_the_two_part_lognormal_holds_three_quantiles():
    """One log-normal through (93 s, 42 min) puts p99 at ~10 h, not 45 h: the spliced tail fixes it."""
    q = spliced_lognormal_quantile(np.array([0.5, 0.9, 0.99]), 93.0, 2520.0, 162000.0)
    np.testing.assert_allclose(q, [93.0, 2520.0, 162000.0], rtol=1e-9)
    single = spliced_lognormal_quantile(np.array([0.99]), 93.0, 2520.0, None)[0]
    assert single < 0.3 * 162000.0
    # when p99 sits where the body's log-normal puts it, the splice is that log-normal
    u = np.linspace(0.01, 0.999, 50)
    np.testing.assert_allclose(spliced_lognormal_quantile(u, 93.0, 2520.0, single), spliced_lognormal_quantile(u, 93.0, 2520.0, None))


def test_parametric_knobs_sizes_map_gang_share_rate_and_median():
    """An explicit size map, gang_share reshaping it, a Poisson rate and a log-normal from median + p90."""
    tr = synthetic_trace("parametric", jobs=5000, sizes={1: 0.6, 4: 0.2, 16: 0.2}, gang_share=0.5, rate_per_h=20,
                         median_s=600, p90_s=6000, p99_s=None, seed=1)
    sh = _shares(tr)
    assert sh[16] == pytest.approx(0.5, abs=0.02)
    assert sh[1] == pytest.approx(0.5 * 0.75, abs=0.02) and sh[4] == pytest.approx(0.5 * 0.25, abs=0.02)
    assert size_shares(PRESETS["parametric"].__class__(jobs=1, rate_per_h=1, median_s=1, p90_s=2, sizes={1: 1}, gang_share=0.6)) == {
        1: pytest.approx(0.4), 16: pytest.approx(0.3), 32: pytest.approx(0.3)}  # no gangs in the map: 2 and 4 nodes
    assert np.median(tr.duration_s) == pytest.approx(600, rel=0.1)
    assert np.percentile(tr.duration_s, 90) == pytest.approx(6000, rel=0.12)
    rate = (len(tr) - 1) / (tr.submit_s[-1] / 3600)
    assert rate == pytest.approx(20, rel=0.05)
    gaps = np.diff(tr.submit_s)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, abs=0.06)  # exponential gaps


def test_span_with_load_and_span_with_rate():
    tr = synthetic_trace("parametric", jobs=None, span_s=30 * 86400, load=0.8, gpus=64, rate_per_h=None,
                         median_s=1800, p90_s=7200, p99_s=None, seed=2)
    assert tr.submit_s[-1] == pytest.approx(30 * 86400)
    assert offered_load(tr, 64) == pytest.approx(0.8, rel=0.02)
    tr = synthetic_trace("synergy", span_s=400 * 3600, seed=2)
    assert len(tr) == pytest.approx(9 * 400, rel=0.06) and tr.submit_s[-1] <= 400 * 3600


def test_synergy_preset():
    """Single-GPU, 9 jobs/h, Synergy's log-uniform durations (32 min .. 46 h, mean 16.8 h), its model zoo 20/70/10."""
    tr = synthetic_trace("synergy", jobs=6000, seed=0)
    assert set(tr.gpus.tolist()) == {1}
    assert (len(tr) - 1) / (tr.submit_s[-1] / 3600) == pytest.approx(9, rel=0.05)
    d = tr.duration_s
    assert d.min() >= 60 * 10**1.5 - 1 and d.max() <= 60 * 10**4 + 1
    assert d.mean() == pytest.approx(60362, rel=0.1)
    fam = {"image": ("alexnet", "resnet18", "resnet50", "mobilenet", "shufflenet"), "language": ("gnmt", "transformer", "lstm"),
           "audio": ("m5", "deepspeech")}
    got = {f: float(np.mean([m in ms for m in tr.model])) for f, ms in fam.items()}
    assert got == {"image": pytest.approx(0.2, abs=0.02), "language": pytest.approx(0.7, abs=0.02), "audio": pytest.approx(0.1, abs=0.02)}
    assert sum(SYNERGY_MIX.values()) == pytest.approx(1.0)


def test_same_seed_same_trace_other_seed_other_trace():
    a, b = synthetic_trace("gang-heavy", jobs=300, seed=7), synthetic_trace("gang-heavy", jobs=300, seed=7)
    for f in ("job_id", "model", "tenant"):
        assert getattr(a, f) == getattr(b, f)
    for f in ("submit_s", "duration_s", "gpus"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    c = synthetic_trace("gang-heavy", jobs=300, seed=8)
    assert not np.array_equal(a.duration_s, c.duration_s)


def test_a_synthetic_trace_flows_through_the_shaping_and_build_workload():
    tr = synthetic_trace("parametric", jobs=200, tenants=3, seed=0)
    assert set(tr.tenant) == {"t0", "t1", "t2"}
    w = window(scale_load(tr, 2.0), 0, 86400)
    work = build_workload(w, cluster.homogeneous(4), seed=0)
    assert len(work) == len(w) > 0
    assert [j.model for j in work.jobs] == list(w.model)  # the trace's models are kept


@pytest.mark.parametrize(("over", "field"), [
    ({"gang_share": 1.2}, "gang_share"),
    ({"gang_share": -0.1}, "gang_share"),
    ({"jobs": 0}, "jobs"),
    ({"jobs": 2.5}, "jobs"),
    ({"span_s": 3600, "jobs": 10}, "jobs/span_s"),
    ({"load": 1.0, "rate_per_h": 3}, "rate_per_h/load"),
    ({"load": 1.0}, "gpus"),
    ({"rate_per_h": -1}, "rate_per_h"),
    ({"median_s": 100, "p90_s": 50}, "p90_s/p99_s"),
    ({"duration": "weibull"}, "duration"),
    ({"sizes": "huge"}, "sizes"),
    ({"sizes": {0: 1.0}}, "sizes"),
    ({"sizes": {1: -1.0}}, "sizes.1"),
    ({"seed": -1}, "seed"),
    ({"colour": "red"}, "colour"),
    ({"duration": "trace"}, "source"),
    # sizes beyond optsched.limits.MAX_TRACE_JOBS, refused before anything is drawn
    ({"jobs": 10_000_001}, "jobs"),
    ({"jobs": 10**11}, "jobs"),
    ({"span_s": 8.64e9, "rate_per_h": 1e9}, "span_s"),
    ({"span_s": 8.64e9, "load": 1e6, "gpus": 10**6}, "span_s"),
    # counts a written trace could not hold (a trace reader refuses jobs beyond 1,000,000 GPUs)
    ({"load": 1.0, "gpus": 10**17}, "gpus"),
    ({"node_gpus": 10**7, "gang_share": 0.5}, "node_gpus"),
])
def test_bad_parameters_are_refused_by_name(over, field):
    with pytest.raises(InputError) as e:
        synthetic_trace("parametric", **over)
    assert e.value.field == field


def test_unknown_preset_and_philly_multi_without_a_trace():
    with pytest.raises(InputError, match="preset"):
        synthetic_trace("poisson")
    with pytest.raises(InputError, match="source.*philly-multi"):
        synthetic_trace("philly-multi")


def test_parse_spec_reads_the_simulate_argument():
    spec = parse_spec("gang-heavy:jobs=50,load=0.9,gpus=64,median_s=60,p99_s=30h,sizes=1:0.5/64:0.5,mix=language:1", seed=4)
    assert (spec.jobs, spec.load, spec.gpus, spec.p99_s, spec.seed) == (50, 0.9, 64, 30 * 3600.0, 4)
    assert dict(spec.sizes) == {1: 0.5, 64: 0.5} and dict(spec.mix or {}) == {"language": 1.0}
    assert parse_spec("synergy:seed=9,rate_per_h=3", seed=4).seed == 9
    with pytest.raises(InputError, match="jobs"):
        parse_spec("synergy:jobs=many")
    assert parse_spec("synergy:jobs=1e3").jobs == 1000  # as --jobs takes it
    with pytest.raises(InputError, match="10,000,000"):
        parse_spec("synergy:jobs=1e11")
    with pytest.raises(InputError, match="KEY=VALUE"):
        parse_spec("synergy:jobs")


def test_workload_verb_writes_a_trace_simulate_reads(tmp_path, capsys):
    out = tmp_path / "trace.csv"
    assert main(["workload", "gang-heavy", "--jobs", "400", "--gpus", "176", "--load", "1.1", "--seed", "0", "-o", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("synthetic-gang-heavy: 400 jobs over") and "offered load 1.1 on 176 GPUs" in line and "8: " in line
    back = load_trace(out)
    again = synthetic_trace("gang-heavy", jobs=400, gpus=176, load=1.1, seed=0)
    np.testing.assert_array_equal(back.submit_s, again.submit_s)
    np.testing.assert_array_equal(back.duration_s, again.duration_s)
    np.testing.assert_array_equal(back.gpus, again.gpus)
    assert back.model == again.model
    assert main(["workload", "parametric", "--gang-share", "2"]) == 2
    assert "gang_share" in capsys.readouterr().err


@pytest.mark.traces
@pytest.mark.skipif(not PHILLY.is_file(), reason="the Philly trace is absent")
def test_philly_multi_resamples_philly_multi_gpu_jobs_jointly():
    src = load_trace(PHILLY)
    tr = synthetic_trace("philly-multi", source=str(PHILLY), jobs=3000, seed=0)
    assert tr.gpus.min() >= 2
    multi = src.take(src.gpus >= 2)
    pairs = set(zip(multi.gpus.tolist(), multi.duration_s.tolist(), strict=True))
    assert all((g, d) in pairs for g, d in zip(tr.gpus.tolist(), tr.duration_s.tolist(), strict=True))
    assert float(np.mean(tr.gpus == 8)) == pytest.approx(float(np.mean(multi.gpus == 8)), abs=0.03)
    gang = synthetic_trace("philly-multi", source=src, jobs=3000, gang_share=0.5, seed=0)
    assert float(np.mean(gang.gpus > 8)) == pytest.approx(0.5, abs=0.03)
    assert math.isfinite(offered_load(gang, 2816))


def test_simulate_takes_a_synthetic_trace_argument(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["simulate", "synthetic:synergy:jobs=15,rate_per_h=30", "--cluster", "2x8", "--allocator", "fungible-greedy",
               "--seed", "3", "--no-progress", "-o", str(out)])
    assert rc == 0
    assert "15 jobs" in capsys.readouterr().err
    assert main(["simulate", "synthetic:synergy:jobs=15", "--format", "philly", "--no-progress", "-o", str(out)]) == 2
    assert main(["simulate", "synthetic:nope", "--no-progress", "-o", str(out)]) == 2
    assert "preset" in capsys.readouterr().err


def test_overriding_a_quantile_replaces_the_presets_quantiles():
    spec = parse_spec("parametric:median_s=10m,p90_s=2h")
    assert (spec.median_s, spec.p90_s, spec.p99_s) == (600.0, 7200.0, None)
    with pytest.raises(InputError, match="median_s"):
        parse_spec("gang-heavy:p99_s=30h")  # a p99 alone is not a distribution
    with pytest.raises(InputError, match=r"one setting.*--p90.*preset's \(median_s 93") as e:
        parse_spec("gang-heavy:median_s=20m")  # nor a median alone: the message says the preset's are gone
    assert e.value.field == "median_s"


def test_the_mix_takes_either_separator_and_the_sample_is_a_source(capsys):
    """``--mix image=0.5`` and ``image:0.5`` are one mix in every verb; ``--source sample`` resamples
    the bundled trace, as ``simulate sample`` replays it."""
    from optsched.commands.gen import parse_shares

    assert parse_shares("--mix", "image=0.5,language:0.5") == {"image": 0.5, "language": 0.5}
    assert parse_shares("--mix", "resnet18,bert") == {"resnet18": 1.0, "bert": 1.0}
    with pytest.raises(InputError, match="NAME:SHARE"):
        parse_shares("--mix", "=0.5")
    assert main(["workload", "philly-multi", "--source", "sample", "--jobs", "20", "--mix", "image:1"]) == 0
    assert "synthetic-philly-multi: 20 jobs" in capsys.readouterr().out


def test_the_docstring_example_runs():
    import doctest

    from optsched.sim import synthetic

    assert doctest.testmod(synthetic).failed == 0


def test_a_gpu_count_no_trace_reader_takes_is_refused_before_writing(tmp_path, capsys):
    """workload --sizes 2000000:1 wrote a trace that simulate then refused (more than 1,000,000 GPUs)."""
    out = tmp_path / "big.csv"
    assert main(["workload", "parametric", "--jobs", "10", "--sizes", "2000000:1", "-o", str(out)]) == 2
    assert "sizes.2000000" in capsys.readouterr().err and not out.exists()
    tr = synthetic_trace("parametric", jobs=10, sizes={1_000_000: 1.0})  # the largest count: written and read back
    assert main(["workload", "parametric", "--jobs", "10", "--sizes", "1000000:1", "-o", str(out)]) == 0
    assert load_trace(out).gpus.tolist() == tr.gpus.tolist() == [1_000_000] * 10


def test_describe_a_trace_whose_jobs_all_arrive_at_once():
    tr = synthetic_trace("parametric", jobs=10, rate_per_h=1e300, seed=0)
    assert float(tr.submit_s.max()) == 0.0
    line = describe(tr, gpus=8)
    assert "all arriving at once" in line and "inf" not in line


def test_workload_refuses_a_seed_simulate_would_refuse(tmp_path, capsys):
    out = tmp_path / "w.csv"
    assert main(["workload", "gang-heavy", "--jobs", "10", "--gpus", "176", "--load", "1", "--seed", str(10**21), "-o", str(out)]) == 2
    assert "--seed: must be in [0, 2147483647]" in capsys.readouterr().err and not out.exists()
