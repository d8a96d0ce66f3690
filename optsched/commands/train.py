"""``optsched train``: distil exact CP-SAT solutions into the MAIFS-style policy (BC, then DAgger).

Writes into ``--out``: ``log.jsonl`` (one line per epoch), ``ckpt-last.pt``, ``best.pt`` (torch
checkpoints) with their numpy-inference exports ``ckpt-last.npz``, ``best.npz``, ``curves.png``
(loss and validation gap) and ``summary.json``. Labels are cached in ``--cache`` so an interrupted
run resumes without re-solving. ``--ship PATH`` copies the best weights file (``.npz``; e.g. to
``optsched/learned/weights/maifs-small.npz``, the shipped policy). Needs the ``train`` extra.
"""

from __future__ import annotations

import argparse
import json
import shutil

from optsched.errors import InputError


def _sizes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        try:
            n, j = part.lower().split("x")
            out.append((int(n), int(j)))
        except ValueError:
            raise InputError("--sizes", text, "must be comma-separated NODESxJOBS pairs, e.g. 2x6,4x12") from None
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="runs/maifs", help="run directory (default runs/maifs)")
    p.add_argument("--cache", default="runs/label-cache", help="label cache directory (default runs/label-cache)")
    p.add_argument("--sizes", default="2x6,3x10,4x12,6x20", help="round sizes NODESxJOBS, cycled (default 2x6,3x10,4x12,6x20)")
    p.add_argument("--train-rounds", type=int, default=300)
    p.add_argument("--val-rounds", type=int, default=40)
    p.add_argument("--epochs", type=int, default=20, help="behaviour-cloning epochs")
    p.add_argument("--dagger-iters", type=int, default=2)
    p.add_argument("--dagger-rounds", type=int, default=100, help="learner roll-outs relabelled per DAgger iteration")
    p.add_argument("--dagger-epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--label-time-limit", type=float, default=10.0, help="CP-SAT seconds per label")
    p.add_argument("--label-workers", type=int, default=2, help="labelling processes")
    p.add_argument("--label-threads", type=int, default=1, help="CP-SAT workers per labelling process (1: deterministic)")
    p.add_argument("--backend", default="local", help="where labelling runs: local (process pool, default) or ray (optional extra)")
    p.add_argument("--address", help="Ray cluster to join with --backend ray (default: start a local one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu or cuda[:i]")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--ship", help="copy the best weights (.npz) here at the end (e.g. optsched/learned/weights/maifs-small.npz)")
    p.add_argument("--no-progress", action="store_true")


def run(args: argparse.Namespace) -> int:
    if args.ship and not args.ship.endswith(".npz"):
        raise InputError("--ship", args.ship, "must name a .npz weights file (what numpy inference loads)")
    from optsched.learned.train import TrainConfig, run_training  # lazy: training imports torch, the `train` extra

    cfg = TrainConfig(
        out=args.out, cache=args.cache, sizes=_sizes(args.sizes), train_rounds=args.train_rounds, val_rounds=args.val_rounds,
        epochs=args.epochs, dagger_iters=args.dagger_iters, dagger_rounds=args.dagger_rounds, dagger_epochs=args.dagger_epochs,
        batch_size=args.batch_size, lr=args.lr, d_model=args.d_model, heads=args.heads, layers=args.layers,
        label_time_limit=args.label_time_limit, label_workers=args.label_workers, label_threads=args.label_threads,
        label_backend=args.backend, label_address=args.address, seed=args.seed, device=args.device, threads=args.threads, progress=not args.no_progress,
    )
    summary = run_training(cfg)
    print(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=1))
    if args.ship:
        shutil.copyfile(f"{args.out}/best.npz", args.ship)
        print(f"best weights copied to {args.ship}")
    return 0
