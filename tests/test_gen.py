"""The instance generator: validity, determinism, options, running placements, size classes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import catalogue
from optsched.checker import check_schedule
from optsched.errors import InputError
from optsched.gen import PHILLY_JOB_SIZES, SIZE_CLASSES, generate, generate_suite
from optsched.io import load_instance
from optsched.limits import MAX_COUNT, MAX_GEN_COUNT
from optsched.model import Instance
from optsched.schedule import Assignment, Schedule

REPO = Path(__file__).parents[1]


def running_schedule(inst: Instance) -> Schedule:
    """The schedule that keeps every running job where it is, at its demand."""
    return Schedule(inst.name, {j.id: Assignment(dict(j.placement), *j.demand) for j in inst.jobs if j.running})


def test_default_small_round():
    """generate(8, 32, seed=1): 8 servers of 8 V100s, 48 cores, 500 GB; 32 catalogue jobs."""
    inst = generate(8, 32, seed=1)
    assert inst.size == (8, 32)
    assert {(n.gpu_type, n.gpus, n.cpus, n.mem_gb) for n in inst.nodes} == {("V100", 8, 48, 500)}
    assert all(j.model in catalogue.MODELS and j.demand == catalogue.FAIR_SHARE for j in inst.jobs)
    assert all(j.gpu_speed is None and not j.running for j in inst.jobs)
    assert not inst.round.fair and inst.round.duration_s == 300
    assert Instance.from_dict(inst.to_dict()).to_dict() == inst.to_dict()


def test_deterministic_by_seed():
    kw = dict(gpu_types={"V100": 1, "K80": 1}, running_fraction=0.4, restrict_fraction=0.3, tightness=1.3)
    assert generate(6, 20, seed=5, **kw).to_dict() == generate(6, 20, seed=5, **kw).to_dict()
    assert generate(6, 20, seed=5, **kw).to_dict()["jobs"] != generate(6, 20, seed=6, **kw).to_dict()["jobs"]


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(1, 16), jobs=st.integers(1, 64), tightness=st.floats(0.2, 3.0), seed=st.integers(0, 10**6))
def test_tightness_hit(nodes, jobs, tightness, seed):
    """With a job count and a tightness, the GPUs demanded are as close to round(tightness x
    capacity) as that many jobs of the mix's sizes can get (exactly, unless e.g. one job must
    demand 6 GPUs)."""
    capacity = 8 * nodes
    target = max(1, round(tightness * capacity))
    max_size = max(s for s in PHILLY_JOB_SIZES if s <= capacity)
    if not jobs <= target <= jobs * max_size:
        with pytest.raises(InputError, match="tightness"):
            generate(nodes, jobs, seed=seed, tightness=tightness)
        return
    inst = generate(nodes, jobs, seed=seed, tightness=tightness)
    assert len(inst.jobs) == jobs
    sizes = [s for s in PHILLY_JOB_SIZES if s <= capacity]
    reachable = {0}
    for _ in range(jobs):
        reachable = {r + s for r in reachable for s in sizes}
    best = min(abs(r - target) for r in reachable)
    assert abs(sum(j.gpus for j in inst.jobs) - target) == best


@pytest.mark.parametrize("tightness", [0.5, 1.0, 1.5, 2.5])
def test_tightness_without_job_count(tightness):
    inst = generate(8, None, seed=3, tightness=tightness)
    assert abs(sum(j.gpus for j in inst.jobs) - tightness * 64) <= 8


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.integers(1, 12),
    jobs=st.integers(0, 48),
    frac=st.floats(0.0, 1.0),
    types=st.sampled_from([("V100",), ("V100", "K80"), {"A100": 1, "V100": 2, "P100": 1}]),
    fair=st.booleans(),
    seed=st.integers(0, 10**6),
)
def test_running_placements_feasible(nodes, jobs, frac, types, fair, seed):
    """Running jobs get a placement that, read as a schedule at demand, passes the checker, and
    as many run as asked unless the cluster is full at demand."""
    inst = generate(nodes, jobs, seed=seed, running_fraction=frac, gpu_types=types, fair=fair, restrict_fraction=0.3)
    running = [j for j in inst.jobs if j.running]
    report = check_schedule(inst, running_schedule(inst))
    assert report.feasible, list(report)
    assert len(running) <= round(frac * jobs)
    for j in running:
        assert 30 <= j.restart_s <= 180 and j.restart_s == int(j.restart_s)
        assert report.objective > 0
    if len(running) < round(frac * jobs):  # someone did not fit: at least one GPU type is nearly full at demand
        used = Counter()
        for j in running:
            for n, k in j.placement.items():
                used[n] += k
        assert any(inst.node(n).gpus - used[n] < 8 for n in (nd.id for nd in inst.nodes))


def test_heterogeneous_cluster_and_restrictions():
    inst = generate(9, 60, seed=2, gpu_types={"V100": 2, "K80": 1}, restrict_fraction=0.5)
    assert Counter(n.gpu_type for n in inst.nodes) == {"V100": 6, "K80": 3}
    restricted = [j for j in inst.jobs if len(j.gpu_speed) == 1]
    assert 15 <= len(restricted) <= 45
    for j in inst.jobs:
        assert j.gpu_speed == catalogue.gpu_speeds(j.model, list(j.gpu_speed))
        total = sum(n.gpus for n in inst.nodes if n.gpu_type in j.gpu_speed)
        assert total >= j.gpus
    assert generate(4, 8, gpu_types=["A100"]).jobs[0].gpu_speed is not None  # A100 speed != 1


def test_job_sizes_fit_the_cluster():
    """Gangs larger than the largest GPU type are dropped from the mix."""
    inst = generate(1, 200, seed=0)
    assert max(j.gpus for j in inst.jobs) <= 8
    inst = generate(3, 50, seed=0, job_sizes={2: 1, 32: 1})
    assert {j.gpus for j in inst.jobs} == {2}


def test_attribute_ranges_and_options():
    inst = generate(8, 64, seed=4, spread_factor=(0.8, 0.95), weights=(0.5, 2.0), grid="coarse", fair=True,
                    duration_s=600, mix={"image": 1})
    assert inst.round.fair and inst.round.duration_s == 600
    for j in inst.jobs:
        assert 0.5 <= j.weight <= 2.0
        assert (0.8 <= j.spread_factor <= 0.95) if j.gpus > 1 else j.spread_factor == 1.0
        assert j.profile.cpus_per_gpu == catalogue.CPU_GRIDS["coarse"]
        assert catalogue.MODELS[j.model].family == "image"
    fixed = generate(2, 5, seed=1, weights=1.0, spread_factor=0.9)
    assert all(j.weight == 1.0 for j in fixed.jobs)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(nodes=0, jobs=3), "nodes"),
        (dict(nodes=2, jobs=-1), "jobs"),
        (dict(nodes=2, jobs=None), "jobs"),
        (dict(nodes=2, jobs=3, tightness=-1.0), "tightness"),
        (dict(nodes=2, jobs=3, running_fraction=1.5), "running_fraction"),
        (dict(nodes=2, jobs=3, gpu_types=["V100", "Volta"]), "gpu_types"),
        (dict(nodes=2, jobs=3, grid="fine"), "grid"),
        (dict(nodes=2, jobs=3, spread_factor=(0.9, 1.2)), "spread_factor"),
        (dict(nodes=2, jobs=3, weights=(2.0, 1.0)), "weights"),
        (dict(nodes=2, jobs=3, job_sizes={0: 1.0}), "job_sizes"),
        (dict(nodes=2, jobs=3, job_sizes={64: 1.0}), "job_sizes"),
        (dict(nodes=2, jobs=3, seed=-2), "seed"),
        (dict(nodes=2, jobs=3, mix={"resnet9": 1}), "mix"),
        # sizes beyond optsched.limits, refused before anything is built
        (dict(nodes=100_001, jobs=3), "nodes"),
        (dict(nodes=2, jobs=500_001), "jobs"),
        (dict(nodes=2, jobs=None, tightness=1e9), "tightness"),
        (dict(nodes=2, jobs=None, tightness=1e308), "tightness"),
        (dict(nodes=2, jobs=3, gpus_per_node=1_000_001), "gpus_per_node"),
        (dict(nodes=2, jobs=3, cpus_per_node=1_000_001), "cpus_per_node"),
        (dict(nodes=2, jobs=3, mem_per_node_gb=1_000_001), "mem_per_node_gb"),
        (dict(nodes=3, jobs=3, gpus_per_node=1_000_000, job_sizes={2_000_000: 1.0}), "job_sizes.2000000"),
        (dict(nodes=2, jobs=3, weights=(1.0, 1e7)), "weights"),
        (dict(nodes=2, jobs=3, duration_s=1e10), "duration_s"),
    ],
)
def test_bad_options_raise(kwargs, field):
    nodes, jobs = kwargs.pop("nodes"), kwargs.pop("jobs")
    with pytest.raises(InputError) as e:
        generate(nodes, jobs, **kwargs)
    assert e.value.field.startswith(field)


def test_generated_rounds_at_the_count_limit_are_read_back():
    """What gen writes, solve reads: per-node counts up to MAX_COUNT pass the reader's range check."""
    inst = generate(2, 3, gpus_per_node=MAX_COUNT, cpus_per_node=MAX_COUNT, mem_per_node_gb=MAX_COUNT)
    back = Instance.from_dict(inst.to_dict())
    assert {n.gpus for n in back.nodes} == {MAX_COUNT}
    with pytest.raises(InputError, match="count") as e:
        generate_suite("tiny", MAX_GEN_COUNT + 1)
    assert e.value.field == "count"


def test_size_classes():
    for name in ("tiny", "small", "medium"):
        suite = generate_suite(name, 2, seed=0)
        sc = SIZE_CLASSES[name]
        assert len(suite) == 2 * len(sc.shapes)
        assert [i.name for i in suite][:2] == [f"{sc.prefix}-{sc.shapes[0][0]}n-{sc.shapes[0][1]}j-0{k}" for k in (1, 2)]
        for inst in suite:
            capacity = sum(n.gpus for n in inst.nodes)
            assert sum(j.gpus for j in inst.jobs) == round(1.25 * capacity)
    large = generate_suite("large")[-1]
    assert large.size == (1024, 4000)
    with pytest.raises(InputError, match="size_class"):
        generate_suite("enormous")


@pytest.mark.parametrize("path", sorted((REPO / "instances").glob("*/*.json")), ids=lambda p: p.name)
def test_bundled_instances_valid(path):
    """Every bundled example loads and its running jobs' placements are feasible."""
    inst = load_instance(path)
    assert inst.name == path.name.removesuffix(".json")
    if path.parent.name == "traces":
        # snapshots of a fungible replay: running jobs hold less than their (Alibaba) request,
        # so only their leanest grid point is sure to fit where they are
        lean = {j.id: Assignment(dict(j.placement), j.profile.cpus_per_gpu[0], j.profile.mem_per_gpu_gb[0])
                for j in inst.jobs if j.running}
        assert check_schedule(inst, Schedule(inst.name, lean)).feasible
    else:
        assert check_schedule(inst, running_schedule(inst)).feasible


def test_bundled_instances_reproducible():
    """The bundled suite files are exactly what the generator makes now (regenerate them with the
    commands in instances/README.md when the generator or the catalogue changes)."""
    for name, folder in (("tiny", "tiny"), ("small", "small")):
        for inst in generate_suite(name, 2 if name == "tiny" else 1):
            assert load_instance(REPO / "instances" / folder / f"{inst.name}.json").to_dict() == inst.to_dict()
    assert (REPO / "instances" / "small" / "s-4n-12j-01.json").exists()
