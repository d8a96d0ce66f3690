"""Slurm accounting (``sacct --parsable2``) read into the columns of a
:class:`~optsched.sim.traces.Trace` (:func:`read_sacct`; the format is described at
:func:`optsched.sim.traces.load_sacct`), and the Slurm cells it parses: ``Elapsed`` run times
(:func:`slurm_elapsed`) and ``AllocTRES`` resource lists (:func:`slurm_tres`)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from optsched.errors import InputError
from optsched.sim.csv_rows import cell, gpu_count, job_id, read_rows, text_of, time_value

__all__ = ["SLURM_MEM", "read_sacct", "slurm_elapsed", "slurm_tres"]


#: Slurm's memory suffixes in ``AllocTRES`` (``mem=64G``), in GiB; a bare number is MiB
SLURM_MEM = {"K": 1 / 1024**2, "M": 1 / 1024, "G": 1.0, "T": 1024.0, "P": 1024.0**2}


#: a Slurm run time: ``[DD-HH:]`` or ``[HH:]`` before ``MM:SS[.sss]`` (with days, the hours are always given)
_ELAPSED = re.compile(r"(?:(\d+)-(?=\d+:\d+:))?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", re.ASCII)


def slurm_elapsed(path: Path, line: int, text: str) -> float:
    """Seconds of a Slurm ``Elapsed`` cell: ``[DD-HH:]MM:SS[.sss]`` or ``[HH:]MM:SS[.sss]``, minutes and
    seconds below 60 and, after days, hours below 24 (as Slurm writes it)."""
    m = _ELAPSED.fullmatch(text.strip())
    d, h, mi, s = (float(x or 0) for x in m.groups()) if m else (0.0, 0.0, 0.0, 0.0)
    out = d * 86400 + h * 3600 + mi * 60 + s
    if m is None or mi >= 60 or s >= 60 or (m.group(1) and h >= 24) or not math.isfinite(out):
        raise InputError(cell(path, line, "Elapsed"), text, "must be a Slurm run time [DD-HH:]MM:SS or [HH:]MM:SS")
    return out


def slurm_tres(path: Path, line: int, text: str) -> tuple[float, float, float, str]:
    """GPUs, cores, GiB and GPU type of an ``AllocTRES`` cell (``cpu=8,mem=64G,gres/gpu:a100=2``;
    ``nan`` for what it does not list, 0 GPUs where it lists none; several GPU types are joined
    by a vertical bar, ``A100|V100``). Each count must be a finite number >= 0."""
    gpus, typed, cpus, mem, types = math.nan, math.nan, math.nan, math.nan, []
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise InputError(cell(path, line, "AllocTRES"), text, "must be KEY=VALUE pairs (cpu=8,mem=64G,gres/gpu=2)")
        if key not in ("gres/gpu", "cpu", "mem") and not key.startswith("gres/gpu:"):
            continue
        scale = SLURM_MEM.get(value[-1:].upper()) if key == "mem" else None
        try:
            x = float(value[:-1]) * scale if scale is not None else float(value) / (1024 if key == "mem" else 1)
        except ValueError:
            raise InputError(cell(path, line, "AllocTRES"), item, "must be a number (with K, M, G or T for memory)") from None
        if not (math.isfinite(x) and x >= 0):
            raise InputError(cell(path, line, "AllocTRES"), item, "must be a finite number >= 0")
        if key == "gres/gpu":
            gpus = x
        elif key == "cpu":
            cpus = x
        elif key == "mem":
            mem = x
        else:
            typed = (typed if math.isfinite(typed) else 0.0) + x
            if not math.isfinite(typed):  # typed counts that sum past a double: not "no GPU"
                raise InputError(cell(path, line, "AllocTRES"), value, "its typed GPU counts sum beyond any GPU count")
            if x > 0:
                types.append(key.split(":", 1)[1].upper())
    total = gpus if math.isfinite(gpus) else typed
    return (total if math.isfinite(total) else 0.0), cpus, mem, "|".join(dict.fromkeys(types))


def read_sacct(path: Path) -> tuple[dict[str, list[Any]], dict[str, int]]:
    """The columns (``line`` holds each row's file line) and notes of a Slurm accounting file
    (a line with more or fewer fields than the header is refused); the caller drops, rebases and
    builds the trace."""
    rows = read_rows(path, ["JobID", "Submit", "Elapsed", "AllocTRES"])
    cols: dict[str, list[Any]] = {k: [] for k in (
        "line", "job_id", "submit_s", "duration_s", "gpus", "cpu_cores", "mem_gib", "tenant", "gpu_type")}
    notes: dict[str, int] = {}
    seen: dict[str, int] = {}
    for i, r in enumerate(rows):
        ln = rows.lines[i]
        short = None in r.values()  # the csv reader fills the fields a line lacks with None, and keys its extra ones by None
        if short or None in r:  # sacct writes every field of every line: one was lost, or holds the separator
            raise InputError(f"{path.name}[line {ln}]", text_of(r, "JobID"), f"has {'fewer' if short else 'more'} fields than the "
                             "header: is the line cut short, or does a field hold the separator?")
        raw = text_of(r, "JobID")
        if "." in raw:
            notes["skipped_job_steps"] = notes.get("skipped_job_steps", 0) + 1
            continue
        jid = job_id(path, ln, "JobID", raw, seen)
        if "Start" in r and text_of(r, "Start") in ("Unknown", "None", ""):
            notes["dropped_never_scheduled"] = notes.get("dropped_never_scheduled", 0) + 1
            continue
        g_raw, cpus, mem, gtype = slurm_tres(path, ln, text_of(r, "AllocTRES"))
        g = gpu_count(path, ln, "AllocTRES", g_raw, notes)
        if g is None:
            continue
        cols["job_id"].append(jid)
        cols["line"].append(ln)
        cols["submit_s"].append(time_value(path, ln, "Submit", r.get("Submit")))
        cols["duration_s"].append(slurm_elapsed(path, ln, text_of(r, "Elapsed")))
        cols["gpus"].append(g)
        cols["cpu_cores"].append(cpus)
        cols["mem_gib"].append(mem)
        cols["tenant"].append(text_of(r, "Account") or text_of(r, "User"))
        cols["gpu_type"].append(gtype)
    return cols, notes
