"""Every function that reads or writes a file refuses a path no file system can hold with an
InputError naming the field, before touching the file system."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from optsched import io, solve_round
from optsched.errors import InputError
from optsched.fields import file_path
from optsched.gen import generate
from optsched.sim import cluster, experiment, traces
from optsched.sim.csv_schema import CsvSchema
from optsched.sim.metrics import read_run, write_jobs_csv, write_metrics_json
from optsched.sim.result import SimResult
from optsched.sim.shadow import write_rounds_csv

NUL = "runs/a\x00b.json"


def _result() -> SimResult:
    return SimResult(name="r", jobs={"submit_s": np.zeros(1), "start_s": np.zeros(1), "finish_s": np.ones(1)},
                     rounds={"t_s": np.zeros(1)})


CALLS = {
    "load_json": (lambda: io.load_json(NUL), "path"),
    "load_instance": (lambda: io.load_instance(NUL), "path"),
    "load_schedule": (lambda: io.load_schedule(NUL), "path"),
    "write_json": (lambda: io.write_json({}, NUL), "path"),
    "save_instance": (lambda: io.save_instance(generate(2, 3, seed=0), NUL), "path"),
    "check_writable": (lambda: io.check_writable(NUL), "-o"),
    "load_trace": (lambda: traces.load_trace(NUL), "path"),
    "load_trace(fmt)": (lambda: traces.load_trace(NUL, "philly"), "path"),
    "prepare": (lambda: experiment.prepare(NUL), "path"),
    "CsvSchema.from_file": (lambda: CsvSchema.from_file(NUL), "schema"),
    "pai_2020": (lambda: cluster.pai_2020(path=NUL), "path"),
    "alibaba_v2023": (lambda: cluster.alibaba_v2023(path=NUL), "path"),
    "learned weights": (lambda: solve_round(generate(2, 3, seed=0), method="learned", weights=NUL), "weights"),
    "write_jobs_csv": (lambda: write_jobs_csv(_result(), NUL), "path"),
    "write_metrics_json": (lambda: write_metrics_json(_result(), NUL), "path"),
    "read_run": (lambda: read_run(NUL), "metrics_json"),
    "write_rounds_csv": (lambda: write_rounds_csv([{"t_s": 0.0}], NUL), "path"),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_nul_in_a_path_is_an_input_error(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    call, field = CALLS[name]
    with pytest.raises(InputError, match="NUL") as e:
        call()
    assert e.value.field == field
    assert not (tmp_path / "runs").exists()  # refused before any directory was made


@pytest.mark.parametrize("value", [b"a.json", 3, None, ""])
def test_file_path_refuses_what_is_not_a_path(value: object) -> None:
    with pytest.raises(InputError, match="file path"):
        file_path(value, "x")


def test_file_path_keeps_a_good_path(tmp_path: Path) -> None:
    assert file_path(tmp_path / "a.json") == tmp_path / "a.json"
    assert file_path("a.json") == Path("a.json")
