"""Trace files read with a custom model catalogue: a file's model names, and a schema's ``models``
targets, are matched against the catalogue the simulation uses (the built-in one by default)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

from optsched import catalogue
from optsched.errors import InputError
from optsched.model import Profile
from optsched.sim.experiment import open_trace, prepare, run
from optsched.sim.traces import CsvSchema, load_csv, load_trace

EXTRA = "llama-ft"


class WithExtraModel:
    """The library's catalogue plus one model, ``llama-ft``: flat at 2 samples/s per GPU on the
    catalogue's grid, at the fair share, as fast on every GPU type."""

    MODELS = (*catalogue.MODELS, EXTRA)
    ALIASES = catalogue.ALIASES

    def profile(self, model: str, gpus: int) -> Profile:
        if model != EXTRA:
            return catalogue.profile(model, gpus)
        grid = catalogue.profile("bert", gpus)
        return Profile(grid.cpus_per_gpu, grid.mem_per_gpu_gb, [[2.0 * gpus] * len(grid.mem_per_gpu_gb) for _ in grid.cpus_per_gpu])

    def demand(self, model: str, gpus: int) -> tuple[int, int]:
        return catalogue.demand("bert" if model == EXTRA else model, gpus)

    def gpu_speeds(self, model: str, gpu_types: Sequence[str]) -> Mapping[str, float]:
        return {t: 1.0 for t in gpu_types} if model == EXTRA else catalogue.gpu_speeds(model, gpu_types)

    def sample_models(self, rng: np.random.Generator, n: int, mix: object = None) -> Sequence[str]:
        return catalogue.sample_models(rng, n, mix)


CAT = WithExtraModel()
REFUSED = "is not a catalogue model"  # the problem of a name the catalogue in use does not know


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _normalized(tmp_path: Path) -> Path:
    return _write(tmp_path, "n.csv", "job_id,submit_time_s,duration_s,num_gpus,model\n"
                  "a,0,600,2,Llama-FT\n"      # the extra model, spelled loosely
                  "b,60,300,1,ResNet-50\n"    # a built-in model
                  "c,120,300,4,res18\n"       # a built-in alias
                  "d,180,900,8,LLAMA_FT\n")


def test_a_normalized_trace_names_a_custom_catalogues_model(tmp_path):
    p = _normalized(tmp_path)
    assert load_trace(p, catalogue=CAT).model == (EXTRA, "resnet50", "resnet18", EXTRA)
    with pytest.raises(InputError) as e:  # the built-in catalogue does not know it: file, line and column
        load_trace(p)
    assert e.value.field == "n.csv[line 2].model" and e.value.value == "Llama-FT" and REFUSED in e.value.problem


def test_prepare_and_run_simulate_a_custom_model_read_from_a_file(tmp_path):
    p = _normalized(tmp_path)
    setup = prepare(p, cluster="2x8", catalogue=CAT)
    jobs = {j.id: j for j in setup.workload.jobs}
    assert [jobs[k].model for k in "abcd"] == [EXTRA, "resnet50", "resnet18", EXTRA]
    assert jobs["a"].profile == CAT.profile(EXTRA, 2) and jobs["d"].work == pytest.approx(900 * 2.0 * 8)
    res = run(setup, policy="fifo", allocator="fixed-demand", time_limit=5.0)
    assert res.finished.all() and set(res.jobs["model"]) == {EXTRA, "resnet50", "resnet18"}
    with pytest.raises(InputError, match=r"n\.csv\[line 2\]\.model"):
        prepare(p, cluster="2x8")


def test_a_schema_csv_and_its_models_map_name_a_custom_catalogues_model(tmp_path):
    p = _write(tmp_path, "m.csv", "t,g,d,arch\n0,1,60,tuned-llama\n5,2,60,Llama FT\n9,1,60,MobileNet\n")
    cols = {"submit": "t", "gpus": "g", "duration": "d", "model": "arch"}
    schema = CsvSchema(cols, models={"tuned-llama": "Llama FT"})  # a target only the custom catalogue knows
    assert load_csv(p, schema, catalogue=CAT).model == (EXTRA, EXTRA, "mobilenet")
    assert load_trace(p, schema=schema, catalogue=CAT).model == (EXTRA, EXTRA, "mobilenet")
    assert dict(schema.for_catalogue(CAT).models) == {"tuned-llama": EXTRA}
    with pytest.raises(InputError) as e:  # the built-in catalogue refuses the target, as the schema's
        load_csv(p, schema)
    assert e.value.field == "models.tuned-llama" and REFUSED in e.value.problem
    with pytest.raises(InputError) as e:  # and, without the map, the trace's name, naming the cell
        load_csv(p, CsvSchema(cols))
    assert e.value.field == "m.csv[line 2].arch" and "models can map it" in e.value.problem
    setup = prepare(p, cluster="1x8", schema=schema, catalogue=CAT)
    assert [j.model for j in setup.workload.jobs] == [EXTRA, EXTRA, "mobilenet"]
    assert setup.settings["schema"]["models"] == {"tuned-llama": EXTRA}  # recorded as the catalogue's name


def test_a_synthetic_trace_resamples_a_source_file_naming_a_custom_model(tmp_path):
    p = _normalized(tmp_path)
    tr = open_trace(f"synthetic:philly-multi:source={p},jobs=6", seed=1, catalogue=CAT)
    assert len(tr) == 6 and set(tr.gpus) <= {2, 4, 8}
    with pytest.raises(InputError, match=r"n\.csv\[line 2\]\.model"):
        open_trace(f"synthetic:philly-multi:source={p},jobs=6", seed=1)
