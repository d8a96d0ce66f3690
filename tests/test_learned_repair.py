"""The price-guided repair (``optsched.learned.repair``): always feasible, never worse than its base."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from bruteforce import brute_force
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_learned_policy import random_round

from optsched import Instance, Job, Node, Profile, Round, check_schedule, solve_round
from optsched.errors import InputError
from optsched.gen import generate
from optsched.learned.curriculum import shapes_round, unfamiliar_round
from optsched.learned.decode import PlacementState, Scores, decode_state, scores_of, state_schedule
from optsched.learned.exchange import swap_nodes
from optsched.learned.features import RoundFeatures, featurise
from optsched.learned.moves import (
    move_to_faster,
    node_knapsack,
    polish,
    relocate,
    repoint_nodes,
    squeeze_gangs,
    squeeze_in,
    upgrade_points,
)
from optsched.learned.policy import PolicyNet, collate
from optsched.learned.prices import _dual, option_table, resource_prices
from optsched.learned.repack import price_repack
from optsched.learned.repair import first_decodes, improve, state_value
from optsched.learned.solver import LearnedSolver
from optsched.values import schedule_value


@pytest.fixture(scope="module")
def net() -> PolicyNet:
    torch.manual_seed(2)
    return PolicyNet(d_model=16, heads=2, layers=1, d_point=8).eval()


def _base(net: PolicyNet, inst: Instance) -> tuple:
    f = featurise(inst)
    with torch.no_grad():
        out = net(collate([f]))
    return f, decode_state(inst, f, scores_of(out, 0, f))


def _round(seed: int, n_nodes: int, n_jobs: int, kind: int, fair: bool) -> Instance:
    if kind == 0:
        return random_round(seed, n_nodes, n_jobs, fair=fair)
    # generator rounds: memory-bound 8-GPU servers, whole-node gangs, several types, running jobs
    opts: dict = {"grid": "coarse", "tightness": 1.25, "fair": fair}
    if kind == 2:
        opts.update(gpu_types={"V100": 2, "P100": 1, "K80": 1}, running_fraction=0.3)
    return generate(n_nodes, max(n_jobs, 1), seed=seed, **opts)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    n_nodes=st.integers(1, 8),
    n_jobs=st.integers(0, 30),
    kind=st.integers(0, 2),
    fair=st.booleans(),
)
def test_repair_is_feasible_and_never_lowers_the_objective(net, seed, n_nodes, n_jobs, kind, fair) -> None:
    """On random rounds every repack passes the independent checker, its objective is what the
    checker computes, and improve() returns a state worth at least the decoded one."""
    try:
        inst = _round(seed, n_nodes, n_jobs, kind, fair)
    except InputError:  # a generator draw that cannot exist (e.g. more jobs than the GPUs allow)
        return
    f, base = _base(net, inst)
    base_v = state_value(inst, f, base)
    assert base_v == pytest.approx(schedule_value(inst, state_schedule(inst, f, base)))
    table = option_table(inst, f)
    lam, _ = resource_prices(table)
    for fill_to in (0.9, 1.0):
        st_ = price_repack(inst, f, table, lam, targets=dict(base.point), fill_to=fill_to)
        sched = state_schedule(inst, f, st_)
        report = check_schedule(inst, sched)
        assert report.feasible, list(report)
        assert report.objective == pytest.approx(state_value(inst, f, st_))
    stats: dict = {}
    won, v = improve(inst, f, base, stats=stats)
    assert v >= base_v - 1e-9
    assert v == pytest.approx(state_value(inst, f, won))
    assert check_schedule(inst, state_schedule(inst, f, won)).feasible
    assert stats["repair_used"] == (won is not base)


def test_prices_lower_the_dual() -> None:
    """The cutting-plane prices give a lower dual value than zero prices (the sum of every
    job's best worth) on a tight generator round, and the repack at them is feasible."""
    inst = generate(16, 64, seed=3, grid="coarse", tightness=1.25)
    f = featurise(inst)
    table = option_table(inst, f)
    zero, _ = _dual(table, np.zeros_like(table.cap))
    lam, d = resource_prices(table)
    assert d < 0.99 * zero
    assert (lam >= 0).all()
    st_ = price_repack(inst, f, table, lam)
    assert check_schedule(inst, state_schedule(inst, f, st_)).feasible


def _prof() -> Profile:
    # throughput grows with memory: 10 GB -> 1.0, 40 GB -> 1.5
    return Profile((1,), (10, 40), ((1.0, 1.5),))


def _point(f: RoundFeatures, mem_gb: int) -> int:
    """Index of the :func:`_prof` grid point with ``mem_gb`` GB a GPU (every job here has that profile)."""
    return int(np.flatnonzero((f.point_m[0] == mem_gb) & f.point_mask[0])[0])


def test_squeeze_admits_a_waiting_job_by_lowering_a_neighbour() -> None:
    """One 2-GPU node with 50 GB: job a runs at 40 GB; job b (1 GPU) waits. Moving a down to 10 GB
    (loses 0.5) lets b run at 40 GB (worth 1.5): squeeze_in does it."""
    prof = _prof()
    inst = Instance("sq", (Node("n", "V100", 2, 8, 50),), (Job("a", 1, prof, (1, 10)), Job("b", 1, prof, (1, 10))))
    f = featurise(inst)
    st_ = PlacementState(f)
    p40 = _point(f, 40)
    st_.place(0, {0: 1}, p40, 1, 40)
    before = state_value(inst, f, st_)
    assert squeeze_in(inst, f, st_) == 1
    sched = state_schedule(inst, f, st_)
    assert check_schedule(inst, sched).feasible
    assert set(sched.jobs) == {"a", "b"}
    assert state_value(inst, f, st_) == pytest.approx(before + 1.0)  # 1.5 + 1.0 against 1.5


def test_upgrade_points_fills_a_node() -> None:
    """Jobs at their leanest point move up while their node has room (best gain per resource first)."""
    prof = _prof()
    inst = Instance("up", (Node("n", "V100", 2, 8, 60),), (Job("a", 1, prof, (1, 10)), Job("b", 1, prof, (1, 10))))
    f = featurise(inst)
    st_ = PlacementState(f)
    p10 = _point(f, 10)
    st_.place(0, {0: 1}, p10, 1, 10)
    st_.place(1, {0: 1}, p10, 1, 10)
    upgrade_points(inst, f, st_)
    assert sorted(int(f.point_m[j, st_.point[j]]) for j in (0, 1)) == [10, 40]  # 50 GB: only one fits at 40
    assert check_schedule(inst, state_schedule(inst, f, st_)).feasible


def test_running_jobs_stay_where_they_are() -> None:
    """A running job whose best priced option is its own type keeps its nodes (no restart)."""
    inst = generate(6, 20, seed=5, grid="coarse", tightness=1.0, running_fraction=0.5)
    f = featurise(inst)
    table = option_table(inst, f)
    lam, _ = resource_prices(table)
    st_ = price_repack(inst, f, table, lam)
    sched = state_schedule(inst, f, st_)
    running = [j for j in inst.jobs if j.placement is not None and j.id in sched.jobs]
    assert running
    assert all(dict(sched.jobs[j.id].nodes) == dict(j.placement) for j in running)


def test_solver_repair_option() -> None:
    """``repair`` is validated; with it on, the solver's result is at least the policy's."""
    inst = generate(8, 32, seed=7, grid="coarse", tightness=1.25)
    with pytest.raises(InputError):
        LearnedSolver().solve(inst, time_limit=5, seed=0, repair="yes")
    off = LearnedSolver().solve(inst, time_limit=5, seed=0, samples=0, repair=False)
    on = LearnedSolver().solve(inst, time_limit=5, seed=0, samples=0, repair=True)
    assert on.objective >= off.objective - 1e-9
    assert on.stats["repair_base_objective"] == pytest.approx(off.objective)
    assert check_schedule(inst, on.schedule).feasible


def test_solver_completes_a_hint_and_ignores_what_does_not_fit() -> None:
    """The policy decodes around a hint's jobs; a hint that oversubscribes a node is not trusted
    (only what fits is fixed), and the result stays feasible and at least the hint's worth."""
    from optsched import Assignment, Schedule

    inst = generate(4, 12, seed=11, grid="coarse", tightness=1.0, running_fraction=0.5)
    running = [j for j in inst.jobs if j.placement is not None]
    assert running
    keep = Schedule(inst.name, {j.id: Assignment(dict(j.placement), *j.demand) for j in running})
    assert check_schedule(inst, keep).feasible
    res = LearnedSolver().solve(inst, time_limit=5, seed=0, samples=0, hint=keep)
    assert check_schedule(inst, res.schedule).feasible
    assert res.objective >= schedule_value(inst, keep) - 1e-9
    # the same jobs twice over on one node: infeasible as a whole
    n0 = inst.nodes[0]
    bad = Schedule(inst.name, {j.id: Assignment({n0.id: j.gpus}, *j.demand) for j in inst.jobs if j.gpus <= n0.gpus})
    assert not check_schedule(inst, bad).feasible
    res = LearnedSolver().solve(inst, time_limit=5, seed=0, samples=0, repair=False, hint=bad)
    assert check_schedule(inst, res.schedule).feasible


def test_relocate_moves_a_job_to_a_faster_type_and_polish_never_lowers() -> None:
    """A job on a slow node moves to a free fast node (worth 2x there); polish keeps feasibility."""
    prof = _prof()
    inst = Instance("mv", (Node("slow", "K80", 1, 8, 50), Node("fast", "V100", 1, 8, 50)),
                    (Job("a", 1, prof, (1, 10), gpu_speed={"K80": 0.5, "V100": 1.0}),))
    f = featurise(inst)
    st_ = PlacementState(f)
    p10 = _point(f, 10)
    st_.place(0, {0: 1}, p10, 1, 10)
    assert relocate(inst, f, st_) == 1
    sched = state_schedule(inst, f, st_)
    assert dict(sched.jobs["a"].nodes) == {"fast": 1} and sched.jobs["a"].mem_per_gpu_gb == 40
    assert check_schedule(inst, sched).feasible


def test_swap_nodes_gives_the_fast_node_to_the_job_worth_more_there() -> None:
    """Job a (weight 1) holds the only fast node, job b (weight 4) the slow one; neither can move
    alone (both nodes are full), so relocate cannot help. Exchanging them raises the worth from
    1.5 + 4 x 1.5 x 0.5 = 4.5 to 4 x 1.5 + 1.5 x 0.5 = 6.75."""
    prof = _prof()
    speeds = {"K80": 0.5, "V100": 1.0}
    inst = Instance("swap", (Node("fast", "V100", 1, 8, 50), Node("slow", "K80", 1, 8, 50)),
                    (Job("a", 1, prof, (1, 10), weight=1.0, gpu_speed=speeds), Job("b", 1, prof, (1, 10), weight=4.0, gpu_speed=speeds)))
    f = featurise(inst)
    st_ = PlacementState(f)
    p40 = _point(f, 40)
    st_.place(0, {0: 1}, p40, 1, 40)
    st_.place(1, {1: 1}, p40, 1, 40)
    assert relocate(inst, f, st_) == 0
    assert _checked_step(swap_nodes, inst, f, st_) == 1
    sched = state_schedule(inst, f, st_)
    assert dict(sched.jobs["b"].nodes) == {"fast": 1} and dict(sched.jobs["a"].nodes) == {"slow": 1}
    assert state_value(inst, f, st_) == pytest.approx(4 * 1.5 + 0.5 * 1.5)
    assert swap_nodes(inst, f, st_) == 0  # nothing left to gain


def test_first_decodes_start_a_gang_the_decoder_reached_too_late() -> None:
    """Four one-GPU nodes: four small jobs decoded first fill them, and the 4-GPU gang (worth far
    more) waits. Decoding the gang first runs it over the four nodes."""
    prof = _prof()
    small = tuple(Job(f"s{i}", 1, prof, (1, 10), weight=0.25) for i in range(4))
    gang = Job("g", 4, prof, (1, 10), weight=3.0, spread_factor=0.95)
    inst = Instance("first", tuple(Node(f"n{i}", "V100", 1, 8, 50) for i in range(4)), (*small, gang), Round(spread_from="fewest"))
    f = featurise(inst)
    scores = Scores(admit=np.array([1.0, 1.0, 1.0, 1.0, 0.0]), node=np.zeros((5, 4)), point=np.zeros((5, f.point.shape[1])), fit=np.zeros(5))
    st_ = decode_state(inst, f, scores)
    assert 4 not in st_.where
    v0 = state_value(inst, f, st_)
    better = first_decodes(inst, f, scores, [4], v0)
    assert better is not None and 4 in better.where and state_value(inst, f, better) > v0
    report = check_schedule(inst, state_schedule(inst, f, better))
    assert report.feasible and report.objective == pytest.approx(state_value(inst, f, better))
    assert first_decodes(inst, f, scores, [4], state_value(inst, f, better)) is None  # only a better state is returned


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n_nodes=st.integers(1, 6), n_jobs=st.integers(0, 20))
def test_swap_nodes_is_feasible_and_monotone(net, seed, n_nodes, n_jobs) -> None:
    inst = random_round(seed, n_nodes, n_jobs)
    f, base = _base(net, inst)
    _checked_step(swap_nodes, inst, f, base)


@pytest.mark.parametrize("seed", range(12))
def test_swap_nodes_keeps_jobs_on_their_allowed_types(net, seed) -> None:
    """Rounds of several GPU types where half the jobs may use one type only: an exchange never
    puts a job on a type it may not use (the checker's rule 2)."""
    for inst in (unfamiliar_round(4, 12, seed=seed), shapes_round(3, 10, seed=seed)):
        f, base = _base(net, inst)
        polish(inst, f, base)
        _checked_step(swap_nodes, inst, f, base)


def test_the_best_sample_is_polished_too() -> None:
    """Where a sampled decode beats the repaired greedy one, the local moves run on it as well. On
    this round the best sample puts the heavier of two 2-GPU jobs on the slow T4 node and the
    lighter one on the A100 node; exchanging them (:func:`swap_nodes`) reaches the optimum."""
    inst = shapes_round(2, 6, seed=9_002_027)
    raw = LearnedSolver().solve(inst, time_limit=5, seed=0, repair=False)
    on = LearnedSolver().solve(inst, time_limit=5, seed=0)
    assert on.stats["source"] == "sample+polish"
    assert on.objective > raw.objective + 0.1
    opt = solve_round(inst, solver="cpsat", time_limit=10, num_workers=1)
    assert opt.status.value == "optimal" and on.objective == pytest.approx(opt.objective)
    assert check_schedule(inst, on.schedule).feasible


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n_nodes=st.integers(1, 6), n_jobs=st.integers(0, 20))
def test_polish_is_feasible_and_monotone(net, seed, n_nodes, n_jobs) -> None:
    """polish() on a decoded state of a random round only raises its worth and stays feasible."""
    inst = random_round(seed, n_nodes, n_jobs)
    f, base = _base(net, inst)
    v0 = state_value(inst, f, base)
    polish(inst, f, base)
    assert state_value(inst, f, base) >= v0 - 1e-9
    report = check_schedule(inst, state_schedule(inst, f, base))
    assert report.feasible, list(report)


def _optimal_schedule(inst: Instance, f, state, best: float):
    """The schedule of ``state``, checked: feasible under the checker, worth ``best`` (the brute-force
    optimum) and what state_value says."""
    sched = state_schedule(inst, f, state)
    report = check_schedule(inst, sched)
    assert report.feasible, list(report)
    assert report.objective == pytest.approx(best) == pytest.approx(state_value(inst, f, state))
    return sched


def _checked_step(step, inst: Instance, f, base) -> int:
    """Run ``step(inst, f, base)`` (a repair step changing ``base`` in place) and check the state it
    leaves: feasible under the checker, worth what state_value says, and not below the state before.
    Returns what the step returned."""
    v0 = state_value(inst, f, base)
    out = step(inst, f, base)
    report = check_schedule(inst, state_schedule(inst, f, base))
    assert report.feasible, list(report)
    assert report.objective == pytest.approx(state_value(inst, f, base))
    assert report.objective >= v0 - 1e-9
    return out


def test_node_knapsack_is_exact() -> None:
    """On 300 random small multiple-choice knapsacks it finds the enumerated optimum (and says
    ``None`` exactly when no choice fits), and its choices are worth what it reports."""
    import itertools

    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 5))
        vals = [rng.random(int(k)) for k in rng.integers(1, 5, n)]
        cs = [rng.integers(0, 6, v.size) for v in vals]
        ms = [rng.integers(0, 6, v.size) for v in vals]
        cap_c, cap_m = int(rng.integers(0, 15)), int(rng.integers(0, 15))
        fits = [sum(v[i] for v, i in zip(vals, ch, strict=True)) for ch in itertools.product(*(range(v.size) for v in vals))
                if sum(c[i] for c, i in zip(cs, ch, strict=True)) <= cap_c and sum(m[i] for m, i in zip(ms, ch, strict=True)) <= cap_m]
        res = node_knapsack(vals, cs, ms, cap_c, cap_m)
        if not fits:
            assert res is None
            continue
        assert res is not None and res[0] == pytest.approx(max(fits))
        assert sum(v[i] for v, i in zip(vals, res[1], strict=True)) == pytest.approx(res[0])
        assert sum(c[i] for c, i in zip(cs, res[1], strict=True)) <= cap_c and sum(m[i] for m, i in zip(ms, res[1], strict=True)) <= cap_m


def _two_profiles() -> tuple[Profile, Profile]:
    # 10 GB -> 1.0 for both; 40 GB -> 1.5 (a) and 3.0 (b)
    return Profile((1,), (10, 40), ((1.0, 1.5),)), Profile((1,), (10, 40), ((1.0, 3.0),))


def test_repoint_nodes_finds_a_mix_that_needs_a_downgrade() -> None:
    """One 2-GPU node with 50 GB: a at 40 GB (1.5) and b at 10 GB (1.0). Only a going down lets b
    go up (1.0 + 3.0 = 4.0); one-job-at-a-time upgrades cannot get there, repoint_nodes does."""
    pa, pb = _two_profiles()
    inst = Instance("rp", (Node("n", "V100", 2, 8, 50),), (Job("a", 1, pa, (1, 10)), Job("b", 1, pb, (1, 10))))
    f = featurise(inst)
    st_ = PlacementState(f)
    st_.place(0, {0: 1}, _point(f, 40), 1, 40)
    st_.place(1, {0: 1}, _point(f, 10), 1, 10)
    upgrade_points(inst, f, st_)
    assert state_value(inst, f, st_) == pytest.approx(2.5)
    assert repoint_nodes(inst, f, st_) == pytest.approx(1.5)
    sched = state_schedule(inst, f, st_)
    report = check_schedule(inst, sched)
    assert report.feasible and report.objective == pytest.approx(4.0)
    assert (sched.jobs["a"].mem_per_gpu_gb, sched.jobs["b"].mem_per_gpu_gb) == (10, 40)


def test_a_running_job_leaves_its_node_when_that_pays_and_pays_its_restart() -> None:
    """Node A (2 GPUs, 45 GB) runs a and b at 10 GB; node B (1 GPU, 10 GB) is free; node C (no
    GPUs, 100 GB) only makes memory look plentiful in aggregate, so the prices keep both jobs on
    their type. Staying, b cannot go up to 40 GB (3.0) unless a leaves: a moves to B (its restart
    costs 10 % of the round: 1.0 x 0.9) and b takes 40 GB: 3.9, the optimum (brute force),
    against 2.0 for both staying. No single move gains on its own (a on B is worth 0.9 < 1.0, so
    relocate() does not move it): the repack's per-node choice of who leaves does it."""
    pa, pb = _two_profiles()
    nodes = (Node("A", "V100", 2, 8, 45), Node("B", "V100", 1, 8, 10), Node("C", "V100", 0, 8, 100))
    jobs = (Job("a", 1, pa, (1, 10), placement={"A": 1}, restart_s=30.0), Job("b", 1, pb, (1, 10), placement={"A": 1}, restart_s=30.0))
    inst = Instance("ev", nodes, jobs)
    assert inst.round.duration_s == 300
    best, _ = brute_force(inst)
    assert best == pytest.approx(3.9)
    f = featurise(inst)
    table = option_table(inst, f)
    lam, _ = resource_prices(table)
    st_ = price_repack(inst, f, table, lam)
    sched = state_schedule(inst, f, st_)
    report = check_schedule(inst, sched)
    assert report.feasible, list(report)
    assert report.objective == pytest.approx(best)
    assert dict(sched.jobs["a"].nodes) == {"B": 1} and dict(sched.jobs["b"].nodes) == {"A": 1}
    assert schedule_value(inst, sched) == pytest.approx(1.0 * 0.9 + 3.0)  # the mover pays its restart
    off = price_repack(inst, f, table, lam, evict=False)
    assert state_value(inst, f, off) == pytest.approx(2.0)  # without the per-node choice both stay at 10 GB


def test_evict_solves_the_all_staying_mix_only_where_someone_would_leave(monkeypatch) -> None:
    """Node A (2 GPUs, 80 GB) runs a and b at 10 GB, and both fit at 40 GB (3.0, the optimum by
    brute force): nobody should leave. ``_evict_crowded`` then solves no knapsack without the
    leave option (the all-staying mix is only needed to judge a leaver; the final per-node pass
    finds it), and the repack still reaches the optimum."""
    import sys

    import optsched.learned.moves as moves

    pa, pb = _two_profiles()
    nodes = (Node("A", "V100", 2, 8, 80), Node("B", "V100", 1, 8, 10), Node("C", "V100", 0, 8, 100))
    jobs = (Job("a", 1, pb, (1, 10), placement={"A": 1}, restart_s=30.0), Job("b", 1, pb, (1, 10), placement={"A": 1}, restart_s=30.0))
    inst = Instance("stay", nodes, jobs)
    best, _ = brute_force(inst)
    assert best == pytest.approx(6.0)
    f = featurise(inst)
    table = option_table(inst, f)
    lam, _ = resource_prices(table)
    sizes: list[list[int]] = []
    import optsched.learned.repack as repack

    real = moves.node_knapsack

    def counted(values, *args, **kwargs):
        if sys._getframe(1).f_code.co_name == "_evict_crowded":
            sizes.append([v.size for v in values])
        return real(values, *args, **kwargs)

    monkeypatch.setattr(repack, "node_knapsack", counted)
    st_ = price_repack(inst, f, table, lam)
    assert sizes and all(s == [3, 3] for s in sizes), sizes  # two grid points + leave, never the bare two
    assert state_value(inst, f, st_) == pytest.approx(best)
    assert {j: dict(w) for j, w in st_.where.items()} == {0: {0: 1}, 1: {0: 1}}


@pytest.mark.parametrize(("spread_from", "optimum"), [("one", 4.7), ("fewest", 5.0)])
def test_squeeze_gangs_splits_a_gang_over_nodes_it_shares(spread_from, optimum) -> None:
    """Two 3-GPU nodes with 50 GB, each running a 1-GPU job at 40 GB (1.5 each); a 4-GPU gang
    (weight 3, spread factor 0.9, 10 GB a GPU) waits: no node has 4 free GPUs, nor room for 2 of
    its GPUs. Split 2 + 2 with both jobs down to 10 GB (1.0 each) it is worth 3 x 0.9 = 2.7
    counted from one node, 3 from its fewest nodes (two): squeeze_gangs admits it, 4.7 (5.0)
    against 3.0, the optimum by brute force. squeeze_in (one node) cannot."""
    prof = _prof()
    nodes = (Node("n1", "V100", 3, 8, 50), Node("n2", "V100", 3, 8, 50))
    jobs = (Job("a", 1, prof, (1, 10)), Job("b", 1, prof, (1, 10)), Job("c", 4, prof, (1, 10), weight=3.0, spread_factor=0.9))
    inst = Instance("sg", nodes, jobs, Round(spread_from=spread_from))
    best, _ = brute_force(inst)
    assert best == pytest.approx(optimum)
    f = featurise(inst)
    st_ = PlacementState(f)
    p40 = _point(f, 40)
    st_.place(0, {0: 1}, p40, 1, 40)
    st_.place(1, {1: 1}, p40, 1, 40)
    assert squeeze_in(inst, f, st_) == 0
    assert squeeze_gangs(inst, f, st_) == 1
    sched = _optimal_schedule(inst, f, st_, best)
    assert dict(sched.jobs["c"].nodes) == {"n1": 2, "n2": 2}
    assert squeeze_gangs(inst, f, st_) == 0  # nothing left to admit


def test_squeeze_gangs_on_generator_rounds_is_feasible_and_monotone(net) -> None:
    """On 24 generator rounds with 8-GPU nodes, 8- and 16-GPU gangs, three GPU types and running
    jobs, the decoded state with its multi-GPU jobs taken out, plus squeeze_gangs, passes the
    checker and is worth at least that state; some rounds admit gangs (the check is not vacuous)."""
    admitted = 0
    for seed in range(24):
        try:
            inst = _round(seed, 4 + seed % 5, 10 + 2 * seed, 2 if seed % 2 else 1, False)
        except InputError:
            continue
        f, base = _base(net, inst)
        for j in [j for j in base.where if f.gpus[j] >= 2]:  # gangs wait: room is left only among the small jobs
            for n, k in base.where.pop(j).items():
                base.free_g[n] += k
                base.free_c[n] += int(f.point_c[j, base.point[j]]) * k
                base.free_m[n] += int(f.point_m[j, base.point[j]]) * k
            del base.point[j]
        admitted += _checked_step(squeeze_gangs, inst, f, base)
    assert admitted > 0


def test_improve_final_pass_on_large_rounds_is_feasible(net, monkeypatch) -> None:
    """improve()'s final pass for rounds above RELOCATE_CELLS (per-node mixes, squeeze_gangs,
    relocate, the touched nodes' mixes again), forced on small generator rounds: feasible, never
    below the decoded state, and the value it reports is the state's."""
    import optsched.learned.moves as moves
    import optsched.learned.repair as repair

    monkeypatch.setattr(repair, "RELOCATE_CELLS", 0)
    monkeypatch.setattr(moves, "RELOCATE_CELLS", 0)
    for seed in range(8):
        inst = _round(seed, 6, 24, 2, False)
        f, base = _base(net, inst)
        base_v = state_value(inst, f, base)
        stats: dict = {}
        won, v = improve(inst, f, base, stats=stats)
        assert v >= base_v - 1e-9
        assert v == pytest.approx(state_value(inst, f, won))
        report = check_schedule(inst, state_schedule(inst, f, won))
        assert report.feasible, list(report)
        assert report.objective == pytest.approx(v)


def test_improve_reports_the_final_pass_on_the_policys_own_schedule(net, monkeypatch) -> None:
    """Without repacks the state kept is the decoded one, changed in place by the final pass: the
    polished objective in the stats is its final worth (the solver labels the result by it)."""
    import optsched.learned.moves as moves
    import optsched.learned.repair as repair

    monkeypatch.setattr(repair, "RELOCATE_CELLS", 0)
    monkeypatch.setattr(moves, "RELOCATE_CELLS", 0)
    gained = 0
    for seed in range(8):
        inst = _round(seed, 6, 24, 2, False)
        f, base = _base(net, inst)
        base_v = state_value(inst, f, base)
        stats: dict = {}
        won, v = improve(inst, f, base, configs=(), stats=stats)
        assert won is base and not stats["repair_used"]
        assert stats["repair_polished_objective"] == pytest.approx(v)
        gained += v > base_v + 1e-9
    assert gained > 0


def test_move_to_faster_makes_room_on_a_faster_node() -> None:
    """Node f (V100, 2 GPUs, 45 GB) runs r at 40 GB (1.5; r may only use V100) with 5 GB free; job
    a (weight 2) runs on a K80 node at half speed (1.0). On f at 10 GB a is worth 2.0 once r goes
    down to 10 GB (1.0): 3.0 against 2.5, the optimum by brute force. relocate() (a job only where
    it fits as things are) cannot; move_to_faster does."""
    prof = _prof()
    nodes = (Node("s", "K80", 1, 8, 10), Node("f", "V100", 2, 8, 45))
    jobs = (Job("r", 1, prof, (1, 10), gpu_speed={"V100": 1.0}), Job("a", 1, prof, (1, 10), weight=2.0, gpu_speed={"K80": 0.5, "V100": 1.0}))
    inst = Instance("mf", nodes, jobs)
    best, _ = brute_force(inst)
    assert best == pytest.approx(3.0)
    f = featurise(inst)
    st_ = PlacementState(f)
    st_.place(0, {1: 1}, _point(f, 40), 1, 40)
    st_.place(1, {0: 1}, _point(f, 10), 1, 10)
    assert state_value(inst, f, st_) == pytest.approx(2.5)
    assert relocate(inst, f, st_) == 0
    assert move_to_faster(inst, f, st_) == 1
    sched = _optimal_schedule(inst, f, st_, best)
    assert dict(sched.jobs["a"].nodes) == {"f": 1} and sched.jobs["r"].mem_per_gpu_gb == 10
    assert move_to_faster(inst, f, st_) == 0


def test_move_to_faster_on_generator_rounds_is_feasible_and_monotone(net) -> None:
    """On 16 three-type generator rounds with running jobs and idle GPUs (tightness 0.8), the
    decoded state plus move_to_faster passes the checker and is worth at least the decoded state;
    some rounds move jobs (so the check is not vacuous)."""
    moved = 0
    for seed in range(16):
        try:
            inst = generate(4 + seed % 5, 12 + 2 * seed, seed=seed, grid="coarse", tightness=0.8,
                            gpu_types={"V100": 2, "P100": 1, "K80": 1}, running_fraction=0.3)
        except InputError:
            continue
        f, base = _base(net, inst)
        moved += _checked_step(move_to_faster, inst, f, base)
    assert moved > 0


def test_improve_final_pass_starts_no_step_past_its_deadline(net, monkeypatch) -> None:
    """improve() with its deadline already past (no repack starts) leaves the state kept as it is:
    none of the final pass's steps runs (each one's set-up alone is O(jobs), tens of ms at
    1,024 x 4,000, past a deadline that keeps only a 5 % margin to the time limit)."""
    import time

    import optsched.learned.moves as moves
    import optsched.learned.repair as repair

    def refuse(*args, **kwargs):
        raise AssertionError("a final-pass step ran past the deadline")

    for name in ("repoint_nodes", "squeeze_gangs", "relocate", "move_to_faster"):
        monkeypatch.setattr(repair, name, refuse)
        monkeypatch.setattr(moves, name, refuse)
    monkeypatch.setattr(repair, "RELOCATE_CELLS", 0)
    monkeypatch.setattr(moves, "RELOCATE_CELLS", 0)
    inst = _round(4, 6, 24, 2, False)
    f, base = _base(net, inst)
    base_v = state_value(inst, f, base)
    won, v = improve(inst, f, base, deadline=time.perf_counter() - 1.0)
    assert won is base and v == pytest.approx(base_v)
