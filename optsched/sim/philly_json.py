"""The original Philly job log (``cluster_job_log`` of github.com/msr-fiddle/philly-traces), read
into the columns of a :class:`~optsched.sim.traces.Trace` (:func:`read_philly_json`).

The log is one JSON list of jobs::

    {"jobid": "application_..._10238", "vc": "6214e9", "user": "...", "status": "Pass",
     "submitted_time": "2017-10-07 11:06:22",
     "attempts": [{"start_time": "2017-10-07 11:06:25", "end_time": "2017-10-07 11:07:55",
                   "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]}

A job's arrival is ``submitted_time``; its run time is the sum of its attempts' (``end_time -
start_time``, the GPU time it used, failed attempts included); its GPUs are the most any attempt
held (the GPUs listed under ``detail``); ``vc`` is the tenant. Jobs with no attempt that started
and ended are dropped as ``dropped_never_scheduled``, jobs with an attempt that ends before it
starts (a clock error) as ``dropped_negative_duration``, jobs whose attempts held no GPU as
``dropped_cpu_only``. Times are ``YYYY-MM-DD HH:MM:SS`` (UTC); errors name the job by its
position in the list and its field (``cluster_job_log[17].attempts[0].end_time``). The file is
read as every optsched JSON input is (:func:`optsched.io.load_json`: strict JSON in UTF-8, no
NaN, no key twice, nesting at most 64 deep).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from optsched.errors import InputError
from optsched.io import load_json
from optsched.limits import MAX_COUNT

__all__ = ["is_philly_json", "read_philly_json"]


def is_philly_json(first: str) -> bool:
    """Whether a file whose first non-blank text is ``first`` may be a Philly job log (a JSON list)."""
    return first.lstrip().startswith("[")


def _time(at: str, value: Any) -> float | None:
    """POSIX seconds of a Philly time, or ``None`` for a missing one (``None``, ``"None"``, empty)."""
    if value is None or value in ("", "None"):
        return None
    if not isinstance(value, str):
        raise InputError(at, value, "must be a time 'YYYY-MM-DD HH:MM:SS' or null")
    try:
        return datetime.strptime(value.strip(), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise InputError(at, value, "must be a time 'YYYY-MM-DD HH:MM:SS' or null") from None


def read_philly_json(path: Path) -> tuple[dict[str, list[Any]], dict[str, int]]:
    """The columns (``line`` holds each job's position in the list, from 1) and notes of a Philly
    job log; the caller drops, rebases and builds the trace."""
    name = path.name
    try:
        jobs = load_json(path)
    except InputError as e:  # a refused value (NaN, a huge number) is named by its place in the file
        if e.field == "path" and "is not valid JSON" in e.problem:  # say why it was read as JSON
            raise InputError(e.field, e.value, f"{e.problem}; read as Philly's JSON job log because it starts with '[' "
                             "(a CSV header whose first name starts with '[': rename that column)") from None
        raise (e if e.field == "path" else e.within(name)) from None
    if not isinstance(jobs, list):
        raise InputError(name, type(jobs).__name__, "must be a JSON list of jobs (Philly's cluster_job_log)")
    cols: dict[str, list[Any]] = {k: [] for k in ("line", "job_id", "submit_s", "duration_s", "gpus", "tenant")}
    notes: dict[str, int] = {}
    seen: set[str] = set()
    for i, job in enumerate(jobs):
        at = f"{name}[{i}]"
        if not isinstance(job, dict) or not {"jobid", "submitted_time"} <= job.keys():
            raise InputError(at, job if not isinstance(job, dict) else sorted(job)[:8],
                             "a JSON list is read as Philly's job log (cluster_job_log), whose jobs have jobid, submitted_time "
                             "and attempts; convert other JSON to CSV (normalized schema, or any layout with --columns)")
        jid = job.get("jobid")
        if not isinstance(jid, str) or not jid:
            raise InputError(f"{at}.jobid", jid, "is required: the job's id")
        if jid in seen:
            raise InputError(f"{at}.jobid", jid, "is repeated: every job of the log must have its own id")
        seen.add(jid)
        submit = _time(f"{at}.submitted_time", job.get("submitted_time"))
        if submit is None:
            raise InputError(f"{at}.submitted_time", job.get("submitted_time"), "is required")
        attempts = job.get("attempts")
        if not isinstance(attempts, list | None):
            raise InputError(f"{at}.attempts", attempts, "must be a list")
        run, gpus, ran, backwards = 0.0, 0, False, False
        for k, a in enumerate(attempts or ()):
            if not isinstance(a, dict):
                raise InputError(f"{at}.attempts[{k}]", a, "must be an attempt object (start_time, end_time, detail)")
            start = _time(f"{at}.attempts[{k}].start_time", a.get("start_time"))
            end = _time(f"{at}.attempts[{k}].end_time", a.get("end_time"))
            detail = a.get("detail")
            detail = [] if detail is None else detail
            if not isinstance(detail, list) or not all(isinstance(d, dict) and isinstance(d.get("gpus", []), list) for d in detail):
                raise InputError(f"{at}.attempts[{k}].detail", detail, "must be a list of {ip, gpus: [...]}")
            gpus = max(gpus, sum(len(d.get("gpus", [])) for d in detail))
            if start is not None and end is not None:
                run += end - start
                ran, backwards = True, backwards or end < start
        if not ran:
            notes["dropped_never_scheduled"] = notes.get("dropped_never_scheduled", 0) + 1
            continue
        if backwards:  # a clock error in the log: its run time is unknown
            notes["dropped_negative_duration"] = notes.get("dropped_negative_duration", 0) + 1
            continue
        if gpus == 0:
            notes["dropped_cpu_only"] = notes.get("dropped_cpu_only", 0) + 1
            continue
        if gpus > MAX_COUNT:
            raise InputError(f"{at}.attempts", gpus, f"must hold at most {MAX_COUNT:,} GPUs (the largest count optsched computes with)")
        cols["line"].append(i + 1)
        cols["job_id"].append(jid)
        cols["submit_s"].append(submit)
        cols["duration_s"].append(run)
        cols["gpus"].append(gpus)
        vc = job.get("vc")
        cols["tenant"].append(vc if isinstance(vc, str) else "")
    return cols, notes
