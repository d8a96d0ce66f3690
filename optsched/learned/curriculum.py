"""Curriculum distillation on a broad distribution of rounds, within a wall-clock budget.

:mod:`optsched.learned.train` distils CP-SAT labels of small rounds in epochs. This module
trains the same network (:class:`~optsched.learned.policy.PolicyNet`, same export format) on a
*curriculum* of round sizes, from a few nodes up to 64 x 256 and beyond, drawn from
:func:`broad_round` (GPU-type mixes and shares, node shapes, tightness from GPU-rich to
GPU-scarce, running jobs, type restrictions, fairness, profile grids, model-family mixes, gang
size mixes and both spread rules), so that the network packs large rounds itself and holds on
rounds unlike any one generator setting.

The run is budgeted in wall-clock seconds (a GPU lease, say) and overlaps the two costs:

1. **Labels**: every round is submitted at once to a process pool (CP-SAT, one worker per
   process, a time limit per size: small rounds are solved to optimality, the largest ones get
   a best-found schedule with a small gap), smallest sizes first. Labels are cached on disk
   under the key of :mod:`optsched.learned.labels`, so a rerun reuses them.
2. **Training** (on ``device``, the GPU where there is one) starts as soon as the first labels
   are in: each epoch takes every label finished so far whose size belongs to the current
   curriculum stage or an earlier one (stages open at fixed shares of the budget), makes
   minibatches of one size each (little padding), and minimises the behaviour-cloning loss of
   :func:`optsched.learned.train.bc_loss`. The learning rate follows a cosine over the budget.
3. Each epoch logs the loss and the validation gaps (greedy decode vs the label) to
   ``log.jsonl`` and writes ``ckpt-last.npz``; in the last stage each epoch also decodes
   *proxy* rounds of the size the policy is meant for (1,024 x 4,000 by default, seeds apart
   from the library's) and measures the policy alone against their LP bound; the best
   epoch (validation gap plus proxy gap) is kept as ``best.npz``.

Needs torch (the ``train`` extra).
"""

from __future__ import annotations

import importlib
import json
import math
import multiprocessing
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from optsched.checker import check_schedule
from optsched.errors import InputError
from optsched.gen import PHILLY_JOB_SIZES, generate
from optsched.io import write_json
from optsched.learned.auto import WarmCpSat
from optsched.learned.inference import load_npz
from optsched.learned.labels import _key, _read, _solve_one, canonicalise
from optsched.learned.solver import policy_schedule
from optsched.mip.bound import lp_bound
from optsched.model import Instance, Profile
from optsched.values import schedule_value

__all__ = ["CurriculumConfig", "broad_round", "run_curriculum", "unfamiliar_round"]

#: GPU types :func:`broad_round` draws from (M60, T4's sibling MISC and V100M32 are left out, so
#: rounds with them are unfamiliar)
_TYPES = ("V100", "P100", "K80", "A100", "T4", "H100")
_JOB_SIZE_MIXES: tuple[dict[int, float], ...] = (
    dict(PHILLY_JOB_SIZES),
    {1: 0.8, 2: 0.08, 4: 0.07, 8: 0.05},
    {1: 0.6, 2: 0.15, 4: 0.15, 8: 0.1},
)


def broad_round(nodes: int, jobs: int, *, seed: int) -> Instance:
    """A random round from a broad distribution, deterministic by ``seed``: up to three GPU types
    in random shares (of six), 4-16 GPUs a node with 3-8 cores and 31-125 GB per GPU, tightness
    from GPU-rich (Philly's sizes drawn freely, as the library's large rounds) to 1.7 demanded
    GPUs per GPU, 0-70 % running jobs, 0-40 % type-restricted jobs, 15 % fair rounds, the three
    profile grids, random model-family mixes, three gang-size mixes, both spread rules."""
    rng = np.random.default_rng(seed)
    k = int(rng.choice([1, 1, 2, 3]))
    types = [str(t) for t in rng.choice(_TYPES, size=k, replace=False)]
    shares = rng.dirichlet(np.ones(k)) + 0.1
    gpn = int(rng.choice([4, 8, 8, 8, 16]))
    cpg = int(rng.choice([3, 4, 6, 6, 8]))
    mpg = int(rng.choice([31, 62, 62, 94, 125]))
    sizes = _JOB_SIZE_MIXES[int(rng.integers(len(_JOB_SIZE_MIXES)))]
    fam = rng.dirichlet(np.full(4, 0.7))
    mix = None if rng.random() < 0.4 else {f: float(w) for f, w in zip(("image", "audio", "language", "other"), fam, strict=True)}
    capacity = nodes * gpn
    tightness: float | None = None
    if rng.random() < 0.75:
        lo = 1.05 * jobs / capacity  # every job needs at least one GPU
        tightness = float(max(lo, rng.uniform(0.45, 1.7)))
        big = max(s for s in sizes if s <= gpn * nodes)
        tightness = min(tightness, jobs * big / capacity)
    return generate(
        nodes,
        jobs,
        seed=seed,
        gpu_types={t: float(s) for t, s in zip(types, shares, strict=True)},
        gpus_per_node=gpn,
        cpus_per_node=cpg * gpn,
        mem_per_node_gb=mpg * gpn,
        job_sizes=sizes,
        tightness=tightness,
        mix=mix,
        running_fraction=float(rng.choice([0.0, 0.0, 0.2, 0.4, 0.7])),
        restrict_fraction=float(rng.choice([0.0, 0.0, 0.2, 0.4])),
        fair=bool(rng.random() < 0.15),
        grid=str(rng.choice(["full", "coarse", "minimal"])),
        weights=[(0.5, 2.0), (1.0, 1.0), (0.2, 5.0)][int(rng.integers(3))],
        spread_from=str(rng.choice(["one", "fewest"])),
    )


def unfamiliar_round(nodes: int, jobs: int, *, seed: int) -> Instance:
    """A round from settings that neither :func:`broad_round` nor the small model's
    :func:`~optsched.learned.train.training_round` draws: GPU types M60, V100M32 and MISC, 2 or 6
    GPUs a node, 5 or 10 cores and 45 or 160 GB per GPU, one model family per round, a gang mix
    without single-GPU dominance, tightness 0.8 or 2.0, 80 % running jobs or none, wide weights."""
    rng = np.random.default_rng(seed)
    types = [("M60",), ("V100M32", "M60"), ("MISC", "V100M32")][int(rng.integers(3))]
    gpn = int(rng.choice([2, 6]))
    family = str(rng.choice(["image", "audio", "language", "other"]))
    sizes = {1: 0.5, 2: 0.3, 4: 0.2} if gpn * nodes >= 4 else {1: 0.6, 2: 0.4}
    capacity = nodes * gpn
    tight = float(rng.choice([0.8, 2.0]))
    lo, hi = jobs / capacity, jobs * max(s for s in sizes if s <= gpn * nodes // max(1, len(types))) / capacity
    return generate(
        nodes,
        jobs,
        seed=seed,
        gpu_types=types,
        gpus_per_node=gpn,
        cpus_per_node=int(rng.choice([5, 10])) * gpn,
        mem_per_node_gb=int(rng.choice([45, 160])) * gpn,
        job_sizes=sizes,
        tightness=min(max(tight, lo), hi),
        mix={family: 1.0},
        running_fraction=float(rng.choice([0.0, 0.8])),
        restrict_fraction=0.5 if len(types) > 1 else 0.0,
        weights=(0.1, 10.0),
        grid=str(rng.choice(["full", "coarse"])),
        name=f"unfamiliar-{nodes}n-{jobs}j-s{seed}",
    )


#: grid levels :func:`shapes_round` draws its profiles' axes from (cores and GB per GPU)
SHAPE_CPUS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16)
SHAPE_MEM = (4, 8, 12, 16, 24, 32, 48, 64, 96, 128)


def _shape_axis(levels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A throughput factor per level in ``(floor, 1]``, non-decreasing: concave, a step, linear or flat."""
    x = (levels - levels.min()) / max(1e-9, float(levels.max() - levels.min()))
    kind = int(rng.integers(4))
    if kind == 0:
        y = 1 - np.exp(-x * rng.uniform(1, 8))
    elif kind == 1:
        y = (x >= rng.uniform(0.2, 0.9)).astype(float)
    elif kind == 2:
        y = x
    else:
        y = np.ones_like(x)
    floor = rng.uniform(0.05, 0.9)
    return floor + (1 - floor) * y / y.max() if y.max() > 0 else np.ones_like(x)


def shapes_round(nodes: int, jobs: int, *, seed: int) -> Instance:
    """A round whose profiles come from no catalogue model: each job's grid (2-6 core levels,
    2-5 memory levels) and throughput surface (a product of a concave, step, linear or flat
    factor per axis, each with its own floor) are drawn at random, its demand anywhere on the
    grid; nodes of 1, 2, 4 or 8 GPUs with 2-12 cores and 16-100 GB per GPU; one, two or three GPU
    types; four gang-size mixes; none or 40 % of the jobs running. Neither :func:`broad_round`
    nor :func:`unfamiliar_round` draws profiles like these: it measures how the policy holds on
    profile shapes it never saw (``benchmarks/bench_policy_broad.py --generators shapes``)."""
    rng = np.random.default_rng(seed)
    gpn = int(rng.choice([1, 2, 4, 8]))
    types = [("A100",), ("V100", "K80"), ("A100", "T4", "P100")][int(rng.integers(3))]
    sizes = [{1: 1.0}, {1: 0.5, 2: 0.25, 4: 0.15, 8: 0.1}, {1: 0.2, 2: 0.4, 4: 0.3, 8: 0.1}, {1: 0.7, 4: 0.3}][int(rng.integers(4))]
    base = generate(nodes, jobs, seed=seed, gpu_types=types, gpus_per_node=gpn, cpus_per_node=int(rng.choice([2, 4, 8, 12])) * gpn,
                    mem_per_node_gb=int(rng.choice([16, 32, 64, 100])) * gpn, job_sizes=sizes, running_fraction=float(rng.choice([0.0, 0.4])),
                    restrict_fraction=float(rng.choice([0.0, 0.3])) if len(types) > 1 else 0.0, weights=(0.2, 5.0),
                    name=f"shapes-{nodes}n-{jobs}j-s{seed}")
    out = []
    for j in base.jobs:
        cs = np.sort(rng.choice(SHAPE_CPUS, size=int(rng.integers(2, 7)), replace=False))
        ms = np.sort(rng.choice(SHAPE_MEM, size=int(rng.integers(2, 6)), replace=False))
        thr = rng.uniform(10, 1000) * np.outer(_shape_axis(cs.astype(float), rng), _shape_axis(ms.astype(float), rng))
        prof = Profile(tuple(int(c) for c in cs), tuple(int(m) for m in ms), tuple(tuple(round(float(t), 4) for t in row) for row in thr))
        demand = (int(cs[int(rng.integers(cs.size))]), int(ms[int(rng.integers(ms.size))]))
        out.append(replace(j, profile=prof, demand=demand, model=None))
    return replace(base, jobs=tuple(out))


def _generator(target: str) -> Callable[..., Instance]:
    """The round generator named ``"module:function"`` (no torch import: workers stay light)."""
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise InputError("generator", target, f"cannot be loaded ({e}); give 'module:function'") from None


def _sizes_default() -> list[list[tuple[int, int]]]:
    return [[(2, 6), (3, 8), (4, 12), (6, 16)], [(8, 24), (12, 48), (16, 64)], [(32, 128)], [(64, 256)]]


@dataclass
class CurriculumConfig:
    """Everything a curriculum run depends on (written into the weights' metadata)."""

    out: str = "runs/maifs-curriculum"
    cache: str = "runs/label-cache"
    #: curriculum stages, each a list of (nodes, jobs) sizes; stage i opens at ``stage_starts[i]``
    stages: list[list[tuple[int, int]]] = field(default_factory=_sizes_default)
    #: share of the training budget at which each stage opens (the first at 0)
    stage_starts: list[float] = field(default_factory=lambda: [0.0, 0.12, 0.32, 0.55])
    #: training rounds per size of each stage
    rounds_per_size: list[int] = field(default_factory=lambda: [200, 80, 160, 140])
    #: CP-SAT seconds per label, per stage
    label_time_limits: list[float] = field(default_factory=lambda: [2.0, 4.0, 6.0, 8.0])
    val_per_size: int = 4
    #: rounds of more cells (nodes x jobs) are labelled by CP-SAT warm-started with the shipped
    #: policy's schedule (``cpsat+maifs``), smaller ones by CP-SAT alone
    warm_label_cells: int = 100
    #: wall-clock seconds for the whole run (labelling overlaps training); training stops then
    budget_s: float = 420.0
    workers: int = 14
    batch_size: int = 16
    lr: float = 5e-4
    #: start from these weights (a ``.npz``; ``None``: random initialisation)
    init: str | None = None
    d_model: int = 64
    heads: int = 4
    layers: int = 2
    seed: int = 0
    device: str = "cpu"
    threads: int = 1
    #: proxy rounds (nodes, jobs, seed, generator options) decoded each epoch of the last stage (the
    #: library's large rounds demand 1.25 GPUs per GPU)
    proxies: list[tuple[int, int, int, dict[str, Any]]] = field(default_factory=lambda: [
        (1024, 4000, 101, {"grid": "coarse", "spread_from": "one", "tightness": 1.25}),
        (1024, 4000, 102, {"grid": "coarse", "spread_from": "one", "tightness": 1.25, "gpu_types": ("K80", "P100", "V100"), "running_fraction": 0.3}),
    ])
    #: ``"module:function"`` called as ``f(nodes, jobs, seed=...) -> Instance`` (in the workers)
    generator: str = "optsched.learned.curriculum:broad_round"

    def validate(self) -> None:
        n = len(self.stages)
        if n < 1:
            raise InputError("stages", self.stages, "must list at least one stage of sizes")
        for name in ("stage_starts", "rounds_per_size", "label_time_limits"):
            if len(getattr(self, name)) != n:
                raise InputError(name, getattr(self, name), f"must have one entry per stage ({n})")
        if self.stage_starts[0] != 0 or sorted(self.stage_starts) != list(self.stage_starts) or self.stage_starts[-1] >= 1:
            raise InputError("stage_starts", self.stage_starts, "must start at 0, rise, and stay below 1")
        for s in self.stages:
            if not s or any(len(x) != 2 or min(x) < 1 for x in s):
                raise InputError("stages", s, "each stage lists (nodes >= 1, jobs >= 1) sizes")
        for name in ("val_per_size", "workers", "batch_size", "d_model", "heads", "layers", "threads"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(name, v, "must be a positive integer")
        if not (self.budget_s > 0 and math.isfinite(self.budget_s)):
            raise InputError("budget_s", self.budget_s, "must be a positive number of seconds")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise InputError("lr", self.lr, "must be a positive number")
        _generator(self.generator)


@dataclass
class _Item:
    stage: int
    size: tuple[int, int]
    role: str  # "train" or "val"
    path: Path | None
    future: Future | None


def _label_task(args: tuple[str, int, int, int, str, float, str]) -> tuple[str, dict[str, Any] | None]:
    """In a worker: draw the round, and label it unless the cache holds it (then ``None``).

    ``solver`` is ``"cpsat"`` or ``"cpsat+maifs"`` (CP-SAT warm-started with the shipped policy's
    schedule, :class:`optsched.learned.auto.WarmCpSat`: on rounds CP-SAT does not prove within
    its time, the label is then never worse than that schedule)."""
    target, n, j, seed, solver, tl, cache = args
    inst = _generator(target)(n, j, seed=seed)
    opts = {"num_workers": 1}
    path = Path(cache) / f"{_key(inst, solver, tl, 0, opts)}.json"
    if path.exists():
        return str(path), None
    if solver == "cpsat":
        return _solve_one((inst.to_dict(), "cpsat", tl, 0, opts, str(path)))
    res = WarmCpSat().solve(inst, time_limit=tl, seed=0, **opts)
    sched = canonicalise(inst, res.schedule)
    report = check_schedule(inst, sched)
    if report:
        raise RuntimeError(f"canonicalised label of {inst.name} is infeasible: {report[:3]} (a bug)")
    return str(path), {
        "instance": inst.to_dict(), "schedule": sched.to_dict(), "objective": report.objective, "bound": res.bound,
        "status": res.status.value, "time_s": res.time_s, "solver": solver,
    }


def _submit(cfg: CurriculumConfig, pool: ProcessPoolExecutor) -> list[_Item]:
    """All labelling tasks, validation rounds of a stage before its training rounds, stages in order."""
    items = []
    cache = Path(cfg.cache)
    cache.mkdir(parents=True, exist_ok=True)
    base = 2_000_000 * (cfg.seed + 1)
    for si, sizes in enumerate(cfg.stages):
        tl = float(cfg.label_time_limits[si])
        for role, count, off in (("val", cfg.val_per_size, 900_000), ("train", cfg.rounds_per_size[si], 0)):
            for i in range(count):
                for zi, (n, j) in enumerate(sizes):
                    seed = base + off + 10_000 * si + 1_000 * zi + i
                    solver = "cpsat" if n * j <= cfg.warm_label_cells else "cpsat+maifs"
                    fut = pool.submit(_label_task, (cfg.generator, n, j, seed, solver, tl, str(cache)))
                    items.append(_Item(si, (n, j), role, None, fut))
    return items


def _collect(items: list[_Item]) -> None:
    """Write the labels that finished into the cache and note their paths."""
    for it in items:
        f = it.future
        if f is not None and f.done():
            it.future = None
            if f.cancelled() or f.exception() is not None:
                continue
            path, record = f.result()
            if record is not None:
                write_json(record, path)
            it.path = Path(path)


def _proxy_rounds(cfg: CurriculumConfig) -> list[Instance]:
    return [generate(n, j, seed=s, name=f"proxy-{n}n-{j}j-s{s}", **o) for n, j, s, o in cfg.proxies]


def run_curriculum(cfg: CurriculumConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The whole run (module docstring). Writes ``log.jsonl``, ``ckpt-last.npz``, ``best.npz``
    and ``summary.json`` into ``cfg.out`` and returns the summary."""
    cfg.validate()
    t0 = time.perf_counter()
    deadline = t0 + cfg.budget_s
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    # the pool starts before torch touches a GPU (spawned workers: no forked CUDA state)
    pool = ProcessPoolExecutor(max_workers=cfg.workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        items = _submit(cfg, pool)
        log(f"[{time.perf_counter() - t0:6.1f}s] {len(items)} rounds, {sum(it.future is not None for it in items)} to label")
        return _train(cfg, items, t0, deadline, out, log)
    finally:
        _stop(pool)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel the labels not started and end the workers (a label still solving is dropped:
    the run's budget is over, and a worker left running would hold the interpreter's exit)."""
    procs = list(getattr(pool, "_processes", {}).values())  # the executor offers no public handle
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=5)


def _train(cfg: CurriculumConfig, items: list[_Item], t0: float, deadline: float, out: Path, log: Callable[[str], None]) -> dict[str, Any]:
    from optsched.learned.policy import PolicyNet, export_weights, torch  # lazy: torch, the train extra
    from optsched.learned.train import bc_loss, greedy, make_examples, validation_gaps  # lazy: torch, the train extra

    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    rng = np.random.default_rng(cfg.seed)
    if cfg.init:
        net = PolicyNet.from_weights(cfg.init)
        reference = load_npz(cfg.init)
    else:
        net = PolicyNet(d_model=cfg.d_model, heads=cfg.heads, layers=cfg.layers)
        reference = None
    net = net.to(cfg.device)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    proxies = _proxy_rounds(cfg)
    proxy_ref, proxy_start = [], []
    for p in proxies:  # the LP bound, and the starting policy alone against it
        lp = lp_bound(p, time_limit=60.0)
        proxy_ref.append(lp)
        if reference is not None:
            proxy_start.append(round((lp - schedule_value(p, policy_schedule(reference, p))) / lp, 4))
    log(f"[{time.perf_counter() - t0:6.1f}s] proxy LP bounds {[round(v, 2) for v in proxy_ref]}, starting policy alone {proxy_start} below")
    train_ex: dict[tuple[int, int], list[Any]] = {}
    val_labels: list[Any] = []
    seen: set[Path] = set()
    budget = deadline - t0
    log_path = out / "log.jsonl"
    log_path.write_text("")
    best = (math.inf, 0)
    epoch = 0
    start_train = time.perf_counter()
    n_stages = len(cfg.stages)
    last_stage_open = False
    while True:
        now = time.perf_counter()
        frac = (now - t0) / budget
        if now > deadline - 5:
            break
        stage = max(i for i, s in enumerate(cfg.stage_starts) if frac >= s)
        _collect(items)
        for it in items:
            if it.stage <= stage and it.path is not None and it.path not in seen:
                seen.add(it.path)
                lab = _read(it.path)
                if it.role == "val":
                    val_labels.append(lab)
                else:
                    train_ex.setdefault(it.size, []).extend(make_examples([lab]))
        batches = []
        for size, exs in train_ex.items():
            order = rng.permutation(len(exs))
            bs = max(2, cfg.batch_size * 64 // max(64, size[0] * size[1] // 16))  # fewer big rounds a batch
            bs = min(bs, cfg.batch_size)
            for s in range(0, len(order), bs):
                batches.append([exs[i] for i in order[s : s + bs]])
        if not batches:
            time.sleep(1.0)
            continue
        rng.shuffle(batches)
        epoch += 1
        te = time.perf_counter()
        net.train()
        losses = []
        for b in batches:
            if time.perf_counter() > deadline - 5:
                break
            f = (time.perf_counter() - t0) / budget
            for g in opt.param_groups:
                g["lr"] = cfg.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, f))))
            loss = bc_loss(net, b, cfg.device)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            losses.append(float(loss.detach()))
        net.eval()
        gaps = validation_gaps(net, val_labels, cfg.device) if val_labels else [math.nan]
        by_size: dict[str, list[float]] = {}
        for lab, gp in zip(val_labels, gaps, strict=False):
            by_size.setdefault(f"{len(lab.instance.nodes)}x{len(lab.instance.jobs)}", []).append(gp)
        row: dict[str, Any] = {
            "epoch": epoch, "stage": stage, "t_s": round(time.perf_counter() - t0, 1), "epoch_s": round(time.perf_counter() - te, 2),
            "loss": float(np.mean(losses)) if losses else math.nan, "batches": len(losses),
            "examples": {f"{n}x{j}": len(v) for (n, j), v in sorted(train_ex.items())},
            "val_rounds": len(val_labels), "val_gap_mean": float(np.mean(gaps)), "val_gap_median": float(np.median(gaps)),
            "val_gap_by_size": {k: round(float(np.mean(v)), 4) for k, v in sorted(by_size.items())},
            "lr": opt.param_groups[0]["lr"], "pending_labels": sum(it.future is not None for it in items),
        }
        final_stage = stage == n_stages - 1
        if final_stage and proxies and time.perf_counter() < deadline - 10:
            pg = []
            for p, ref in zip(proxies, proxy_ref, strict=True):
                v = schedule_value(p, greedy(net, p, cfg.device))
                pg.append((ref - v) / ref)
            row["proxy_gap_to_lp"] = [round(x, 4) for x in pg]
        meta = {"epoch": epoch, "config": _jsonable(asdict(cfg)), "val": {k: v for k, v in row.items() if k != "examples"}}
        export_weights(net, out / "ckpt-last.npz", **meta)
        if final_stage and ("proxy_gap_to_lp" in row or not proxies):
            score = row["val_gap_mean"] + float(np.mean(row.get("proxy_gap_to_lp", [0.0])))
            if not last_stage_open or score < best[0]:
                best = (score, epoch)
                export_weights(net, out / "best.npz", **meta)
            last_stage_open = True
            row["score"] = score
        with log_path.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        log(f"[{row['t_s']:6.1f}s] epoch {epoch} stage {stage} loss {row['loss']:.4f} val {100 * row['val_gap_mean']:.2f}% "
            f"{row['val_gap_by_size']} proxy {row.get('proxy_gap_to_lp')} pending {row['pending_labels']} ({row['epoch_s']}s)")
    if not last_stage_open:  # the budget ended before the last stage: the last epoch is the best we have
        if (out / "ckpt-last.npz").exists():
            (out / "best.npz").write_bytes((out / "ckpt-last.npz").read_bytes())
        best = (math.nan, epoch)
    summary = {
        "epochs": epoch, "best_epoch": best[1], "best_score": best[0], "train_s": time.perf_counter() - start_train,
        "wall_s": time.perf_counter() - t0,
        "labels": {"train": {f"{n}x{j}": len(v) for (n, j), v in sorted(train_ex.items())}, "val": len(val_labels)},
        "label_status": _status_counts([_read(p) for p in sorted(seen)]),
        "config": _jsonable(asdict(cfg)),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _status_counts(labels: Sequence[Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for lab in labels:
        k = f"{len(lab.instance.nodes)}x{len(lab.instance.jobs)}"
        d = out.setdefault(k, {"n": 0, "optimal": 0, "gaps": []})
        d["n"] += 1
        d["optimal"] += lab.status == "optimal"
        if lab.gap is not None:
            d["gaps"].append(lab.gap)
    for d in out.values():
        g = d.pop("gaps")
        d["with_bound"] = len(g)
        d["gap_median"] = float(np.median(g)) if g else None
        d["gap_max"] = float(np.max(g)) if g else None
    return out


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x
