"""An episode's decision as contract JSON, so ``optsched validate`` (or ``optsched check``) can judge it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from optsched.envs.builder import RoundBuilder
from optsched.io import save_instance, write_json

__all__ = ["save_episode", "schedule_json"]


def schedule_json(builder: RoundBuilder, solver: str = "rl-policy") -> dict[str, Any]:
    """The contract's schedule JSON of the decision (report fields: objective, status, solver)."""
    doc = builder.schedule().to_dict()
    doc.update(objective=builder.objective, bound=None, status="feasible", solver=solver, time_s=None)
    return doc


def save_episode(builder: RoundBuilder, directory: str | Path, stem: str | None = None, solver: str = "rl-policy") -> tuple[Path, Path]:
    """Write ``<stem>.instance.json`` and ``<stem>.decision.json`` into ``directory``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    stem = stem or re.sub(r"[^A-Za-z0-9_.-]+", "_", builder.instance.name)
    inst_path, dec_path = out / f"{stem}.instance.json", out / f"{stem}.decision.json"
    save_instance(builder.instance, inst_path)
    write_json(schedule_json(builder, solver), dec_path)
    return inst_path, dec_path
