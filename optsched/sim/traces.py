"""Traces for the simulator: the :class:`Trace` column table and reading it from CSV.

A :class:`Trace` is a column table of jobs as a trace records them (arrival, run time, GPUs and,
where the trace has them, CPU/memory requests, a GPU-type constraint and a model name). Loaders
read four formats into it:

* the normalized schema of ``../shared/traces/normalized/*.csv`` (:func:`load_normalized`);
* the Philly per-job CSV of the Pollux artifact (:func:`load_philly`);
* Alibaba GPU v2023 pod lists (:func:`load_alibaba_pods`);
* the Helios format ``job_id, user, vc, gpu_num, node_num, state, submit_time, duration``
  (:func:`load_helios`);
* the original Philly job log, JSON (:func:`load_philly_json`, :mod:`optsched.sim.philly_json`);
* Slurm accounting, ``sacct --parsable2`` with ``JobID, Submit, Elapsed, AllocTRES``
  (:func:`load_sacct`, :mod:`optsched.sim.sacct`);
* any other CSV layout that a :class:`CsvSchema` describes (its columns and time unit,
  :func:`load_csv`).

Every loader skips ``#`` comment lines (the rows are read by :mod:`optsched.sim.csv_rows`), drops the jobs it cannot
replay and rebases submit times so that the first arrival kept is at
0; :func:`write_trace_csv` writes a trace in the normalized schema.

Replay conventions (``../shared/traces/README.md``): ``duration_s`` is the job's run time at its
fixed demand on a speed-1.0 GPU on one node, so its *work* is ``duration_s x throughput(demand)``.
Jobs that ask for no whole GPU (CPU-only pods) are dropped; fractional-GPU pods (Alibaba GPU
sharing) are replayed as one whole GPU. Both are counted in :attr:`Trace.notes`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

from optsched.errors import InputError
from optsched.fields import file_path
from optsched.limits import MAX_COUNT
from optsched.sim.catalogues import Catalogue, ModelNames
from optsched.sim.csv_rows import (
    cell,
    drop_and_rebase,
    flag,
    fraction,
    gpu_count,
    header_names,
    job_id,
    model_name,
    number,
    numbered,
    read_rows,
    short_list,
    text_of,
    time_value,
)
from optsched.sim.csv_schema import SCHEMA_FIELDS, TIME_UNITS, CsvSchema
from optsched.sim.philly_json import is_philly_json, read_philly_json
from optsched.sim.sacct import read_sacct

__all__ = [
    "LOADERS",
    "SAMPLE",
    "SCHEMA_FIELDS",
    "TIME_UNITS",
    "CsvSchema",
    "Trace",
    "load_alibaba_pods",
    "sample_trace_path",
    "load_csv",
    "load_helios",
    "load_normalized",
    "load_philly",
    "load_philly_json",
    "load_sacct",
    "load_trace",
    "write_trace_csv",
]


# --- the trace table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trace:
    """Jobs of a trace, one entry per job in every column, sorted by ``submit_s``.

    Float columns hold ``nan`` and string columns ``""`` where the trace has no value.
    ``cpu_cores`` / ``mem_gib`` are the job's *total* request (Alibaba); ``cpus_per_gpu`` /
    ``mem_per_gpu_gb`` an explicit per-GPU fixed demand; ``model`` a catalogue model name.
    """

    name: str
    job_id: tuple[str, ...]
    submit_s: np.ndarray
    duration_s: np.ndarray
    gpus: np.ndarray
    cpu_cores: np.ndarray
    mem_gib: np.ndarray
    cpus_per_gpu: np.ndarray
    mem_per_gpu_gb: np.ndarray
    tenant: tuple[str, ...]
    gpu_type: tuple[str, ...]
    model: tuple[str, ...]
    notes: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.job_id)
        for name in ("submit_s", "duration_s", "cpu_cores", "mem_gib", "cpus_per_gpu", "mem_per_gpu_gb"):
            arr = np.asarray(getattr(self, name), dtype=np.float64)
            if arr.shape != (n,):
                raise InputError(name, arr.shape, f"must have one value per job ({n})")
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        gpus = np.asarray(self.gpus, dtype=np.int64)
        if gpus.shape != (n,):
            raise InputError("gpus", gpus.shape, f"must have one value per job ({n})")
        gpus.setflags(write=False)
        object.__setattr__(self, "gpus", gpus)
        for name in ("job_id", "tenant", "gpu_type", "model"):
            col = tuple(getattr(self, name))
            if len(col) != n:
                raise InputError(name, len(col), f"must have one value per job ({n})")
            object.__setattr__(self, name, col)
        if len(set(self.job_id)) != n:
            dup = next(j for j in self.job_id if self.job_id.count(j) > 1)
            raise InputError("job_id", dup, "duplicate job id")
        bad = np.flatnonzero(~np.isfinite(self.submit_s) | (self.submit_s < 0))
        if bad.size:
            raise InputError(f"submit_s[{self.job_id[bad[0]]}]", float(self.submit_s[bad[0]]), "must be a finite time >= 0")
        bad = np.flatnonzero(~np.isfinite(self.duration_s) | (self.duration_s <= 0))
        if bad.size:
            raise InputError(f"duration_s[{self.job_id[bad[0]]}]", float(self.duration_s[bad[0]]), "must be a finite time > 0")
        bad = np.flatnonzero(self.gpus < 1)
        if bad.size:
            raise InputError(f"gpus[{self.job_id[bad[0]]}]", int(self.gpus[bad[0]]), "must be >= 1")
        if n > 1 and np.any(np.diff(self.submit_s) < 0):
            raise InputError("submit_s", "unsorted", "jobs must be sorted by submit time (use Trace.from_rows)")
        object.__setattr__(self, "notes", dict(self.notes))

    def __len__(self) -> int:
        return len(self.job_id)

    @classmethod
    def from_columns(cls, name: str, cols: Mapping[str, Sequence[Any]], notes: Mapping[str, int] | None = None) -> Trace:
        """Build from columns (missing optional ones are filled), sorting stably by submit time."""
        n = len(cols["job_id"])
        nan = np.full(n, np.nan)
        empty = ("",) * n
        submit = np.asarray(cols["submit_s"], dtype=np.float64)
        order = np.argsort(submit, kind="stable")

        def f(key: str) -> np.ndarray:
            return np.asarray(cols.get(key, nan), dtype=np.float64)[order]

        def s(key: str) -> tuple[str, ...]:
            col = cols.get(key, empty)
            return tuple(str(col[i]) for i in order)

        return cls(
            name=name,
            job_id=s("job_id"),
            submit_s=submit[order],
            duration_s=f("duration_s"),
            gpus=np.asarray(cols["gpus"], dtype=np.int64)[order],
            cpu_cores=f("cpu_cores"),
            mem_gib=f("mem_gib"),
            cpus_per_gpu=f("cpus_per_gpu"),
            mem_per_gpu_gb=f("mem_per_gpu_gb"),
            tenant=s("tenant"),
            gpu_type=s("gpu_type"),
            model=s("model"),
            notes=dict(notes or {}),
        )

    def take(self, idx: np.ndarray, *, name: str | None = None, notes: Mapping[str, int] | None = None) -> Trace:
        """The jobs at sorted integer positions ``idx`` (or a boolean mask)."""
        idx = np.asarray(idx)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        pick = [int(i) for i in idx]
        merged = dict(self.notes)
        for k, v in (notes or {}).items():
            merged[k] = merged.get(k, 0) + v
        return Trace(
            name=name or self.name,
            job_id=tuple(self.job_id[i] for i in pick),
            submit_s=self.submit_s[idx],
            duration_s=self.duration_s[idx],
            gpus=self.gpus[idx],
            cpu_cores=self.cpu_cores[idx],
            mem_gib=self.mem_gib[idx],
            cpus_per_gpu=self.cpus_per_gpu[idx],
            mem_per_gpu_gb=self.mem_per_gpu_gb[idx],
            tenant=tuple(self.tenant[i] for i in pick),
            gpu_type=tuple(self.gpu_type[i] for i in pick),
            model=tuple(self.model[i] for i in pick),
            notes=merged,
        )

    def with_columns(self, **cols: Any) -> Trace:
        """A copy with some columns replaced (re-validated)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d.update(cols)
        return Trace(**d)


# --- the loaders ------------------------------------------------------------------------------------


def load_normalized(path: str | Path, *, catalogue: Catalogue | None = None) -> Trace:
    """The normalized schema (``../shared/traces/normalized/*.csv``) plus optional replay columns.

    Required: ``job_id, submit_time_s, duration_s, num_gpus``. Optional: ``gpu_fraction,
    cpu_cores, mem_gib, tenant, gpu_type, model, cpus_per_gpu, mem_per_gpu_gb``; ``censored``
    rows are replayed with their (lower-bound) duration and counted in ``notes``. Submit times are
    rebased so that the first arrival is at 0, as every loader does. Model names are matched
    against ``catalogue`` (default: :mod:`optsched.catalogue`).
    """
    p = Path(path)
    rows = read_rows(p, ["job_id", "submit_time_s", "duration_s", "num_gpus"])
    cols: dict[str, list[Any]] = {k: [] for k in (
        "line", "job_id", "submit_s", "duration_s", "gpus", "cpu_cores", "mem_gib", "cpus_per_gpu", "mem_per_gpu_gb",
        "tenant", "gpu_type", "model")}
    notes: dict[str, int] = {}
    seen: dict[str, int] = {}
    names = ModelNames(catalogue)
    for i, r in enumerate(rows):
        ln = rows.lines[i]
        jid = job_id(p, ln, "job_id", r.get("job_id"), seen)
        frac = fraction(p, ln, "gpu_fraction", r.get("gpu_fraction"))
        g = gpu_count(p, ln, "num_gpus", number(p, ln, "num_gpus", r.get("num_gpus")), notes, 1.0 if math.isnan(frac) else frac)
        if g is None:
            continue
        if flag(p, ln, "censored", r.get("censored")):
            notes["censored"] = notes.get("censored", 0) + 1
        cols["job_id"].append(jid)
        cols["line"].append(ln)
        cols["submit_s"].append(number(p, ln, "submit_time_s", r.get("submit_time_s")))
        cols["duration_s"].append(number(p, ln, "duration_s", r.get("duration_s")))
        cols["gpus"].append(g)
        for c in ("cpu_cores", "mem_gib", "cpus_per_gpu", "mem_per_gpu_gb"):
            cols[c].append(number(p, ln, c, r.get(c), required=False, at_least=0))
        for c in ("tenant", "gpu_type"):
            cols[c].append(text_of(r, c))
        cols["model"].append(model_name(p, ln, "model", r.get("model"), names))
    drop_and_rebase(p, cols, notes)
    return Trace.from_columns(p.stem, cols, notes)


#: the columns :func:`write_trace_csv` writes, in order (required ones first), and the Trace field of each
_WRITE_COLUMNS = (
    ("job_id", "job_id"), ("submit_time_s", "submit_s"), ("duration_s", "duration_s"), ("num_gpus", "gpus"),
    ("cpu_cores", "cpu_cores"), ("mem_gib", "mem_gib"), ("cpus_per_gpu", "cpus_per_gpu"), ("mem_per_gpu_gb", "mem_per_gpu_gb"),
    ("tenant", "tenant"), ("gpu_type", "gpu_type"), ("model", "model"),
)


def write_trace_csv(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` in the normalized schema (what :func:`load_normalized` reads back).

    The four required columns always; an optional column only when some job has a value in it.
    Numbers are written exactly (``repr``), so a written trace loads back equal.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    cols = [(c, f) for c, f in _WRITE_COLUMNS if c in ("job_id", "submit_time_s", "duration_s", "num_gpus")
            or any((v != "") if isinstance(v, str) else math.isfinite(v) for v in getattr(trace, f))]
    with p.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow([c for c, _ in cols])
        for i in range(len(trace)):
            row = []
            for _, f in cols:
                v = getattr(trace, f)[i]
                if isinstance(v, str):
                    row.append(v)
                elif f == "gpus":
                    row.append(int(v))
                else:
                    row.append("" if not math.isfinite(v) else repr(float(v)))
            w.writerow(row)
    return p


def load_philly(path: str | Path) -> Trace:
    """Philly per-job CSV of the Pollux artifact: ``timestamp, duration, num_gpus, gpu_time, cluster``.

    Job ids are ``philly-<row>`` (row number in the file, as ``normalize.py`` names them).
    """
    p = Path(path)
    rows = read_rows(p, ["timestamp", "duration", "num_gpus"])
    cols: dict[str, list[Any]] = {k: [] for k in ("line", "job_id", "submit_s", "duration_s", "gpus", "tenant")}
    notes: dict[str, int] = {}
    for i, r in enumerate(rows):
        ln = rows.lines[i]
        g = gpu_count(p, ln, "num_gpus", number(p, ln, "num_gpus", r.get("num_gpus")), notes)
        if g is None:
            continue
        cols["job_id"].append(f"philly-{i}")
        cols["line"].append(ln)
        cols["submit_s"].append(time_value(p, ln, "timestamp", r.get("timestamp")))
        cols["duration_s"].append(number(p, ln, "duration", r.get("duration")))
        cols["gpus"].append(g)
        cols["tenant"].append(text_of(r, "cluster"))
    drop_and_rebase(p, cols, notes)
    return Trace.from_columns(p.stem, cols, notes)


def load_philly_json(path: str | Path) -> Trace:
    """The original Philly job log ``cluster_job_log`` (a JSON list of jobs; the columns as
    :func:`optsched.sim.philly_json.read_philly_json` reads them)."""
    p = Path(path)
    cols, notes = read_philly_json(p)
    drop_and_rebase(p, cols, notes)
    return Trace.from_columns(p.stem, cols, notes)


def load_alibaba_pods(path: str | Path) -> Trace:
    """Alibaba GPU v2023 pod list (``openb_pod_list_*.csv``).

    Arrival is ``creation_time``; run time ``deletion_time - scheduled_time``. Pods never
    scheduled, and CPU-only pods, are dropped; fractional-GPU pods count as one GPU. CPU and
    memory requests (``cpu_milli``, ``memory_mib``) become the job's fixed demand.
    """
    p = Path(path)
    rows = read_rows(p, ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time"])
    cols: dict[str, list[Any]] = {k: [] for k in (
        "line", "job_id", "submit_s", "duration_s", "gpus", "cpu_cores", "mem_gib", "tenant", "gpu_type")}
    notes: dict[str, int] = {}
    seen: dict[str, int] = {}
    for i, r in enumerate(rows):
        ln = rows.lines[i]
        jid = job_id(p, ln, "name", r.get("name"), seen)
        if not text_of(r, "scheduled_time"):
            notes["dropped_never_scheduled"] = notes.get("dropped_never_scheduled", 0) + 1
            continue
        milli = number(p, ln, "gpu_milli", r.get("gpu_milli"), required=False, at_least=0)
        g = gpu_count(p, ln, "num_gpu", number(p, ln, "num_gpu", r.get("num_gpu")), notes, 1.0 if math.isnan(milli) else milli / 1000)
        if g is None:
            continue
        cols["job_id"].append(jid)
        cols["line"].append(ln)
        cols["submit_s"].append(number(p, ln, "creation_time", r.get("creation_time")))
        cols["duration_s"].append(number(p, ln, "deletion_time", r.get("deletion_time")) - number(p, ln, "scheduled_time", r.get("scheduled_time")))
        cols["gpus"].append(g)
        cols["cpu_cores"].append(number(p, ln, "cpu_milli", r.get("cpu_milli"), at_least=0, scale=1 / 1000))
        cols["mem_gib"].append(number(p, ln, "memory_mib", r.get("memory_mib"), at_least=0, scale=1 / 1024))
        cols["tenant"].append(text_of(r, "qos"))
        cols["gpu_type"].append(text_of(r, "gpu_spec"))
    drop_and_rebase(p, cols, notes)
    return Trace.from_columns(p.stem, cols, notes)


def load_helios(path: str | Path) -> Trace:
    """Helios format: ``job_id, user, vc, gpu_num, node_num, state, submit_time, duration``.

    ``submit_time`` is seconds or a ``YYYY-MM-DD HH:MM:SS`` time; times are rebased so that the
    first arrival is 0. CPU-only jobs (``gpu_num == 0``) are dropped.
    """
    p = Path(path)
    rows = read_rows(p, ["job_id", "gpu_num", "submit_time", "duration"])
    cols: dict[str, list[Any]] = {k: [] for k in ("line", "job_id", "submit_s", "duration_s", "gpus", "tenant")}
    notes: dict[str, int] = {}
    seen: dict[str, int] = {}
    for i, r in enumerate(rows):
        ln = rows.lines[i]
        jid = job_id(p, ln, "job_id", r.get("job_id"), seen)
        g = gpu_count(p, ln, "gpu_num", number(p, ln, "gpu_num", r.get("gpu_num")), notes)
        if g is None:
            continue
        cols["job_id"].append(jid)
        cols["line"].append(ln)
        cols["submit_s"].append(time_value(p, ln, "submit_time", r.get("submit_time")))
        cols["duration_s"].append(number(p, ln, "duration", r.get("duration")))
        cols["gpus"].append(g)
        cols["tenant"].append(text_of(r, "vc"))
    drop_and_rebase(p, cols, notes)
    return Trace.from_columns(p.stem, cols, notes)


def load_sacct(path: str | Path) -> Trace:
    """Slurm accounting (``sacct --allusers --parsable2 --format=JobID,Account,Submit,Start,Elapsed,AllocTRES``,
    a ``|``-separated file; ``--delimiter=,`` works too).

    Arrival is ``Submit`` (an ISO date-time), run time ``Elapsed``; GPUs, cores and memory come
    from ``AllocTRES`` (``gres/gpu=N``, or the sum of ``gres/gpu:TYPE=N``, whose type, in capitals
    (``a100`` is ``A100``), becomes the job's GPU-type constraint; ``cpu=``, ``mem=`` become its fixed demand). Job steps
    (``123.batch``, ``123.0``) are skipped, counted as ``skipped_job_steps``; jobs that never
    started (``Start`` is ``Unknown`` or ``None``) are dropped as ``dropped_never_scheduled``,
    jobs without GPUs as ``dropped_cpu_only``. The tenant is ``Account`` (else ``User``).
    """
    p = Path(path)
    cols, notes = read_sacct(p)
    drop_and_rebase(p, cols, notes)
    return Trace.from_columns(p.stem, cols, notes)


_SNIFF = {
    "normalized": {"job_id", "submit_time_s", "duration_s", "num_gpus"},
    "philly": {"timestamp", "duration", "num_gpus"},
    "alibaba": {"name", "cpu_milli", "num_gpu", "creation_time"},
    "helios": {"job_id", "gpu_num", "submit_time", "duration"},
    "sacct": {"JobID", "Submit", "Elapsed", "AllocTRES"},
}
LOADERS = {"normalized": load_normalized, "philly": load_philly, "philly-json": load_philly_json, "alibaba": load_alibaba_pods,
           "helios": load_helios, "sacct": load_sacct}


#: the trace argument that names the bundled sample (a slice of the Philly trace; optsched/data)
SAMPLE = "sample"


def sample_trace_path() -> Path:
    """The bundled sample trace (normalized schema): two days of the Philly trace, CC BY 4.0
    (attribution and changes in ``optsched/data/philly-sample.NOTICE.md``)."""
    return Path(str(files("optsched") / "data" / "philly-sample.csv"))


def load_trace(path: str | Path, fmt: str = "auto", schema: CsvSchema | None = None, *, catalogue: Catalogue | None = None) -> Trace:
    """Load a trace in ``fmt`` (one of :data:`LOADERS`) or guess the format from the header;
    with a ``schema``, read any CSV layout it describes (:func:`load_csv`). A ``model`` column's
    names are matched against ``catalogue`` (default: :mod:`optsched.catalogue`)."""
    p = file_path(path)
    if schema is not None:
        if fmt not in ("auto", "custom"):
            raise InputError("format", fmt, "a column schema describes the format itself; leave the format at auto")
        return load_csv(p, schema, catalogue=catalogue)
    if fmt != "auto":
        if fmt not in LOADERS:
            raise InputError("format", fmt, f"unknown trace format; known: {['auto', *LOADERS]}")
        return _load(fmt, p, catalogue)
    at: list[int] = []
    try:
        with p.open(encoding="utf-8-sig") as fh:
            first = next(numbered(fh, "#", at), "")
    except FileNotFoundError:
        raise InputError("path", str(p), "no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError("path", str(p), f"cannot be read: {e}") from None
    if is_philly_json(first):
        return load_philly_json(p)
    names = header_names(p, first, at[0] if at else 1)
    header = set(names)
    for name, cols in _SNIFF.items():
        if cols <= header:
            return _load(name, p, catalogue)
    if first.lstrip()[:1] == "{":
        raise InputError("path", str(p), "looks like a JSON object; traces are CSV files (normalized, Philly, Alibaba, Helios, sacct, "
                                         "or any layout described with --columns / --schema) or Philly's JSON job log (a list)")
    raise InputError("path", str(p), f"unrecognised trace header {short_list(names)}; pass the format, or describe the "
                      "columns with a CsvSchema (optsched simulate --columns / --schema)")


def _load(fmt: str, path: str | Path, catalogue: Catalogue | None) -> Trace:
    """``LOADERS[fmt]`` on ``path``, giving ``catalogue`` to the loader whose format has a model column."""
    return load_normalized(path, catalogue=catalogue) if fmt == "normalized" else LOADERS[fmt](path)


# --- any CSV layout, described by a schema (optsched.sim.csv_schema) ---------------------------------

def load_csv(path: str | Path, schema: CsvSchema, *, catalogue: Catalogue | None = None) -> Trace:
    """A trace from a CSV of any layout ``schema`` describes (see :class:`CsvSchema`).

    As the other loaders: CPU-only and zero-length jobs dropped, fractional GPUs replayed whole
    (``gpu_fraction``), each counted in ``notes``; submit times rebased to the first arrival.
    Model names, and the targets of the schema's ``models``, are matched against ``catalogue``
    (default: :mod:`optsched.catalogue`; :meth:`CsvSchema.for_catalogue`).
    """
    p = Path(path)
    schema = schema.for_catalogue(catalogue)
    c = schema.columns
    rows = read_rows(p, sorted(set(c.values())), comment=schema.comment, what="the schema names missing column(s)")
    tu, du = TIME_UNITS[schema.time_unit], TIME_UNITS[schema.duration_unit or schema.time_unit]

    def when(i: int, field: str) -> float:
        return time_value(p, rows.lines[i], c[field], rows[i].get(c[field]), unit=tu, unit_name=schema.time_unit,
                          datetime_format=schema.datetime_format)

    cols: dict[str, list[Any]] = {k: [] for k in (
        "line", "job_id", "submit_s", "duration_s", "gpus", "cpu_cores", "mem_gib", "cpus_per_gpu", "mem_per_gpu_gb", "tenant", "gpu_type", "model")}
    notes: dict[str, int] = {}
    seen: dict[str, int] = {}
    names = ModelNames(catalogue, schema.models)
    for i, r in enumerate(rows):
        ln = rows.lines[i]
        jid = job_id(p, ln, c["id"], r.get(c["id"]), seen) if "id" in c else f"{p.stem}-{i}"
        frac = fraction(p, ln, c["gpu_fraction"], r.get(c["gpu_fraction"])) if "gpu_fraction" in c else math.nan
        raw = number(p, ln, c["gpus"], r.get(c["gpus"]))
        tasks = number(p, ln, c["instances"], r.get(c["instances"])) if "instances" in c else 1.0
        if not (tasks >= 1 and tasks == int(tasks)):
            raise InputError(cell(p, ln, c["instances"]), tasks, "must be a whole number of tasks >= 1")
        if (schema.gpu_unit != 1.0 or tasks != 1) and raw > 0:
            raw *= schema.gpu_unit * tasks
            if raw > MAX_COUNT:  # refused by gpu_count, naming the cell (and not rounded: it may be infinite)
                pass
            elif abs(raw - round(raw)) <= 1e-9:
                raw = float(round(raw))
            elif raw < 1:  # a share of one GPU: replayed on a whole one, counted by gpu_count
                frac, raw = raw, 1.0
            else:  # 1.5 GPUs: rounded up to 2
                notes["rounded_gpus"] = notes.get("rounded_gpus", 0) + 1
                raw = float(math.ceil(raw))
        g = gpu_count(p, ln, c["gpus"], raw, notes, 1.0 if math.isnan(frac) else frac)
        if g is None:
            continue
        submit = when(i, "submit")
        if "duration" in c:
            dur = number(p, ln, c["duration"], r.get(c["duration"]), scale=du)
        else:
            dur = when(i, "end") - (when(i, "start") if "start" in c else submit)
        cols["job_id"].append(jid)
        cols["line"].append(ln)
        cols["submit_s"].append(submit)
        cols["duration_s"].append(dur)
        cols["gpus"].append(g)
        for f, scale in (("cpu_cores", schema.cpu_unit * tasks), ("mem_gib", tasks), ("cpus_per_gpu", 1.0), ("mem_per_gpu_gb", 1.0)):
            cols[f].append(number(p, ln, c[f], r.get(c[f]), required=False, at_least=0, scale=scale) if f in c else math.nan)
        for f in ("tenant", "gpu_type"):
            cols[f].append(text_of(r, c[f]) if f in c else "")
        cols["model"].append(model_name(p, ln, c["model"], r.get(c["model"]), names) if "model" in c else "")
    drop_and_rebase(p, cols, notes)
    return Trace.from_columns(p.stem, cols, notes)
