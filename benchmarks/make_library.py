"""Build the benchmark instance library under instances/ (deterministic; safe to re-run).

    python benchmarks/make_library.py            # generated classes (tiny ... huge)
    python benchmarks/make_library.py --traces   # + rounds taken from trace replays (needs ../shared/traces)

Generated classes come from :func:`optsched.gen.generate` with fixed seeds: homogeneous and
heterogeneous clusters, fair and unfair rounds, rounds with running jobs. Trace-derived rounds
are snapshots of a replay (Philly, Alibaba v2023) on a 16-node cluster under LAS with the
fungible-greedy allocator: the busiest round (most jobs offered) within the window is kept, so
its job-size mix, arrival bursts, running jobs and (for Alibaba) CPU/memory requests as fixed
demands come from the trace. Large and huge rounds are written gzip-compressed.
The index (instances/index.csv) is then filled from solver runs:

    optsched bench instances --solvers cpsat,lns,fungible-greedy,fixed-demand --time-limit 10 \
        --index instances/index.csv --update-index -o benchmarks/results/library.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

from optsched.gen import generate
from optsched.io import save_instance
from optsched.model import Instance

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "instances"
SHARED = ROOT.parent / "shared" / "traces"

#: (class, name, nodes, jobs, seed, generator options); bundled examples in tiny/ and small/ stay as they are
SPECS: list[tuple[str, str, int, int, int, dict]] = [
    ("tiny", "t-4n-8j-het-01", 4, 8, 31, {"gpus_per_node": 4, "cpus_per_node": 24, "mem_per_node_gb": 250, "grid": "minimal", "tightness": 1.25, "gpu_types": {"V100": 1, "K80": 1}, "restrict_fraction": 0.3}),
    ("tiny", "t-4n-8j-fair-run-01", 4, 8, 32, {"gpus_per_node": 4, "cpus_per_node": 24, "mem_per_node_gb": 250, "grid": "coarse", "tightness": 1.25, "fair": True, "running_fraction": 0.5}),
    ("small", "s-6n-24j-het-01", 6, 24, 41, {"tightness": 1.25, "gpu_types": {"V100": 1, "P100": 1}}),
    ("small", "s-8n-32j-fair-01", 8, 32, 42, {"tightness": 1.25, "fair": True}),
    ("small", "s-8n-32j-run-01", 8, 32, 43, {"tightness": 1.25, "running_fraction": 0.4}),
    ("small", "s-8n-24j-coarse-01", 8, 24, 44, {"tightness": 1.5, "grid": "coarse"}),
    ("medium", "m-32n-120j-01", 32, 120, 51, {"tightness": 1.25}),
    ("medium", "m-32n-160j-het-01", 32, 160, 52, {"tightness": 1.25, "gpu_types": {"V100": 2, "P100": 1, "K80": 1}, "restrict_fraction": 0.2}),
    ("medium", "m-48n-200j-run-01", 48, 200, 53, {"tightness": 1.25, "running_fraction": 0.3}),
    ("medium", "m-64n-256j-01", 64, 256, 54, {"tightness": 1.25}),
    ("medium", "m-64n-256j-fair-01", 64, 256, 55, {"tightness": 1.25, "fair": True}),
    ("large", "l-256n-1000j-01", 256, 1000, 61, {"grid": "coarse", "tightness": 1.25}),
    ("large", "l-1024n-4000j-01", 1024, 4000, 62, {"grid": "coarse", "tightness": 1.25}),
    ("large", "l-1024n-4000j-het-run-01", 1024, 4000, 63, {"grid": "coarse", "tightness": 1.25, "gpu_types": {"V100": 2, "P100": 1, "K80": 1}, "running_fraction": 0.3}),
    ("huge", "h-2048n-8000j-01", 2048, 8000, 71, {"grid": "coarse", "tightness": 1.25}),
]

#: (name, trace file relative to ../shared/traces, format, replay options)
TRACE_SPECS = [
    ("tr-philly-16n-01", "philly-pollux/philly.csv", "philly", {"start": "30d", "length": "1d", "target_load": 1.5}),
    ("tr-alibaba-16n-01", "alibaba-gpu-v2023/openb_pod_list_default.csv", "alibaba", {"start": "130d", "length": "2d", "target_load": 1.5}),
]


def _suffix(cls: str) -> str:
    return ".json.gz" if cls in ("large", "huge") else ".json"


def build_generated(out: Path = OUT) -> list[Path]:
    written = []
    for cls, name, nodes, jobs, seed, opts in SPECS:
        path = out / cls / f"{name}{_suffix(cls)}"
        # the library is contract version 1: a gang pays its spread factor per node beyond one
        save_instance(generate(nodes, jobs, seed=seed, name=name, spread_from="one", **opts), path)
        written.append(path)
    return written


def build_trace_rounds(out: Path = OUT) -> list[Path]:
    """Replay each trace window and keep its busiest round as a library instance."""
    from dataclasses import replace

    from optsched.sim.config import SimConfig
    from optsched.sim.engine import simulate
    from optsched.sim.experiment import prepare
    from optsched.sim.policies import get_policy
    from optsched.sim.solving import SolveRoundAllocator

    written = []
    for name, rel, fmt, opts in TRACE_SPECS:
        setup = prepare(SHARED / rel, fmt=fmt, cluster="16x8", seed=0, **opts)
        inner = SolveRoundAllocator("fungible-greedy", time_limit=5.0)
        busiest: list[Instance] = []

        def record(instance: Instance, _inner=inner, _busiest=busiest):
            if not _busiest or len(instance.jobs) > len(_busiest[0].jobs):
                _busiest[:] = [instance]
            return _inner(instance)

        simulate(setup.workload, setup.nodes, get_policy("las"), record, SimConfig(progress=False, horizon_s=3 * 86400))
        inst = replace(busiest[0], name=name, round=replace(busiest[0].round, spread_from="one"))  # version 1, as the library
        path = out / "traces" / f"{name}.json"
        save_instance(inst, path)
        written.append(path)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", action="store_true", help="also derive rounds from ../shared/traces")
    args = ap.parse_args()
    for p in build_generated():
        print(p.relative_to(ROOT), p.stat().st_size)
    if args.traces:
        for p in build_trace_rounds():
            print(p.relative_to(ROOT), p.stat().st_size)


if __name__ == "__main__":
    main()
