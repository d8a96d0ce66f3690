"""The Ray backend gives the same results as the local process pool (skipped without Ray).

One local Ray instance (2 CPUs) serves the whole module. Each test runs the same work on both
backends and compares the outcomes, ignoring only wall-clock columns.
"""

from __future__ import annotations

import operator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from optsched.bench.runner import COLUMNS, BenchTask, read_rows, run_bench  # noqa: E402
from optsched.errors import InputError  # noqa: E402
from optsched.parallel import LocalPool, get_backend  # noqa: E402
from optsched.parallel.ray_backend import RayBackend  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TINY = sorted((REPO / "instances" / "tiny").glob("*.json"))
#: columns that measure wall-clock time (everything else must match exactly)
TIMED = {"time_s", "time_to_1pct", "primal_integral"}


@pytest.fixture(scope="module")
def local_ray():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


def _table(path: Path) -> list[dict[str, str]]:
    rows = [{k: v for k, v in r.items() if k not in TIMED} for r in read_rows(path)]
    return sorted(rows, key=lambda r: (r["instance"], r["solver"], r["seed"]))


def test_imap_unordered_yields_every_result_once(local_ray):
    """Every task's result comes back exactly once, with more tasks than slots in flight.
    (Task functions come from the standard library: Ray workers cannot import this test module.)"""
    out = list(RayBackend(workers=2).imap_unordered(operator.neg, range(20)))
    assert sorted(out) == [-x for x in reversed(range(20))]
    assert list(RayBackend(workers=2).imap_unordered(operator.neg, [])) == []


def test_a_failing_task_raises_its_own_exception_type(local_ray):
    """As with the process pool, a task's exception reaches the caller as the same type."""
    tasks = ["1", "2", "three", "4"]
    with pytest.raises(ValueError, match="three"):
        list(RayBackend(workers=2).imap_unordered(int, tasks))
    with pytest.raises(ValueError, match="three"):
        list(LocalPool(2).imap_unordered(int, tasks))


def test_get_backend_names_ray(local_ray):
    be = get_backend("ray", workers=2)
    assert isinstance(be, RayBackend) and be.workers == 2
    with pytest.raises(InputError):
        RayBackend(workers=0)


def test_bench_sweep_gives_identical_tables(local_ray, tmp_path):
    """The issue's acceptance test in small: one sweep, local pool vs Ray, identical tables."""
    assert len(TINY) >= 8
    tasks = [BenchTask(str(f), s, 0, 2.0) for f in TINY for s in ("fixed-demand", "fungible-greedy")]
    run_bench(tasks, tmp_path / "local.csv", backend="local", workers=2, progress=False)
    run_bench(tasks, tmp_path / "ray.csv", backend="ray", workers=2, progress=False)
    local, remote = _table(tmp_path / "local.csv"), _table(tmp_path / "ray.csv")
    assert len(local) == len(tasks) and all(r["error"] == "" and r["feasible"] == "1" for r in local)
    assert local == remote
    assert set(read_rows(tmp_path / "ray.csv")[0]) == set(COLUMNS)
    # resuming on Ray skips every finished run
    assert run_bench(tasks, tmp_path / "ray.csv", backend="ray", workers=2, progress=False) == []


def test_bench_verb_takes_backend_ray(local_ray, tmp_path, capsys):
    from optsched.cli import main

    out = tmp_path / "r.csv"
    rc = main(["bench", *map(str, TINY[:3]), "--solvers", "fixed-demand", "--time-limit", "1", "--backend", "ray",
               "--workers", "2", "-o", str(out), "--no-progress"])
    assert rc == 0 and len(read_rows(out)) == 3
    assert main(["bench", str(TINY[0]), "--address", "auto", "-o", str(out), "--no-progress"]) == 2


def test_labelling_on_ray_writes_the_same_cache(local_ray, tmp_path):
    """Training labels solved on Ray equal those solved locally (and land in the local cache)."""
    from optsched.io import load_instance
    from optsched.learned.labels import label_rounds

    rounds = [load_instance(f) for f in TINY[:4]]
    kw = dict(solver="fungible-greedy", time_limit=2.0, workers=2, progress=False)
    local = label_rounds(rounds, tmp_path / "local", **kw)
    remote = label_rounds(rounds, tmp_path / "ray", backend="ray", **kw)
    assert [(lab.schedule, lab.objective, lab.status) for lab in local] == [(lab.schedule, lab.objective, lab.status) for lab in remote]
    assert sorted(p.name for p in (tmp_path / "local").iterdir()) == sorted(p.name for p in (tmp_path / "ray").iterdir())


def test_simulation_grid_on_ray_matches_serial(local_ray):
    """A policy x allocator grid simulated on Ray gives the same per-job outcomes as in-process."""
    import numpy as np

    from optsched.sim import cluster
    from optsched.sim.config import SimConfig
    from optsched.sim.experiment import Setup, run_grid
    from optsched.sim.traces import Trace
    from optsched.sim.workload import build_workload

    nodes = cluster.homogeneous(2, gpus=4, cpus=32, mem_gb=256)
    rng = np.random.default_rng(0)
    n = 10
    tr = Trace.from_columns("t", {"job_id": [f"j{i}" for i in range(n)], "submit_s": np.sort(rng.uniform(0, 900, n)),
                                  "duration_s": rng.uniform(100, 800, n), "gpus": rng.choice([1, 2, 4], n)})
    setup = Setup("t", nodes, build_workload(tr, nodes, seed=0))
    pairs = [("las", "fixed-demand"), ("fifo", "fungible-greedy")]
    cfg = SimConfig(round_s=100, progress=False)
    serial = run_grid(setup, pairs, time_limit=1.0, config=cfg, backend="serial", progress=False)
    remote = run_grid(setup, pairs, time_limit=1.0, config=cfg, backend="ray", workers=2, progress=False)
    assert list(serial) == list(remote) == pairs
    for pa in pairs:
        for col in ("finish_s", "start_s", "preemptions", "moves"):
            np.testing.assert_array_equal(serial[pa].jobs[col], remote[pa].jobs[col])
