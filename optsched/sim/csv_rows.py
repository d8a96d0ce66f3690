"""Reading a trace CSV into rows (:func:`read_rows`) and the cell readers the trace loaders of
:mod:`optsched.sim.traces` share: numbers, times, GPU counts, each error naming the file line."""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from optsched.errors import InputError
from optsched.fields import file_path
from optsched.limits import MAX_COUNT
from optsched.sim.catalogues import ModelNames

__all__ = ["DELIMITERS", "FLAGS", "MAX_DURATION_S", "Rows", "cell", "csv_error", "delimiter_of", "drop_and_rebase", "flag", "fraction",
           "gpu_count", "header_names", "job_id", "model_name", "number", "numbered", "read_rows", "short_list", "text_of", "time_value", "uncommented"]


#: the longest run time a trace job may have, and the latest arrival after the first, in seconds (a job's work, its
#: run time times a throughput of up to 1e12 samples/s, stays far inside a double, and a time below 2e15 s is exact
#: to a quarter second); a trace in microseconds read as seconds stays below it
MAX_DURATION_S = 1e15


#: the separators a trace CSV may use: the header's most frequent one is taken where it has no comma
DELIMITERS = (",", "\t", ";", "|")


class Rows(list[dict[str, str]]):
    """A CSV file's data rows, each with the file line it ends on (1-based, counting the header
    and comment lines), so that errors name the line an editor shows."""

    def __init__(self, rows: Iterable[dict[str, str]], lines: Sequence[int]) -> None:
        super().__init__(rows)
        self.lines = list(lines)


def delimiter_of(header: str) -> str:
    """The separator of a CSV file, from its header line (:data:`DELIMITERS`; a comma wherever
    the header has one)."""
    if "," in header:
        return ","
    counts = {d: header.count(d) for d in DELIMITERS[1:]}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def read_rows(path: str | Path, required: Sequence[str], *, header: Sequence[str] | None = None,
              comment: str = "#", what: str = "missing required column(s)", delimiter: str | None = None) -> Rows:
    """The rows of a CSV file (lines starting with ``comment`` and empty lines skipped; a UTF-8
    byte-order mark, blanks after a separator and around column names ignored; the separator
    found from the header, :func:`delimiter_of`, unless given); every column of ``required`` must
    be in its header, else an error naming the file's columns."""
    p = file_path(path)
    numbers: list[int] = []
    try:
        with p.open(newline="", encoding="utf-8-sig") as fh:
            nul: list[int] = []
            lines = _flag_nul(numbered(fh, comment, numbers), numbers, nul)
            first = next(lines, "")
            sep = delimiter or delimiter_of(first)
            reader = csv.DictReader(itertools.chain([first] if first else [], lines), fieldnames=list(header) if header else None,
                                    delimiter=sep, skipinitialspace=True)
            rows, ends = [], []
            try:
                if reader.fieldnames is not None:
                    reader.fieldnames = [f.strip() for f in reader.fieldnames]
                start = reader.line_num
                for r in reader:
                    if reader.line_num - start > 1:  # a row over several lines: no trace field spans lines, a stray quote did
                        raise InputError(f"{p.name}[line {numbers[start]}]", short_list([str(v) for v in r.values()], 4),
                                         f"a quoted cell runs from line {numbers[start]} to {numbers[reader.line_num - 1]}: "
                                         "is a quote unbalanced?")
                    start = reader.line_num
                    rows.append(r)
                    ends.append(numbers[reader.line_num - 1])
            except csv.Error as e:
                raise csv_error(p, numbers[min(reader.reader.line_num, len(numbers)) - 1] if numbers else 1, e) from None
            fields = reader.fieldnames or []
            if nul:  # Python's csv reads NUL bytes: "j1" and "j1\0" would be two jobs
                raise csv_error(p, nul[0], csv.Error("line contains NUL"))
    except FileNotFoundError:
        raise InputError("path", str(p), "no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError("path", str(p), f"cannot be read: {e}") from None
    if header is None:
        twice = next((f for i, f in enumerate(fields) if f and f in fields[:i]), None)
        if twice is not None:
            raise InputError(f"{p.name}[line {numbers[0]}].{twice}", twice, "the header names this column twice: rename one (a cell "
                             "could not say which it belongs to)")
    missing = sorted({c for c in required if c not in fields}, key=list(required).index)
    if missing:
        raise InputError(f"{p.name}.columns", short_list(fields), f"{what} {missing}")
    return Rows(rows, ends)


def csv_error(path: Path, line: int, e: csv.Error) -> InputError:
    """The refusal of a line the CSV reader cannot split (a cell beyond ``csv.field_size_limit()``
    characters, a NUL byte, a stray quote), naming the file line."""
    if "field limit" in str(e):
        return InputError(f"{path.name}[line {line}]", str(e), f"has a cell longer than {csv.field_size_limit():,} characters, more "
                          "than any trace field holds: is this a CSV trace, and is its quoting balanced?")
    return InputError(f"{path.name}[line {line}]", str(e), "cannot be read as a CSV row")


def header_names(path: Path, text: str, line: int) -> list[str]:
    """The column names of the header ``text``, file line ``line`` (its separator found by :func:`delimiter_of`)."""
    try:
        return [c.strip() for c in next(csv.reader([text], delimiter=delimiter_of(text), skipinitialspace=True), [])]
    except csv.Error as e:
        raise csv_error(path, line, e) from None


def short_list(names: Sequence[str], most: int = 24, width: int = 40) -> list[str]:
    """At most ``most`` names of at most ``width`` characters each (a header can be a whole file)."""
    out = [n if len(n) <= width else n[: width - 3] + "..." for n in list(names)[:most]]
    return out + [f"... {len(names) - most} more"] if len(names) > most else out


def numbered(lines: Iterable[str], comment: str, numbers: list[int]) -> Iterator[str]:
    """:func:`uncommented`, appending each kept line's 1-based number in the file to ``numbers``."""
    for n, line in enumerate(lines, 1):
        if line.strip() and not line.lstrip().startswith(comment):
            numbers.append(n)
            yield line


def _flag_nul(lines: Iterator[str], numbers: list[int], nul: list[int]) -> Iterator[str]:
    """``lines`` as they come (from :func:`numbered`), noting in ``nul`` the file line of each that
    holds a NUL byte."""
    for line in lines:
        if "\x00" in line:
            nul.append(numbers[-1])
        yield line


def uncommented(lines: Iterable[str], comment: str = "#") -> Iterator[str]:
    """The lines of a CSV file that are not comments (``comment`` first, after blanks) nor empty
    (:func:`numbered`, without the line numbers)."""
    return numbered(lines, comment, [])


def cell(path: Path, line: int, col: str) -> str:
    """The name of a cell in errors: ``FILE[line N].COLUMN``."""
    return f"{path.name}[line {line}].{col}"


def text_of(row: dict[str, str], col: str) -> str:
    """A row's cell, stripped (``""`` where the row is too short to have it)."""
    value = row.get(col)
    return value.strip() if isinstance(value, str) else ""


def number(path: Path, line: int, col: str, text: str | None, *, required: bool = True, at_least: float | None = None,
           scale: float = 1.0) -> float:
    """A numeric cell times ``scale``; an empty cell is refused where ``required``, else ``nan``
    ("not recorded"). NaN, infinities, values below ``at_least`` and values that overflow once
    scaled are refused, naming the cell: no number a trace records is any of these."""
    text = (text or "").strip()
    if not text:
        if required:
            raise InputError(cell(path, line, col), text, "is required")
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise InputError(cell(path, line, col), text, "must be a number") from None
    if not math.isfinite(value):
        raise InputError(cell(path, line, col), text, "must be a finite number (leave the cell empty where nothing was recorded)")
    if at_least is not None and value < at_least:
        raise InputError(cell(path, line, col), value, f"must be >= {at_least:g}")
    if not math.isfinite(value * scale):
        raise InputError(cell(path, line, col), text, "is too large")
    return value * scale


def job_id(path: Path, line: int, col: str, text: str | None, seen: dict[str, int]) -> str:
    """A row's job id: required, and unique in the file (``seen`` maps every id read so far to its
    line; a repeated id is refused naming both lines)."""
    jid = (text or "").strip()
    if not jid:
        raise InputError(cell(path, line, col), jid, "is required: the job's id")
    if jid in seen:
        raise InputError(cell(path, line, col), jid, f"is also the job id of line {seen[jid]}: each row is one job, so ids must be "
                         "unique (with --columns/--schema, map id to a column unique per row, or leave it unmapped: ids are "
                         "then the row numbers)")
    seen[jid] = line
    return jid


def model_name(path: Path, line: int, col: str, text: str | None, names: ModelNames) -> str:
    """A model cell as the name of the catalogue in use (``names``: its models and aliases, and a
    schema's ``models``); an empty cell stays empty. A name it does not know is refused naming the cell."""
    name = (text or "").strip()
    if not name:
        return ""
    try:
        return names.match(name)
    except InputError as e:
        raise InputError(cell(path, line, col), name, e.problem + "; a --schema file's models can map it to one") from None


def fraction(path: Path, line: int, col: str, text: str | None) -> float:
    """A GPU share in (0, 1] (``nan`` for an empty cell)."""
    value = number(path, line, col, text, required=False)
    if not (math.isnan(value) or 0 < value <= 1):
        raise InputError(cell(path, line, col), value, "must be a share of one GPU in (0, 1]")
    return value


#: the values of a boolean cell (case ignored); an empty cell is false
FLAGS = {"": False, "0": False, "false": False, "1": True, "true": True}


def flag(path: Path, line: int, col: str, text: str | None) -> bool:
    """A boolean cell: 0 / 1 or false / true (empty: false)."""
    key = (text or "").strip().lower()
    if key not in FLAGS:
        raise InputError(cell(path, line, col), text, "must be 0 or 1 (or false / true)")
    return FLAGS[key]


def time_value(path: Path, line: int, col: str, text: str | None, *, unit: float = 1.0, unit_name: str = "seconds",
               datetime_format: str | None = None) -> float:
    """POSIX seconds from a number of ``unit`` seconds each (:func:`number`'s checks), or a
    date-time: in ``datetime_format`` (``strptime`` codes) when given, else ISO 8601; naive = UTC."""
    text = (text or "").strip()
    try:
        float(text)
    except ValueError:
        pass
    else:
        return number(path, line, col, text, scale=unit)
    if not text:
        raise InputError(cell(path, line, col), text, "is required")
    try:
        dt = datetime.strptime(text, datetime_format) if datetime_format else datetime.fromisoformat(text)
    except ValueError:
        what = f"a date-time in {datetime_format!r}" if datetime_format else "an ISO date-time (YYYY-MM-DD HH:MM:SS)"
        raise InputError(cell(path, line, col), text, f"must be a number of {unit_name} or {what}") from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def gpu_count(path: Path, line: int, col: str, value: float, notes: dict[str, int], fraction: float = 1.0) -> int | None:
    """Whole GPUs of a row, at most :data:`~optsched.limits.MAX_COUNT`, or ``None`` to drop it
    (CPU-only); counts what it changed."""
    if not math.isfinite(value) or value < 0 or value != int(value):
        raise InputError(cell(path, line, col), value, "must be a whole number of GPUs >= 0")
    if value > MAX_COUNT:
        raise InputError(cell(path, line, col), value, f"must be at most {MAX_COUNT:,} GPUs (the largest count optsched computes with)")
    if value == 0:
        notes["dropped_cpu_only"] = notes.get("dropped_cpu_only", 0) + 1
        return None
    if fraction < 1.0:
        notes["fractional_gpu_as_whole"] = notes.get("fractional_gpu_as_whole", 0) + 1
    return int(value)


def drop_and_rebase(path: Path, cols: dict[str, list[Any]], notes: dict[str, int]) -> None:
    """Drop the jobs that cannot be replayed -- zero-length ones (present in the traces) and those
    that end before they start (a clock error in the trace), counted apart -- then rebase submit
    times so that the first job *kept* arrives at 0 (a dropped job sets no origin). ``cols["line"]``
    holds each row's file line: a run time or an arrival that overflows once subtracted (times
    near 1e308), or a run time or a rebased arrival above :data:`MAX_DURATION_S`, is refused naming it."""
    for d, line in zip(cols["duration_s"], cols["line"], strict=True):
        if not math.isfinite(d):
            raise InputError(f"{path.name}[line {line}]", d, "the job's end minus its start overflows: are its times in range?")
        if d > MAX_DURATION_S:
            raise InputError(f"{path.name}[line {line}]", d, f"the job runs more than {MAX_DURATION_S:.0e} seconds (31.7 million years), "
                             "beyond what the simulator computes with: are its times in range, and in the unit read?")
    keep = [i for i, d in enumerate(cols["duration_s"]) if d > 0]
    if len(keep) < len(cols["duration_s"]):
        zero = sum(1 for d in cols["duration_s"] if d == 0)
        negative = len(cols["duration_s"]) - len(keep) - zero
        for key, n in (("dropped_zero_duration", zero), ("dropped_negative_duration", negative)):
            if n:
                notes[key] = notes.get(key, 0) + n
        for k in cols:
            cols[k] = [cols[k][i] for i in keep]
    if cols["submit_s"]:
        t0 = min(cols["submit_s"])
        cols["submit_s"] = [t - t0 for t in cols["submit_s"]]
        for t, line in zip(cols["submit_s"], cols["line"], strict=True):
            if not math.isfinite(t):
                raise InputError(f"{path.name}[line {line}]", t, "the job arrives too long after the first (the difference overflows): "
                                 "are its times in range?")
            if t > MAX_DURATION_S:  # a double's steps there outgrow a round: its run time and JCT would be rounded away
                raise InputError(f"{path.name}[line {line}]", t, f"the job arrives more than {MAX_DURATION_S:.0e} seconds (31.7 million "
                                 "years) after the first, beyond what the simulator computes with: are its times in range, and in the unit read?")
