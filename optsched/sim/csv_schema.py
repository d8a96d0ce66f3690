"""How to read a trace CSV of any layout: :class:`CsvSchema` -- which column holds each trace
field, the time units, a date-time format, the comment marker, the units of GPU and core counts
and a map of the trace's model names to the catalogue's. :func:`optsched.sim.traces.load_csv`
reads a file with one."""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from optsched.errors import InputError
from optsched.fields import file_path
from optsched.sim.catalogues import Catalogue, ModelNames

__all__ = ["SCHEMA_FIELDS", "TIME_UNITS", "CsvSchema"]


#: seconds per unit of the time units a schema takes
TIME_UNITS: Mapping[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "min": 60.0, "h": 3600.0}
#: the trace fields a schema can map to CSV columns: ``submit``, ``gpus`` and one of ``duration``
#: / ``end`` are required (``end`` minus ``start``, or minus ``submit`` without a ``start``)
SCHEMA_FIELDS = ("id", "submit", "duration", "start", "end", "gpus", "instances", "gpu_fraction", "cpu_cores", "mem_gib",
                 "cpus_per_gpu", "mem_per_gpu_gb", "tenant", "gpu_type", "model")


@dataclass(frozen=True)
class CsvSchema:
    """How to read a CSV trace of another layout: which column holds each trace field, the unit of
    the times, a date-time format, and the comment marker.

    ``columns`` maps :data:`SCHEMA_FIELDS` to column names (unmapped fields are absent; ``id``
    defaults to the row number). ``instances`` is a count of identical tasks of one job, each
    asking for ``gpus``, ``cpu_cores`` and ``mem_gib`` (the job asks for that many times as much). ``time_unit`` is the unit of numeric ``submit`` / ``start`` /
    ``end`` values and ``duration_unit`` that of ``duration`` (default: ``time_unit``), each one of
    :data:`TIME_UNITS`. Times may instead be date-times: in ``datetime_format`` (``strptime``
    codes) when given, else ISO 8601; naive ones are UTC. Lines starting with ``comment`` are
    skipped (every loader skips ``#`` lines). ``gpu_unit`` is the GPUs one unit of the ``gpus``
    column stands for (Alibaba PAI 2020's ``plan_gpu`` is in percent of a GPU: 0.01); a count that
    is not whole is rounded up to whole GPUs, counted in ``notes["fractional_gpu_as_whole"]`` below
    one GPU and in ``notes["rounded_gpus"]`` above (1.5 GPUs -> 2). ``cpu_unit``
    is the cores one unit of ``cpu_cores`` stands for (PAI 2020's ``plan_cpu``: 0.01). ``models``
    maps names the ``model`` column holds to catalogue models (or aliases), for names that
    :func:`optsched.catalogue.match_model` does not match by itself (a trace's ``vgg-ish`` ->
    ``resnet50``); it is consulted first, names as the trace spells them. Its targets are checked
    against the catalogue the trace is read with (:meth:`for_catalogue`), which need not be
    :mod:`optsched.catalogue`.
    """

    columns: Mapping[str, str]
    time_unit: str = "s"
    duration_unit: str | None = None
    datetime_format: str | None = None
    comment: str = "#"
    gpu_unit: float = 1.0
    cpu_unit: float = 1.0
    models: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.columns, Mapping):
            raise InputError("columns", self.columns, "must map trace fields to CSV column names")
        for k, v in self.columns.items():
            if k not in SCHEMA_FIELDS:
                raise InputError(f"columns.{k}", v, f"is not a trace field; known: {list(SCHEMA_FIELDS)}")
            if not isinstance(v, str) or not v.strip():
                raise InputError(f"columns.{k}", v, "must be a column name")
        for need in ("submit", "gpus"):
            if need not in self.columns:
                raise InputError(f"columns.{need}", None, "is required")
        if "duration" not in self.columns and "end" not in self.columns:
            raise InputError("columns.duration", None, "is required (or an end time, columns.end)")
        for name in ("time_unit", "duration_unit"):
            u = getattr(self, name)
            if (u is not None or name == "time_unit") and not (isinstance(u, str) and u in TIME_UNITS):
                raise InputError(name, u, f"unknown time unit; known: {list(TIME_UNITS)}")
        if self.datetime_format is not None and (not isinstance(self.datetime_format, str) or "%" not in self.datetime_format):
            raise InputError("datetime_format", self.datetime_format, "must be a strptime format such as %Y-%m-%d %H:%M:%S")
        if self.datetime_format is not None:
            try:  # a directive strptime does not know ("%Q") would fail every cell as a mismatch
                datetime.strptime(datetime(2001, 2, 3, 4, 5, 6).strftime(self.datetime_format), self.datetime_format)
            except ValueError as e:
                if "directive" in str(e) or "stray" in str(e):
                    raise InputError("datetime_format", self.datetime_format, f"is not a strptime format: {e}") from None
        if not isinstance(self.comment, str) or not self.comment:
            raise InputError("comment", self.comment, "must be a non-empty marker such as #")
        for name, what in (("gpu_unit", "GPUs one unit of the gpus column"), ("cpu_unit", "cores one unit of the cpu_cores column")):
            u = getattr(self, name)
            if isinstance(u, bool) or not isinstance(u, (int, float)) or not 0 < u <= sys.float_info.max:
                raise InputError(name, u, f"must be a number > 0: the {what} stands for")
            object.__setattr__(self, name, float(u))
        object.__setattr__(self, "columns", MappingProxyType(dict(self.columns)))
        if not isinstance(self.models, Mapping):
            raise InputError("models", self.models, "must map the trace's model names to catalogue models")
        if self.models and "model" not in self.columns:
            raise InputError("models", dict(self.models), "applies only with a model column (columns.model)")
        models = {}
        for k, v in self.models.items():
            if not isinstance(k, str) or not k.strip():
                raise InputError("models", k, "must map model names as the trace spells them")
            if not isinstance(v, str):
                raise InputError(f"models.{k}", v, "must be a model name")
            models[k.strip()] = v
        object.__setattr__(self, "models", MappingProxyType(models))

    def for_catalogue(self, catalogue: Catalogue | None = None) -> CsvSchema:
        """This schema with the targets of its ``models`` as ``catalogue``'s names (default:
        :mod:`optsched.catalogue`), matched as the trace's names are
        (:class:`~optsched.sim.catalogues.ModelNames`); a target the catalogue does not know is
        refused (field ``models.NAME``). :func:`optsched.sim.traces.load_csv` reads with it."""
        names = ModelNames(catalogue)
        models = {}
        for k, v in self.models.items():
            try:
                models[k] = names.match(v)
            except InputError as e:
                raise InputError(f"models.{k}", v, e.problem) from None
        return replace(self, models=models)

    @staticmethod
    def parse_columns(text: str) -> dict[str, str]:
        """``FIELD=COLUMN,...`` (the ``--columns`` option) -> a ``columns`` map (checked when the schema is built)."""
        cols: dict[str, str] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            k, eq, v = part.partition("=")
            if not eq:
                raise InputError("--columns", text, "must be FIELD=COLUMN pairs separated by commas")
            if k.strip() in cols:
                raise InputError("--columns", text, f"maps {k.strip()} twice ({cols[k.strip()]} and {v.strip()}): name each field once")
            cols[k.strip()] = v.strip()
        return cols

    @classmethod
    def from_file(cls, path: str | Path, *, columns: Mapping[str, str] | None = None, **settings: Any) -> CsvSchema:
        """A schema file: JSON (or TOML for ``.toml``) with ``columns`` and optionally
        ``time_unit``, ``duration_unit``, ``datetime_format``, ``comment``, ``gpu_unit``, ``cpu_unit`` and ``models``. ``columns`` are
        added to (and replace) the file's, and ``settings`` that are not ``None`` replace its."""
        p = file_path(path, "schema")
        try:
            text = p.read_text(encoding="utf-8-sig")  # a byte-order mark skipped, as every other input's
        except FileNotFoundError:
            raise InputError("schema", str(p), "no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise InputError("schema", str(p), f"cannot be read: {e}") from None
        try:
            if p.suffix == ".toml":
                doc = tomllib.loads(text)  # refuses a key given twice itself
            else:
                doc = json.loads(text, object_pairs_hook=_once)
        except ValueError as e:
            raise InputError("schema", str(p), f"is not valid {'TOML' if p.suffix == '.toml' else 'JSON'}: {e}") from None
        except RecursionError:
            raise InputError("schema", str(p), "nests arrays and objects too deeply to be a schema") from None
        if not isinstance(doc, dict) or "columns" not in doc:
            raise InputError("schema", str(p), "must be an object with a 'columns' map")
        unknown = set(doc) - {"columns", "time_unit", "duration_unit", "datetime_format", "comment", "gpu_unit", "cpu_unit", "models"}
        if unknown:
            raise InputError("schema", sorted(unknown), "unknown key(s); known: columns, time_unit, duration_unit, datetime_format, comment, "
                             "gpu_unit, cpu_unit, models")
        if not isinstance(doc["columns"], dict):
            raise InputError("schema.columns", doc["columns"], "must map trace fields to CSV column names")
        doc["columns"] = {**doc["columns"], **(columns or {})}
        doc.update({k: v for k, v in settings.items() if v is not None})
        return cls(**doc)

    def to_dict(self) -> dict[str, Any]:
        """The settings, as a run's manifest records them (``models`` only where given)."""
        return {"columns": dict(self.columns), "time_unit": self.time_unit, "duration_unit": self.duration_unit,
                "datetime_format": self.datetime_format, "comment": self.comment, "gpu_unit": self.gpu_unit,
                "cpu_unit": self.cpu_unit, **({"models": dict(self.models)} if self.models else {})}


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once (``json`` keeps the last of a repeated key silently)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"the key {k!r} is given twice")
        out[k] = v
    return out
