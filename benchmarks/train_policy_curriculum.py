"""Train the learned policy with the size curriculum on broad rounds (optsched.learned.curriculum).

The run that made ``optsched/learned/weights/maifs-broad.npz`` (one NVIDIA H200, 16 cores, a
430 s budget; its model card gives the figures)::

    python benchmarks/train_policy_curriculum.py --out runs/maifs-broad --cache runs/label-cache \
        --budget 430 --workers 14 --device cuda --init optsched/learned/weights/maifs-small.npz

Labels (CP-SAT, one worker per process) are cached in ``--cache``; a rerun with the same cache
skips the solving. ``--tiny`` runs the same pipeline at toy sizes in a minute (a rehearsal).
``--tar`` packs the label cache into a ``.tar.gz`` at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import time
from pathlib import Path

from optsched.learned.curriculum import CurriculumConfig, run_curriculum


def _pick_device(init: str | None) -> str:
    """``cuda`` if a training step and a greedy decode run there (checked on a toy round), else ``cpu``."""
    try:
        from optsched.learned.curriculum import broad_round
        from optsched.learned.labels import Label
        from optsched.learned.policy import PolicyNet, torch
        from optsched.learned.train import bc_loss, greedy, make_examples

        if not torch.cuda.is_available():
            print("device: no CUDA GPU, training on cpu", flush=True)
            return "cpu"
        net = (PolicyNet.from_weights(init) if init else PolicyNet()).to("cuda")
        inst = broad_round(4, 12, seed=1)
        sched = greedy(net, inst, "cuda")
        loss = bc_loss(net, make_examples([Label(inst, sched, 1.0, None, "check", 0.0)]), "cuda")
        loss.backward()
        print(f"device: cuda ({torch.cuda.get_device_name(0)}), check loss {float(loss.detach()):.4f}", flush=True)
        return "cuda"
    except Exception as e:  # noqa: BLE001 -- any failure means: train on the CPU
        print(f"device: cuda check failed ({type(e).__name__}: {e}), training on cpu", flush=True)
        return "cpu"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/maifs-broad")
    p.add_argument("--cache", default="runs/label-cache")
    p.add_argument("--budget", type=float, default=430.0, help="wall-clock seconds of the whole run")
    p.add_argument("--workers", type=int, default=14, help="labelling processes")
    p.add_argument("--device", default="cpu", help="cpu, cuda, or auto (cuda if one training step runs there, else cpu)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--init", help="start from these weights (.npz)")
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tiny", action="store_true", help="toy sizes and counts (a rehearsal of the pipeline)")
    p.add_argument("--finetune", action="store_true", help="open every stage at once (continue a run on its cached labels)")
    p.add_argument("--tar", help="write the label cache as this .tar.gz at the end")
    a = p.parse_args(argv)
    if a.device == "auto":
        a.device = _pick_device(a.init)
    cfg = CurriculumConfig(out=a.out, cache=a.cache, budget_s=a.budget, workers=a.workers, device=a.device,
                           threads=a.threads, init=a.init, lr=a.lr, seed=a.seed)
    if a.tiny:
        cfg.stages = [[(2, 6), (3, 8)], [(4, 12)], [(8, 24)], [(16, 64)]]
        cfg.rounds_per_size = [6, 4, 4, 3]
        cfg.label_time_limits = [1.0, 1.0, 2.0, 2.0]
        cfg.val_per_size = 2
        cfg.proxies = [(64, 256, 101, {"grid": "coarse", "spread_from": "one"})]
    if a.finetune:
        cfg.stage_starts = [0.0] * len(cfg.stages)
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(msg, flush=True)

    summary = run_curriculum(cfg, log)
    log(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=1))
    if a.tar:
        with tarfile.open(a.tar, "w:gz") as tf:
            for f in sorted(Path(a.cache).glob("*.json")):
                tf.add(f, arcname=f"label-cache/{f.name}")
        log(f"label cache -> {a.tar} ({Path(a.tar).stat().st_size / 1e6:.1f} MB) at {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
