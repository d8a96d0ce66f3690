"""The policy's forward pass: numpy inference (what solving runs) against the torch module.

Times ``NumpyPolicy.scores`` (one BLAS thread) and the torch module's forward pass (one torch
thread) with the shipped weights on the library's small rounds and its two 1,024 x 4,000 rounds
(best of 5, resp. 3, repetitions per round; medians over rounds). Needs the ``train`` extra.

    python benchmarks/bench_inference.py
"""

from __future__ import annotations

import glob
import os
import statistics
import time
from collections.abc import Callable

import torch

from optsched import load_instance
from optsched.learned.decode import Scores, scores_of
from optsched.learned.features import RoundFeatures, featurise
from optsched.learned.inference import DEFAULT_WEIGHTS, load_npz
from optsched.learned.policy import PolicyNet, collate


def _best(fn: Callable[[RoundFeatures], Scores], f: RoundFeatures, reps: int) -> float:
    fn(f)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(f)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    torch.set_num_threads(1)
    numpy_net = load_npz(DEFAULT_WEIGHTS)
    net = PolicyNet.from_weights(numpy_net).eval()

    def with_torch(f: RoundFeatures) -> Scores:
        with torch.inference_mode():
            return scores_of(net(collate([f])), 0, f)

    sets = {"small": (sorted(glob.glob("instances/small/*.json")), 5),
            "1,024 x 4,000": (sorted(glob.glob("instances/large/l-1024n-4000j-*.json.gz")), 3)}
    for label, (paths, reps) in sets.items():
        feats = [featurise(load_instance(p)) for p in paths]
        for name, fn in (("numpy", numpy_net.scores), ("torch", with_torch)):
            ts = [_best(fn, f, reps) for f in feats]
            print(f"{label} ({len(feats)} rounds) {name}: median {1000 * statistics.median(ts):.1f} ms, max {1000 * max(ts):.1f} ms")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
