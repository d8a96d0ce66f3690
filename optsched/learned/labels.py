"""Labels for distillation: exact solutions of rounds, canonical under node symmetry, cached on disk.

- :func:`canonicalise`: identical nodes (same GPU type, capacities, rack size and running jobs)
  are interchangeable, so an optimum has many equivalent node labellings. The canonical one gives
  the heaviest load of a class to its lowest-index node, as the decoder's tie-breaking does, so
  that equivalent optima teach the policy the same thing.
- :func:`residual_round`: the round left after some jobs were placed (their capacity removed,
  they leave the round): the state DAgger relabels.
- :func:`label_rounds`: solve rounds exactly on a backend (a local process pool by default, or
  Ray: :mod:`optsched.parallel`), deterministic (fixed seed), cached by a hash of the round
  and the solver settings (so runs resume where they stopped). Workers return the label and the
  caller writes the cache, so remote workers need no shared file system.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from optsched.capacity import residual_round
from optsched.checker import check_schedule
from optsched.io import load_json, write_json
from optsched.model import Instance
from optsched.parallel import Backend, get_backend
from optsched.schedule import Assignment, Schedule
from optsched.solve import solve_round

__all__ = ["Label", "canonicalise", "label_rounds", "residual_round"]


@dataclass(frozen=True)
class Label:
    """An exactly solved round: its schedule (canonical), objective, bound and solver status."""

    instance: Instance
    schedule: Schedule
    objective: float
    bound: float | None
    status: str
    time_s: float

    @property
    def gap(self) -> float | None:
        if self.bound is None:
            return None
        return max(0.0, (self.bound - self.objective) / max(abs(self.bound), 1e-9))


def _node_class_key(instance: Instance) -> list[tuple[Any, ...]]:
    rack_size: dict[str | None, int] = defaultdict(int)
    for n in instance.nodes:
        rack_size[n.rack] += 1
    running: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for j in instance.jobs:
        for nid, k in (j.placement or {}).items():
            running[nid].append((j.id, k))
    return [
        (n.gpu_type, n.gpus, n.cpus, n.mem_gb, rack_size[n.rack] if n.rack is not None else 0, tuple(sorted(running[n.id])))
        for n in instance.nodes
    ]


def canonicalise(instance: Instance, schedule: Schedule) -> Schedule:
    """The equivalent schedule with each class of identical nodes' loads sorted heaviest-first.

    Loads (the jobs on a node and their GPUs) move as a whole between identical nodes, which
    keeps every job's GPU type, node count and grid point, hence feasibility and worth.
    """
    keys = _node_class_key(instance)
    classes: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        classes[k].append(i)
    load: dict[str, dict[str, int]] = defaultdict(dict)  # node id -> job id -> GPUs
    for jid, a in schedule.jobs.items():
        for nid, k in a.nodes.items():
            load[nid][jid] = k
    rename: dict[str, str] = {}
    for members in classes.values():
        if len(members) < 2:
            continue
        ids = [instance.nodes[i].id for i in members]

        def weight(nid: str) -> tuple[Any, ...]:
            jobs = load.get(nid, {})
            a = schedule.jobs
            gpus = sum(jobs.values())
            cpus = sum(k * a[j].cpus_per_gpu for j, k in jobs.items())
            mem = sum(k * a[j].mem_per_gpu_gb for j, k in jobs.items())
            return (-gpus, -cpus, -mem, tuple(sorted(jobs.items())))

        for src, dst in zip(sorted(ids, key=weight), ids, strict=True):
            rename[src] = dst
    if not rename:
        return schedule
    jobs = {}
    for jid, a in schedule.jobs.items():
        nodes: dict[str, int] = {}
        for nid, k in a.nodes.items():
            nodes[rename.get(nid, nid)] = k
        jobs[jid] = Assignment(nodes, a.cpus_per_gpu, a.mem_per_gpu_gb)
    return Schedule(schedule.instance, jobs)


def _key(instance: Instance, solver: str, time_limit: float, seed: int, options: Mapping[str, Any]) -> str:
    blob = json.dumps({"i": instance.to_dict(), "s": solver, "t": time_limit, "seed": seed, "o": dict(options)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _solve_one(args: tuple[dict[str, Any], str, float, int, dict[str, Any], str]) -> tuple[str, dict[str, Any]]:
    """Solve one round (in a worker); returns the cache path and the label record to write there."""
    inst_d, solver, time_limit, seed, options, path = args
    inst = Instance.from_dict(inst_d)
    res = solve_round(inst, solver=solver, time_limit=time_limit, seed=seed, **options)
    sched = canonicalise(inst, res.schedule)
    report = check_schedule(inst, sched)
    if report:
        raise RuntimeError(f"canonicalised label of {inst.name} is infeasible: {report[:3]} (a bug)")
    record = {
        "instance": inst_d,
        "schedule": sched.to_dict(),
        "objective": report.objective,
        "bound": res.bound,
        "status": res.status.value,
        "time_s": res.time_s,
        "solver": solver,
    }
    return path, record


def _read(path: Path) -> Label:
    d = load_json(path)
    inst = Instance.from_dict(d["instance"])
    return Label(inst, Schedule.from_dict(d["schedule"]), float(d["objective"]), d["bound"], d["status"], float(d["time_s"]))


def label_rounds(
    instances: Iterable[Instance],
    cache_dir: str | Path,
    *,
    solver: str = "cpsat",
    time_limit: float = 10.0,
    seed: int = 0,
    workers: int = 1,
    options: Mapping[str, Any] | None = None,
    progress: bool = True,
    desc: str = "labelling",
    backend: str | Backend = "local",
    address: str | None = None,
) -> list[Label]:
    """Exact labels of ``instances`` (in order), solving only those not cached in ``cache_dir``.

    ``workers`` rounds are solved at once on ``backend`` (``"local"``: a process pool, serial
    when ``workers`` is 1; ``"ray"``: the Ray cluster at ``address`` or a local one)."""
    options = dict(options or {})
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    insts = list(instances)
    paths = [cache / f"{_key(i, solver, time_limit, seed, options)}.json" for i in insts]
    todo = [(i.to_dict(), solver, time_limit, seed, options, str(p)) for i, p in zip(insts, paths, strict=True) if not p.exists()]
    if todo:
        bar = tqdm(total=len(todo), desc=desc, disable=not progress, unit="round")
        be = get_backend(backend, workers=max(1, workers), address=address) if isinstance(backend, str) else backend
        for path, record in be.imap_unordered(_solve_one, todo):
            write_json(record, path)
            bar.update()
        bar.close()
    return [_read(p) for p in paths]
