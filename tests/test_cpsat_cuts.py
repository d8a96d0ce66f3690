"""Valid inequalities of the CP-SAT round model: lifted node rows cut no feasible node load, and
the model with them (or with the split-job rows) keeps the brute-force optimum."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from optsched.checker import check_schedule
from optsched.exact.constraints import lifted_coefficients
from optsched.exact.cpsat import CpSatSolver
from optsched.model import Instance, Job, Node, Profile, Round
from optsched.result import Status

sys.path.insert(0, str(Path(__file__).parent))
from bruteforce import brute_force, search_size  # noqa: E402
from strategies import tiny_instances  # noqa: E402


def _loads(items: list[tuple[int, int]], gpus: int, cap: int, counts: tuple[int, ...] = ()):
    """Every vector of item counts whose GPUs and cores fit the node (small: enumerated)."""
    i = len(counts)
    if i == len(items):
        yield counts
        return
    g, k = items[i]
    used_g = sum(c * items[t][0] for t, c in enumerate(counts))
    used_k = sum(c * items[t][1] for t, c in enumerate(counts))
    n = 0
    while used_g + n * g <= gpus and used_k + n * k <= cap:
        yield from _loads(items, gpus, cap, (*counts, n))
        n += 1


@settings(max_examples=200, deadline=None)
@given(gpus=st.integers(1, 8), cap=st.integers(1, 48),
       items=st.lists(st.tuples(st.integers(1, 8), st.integers(0, 24)), min_size=1, max_size=4))
def test_lifted_coefficients_cut_no_feasible_load(gpus, cap, items):
    """Every integer node load within GPUs and cores satisfies the lifted core row."""
    items = [(g, g * c) for g, c in items]  # (GPUs, cores) of one unit: c cores per GPU
    coefs = lifted_coefficients(gpus, cap, items)
    assert all(a >= k for a, (_g, k) in zip(coefs, items, strict=True))  # never weaker than the plain row
    for counts in _loads(items, gpus, cap):
        assert sum(a * n for a, n in zip(coefs, counts, strict=True)) <= cap, (counts, coefs)


def test_lifted_coefficients_lift_gpu_heavy_items():
    """An 8-GPU job with 1 core per GPU on an 8-GPU, 48-core node strands the other 40 cores."""
    assert lifted_coefficients(8, 48, [(8, 8), (1, 24), (1, 1)]) == [48, 24, 1]
    # if no unit can use more than 5 cores per GPU, the 48-core row never binds: unchanged
    assert lifted_coefficients(8, 48, [(8, 8), (1, 5)]) == [8, 5]


def test_lifted_rows_change_nothing_on_a_gpu_heavy_round():
    """Two nodes; a GPU-heavy 8-GPU job and CPU-hungry 1-GPU jobs: same optimum with and without."""
    lang = Profile((1,), (20,), ((1.0,),))
    hungry = Profile((1, 6, 24), (20, 60), ((0.2, 0.3), (1.0, 1.1), (2.0, 2.5)))
    nodes = [Node("n0", "V100", 8, 48, 500), Node("n1", "V100", 8, 48, 500)]
    jobs = [Job("big", 8, lang, (1, 20), weight=3.0)] + [Job(f"h{i}", 1, hungry, (6, 20)) for i in range(5)]
    inst = Instance("lift", tuple(nodes), tuple(jobs), Round(300.0, False))
    a = CpSatSolver().solve(inst, time_limit=5.0, seed=0, num_workers=1)
    b = CpSatSolver().solve(inst, time_limit=5.0, seed=0, num_workers=1, lifted_rows=True)
    assert a.status is Status.OPTIMAL and b.status is Status.OPTIMAL
    assert b.objective == pytest.approx(a.objective, rel=1e-9)
    assert list(check_schedule(inst, b.schedule)) == []


@pytest.mark.parametrize("opts", [{"lifted_rows": True}, {"split_cuts": True}], ids=["lifted", "split"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_instances())
def test_cuts_keep_the_brute_force_optimum(opts, inst):
    assume(search_size(inst) <= 20000)
    res = CpSatSolver().solve(inst, time_limit=2.0, seed=0, num_workers=1, **opts)
    assert list(check_schedule(inst, res.schedule)) == []
    best, _ = brute_force(inst)
    assert res.objective <= best + 1e-6
    if res.status is Status.OPTIMAL:
        assert res.objective == pytest.approx(best, rel=1e-6, abs=1e-9)


def test_split_cuts_keep_split_optima():
    """Split jobs over 2 and 3 nodes, one of them running split with a restart cost: same optimum
    with and without the split rows."""
    flat = Profile((1, 2), (10,), ((1.0,), (1.2,)))
    nodes = [Node(f"n{i}", "V100", 4, 8, 100) for i in range(4)]
    jobs = [Job("a", 6, flat, (1, 10), spread_factor=0.9), Job("b", 8, flat, (1, 10), spread_factor=0.8),
            Job("c", 4, flat, (1, 10), spread_factor=0.7, placement={"n2": 2, "n3": 2}, restart_s=100),
            Job("d", 1, flat, (1, 10), weight=0.5)]
    inst = Instance("split", tuple(nodes), tuple(jobs), Round(300.0, False))
    a = CpSatSolver().solve(inst, time_limit=5.0, seed=0, num_workers=1, split_cuts=False)
    b = CpSatSolver().solve(inst, time_limit=5.0, seed=0, num_workers=1, split_cuts=True)
    assert a.status is Status.OPTIMAL and b.status is Status.OPTIMAL
    assert b.objective == pytest.approx(a.objective, rel=1e-9)
    assert list(check_schedule(inst, b.schedule)) == []
