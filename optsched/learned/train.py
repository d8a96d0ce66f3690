"""Distillation of exact solutions into the policy: behaviour cloning, then DAgger.

1. **Rounds**: random rounds from :func:`optsched.gen.generate`, over a list of sizes, with
   seeds derived from the run's seed (train, DAgger and validation rounds never share seeds).
2. **Labels**: exact CP-SAT solutions, canonical under node symmetry, solved in a process pool
   and cached on disk (:mod:`optsched.learned.labels`), so an interrupted run resumes.
3. **Behaviour cloning**: maximise the Evaluate-mode log-likelihood
   (:func:`optsched.learned.decode.log_likelihood`) of the labels, per job, with Adam and a cosine
   learning-rate schedule over all epochs (cloning and DAgger).
4. **DAgger**: roll the learner out on training rounds, stop it part-way (a random share of
   its placements), and label the *residual* round it reached with the exact solver; the new
   states join the data set, and cloning continues on the aggregate.

Each epoch logs the loss and the validation gap (greedy decode vs the exact optimum) to a JSON-lines
log, writes a checkpoint (torch ``.pt`` and, through the exporter, the ``.npz`` that inference
loads), keeps the best one, and the run ends with a loss/gap curve PNG (needs the ``plot`` extra).
Needs torch: the ``train`` extra.
"""

from __future__ import annotations

import importlib
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from optsched.errors import InputError
from optsched.extras import pyplot
from optsched.gen import generate
from optsched.learned.decode import decode, log_likelihood, scores_of, target_arrays
from optsched.learned.features import RoundFeatures, featurise
from optsched.learned.labels import Label, label_rounds, residual_round
from optsched.learned.policy import PolicyNet, collate, export_weights, torch  # torch: the `train` extra
from optsched.model import Instance
from optsched.schedule import Schedule
from optsched.values import schedule_value

__all__ = ["Example", "TrainConfig", "bc_loss", "make_examples", "plot_curves", "run_training", "train_epoch", "validation_gaps"]


@dataclass
class TrainConfig:
    """Everything a training run depends on (written into the checkpoint and the model card)."""

    out: str = "runs/maifs"
    cache: str = "runs/label-cache"
    sizes: list[tuple[int, int]] = field(default_factory=lambda: [(2, 6), (3, 10), (4, 12), (6, 20)])
    train_rounds: int = 300
    val_rounds: int = 40
    epochs: int = 20
    dagger_iters: int = 2
    dagger_rounds: int = 100
    dagger_epochs: int = 8
    batch_size: int = 16
    lr: float = 1e-3
    d_model: int = 64
    heads: int = 4
    layers: int = 2
    label_time_limit: float = 10.0
    label_workers: int = 2
    label_threads: int = 1
    #: where labelling runs: ``"local"`` (process pool) or ``"ray"`` (optional extra)
    label_backend: str = "local"
    #: Ray cluster address for ``label_backend="ray"`` (``None``: start a local Ray instance)
    label_address: str | None = None
    seed: int = 0
    device: str = "cpu"
    #: torch CPU threads (1 by default: tiny batches gain nothing from more, and OpenMP threads
    #: that busy-wait on a shared machine slow training by an order of magnitude)
    threads: int = 1
    progress: bool = True
    #: ``"module:function"`` called as ``f(nodes, jobs, seed=...) -> Instance``
    generator: str = "optsched.learned.train:training_round"

    def validate(self) -> None:
        for name in ("train_rounds", "val_rounds", "epochs", "batch_size", "d_model", "heads", "layers", "label_workers", "label_threads", "threads"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise InputError(name, v, "must be a positive integer")
        for name in ("dagger_iters", "dagger_rounds", "dagger_epochs", "seed"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 0:
                raise InputError(name, v, "must be a non-negative integer")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise InputError("lr", self.lr, "must be a positive number")
        if not self.label_time_limit > 0:
            raise InputError("label_time_limit", self.label_time_limit, "must be positive")
        if self.d_model % self.heads:
            raise InputError("d_model", self.d_model, f"must be a multiple of heads={self.heads}")
        if not self.sizes:
            raise InputError("sizes", self.sizes, "must list at least one (nodes, jobs) size")
        for s in self.sizes:
            if len(s) != 2 or min(s) < 1:
                raise InputError("sizes", s, "each size must be (nodes >= 1, jobs >= 1)")
        _generator(self.generator)
        if self.label_backend not in ("local", "serial", "ray"):
            raise InputError("label_backend", self.label_backend, "must be local, serial or ray")
        if self.device != "cpu" and not (self.device.startswith("cuda") and torch.cuda.is_available()):
            raise InputError("device", self.device, "must be 'cpu', or 'cuda[:i]' on a machine with a CUDA GPU")


@dataclass
class Example:
    """One labelled round in the policy's terms."""

    instance: Instance
    feats: RoundFeatures
    gpus: np.ndarray
    point: np.ndarray
    objective: float


def make_examples(labels: Sequence[Label]) -> list[Example]:
    out = []
    for lab in labels:
        feats = featurise(lab.instance)
        g, p = target_arrays(lab.instance, feats, lab.schedule)
        out.append(Example(lab.instance, feats, g, p, lab.objective))
    return out


def bc_loss(net: PolicyNet, examples: Sequence[Example], device: str | torch.device = "cpu") -> torch.Tensor:
    """Mean over rounds of the negative log-likelihood of the label, per job."""
    out = net(collate([e.feats for e in examples], device))
    terms = []
    for b, e in enumerate(examples):
        ll = log_likelihood(out, b, e.feats, e.gpus, e.point)["total"]
        terms.append(-ll / max(e.feats.n_jobs, 1))
    return torch.stack(terms).mean()


def train_epoch(
    net: PolicyNet,
    opt: torch.optim.Optimizer,
    examples: Sequence[Example],
    *,
    batch_size: int,
    rng: np.random.Generator,
    device: str | torch.device = "cpu",
    progress: bool = False,
    desc: str = "epoch",
) -> float:
    """One pass over ``examples`` in random minibatches; returns the mean loss."""
    net.train()
    order = rng.permutation(len(examples))
    losses = []
    for s in tqdm(range(0, len(order), batch_size), desc=desc, disable=not progress, leave=False, unit="batch"):
        batch = [examples[i] for i in order[s : s + batch_size]]
        loss = bc_loss(net, batch, device)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    net.eval()
    return float(np.mean(losses)) if losses else float("nan")


def greedy(net: PolicyNet, instance: Instance, device: str | torch.device = "cpu", *, leftover: bool = True) -> Schedule:
    feats = featurise(instance)
    with torch.inference_mode():
        out = net(collate([feats], device))
    return decode(instance, feats, scores_of(out, 0, feats), leftover=leftover)


def validation_gaps(net: PolicyNet, labels: Sequence[Label], device: str | torch.device = "cpu") -> list[float]:
    """Greedy-decode gap to each label's objective, ``(label - policy) / label``."""
    net.eval()
    gaps = []
    for lab in labels:
        v = schedule_value(lab.instance, greedy(net, lab.instance, device))
        gaps.append((lab.objective - v) / max(lab.objective, 1e-9))
    return gaps


#: cluster variants of :func:`training_round` (GPU types present)
_TYPE_SETS: tuple[tuple[str, ...], ...] = (("V100",), ("V100", "P100"), ("V100", "P100", "K80"), ("A100", "V100"))


def training_round(nodes: int, jobs: int, *, seed: int) -> Instance:
    """A varied random round for distillation, deterministic by ``seed``: :func:`optsched.gen.generate`
    with the GPU types, node shape, tightness, running share, type restrictions, fairness and
    profile grid drawn from ``seed`` (so the policy sees the variety it will be used on)."""
    rng = np.random.default_rng(seed)
    shape = [(8, 48, 500), (4, 24, 250), (8, 64, 500)][int(rng.integers(3))]
    return generate(
        nodes,
        jobs,
        seed=seed,
        gpu_types=_TYPE_SETS[int(rng.integers(len(_TYPE_SETS)))],
        gpus_per_node=shape[0],
        cpus_per_node=shape[1],
        mem_per_node_gb=shape[2],
        tightness=float(rng.choice([0.9, 1.1, 1.25, 1.5])),
        running_fraction=float(rng.choice([0.0, 0.0, 0.3, 0.6])),
        restrict_fraction=float(rng.choice([0.0, 0.2])),
        fair=bool(rng.random() < 0.2),
        grid=str(rng.choice(["full", "coarse"])),
    )


def _generator(target: str) -> Callable[..., Instance]:
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise InputError("generator", target, f"cannot be loaded ({e}); give 'module:function'") from None


def _rounds(sizes: Sequence[tuple[int, int]], count: int, seed_base: int, generator: str) -> list[Instance]:
    generate = _generator(generator)
    out = []
    for i in range(count):
        n, j = sizes[i % len(sizes)]
        out.append(generate(n, j, seed=seed_base + i))
    return out


def _dagger_states(net: PolicyNet, rounds: Sequence[Instance], rng: np.random.Generator, device: str) -> list[Instance]:
    """Residual rounds the learner reaches after a random share of its own placements."""
    states = []
    for inst in rounds:
        sched = greedy(net, inst, device, leftover=False)
        items = list(sched.jobs.items())  # in placement order
        if len(items) < 2:
            continue
        cut = int(rng.integers(1, len(items)))
        prefix = Schedule(inst.name, dict(items[:cut]))
        res = residual_round(inst, prefix)
        if res.jobs and any(n.gpus > 0 for n in res.nodes):
            states.append(res)
    return states


def plot_curves(log: Sequence[dict[str, Any]], path: str | Path, ax: Any = None) -> None:
    """Training loss and median validation gap per epoch (one PNG)."""
    plt = pyplot("the training curves")

    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(7, 4))
    ep = [r["epoch"] for r in log]
    ax.plot(ep, [r["loss"] for r in log], color="tab:blue", label="train loss (NLL / job)")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot(ep, [100 * r["val_gap_median"] for r in log], color="tab:red", label="median val gap")
    ax2.plot(ep, [100 * r["val_gap_mean"] for r in log], color="tab:red", linestyle="--", label="mean val gap")
    ax2.set_ylabel("gap to exact (%)", color="tab:red")
    for r in log:
        if r.get("phase", "").startswith("dagger") and r.get("first_of_phase"):
            ax.axvline(r["epoch"] - 0.5, color="grey", linewidth=0.8, linestyle=":")
    ax2.legend(loc="upper right")
    ax.set_title("MAIFS distillation: behaviour cloning, then DAgger (dotted)")
    if own:
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)


def run_training(cfg: TrainConfig) -> dict[str, Any]:
    """The whole pipeline (see the module docstring). Returns a summary and writes into ``cfg.out``:
    ``log.jsonl``, ``ckpt-last.pt``, ``best.pt`` (torch checkpoints), ``ckpt-last.npz``, ``best.npz``
    (the same weights for numpy inference, :func:`~optsched.learned.policy.export_weights`),
    ``curves.png``, ``summary.json``."""
    cfg.validate()
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    rng = np.random.default_rng(cfg.seed)
    base = 1_000_000 * (cfg.seed + 1)
    t_start = time.perf_counter()
    lab_opts = {"num_workers": cfg.label_threads}
    label = lambda insts, desc: label_rounds(  # noqa: E731
        insts, cfg.cache, time_limit=cfg.label_time_limit, seed=0, workers=cfg.label_workers,
        options=lab_opts, progress=cfg.progress, desc=desc, backend=cfg.label_backend, address=cfg.label_address,
    )
    train_insts = _rounds(cfg.sizes, cfg.train_rounds, base, cfg.generator)
    val_insts = _rounds(cfg.sizes, cfg.val_rounds, base + 500_000, cfg.generator)
    val_labels = label(val_insts, "labelling val")
    train_labels = label(train_insts, "labelling train")
    examples = make_examples(train_labels)
    net = PolicyNet(d_model=cfg.d_model, heads=cfg.heads, layers=cfg.layers).to(cfg.device)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    total_epochs = cfg.epochs + cfg.dagger_iters * cfg.dagger_epochs
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total_epochs, eta_min=cfg.lr / 20)
    log: list[dict[str, Any]] = []
    best = (math.inf, -1)
    log_path = out / "log.jsonl"
    log_path.write_text("")
    epoch = 0

    def run_phase(phase: str, n_epochs: int) -> None:
        nonlocal epoch, best
        for i in range(n_epochs):
            epoch += 1
            t0 = time.perf_counter()
            loss = train_epoch(net, opt, examples, batch_size=cfg.batch_size, rng=rng, device=cfg.device, progress=cfg.progress, desc=f"{phase} epoch {epoch}")
            sched.step()
            gaps = validation_gaps(net, val_labels, cfg.device)
            row = {
                "epoch": epoch, "phase": phase, "first_of_phase": i == 0, "loss": loss, "examples": len(examples),
                "val_gap_mean": float(np.mean(gaps)), "val_gap_median": float(np.median(gaps)),
                "val_gap_p90": float(np.quantile(gaps, 0.9)), "epoch_s": time.perf_counter() - t0, "lr": opt.param_groups[0]["lr"],
            }
            log.append(row)
            with log_path.open("a") as f:
                f.write(json.dumps(row) + "\n")
            meta = {"epoch": epoch, "config": asdict(cfg), "val": row}
            ckpt = net.checkpoint(**meta)
            torch.save(ckpt, out / "ckpt-last.pt")
            export_weights(net, out / "ckpt-last.npz", **meta)  # what numpy inference loads, in step with the .pt
            if row["val_gap_mean"] < best[0]:
                best = (row["val_gap_mean"], epoch)
                torch.save(ckpt, out / "best.pt")
                export_weights(net, out / "best.npz", **meta)
            if cfg.progress:
                tqdm.write(f"{phase} epoch {epoch}: loss {loss:.4f}  val gap mean {100 * row['val_gap_mean']:.2f}%  median {100 * row['val_gap_median']:.2f}%")

    run_phase("bc", cfg.epochs)
    for it in range(cfg.dagger_iters):
        pool = [train_insts[int(i)] for i in rng.choice(len(train_insts), size=min(cfg.dagger_rounds, len(train_insts)), replace=False)]
        states = _dagger_states(net, pool, rng, cfg.device)
        examples.extend(make_examples(label(states, f"labelling DAgger {it + 1}")))
        run_phase(f"dagger{it + 1}", cfg.dagger_epochs)
    plot_curves(log, out / "curves.png")
    best_ckpt = torch.load(out / "best.pt", map_location="cpu", weights_only=True)
    net_best = PolicyNet.from_checkpoint(best_ckpt)
    gaps = validation_gaps(net_best, val_labels)
    opt_share = float(np.mean([lab.status == "optimal" for lab in val_labels]))
    summary = {
        "best_epoch": best[1],
        "val_gap_mean": float(np.mean(gaps)),
        "val_gap_median": float(np.median(gaps)),
        "val_gap_p90": float(np.quantile(gaps, 0.9)),
        "val_rounds": len(val_labels),
        "val_labels_optimal_share": opt_share,
        "train_examples": len(examples),
        "parameters": sum(p.numel() for p in net.parameters()),
        "wall_s": time.perf_counter() - t_start,
        "config": asdict(cfg),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary
