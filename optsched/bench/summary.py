"""The terminal summary of a results table: one line per (size class, solver)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from optsched.bench.runner import as_float

__all__ = ["format_table", "size_class", "summarise"]

#: size classes of the instance library, by (max nodes, max jobs); the first that fits wins
SIZE_CLASSES = (("tiny", 4, 8), ("small", 8, 32), ("medium", 64, 256), ("large", 1024, 4000))


def size_class(nodes: int, jobs: int) -> str:
    for name, max_n, max_j in SIZE_CLASSES:
        if nodes <= max_n and jobs <= max_j:
            return name
    return "huge"


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def summarise(rows: Iterable[Mapping[str, Any]], by: Callable[[Mapping[str, Any]], str] | None = None) -> list[dict[str, Any]]:
    """Aggregate rows per (group, solver): runs, errors, optimal share, median/max time and gaps."""
    by = by or (lambda r: size_class(int(r["nodes"] or 0), int(r["jobs"] or 0)))
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(by(r) if r.get("nodes") not in ("", None) else "?", r["solver"])].append(r)
    out = []
    for (g, solver), rs in sorted(groups.items()):
        ok = [r for r in rs if r["status"] != "error"]
        times = [as_float(r["time_s"]) for r in ok]
        gaps = [v for r in ok if (v := as_float(r["gap"])) is not None]
        gtb = [v for r in ok if (v := as_float(r["gap_to_best"])) is not None]
        out.append(
            {
                "class": g,
                "solver": solver,
                "runs": len(rs),
                "errors": len(rs) - len(ok),
                "infeasible": sum(1 for r in ok if str(r["feasible"]) != "1"),
                "optimal": sum(1 for r in ok if r["status"] == "optimal") / max(len(ok), 1),
                "time_med": _median([t for t in times if t is not None]),
                "time_max": max((t for t in times if t is not None), default=None),
                "gap_med": _median(gaps),
                "gap_max": max(gaps, default=None),
                "gap_to_best_med": _median(gtb),
            }
        )
    return out


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def format_table(summary: list[dict[str, Any]], *, markdown: bool = False) -> str:
    """A fixed-width text table (percentages for shares and gaps), or a Markdown one."""
    if not summary:
        return "(no rows)"
    cols = ["class", "solver", "runs", "errors", "infeasible", "optimal", "time_med", "time_max", "gap_med", "gap_max", "gap_to_best_med"]
    pct = {"optimal", "gap_med", "gap_max", "gap_to_best_med"}
    cells = [[(f"{100 * r[c]:.2f}%" if c in pct and r[c] is not None else _cell(r[c])) for c in cols] for r in summary]
    if markdown:
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)
