"""The configuration-LP bound (optsched.mip.colgen): never below the optimum, whenever it stops.

Validity is checked against the brute-force optimum of random tiny rounds (tests/bruteforce.py,
written from the contract alone), with the column generation run to convergence and cut short
after one or two iterations (the Lagrangian bound must hold at any duals), and with the memory
and core rounding of the dynamic program forced on.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from optsched.exact.hint import greedy_schedule
from optsched.exact.prep import job_data
from optsched.mip import pricing
from optsched.mip.colgen import config_bound
from optsched.mip.pricing import TAIL, split_fraction, supported
from optsched.model import Instance, Job, Node, Profile, Round

sys.path.insert(0, str(Path(__file__).parent))
from bruteforce import brute_force, search_size  # noqa: E402
from strategies import tiny_instances, wide_gang_round  # noqa: E402


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_instances(), iterations=st.sampled_from([1, 2, 10_000]), warm=st.booleans())
def test_bound_is_at_least_the_brute_force_optimum(inst, iterations, warm):
    assume(search_size(inst) <= 20000)
    best, _ = brute_force(inst)
    res = config_bound(inst, time_limit=10.0, max_iterations=iterations, warm_start=warm,
                       schedules=[greedy_schedule(inst)])
    assert res.bound is not None
    assert res.bound >= best - 1e-7 * max(1.0, best), (res, best)
    if res.converged:
        assert res.lp is not None and res.lp <= res.bound + 1e-6


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_instances(max_nodes=3, max_jobs=4), units=st.sampled_from([2, 3, 5]))
def test_bound_stays_valid_when_sizes_are_rounded_to_units(inst, units):
    """Few units per node make the dynamic program round core and memory sizes down."""
    assume(search_size(inst) <= 20000)
    best, _ = brute_force(inst)
    old = pricing.MAX_UNITS
    pricing.MAX_UNITS = units
    try:
        res = config_bound(inst, time_limit=10.0)
    finally:
        pricing.MAX_UNITS = old
    assert res.bound is not None and res.bound >= best - 1e-7 * max(1.0, best)


def _partitions(g: int, parts: int, cap: int):
    """Every way to write g as an ordered sum of `parts` positive integers <= cap (small g only)."""
    for combo in itertools.product(range(1, cap + 1), repeat=parts):
        if sum(combo) == g:
            yield combo


@pytest.mark.parametrize("g", [2, 3, 4, 6, 8, 16])
@pytest.mark.parametrize("sigma", [0.3, 0.81, 0.95, 1.0])
@pytest.mark.parametrize("base", [1, 2, 3, 4])
def test_split_credits_cover_every_split(g, sigma, base):
    """The pieces of any split over K >= base nodes are credited at least the split's worth
    sigma^(K-base) (base: the node count the gang's spread is paid beyond, 1 counted from one node)."""
    for k_nodes in range(max(2, base), min(g, 5) + 1):
        kk = min(k_nodes, TAIL)
        for parts in _partitions(g, k_nodes, min(g - 1, 8)):
            credit = sum(split_fraction(k, g, kk, sigma, base) for k in parts)
            assert credit >= sigma ** (k_nodes - base) - 1e-12, (g, sigma, base, parts, credit)
    # the tail credit is tight for an even split (Jensen's equality case)
    if g % TAIL == 0:
        assert TAIL * split_fraction(g // TAIL, g, TAIL, sigma, base) == pytest.approx(sigma ** (TAIL - base))


def test_bound_sees_stranded_capacity():
    """Two 8-GPU, 48-core nodes; an 8-GPU job at 1 core/GPU strands 40 cores of its node. The LP
    relaxation of the exact model lends those cores to CPU-hungry 1-GPU jobs (14; the strengthened
    pooled LP charges the gang its whole node: 12.5); configurations cannot (optimum 11)."""
    from optsched.mip.bound import lp_bound

    lang = Profile((1,), (20,), ((1.0,),))
    hungry = Profile((6, 24), (20,), ((1.0,), (3.0,)))
    nodes = (Node("n0", "V100", 8, 48, 500), Node("n1", "V100", 8, 48, 500))
    jobs = (Job("big", 8, lang, (1, 20), weight=5.0, spread_factor=0.5),
            *(Job(f"h{i}", 1, hungry, (6, 20)) for i in range(3)))
    inst = Instance("stranded", nodes, jobs, Round(300.0, False))
    best, _ = brute_force(inst)
    res = config_bound(inst, time_limit=10.0)
    assert best == pytest.approx(11.0)
    assert lp_bound(inst, relaxation="full") == pytest.approx(14.0)
    assert lp_bound(inst) == pytest.approx(12.5)
    assert res.converged and best <= res.bound <= 11.5 + 1e-6


def test_unsupported_rounds():
    inst = Instance.from_dict({
        "version": 2, "name": "v2", "round": {"duration_s": 300, "fair": False, "max_moves": 1},
        "nodes": [{"id": "n0", "gpu_type": "A", "gpus": 2, "cpus": 4, "mem_gb": 8}],
        "jobs": [{"id": "j0", "gpus": 1, "profile": {"cpus_per_gpu": [1], "mem_per_gpu_gb": [4], "throughput": [[1.0]]},
                  "demand": {"cpus_per_gpu": 1, "mem_per_gpu_gb": 4}}]})
    assert not supported(inst)


def test_bound_is_tighter_than_the_lp_on_a_small_bench_round():
    """small/base 8 x 24 seed 0 (bench_core.py): LP 39.85, best schedule known 38.98."""
    from optsched.gen import SIZE_CLASSES, generate
    from optsched.mip.bound import lp_bound

    inst = generate(8, 24, seed=0, **SIZE_CLASSES["small"].options)
    res = config_bound(inst, time_limit=20.0)
    assert res.converged
    assert 38.98 <= res.bound < lp_bound(inst) - 0.5
    assert math.isclose(res.bound, res.lp, rel_tol=1e-4)


def test_bound_worker_returns_the_bound_from_a_child_process():
    """optsched.mip.bound_worker: the configuration bound computed in a child process, collected."""
    import time

    from optsched.mip.bound_worker import BoundWorker

    lang = Profile((1,), (20,), ((1.0,),))
    hungry = Profile((6, 24), (20,), ((1.0,), (3.0,)))
    nodes = (Node("n0", "V100", 8, 48, 500), Node("n1", "V100", 8, 48, 500))
    jobs = (Job("big", 8, lang, (1, 20), weight=5.0, spread_factor=0.5),
            *(Job(f"h{i}", 1, hungry, (6, 20)) for i in range(3)))
    inst = Instance("stranded", nodes, jobs, Round(300.0, False))
    assert BoundWorker.applies(inst)
    w = BoundWorker(inst, 20.0, [greedy_schedule(inst)])
    b = w.collect(wait_until=time.perf_counter() + 20.0)
    assert w.stats["bound_worker_done"] and w.stats["config_converged"]
    assert b == pytest.approx(11.5, rel=1e-6)
    # the final prices came too: they add up to the bound
    p = w.prices()
    assert p is not None and set(p.job) == {j.id for j in jobs} and set(p.node) == {"n0", "n1"}
    assert sum(p.job.values()) + sum(p.node.values()) == pytest.approx(b, rel=1e-6)


def test_lns_aims_with_the_prices_its_bound_worker_sends(monkeypatch):
    """lns reads its bound worker's prices as they come (here a stand-in worker holding a converged
    bound's prices), its schedule stays checked, and cpsat hands its worker to its lns stage."""
    from optsched.checker import check_schedule
    from optsched.gen import SIZE_CLASSES, generate
    from optsched.heuristics import lns as lns_mod
    from optsched.solve import solve_round

    inst = generate(16, 80, seed=2, **SIZE_CLASSES["medium"].options)

    class Worker:
        def __init__(self):
            self._prices = config_bound(inst, time_limit=10.0).prices

        def prices(self):
            return self._prices

    res = lns_mod.LargeNeighbourhoodSearch().solve(inst, time_limit=1.0, seed=0, bound=False, bound_worker=Worker())
    assert res.stats["price_updates"] == 1  # one object: read once
    assert check_schedule(inst, res.schedule) == []
    assert "price_updates" not in lns_mod.LargeNeighbourhoodSearch().solve(inst, time_limit=0.5, seed=0, bound=False).stats

    handed = []
    solve = lns_mod.LargeNeighbourhoodSearch.solve

    def recording(self, *args, **kwargs):
        handed.append(kwargs.get("bound_worker"))
        return solve(self, *args, **kwargs)

    monkeypatch.setattr(lns_mod.LargeNeighbourhoodSearch, "solve", recording)
    res = solve_round(inst, solver="cpsat", time_limit=3.0, seed=0)  # 1,280 cells: an lns stage and a worker
    assert len(handed) == 1 and handed[0] is not None and "lns_price_updates" in res.stats


def _record_workers(monkeypatch) -> list[str]:
    """Make every BoundWorker started from now on record its instance's name in the returned list."""
    from optsched.mip import bound_worker

    started: list[str] = []

    class Recording(bound_worker.BoundWorker):
        def __init__(self, *args, **kwargs):
            started.append(args[0].name)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(bound_worker, "BoundWorker", Recording)
    return started


def test_cpsat_without_the_bound_worker_starts_no_child_process(monkeypatch):
    """cpsat(bound_worker=False): neither cpsat nor its lns stage starts a bound worker; the LP bound is still reported."""
    from optsched.gen import SIZE_CLASSES, generate
    from optsched.mip import bound_worker
    from optsched.solve import solve_round

    started = _record_workers(monkeypatch)
    inst = generate(16, 80, seed=0, **SIZE_CLASSES["medium"].options)  # 1,280 cells: cpsat runs an lns stage
    assert bound_worker.BoundWorker.applies(inst)
    res = solve_round(inst, solver="cpsat", time_limit=4.0, seed=0, bound_worker=False)
    assert started == []
    assert res.bound is not None and res.bound >= res.objective - 1e-6


def test_lns_bound_option_is_checked():
    from optsched.errors import InputError
    from optsched.heuristics.lns import LargeNeighbourhoodSearch

    inst = Instance("one", (Node("n0", "V100", 1, 4, 20),), (Job("j", 1, Profile((1,), (20,), ((1.0,),)), (1, 20)),), Round(300.0, False))
    with pytest.raises(InputError) as e:
        LargeNeighbourhoodSearch().solve(inst, time_limit=1.0, seed=0, bound="config")
    assert e.value.field == "options.bound"
    assert LargeNeighbourhoodSearch().solve(inst, time_limit=1.0, seed=0, bound="lp").bound is not None


def test_a_bound_worker_started_early_is_used_and_stopped_by_cpsat(monkeypatch):
    """cpsat.start_bound_worker: a caller (cpsat+maifs) starts the worker before its own hint;
    cpsat then starts none of its own, reports the worker's bound and stops the child."""
    import time

    from optsched.exact.cpsat import start_bound_worker
    from optsched.gen import SIZE_CLASSES, generate
    from optsched.mip import bound_worker
    from optsched.solve import solve_round

    inst = generate(16, 80, seed=1, **SIZE_CLASSES["medium"].options)  # 1,280 cells: an lns stage
    early = start_bound_worker(inst, 6.0)
    assert isinstance(early, bound_worker.BoundWorker)
    started = _record_workers(monkeypatch)
    time.sleep(0.5)  # the caller's own work
    res = solve_round(inst, solver="cpsat", time_limit=5.5, seed=0, bound_worker=early)
    assert started == []
    assert early._proc.poll() is not None  # collected: the child is gone
    assert "bound_worker_done" in res.stats and res.stats["lp_bound"] is not None
    assert res.bound is not None and res.objective - 1e-6 <= res.bound <= res.stats["lp_bound"] + 1e-6


def test_start_bound_worker_only_where_cpsat_would_start_one():
    from optsched.errors import InputError
    from optsched.exact.cpsat import start_bound_worker
    from optsched.gen import SIZE_CLASSES, generate
    from optsched.solve import solve_round

    small = generate(4, 12, seed=0, **SIZE_CLASSES["small"].options)  # no lns stage
    assert start_bound_worker(small, 10.0) is None
    medium = generate(16, 80, seed=1, **SIZE_CLASSES["medium"].options)
    assert start_bound_worker(medium, 1.0) is None  # too little time for the configuration LP
    with pytest.raises(InputError) as e:
        solve_round(small, solver="cpsat", time_limit=1.0, seed=0, bound_worker="yes")
    assert e.value.field == "options.bound_worker"


def test_bound_counts_a_gang_that_needs_more_than_tail_nodes():
    """A gang whose fewest nodes exceed ``TAIL`` has pieces declared as a split over ``TAIL`` or
    more nodes (it had none: the bound left it out and fell below the optimum, which ran it)."""
    inst = wide_gang_round()
    assert inst.spread_base("A", 10) == 5 > TAIL
    best, sched = brute_force(inst)
    assert "gang" in sched
    data = job_data(inst)
    cls = pricing.node_groups(inst, data)[0].cls
    gang = pricing.class_pieces(inst, data, cls)[0]
    assert gang and {pc.nodes for pc in gang} == {TAIL} and {pc.gpus for pc in gang} == {1, 2}
    res = config_bound(inst, time_limit=10.0)
    assert res.bound >= best - 1e-7 * max(1.0, best)
