"""The model catalogue: shapes, magnitudes, calibration to Synergy's measured profiles, errors."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched import catalogue as cat
from optsched.errors import InputError
from optsched.model import Profile

SYNERGY = Path(__file__).parents[1] / ".." / "shared" / "profiles" / "synergy_profiles.json"
IMAGE = ["resnet18", "resnet50", "alexnet", "mobilenet", "shufflenet"]
FLAT = ["transformer", "gnmt", "lstm", "bert", "vae"]


def rel(model: str, c: int, m: int, gpus: int = 1) -> float:
    p = cat.profile(model, gpus)
    return p.at(c, m) / p.at(*cat.demand(model, gpus))


def test_models_and_families():
    """The twelve Synergy models are there, each in a known family, with a positive speed."""
    assert set(cat.MODELS) == {*IMAGE, *FLAT, "m5", "deepspeech"}
    for name, spec in cat.MODELS.items():
        assert spec.name == name
        assert spec.family in cat.FAMILIES
        assert spec.samples_per_s > 0
    assert {cat.MODELS[m].family for m in IMAGE} == {"image"}
    assert cat.MODELS["m5"].family == cat.MODELS["deepspeech"].family == "audio"


@pytest.mark.parametrize("grid", cat.GRIDS)
@pytest.mark.parametrize("model", sorted(cat.MODELS))
def test_profile_valid_on_every_grid(model, grid):
    """Each profile is a valid contract profile holding the fair share; at the fair share a gang
    runs at gpus x the model's measured samples/s (linear data-parallel scaling in a node)."""
    for gpus in (1, 2, 8):
        p = cat.profile(model, gpus, grid=grid)
        assert isinstance(p, Profile)
        assert p.cpus_per_gpu == cat.CPU_GRIDS[grid] and p.mem_per_gpu_gb == cat.MEM_GRIDS[grid]
        assert cat.demand(model, gpus) == cat.FAIR_SHARE
        assert p.at(*cat.FAIR_SHARE) == pytest.approx(gpus * cat.MODELS[model].samples_per_s)


@pytest.mark.parametrize("model", sorted(cat.MODELS))
def test_profiles_monotone(model):
    """More cores or memory never slows a job down (the shape is a min of non-decreasing stages)."""
    t = np.array(cat.profile(model).throughput)
    assert (np.diff(t, axis=0) >= -1e-9).all() and (np.diff(t, axis=1) >= -1e-9).all()


def test_image_models_cpu_hungry():
    """Synergy's headline figures: ResNet-18 0.37x at 1 core and 2.4x at saturation, AlexNet and
    ShuffleNet up to ~2.9x, ResNet-50 only 1.15x; all fall to ~0.1 below the cache size."""
    assert rel("resnet18", 1, 62) == pytest.approx(0.37, abs=0.04)
    assert rel("resnet18", 24, 250) == pytest.approx(2.4, abs=0.02)
    assert rel("alexnet", 24, 250) == pytest.approx(2.94, abs=0.02)
    assert rel("shufflenet", 24, 250) == pytest.approx(2.89, abs=0.02)
    assert rel("resnet50", 24, 250) == pytest.approx(1.15, abs=0.02)
    for m in IMAGE:
        assert rel(m, 24, 21) == pytest.approx(0.1, abs=0.01)
        assert rel(m, 1, 62) < 0.45


def test_audio_m5_gains_from_memory():
    """M5 at 24 cores: 1.5x at 62 GB -> 2.5x at 187 GB."""
    assert rel("m5", 24, 62) == pytest.approx(1.5, abs=0.05)
    assert rel("m5", 24, 187) == pytest.approx(2.5, abs=0.05)
    assert rel("m5", 24, 250) == pytest.approx(2.5, abs=0.05)


@pytest.mark.parametrize("model", FLAT)
def test_language_models_flat(model):
    """Language models and the VAE: CPU and memory beyond the minimum buy nothing."""
    t = np.array(cat.profile(model, 2).throughput)
    assert np.allclose(t, t[0, 0])


def test_memory_rounding_in_one_place():
    assert [cat.round_mem_gb(g) for g in cat.SYNERGY_MEM_LEVELS] == [21, 62, 125, 187, 250]
    assert cat.MEM_GRIDS["full"] == (21, 62, 125, 187, 250)
    for grid in cat.GRIDS:
        assert cat.FAIR_SHARE[0] in cat.CPU_GRIDS[grid] and cat.FAIR_SHARE[1] in cat.MEM_GRIDS[grid]


@pytest.mark.skipif(not SYNERGY.exists(), reason="../shared/profiles is absent")
def test_calibration_close_to_measured():
    """The fitted shapes reproduce Synergy's 1-GPU tables: RMS error <= 0.13 and max <= 0.4 of the
    fair-share speed everywhere, <= 0.035 max for ResNet-18/50, MobileNet and the flat models."""
    report = cat.calibration_report(SYNERGY)
    one_gpu = {k: v for k, v in report.items() if v["gpus"] == 1}
    assert {v["model"] for v in one_gpu.values()} == set(cat.MODELS)
    for key, r in one_gpu.items():
        assert r["rmse"] <= 0.13, key
        assert r["max_abs"] <= 0.4, key
        assert r["model_max"] == pytest.approx(r["measured_max"], abs=0.01), key
        if r["model"] in ("resnet18", "resnet50", "mobilenet", "deepspeech", *FLAT):
            assert r["max_abs"] <= 0.035, key


def test_gpu_speeds():
    """V100 is the unit; newer GPUs are faster for every family, most for language models."""
    for model in cat.MODELS:
        s = cat.gpu_speeds(model, ["K80", "P100", "V100", "A100"])
        assert s["V100"] == 1.0
        assert s["K80"] < s["P100"] < s["V100"] < s["A100"]
    assert cat.gpu_speeds("bert", ["A100"])["A100"] > cat.gpu_speeds("vae", ["A100"])["A100"]
    assert cat.gpu_speeds("resnet18", "T4") == {"T4": cat.GPU_SPEEDS["image"]["T4"]}


def test_unknown_names_raise():
    with pytest.raises(InputError) as e:
        cat.profile("resnet-18")
    assert e.value.field == "model" and e.value.value == "resnet-18"
    for call in (lambda: cat.demand("gpt5", 1), lambda: cat.gpu_speeds("nope", ["V100"])):
        with pytest.raises(InputError, match="model"):
            call()
    with pytest.raises(InputError, match="gpu_type"):
        cat.gpu_speeds("bert", ["V100", "TPUv4"])
    with pytest.raises(InputError, match="grid"):
        cat.profile("bert", grid="fine")
    with pytest.raises(InputError, match="gpus"):
        cat.profile("bert", 0)


def test_sample_models_deterministic_and_follows_mix():
    a = cat.sample_models(np.random.default_rng(7), 500)
    b = cat.sample_models(np.random.default_rng(7), 500)
    assert a == b and set(a) <= set(cat.MODELS)
    only = cat.sample_models(np.random.default_rng(0), 200, {"language": 1.0})
    assert {cat.MODELS[m].family for m in only} == {"language"}
    counts = Counter(cat.sample_models(np.random.default_rng(1), 4000, {"resnet18": 3, "bert": 1}))
    assert set(counts) == {"resnet18", "bert"}
    assert counts["resnet18"] / 4000 == pytest.approx(0.75, abs=0.03)
    assert cat.sample_models(np.random.default_rng(0), 0) == []


@pytest.mark.parametrize("mix", [{"resnet99": 1.0}, {"image": -1.0}, {"image": 0.0}, {}, {"bert": float("nan")}])
def test_bad_mix_raises(mix):
    with pytest.raises(InputError, match="mix"):
        cat.sample_models(np.random.default_rng(0), 3, mix)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(cat.MODELS)), st.integers(1, 32), st.sampled_from(cat.GRIDS))
def test_profile_scales_with_gang(model, gpus, grid):
    """A gang's profile is the 1-GPU shape times its GPUs."""
    one = np.array(cat.profile(model, 1, grid=grid).throughput)
    many = np.array(cat.profile(model, gpus, grid=grid).throughput)
    assert np.allclose(many, gpus * one, rtol=1e-6)
