"""An episode's decision as contract JSON, so ``optsched validate`` (or ``optsched check``) can judge it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from optsched.envs.builder import RoundBuilder
from optsched.io import save_instance, write_json
from optsched.model import Instance
from optsched.schedule import Schedule

__all__ = ["DecisionAccess", "save_episode", "schedule_json"]


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


class DecisionAccess:
    """The round and the decision of an environment whose episode state is ``self.builder``
    (shared by :class:`RoundEnv`, :class:`SimEnv` and :class:`RoundAECEnv`)."""

    builder: RoundBuilder | None

    def _builder(self) -> RoundBuilder:
        if self.builder is None:
            raise RuntimeError("call reset() first")
        return self.builder

    @property
    def instance(self) -> Instance:
        """The round being decided (for SimEnv: the last one once the episode has ended)."""
        return self._builder().instance

    def schedule(self) -> Schedule:
        """The decision so far (complete gangs only) as a contract :class:`Schedule`."""
        return self._builder().schedule()

    def schedule_json(self, solver: str = "rl-policy") -> dict[str, Any]:
        """The decision as the contract's schedule JSON (what ``optsched validate`` reads)."""
        return schedule_json(self._builder(), solver=solver)

    def save_episode(self, directory: str | Path, stem: str | None = None, solver: str = "rl-policy") -> tuple[Path, Path]:
        """Write the round and the decision as ``<stem>.instance.json`` and ``<stem>.decision.json``
        (check them with ``optsched validate INSTANCE DECISION``); returns both paths."""
        return save_episode(self._builder(), directory, stem, solver=solver)
