"""Node refill (optsched.heuristics.node_refill): one node at a time, exactly."""

from __future__ import annotations

import numpy as np
import pytest
from test_incremental_bound import _gang_and_single, _gang_round, _pinned_round, _squeeze

from optsched.checker import check_schedule
from optsched.heuristics import node_refill as node_refill_module
from optsched.heuristics.fungible_greedy import fungible_greedy_schedule
from optsched.heuristics.node_refill import gang_ascent, node_refill, squeezed_greedy
from optsched.incremental import RoundSolver, RoundState
from optsched.model import Instance
from optsched.result import Result, Status
from optsched.schedule import Assignment, Schedule
from optsched.solve import solve_round

FAST = {"num_workers": 1}


def test_refill_slows_a_pinned_job_down_to_let_a_waiting_job_in():
    """The squeeze round: from the pinned job alone at its fast point, the node's best choice
    is the pinned job at 1 core per GPU and the new job at 4 cores (the proven optimum)."""
    inst = _squeeze()
    start = Schedule(inst.name, {"pinned": Assignment({"n0": 3}, 2, 10)})
    out = node_refill(inst, start)
    report = check_schedule(inst, out)
    assert not report
    assert report.objective == pytest.approx(solve_round(inst, solver="cpsat", time_limit=10, **FAST).objective)
    assert out.jobs["pinned"].cpus_per_gpu == 1 and out.jobs["new"].cpus_per_gpu == 4


@pytest.mark.parametrize("seed", range(16))
def test_refill_keeps_schedules_feasible_and_never_lowers_their_worth(seed):
    """From fungible-greedy's schedule (pinned jobs kept) on small rounds with pinned gangs,
    preemptible running jobs and waiting jobs, the refilled schedule passes the checker, keeps
    every pinned job where it runs and is worth no less, and at most the proven optimum."""
    inst = _pinned_round(seed, waiting=4)
    start = solve_round(inst, solver="fungible-greedy").schedule
    before = check_schedule(inst, start)
    assert not before
    out = node_refill(inst, start)
    after = check_schedule(inst, out)
    assert not after, after
    assert after.objective >= before.objective - 1e-9
    assert after.objective <= solve_round(inst, solver="cpsat", time_limit=20, **FAST).objective + 1e-6
    for j in inst.jobs:
        if j.pinned:
            assert dict(out.jobs[j.id].nodes) == dict(j.placement)


def test_refill_reaches_the_optimum_on_most_small_pinned_rounds():
    """From fungible-greedy's schedules on the sixteen rounds above, refilling one node at a time
    reaches CP-SAT's proven optimum on at least half of them (ten when this was written)."""
    hits = 0
    for seed in range(16):
        inst = _pinned_round(seed, waiting=4)
        out = node_refill(inst, solve_round(inst, solver="fungible-greedy").schedule)
        hits += check_schedule(inst, out).objective >= solve_round(inst, solver="cpsat", time_limit=20, **FAST).objective - 1e-6
    assert hits >= 8


def test_a_node_whose_programme_is_too_large_is_left_as_it_is(monkeypatch):
    inst = _squeeze()
    start = Schedule(inst.name, {"pinned": Assignment({"n0": 3}, 2, 10)})
    monkeypatch.setattr(node_refill_module, "NODE_WORK", 1)
    assert node_refill(inst, start).jobs == start.jobs


def test_a_round_chain_refills_a_round_with_pinned_jobs():
    """The chain's carried-over schedule for the squeeze round's second round leaves the new job
    out or slow; the refill finds the optimum and the fill bound proves it (``carried``)."""
    inst = _squeeze()
    d = inst.to_dict()
    first = {**d, "jobs": d["jobs"][:1]}
    chain = RoundSolver("cpsat", time_limit=1.0, options=FAST)
    chain.solve(first)
    res = chain.solve(inst)
    assert not check_schedule(inst, res.schedule)
    assert res.objective == pytest.approx(3.9)
    assert res.stats["incremental"] == "carried" and res.status.value == "optimal"


def test_gang_ascent_trades_a_single_job_s_point_for_a_gang_s():
    """A pinned gang over two nodes at its slow point and a pinned single job on the first node
    at its fast one (worth 2.0): refilling the nodes with the gang's point fixed changes nothing,
    and moving the gang to its fast point and the single job to its slow one is the optimum (2.5)."""
    inst = _gang_and_single()
    start = Schedule(inst.name, {"gang": Assignment({"n0": 2, "n1": 2}, 2, 10), "single": Assignment({"n0": 1}, 2, 40)})
    assert check_schedule(inst, start).objective == pytest.approx(2.0)
    assert node_refill(inst, start, nodes=["n0", "n1"]).jobs == start.jobs
    out = gang_ascent(inst, start)
    report = check_schedule(inst, out)
    assert not report
    assert report.objective == pytest.approx(2.5)


@pytest.mark.parametrize("seed", range(16))
def test_gang_ascent_keeps_schedules_feasible_and_never_lowers_their_worth(seed):
    """From the refilled fungible-greedy schedule on the small pinned rounds, gang ascent's
    result passes the checker, keeps every pinned job where it runs and is worth no less."""
    inst = _pinned_round(seed, waiting=4)
    start = node_refill(inst, solve_round(inst, solver="fungible-greedy").schedule)
    before = check_schedule(inst, start).objective
    out = gang_ascent(inst, start)
    after = check_schedule(inst, out)
    assert not after, after
    assert after.objective >= before - 1e-9
    for j in inst.jobs:
        if j.pinned:
            assert dict(out.jobs[j.id].nodes) == dict(j.placement)


@pytest.mark.parametrize("seed", range(30))
def test_a_node_with_at_most_one_free_gpu_gets_the_tables_optimum(seed):
    """The ways of the pinned jobs, each alone or with one waiting job beside it, choose a set
    worth exactly the tables' optimum (or find, like them, that nothing fits)."""
    nr = node_refill_module
    rng = np.random.default_rng(seed)
    cpus, mem, free = int(rng.integers(8, 40)), int(rng.integers(60, 400)), int(rng.integers(0, 2))
    items = []
    for mandatory in [True] * int(rng.integers(0, 6)) + [False] * int(rng.integers(0, 6)):
        k = int(rng.integers(1, 3))
        opts = [(k * int(rng.integers(1, 7)), k * int(rng.integers(5, 60)), float(rng.uniform(0.1, 3.0))) for _ in range(int(rng.integers(1, 5)))]
        items.append((mandatory, opts, 0 if mandatory else int(rng.integers(1, 3))))
    room = (free, cpus, mem)
    tables, units = nr._tables(room, items)
    best = float(tables[-1][free, cpus // units[0], mem // units[1]])
    done, choice = nr._solve_few(room, items)
    assert done
    if not np.isfinite(best):
        assert choice is None
        return
    assert choice is not None
    got = [items[i][1][k] for i, k in enumerate(choice) if k is not None]
    assert all(k is not None for (mandatory, _, _), k in zip(items, choice, strict=True) if mandatory)
    assert sum(g for (_, _, g), k in zip(items, choice, strict=True) if k is not None) <= free
    assert sum(o[0] for o in got) <= cpus and sum(o[1] for o in got) <= mem
    assert sum(o[2] for o in got) == pytest.approx(best)


def _thin_gang():
    """Two nodes of 4 GPUs, each with 2 GPUs held by a pinned job; a waiting 4-GPU gang spread
    2 + 2 over the GPUs left, at spread factor 0.5; and four waiting 1-GPU jobs that are worth
    more on those GPUs than the gang at half speed."""
    from optsched.model import Instance

    prof = {"cpus_per_gpu": [2], "mem_per_gpu_gb": [10], "throughput": [[1.0]]}
    dem = {"cpus_per_gpu": 2, "mem_per_gpu_gb": 10}
    pinned = [{"id": f"p{i}", "gpus": 2, "weight": 1.0, "profile": prof, "demand": dem, "placement": {f"n{i}": 2},
               "preemptible": False} for i in range(2)]
    gang = {"id": "gang", "gpus": 4, "weight": 1.0, "profile": prof, "demand": dem, "spread_factor": 0.5}
    singles = [{"id": f"s{i}", "gpus": 1, "weight": 0.6, "profile": prof, "demand": dem} for i in range(4)]
    return Instance.from_dict({
        "version": 2, "name": "thin-gang", "round": {"duration_s": 300},
        "nodes": [{"id": f"n{i}", "gpu_type": "V100", "gpus": 4, "cpus": 32, "mem_gb": 200} for i in range(2)],
        "jobs": pinned + [gang] + singles})


def _random_items(rng: np.random.Generator) -> tuple[tuple[int, int, int], list]:
    """A node's programme: a few mandatory items and many optional ones, several alike."""
    cpus, mem, free = int(rng.integers(8, 40)), int(rng.integers(60, 300)), int(rng.integers(1, 6))
    items = []
    for mandatory in [True] * int(rng.integers(0, 3)) + [False] * int(rng.integers(2, 12)):
        g = int(rng.integers(1, 3))
        opts = [(g * int(rng.integers(1, 7)), g * int(rng.integers(5, 60)), float(rng.uniform(0.1, 3.0))) for _ in range(int(rng.integers(1, 4)))]
        items.append((mandatory, opts, 0 if mandatory else g))
        if not mandatory and rng.random() < 0.3:  # a copy, or a lighter copy (a younger job alike)
            items.append((False, [(c, m, v * float(rng.uniform(0.5, 1.0))) for c, m, v in opts], g))
    return (free, cpus, mem), items


def _best(room, items) -> float:
    tables, units = node_refill_module._tables(room, items)
    return float(tables[-1][room[0], room[1] // units[0], room[2] // units[1]])


@pytest.mark.parametrize("seed", range(40))
def test_the_items_left_out_as_dominated_never_change_a_nodes_optimum(seed):
    """The programme over the items :func:`_needed` keeps is worth exactly as much as over all
    of them, in the node's room and in smaller rooms (the tables gang_ascent reads)."""
    room, items = _random_items(np.random.default_rng(seed))
    keep = node_refill_module._needed(items, room)
    kept = [items[i] for i in keep]
    assert [i for i, it in enumerate(items) if it[0]] == [i for i in keep if items[i][0]]  # every mandatory one
    full_t, units = node_refill_module._tables(room, items)
    kept_t, kunits = node_refill_module._tables(room, kept)
    for shrink in (0, 1, 3):
        smaller = (max(0, room[0] - shrink), max(0, room[1] - 2 * shrink), max(0, room[2] - 20 * shrink))
        a = full_t[-1][smaller[0], smaller[1] // units[0], smaller[2] // units[1]]
        b = kept_t[-1][smaller[0], smaller[1] // kunits[0], smaller[2] // kunits[1]]
        assert a == pytest.approx(b) or (not np.isfinite(a) and not np.isfinite(b))


def test_a_job_dominated_by_as_many_as_the_free_gpus_hold_is_left_out():
    """Two free GPUs: a lighter one-GPU job alike in all but weight to two heavier ones, and a
    two-GPU job no faster than a one-GPU one at more cores, are never needed; a pinned job and
    the heavier jobs stay."""
    room = (2, 16, 200)
    heavy = [(2, 20, 1.0), (4, 40, 1.5)]
    items = [(True, [(4, 40, 2.0)], 0), (False, heavy, 1), (False, heavy, 1),
             (False, [(c, m, 0.5 * v) for c, m, v in heavy], 1), (False, [(6, 60, 1.2)], 2)]
    assert node_refill_module._needed(items, room) == [0, 1, 2]
    assert _best(room, items) == pytest.approx(_best(room, [items[i] for i in (0, 1, 2)]))


def test_gang_release_takes_out_a_gang_spread_thin_where_the_refill_does_better():
    """The gang on 2 + 2 GPUs is worth 0.5 (weight 1, spread 0.5 for its second node); refilled
    without it, its four GPUs take the four single jobs, worth 0.6 each: the release takes it
    out, the result passes the checker and is the proven optimum. The refill alone cannot: the
    gang holds GPUs on both nodes."""
    from optsched.heuristics.node_refill import gang_release

    inst = _thin_gang()
    start = Schedule(inst.name, {"p0": Assignment({"n0": 2}, 2, 10), "p1": Assignment({"n1": 2}, 2, 10),
                                 "gang": Assignment({"n0": 2, "n1": 2}, 2, 10)})
    before = check_schedule(inst, start)
    assert not before
    assert node_refill(inst, start).jobs == start.jobs
    out = gang_release(inst, start)
    after = check_schedule(inst, out)
    assert not after
    assert "gang" not in out.jobs and all(f"s{i}" in out.jobs for i in range(4))
    assert after.objective > before.objective
    assert after.objective == pytest.approx(solve_round(inst, solver="cpsat", time_limit=10, **FAST).objective)


def test_gang_release_keeps_a_gang_worth_more_than_what_would_replace_it():
    """With the single jobs light (weight 0.05), the spread gang is worth more than its GPUs
    refilled: the schedule is returned as it is."""
    from optsched.heuristics.node_refill import gang_release
    from optsched.model import Instance

    d = _thin_gang().to_dict()
    for j in d["jobs"]:
        if j["id"].startswith("s"):
            j["weight"] = 0.05
    inst = Instance.from_dict(d)
    start = Schedule(inst.name, {"p0": Assignment({"n0": 2}, 2, 10), "p1": Assignment({"n1": 2}, 2, 10),
                                 "gang": Assignment({"n0": 2, "n1": 2}, 2, 10)})
    assert gang_release(inst, start).jobs == start.jobs


@pytest.mark.parametrize("seed", range(12))
def test_gang_release_keeps_schedules_feasible_and_never_lowers_their_worth(seed):
    """From fungible-greedy's schedules on small pinned rounds, refilled, the release passes the
    checker, keeps every pinned job where it runs and is worth no less."""
    from optsched.heuristics.node_refill import gang_release

    inst = _pinned_round(seed, waiting=4)
    start = node_refill(inst, solve_round(inst, solver="fungible-greedy").schedule)
    before = check_schedule(inst, start)
    out = gang_release(inst, start)
    after = check_schedule(inst, out)
    assert not after, after
    assert after.objective >= before.objective - 1e-9
    for j in inst.jobs:
        if j.pinned:
            assert dict(out.jobs[j.id].nodes) == dict(j.placement)


def _crowded() -> Instance:
    """Four 4-GPU nodes of 12 cores, each with three pinned 1-GPU jobs that are a little faster
    at 4 cores than at 2, and a waiting 4-GPU gang (spread factor 0.5) that fits one GPU on each
    node at 3 cores only once the pinned jobs there drop to 2."""
    pinned = {"cpus_per_gpu": [2, 4], "mem_per_gpu_gb": [10], "throughput": [[1.0], [1.05]]}
    gang = {"cpus_per_gpu": [2, 3], "mem_per_gpu_gb": [10], "throughput": [[1.0], [1.2]]}
    nodes = [{"id": f"n{i}", "gpu_type": "V100", "gpus": 4, "cpus": 12, "mem_gb": 100} for i in range(4)]
    jobs = [{"id": f"p{i}{k}", "gpus": 1, "weight": 0.1, "profile": pinned, "demand": {"cpus_per_gpu": 2, "mem_per_gpu_gb": 10},
             "placement": {f"n{i}": 1}, "preemptible": False} for i in range(4) for k in range(3)]
    jobs.append({"id": "gang", "gpus": 4, "weight": 1.0, "spread_factor": 0.5, "profile": gang,
                 "demand": {"cpus_per_gpu": 2, "mem_per_gpu_gb": 10}})
    return Instance.from_dict({"version": 3, "name": "crowded", "round": {"duration_s": 300}, "nodes": nodes, "jobs": jobs})


def _pinned_fast(inst: Instance) -> Schedule:
    return Schedule(inst.name, {j.id: Assignment(dict(j.placement), 4, 10) for j in inst.jobs if j.pinned})


def test_the_squeezed_greedy_starts_a_gang_the_pinned_jobs_cores_keep_out():
    """With the pinned jobs at their fast points no core is left, and neither the greedy around
    them nor a one-node refill can start the gang (it needs a GPU on every node). With them at
    their leanest points first, the greedy starts it and the leftover pass raises one pinned job
    per node again: the proven optimum, 12 x 0.1 + 4 x 0.1 x 0.05 + 0.5 ** 3 x 1.2."""
    inst = _crowded()
    optimum = solve_round(inst, solver="cpsat", time_limit=10, **FAST).objective
    assert optimum == pytest.approx(1.2 + 0.02 + 0.125 * 1.2)
    around = node_refill(inst, fungible_greedy_schedule(inst, fixed=_pinned_fast(inst)))
    assert "gang" not in around.jobs
    out = squeezed_greedy(inst)
    report = check_schedule(inst, out)
    assert not report
    assert "gang" in out.jobs and report.objective == pytest.approx(optimum)


def test_a_round_chain_starts_that_gang_with_no_search():
    """From a previous schedule with the pinned jobs at their fast points, the chain's squeezed
    greedy starts the gang before any search (``refilled_objective``: the steps before the best
    responses), and the fill bound proves it optimal: the round ends with no solver call."""
    inst = _crowded()
    previous = Result(_pinned_fast(inst), Status.FEASIBLE, 1.26, None, "cpsat", "exact", 0.0, {})
    chain = RoundSolver(time_limit=1.0, options=FAST, state=RoundState("", previous))
    out = chain.solve(inst)
    assert out.stats["incremental"] == "carried"
    assert out.stats["refilled_objective"] == pytest.approx(out.objective)
    assert "gang" in out.schedule.jobs and out.status is Status.OPTIMAL


@pytest.mark.parametrize("seed", range(16))
def test_the_squeezed_greedy_is_feasible_and_keeps_pinned_jobs_where_they_run(seed):
    """On small rounds with pinned gangs and waiting gangs: the checker accepts it, every pinned
    job keeps its nodes, and it is worth at most the proven optimum."""
    inst = _gang_round(seed)
    out = squeezed_greedy(inst)
    report = check_schedule(inst, out)
    assert not report, report
    assert report.objective <= solve_round(inst, solver="cpsat", time_limit=20, **FAST).objective + 1e-6
    for j in inst.jobs:
        if j.pinned:
            assert dict(out.jobs[j.id].nodes) == dict(j.placement)


@pytest.mark.parametrize("seed", range(40))
def test_the_relaxed_programmes_bound_a_nodes_optimum(seed):
    """The lesser of the (GPUs, cores) and (GPUs, memory) programmes is never below the full
    table's optimum, the refill's test for skipping a node (-inf only where nothing fits)."""
    rng = np.random.default_rng(seed)
    room, items = _random_items(rng)
    if rng.random() < 0.3:  # mandatory items that the room may not hold
        room = (room[0], max(1, room[1] // 4), max(5, room[2] // 4))
    best = _best(room, items)
    relaxed, choice = node_refill_module._relaxed(room, items)
    assert relaxed >= best * (1 - 1e-12) if np.isfinite(best) else relaxed >= best
    if choice is not None:  # a relaxed programme's best choice that fits the node is a best one
        _assert_best_choice(room, items, choice, best)


def _assert_best_choice(room, items, choice, best):
    """``choice`` picks every mandatory item, fits the room and is worth the tables' optimum."""
    got = [items[i][1][k] for i, k in enumerate(choice) if k is not None]
    assert all(k is not None for (mandatory, _, _), k in zip(items, choice, strict=True) if mandatory)
    assert sum(g for (_, _, g), k in zip(items, choice, strict=True) if k is not None) <= room[0]
    assert sum(o[0] for o in got) <= room[1] and sum(o[1] for o in got) <= room[2]
    assert sum(o[2] for o in got) == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("seed", range(60))
def test_a_nodes_best_choice_is_the_tables_optimum_with_or_without_the_coarse_programme(seed, monkeypatch):
    """_solve_node tries a programme with coarser units first (rooms of up to 1,000 GB, far
    above its cells per axis) and keeps its best choice only where it fits: the choice is worth
    exactly the exact tables' optimum either way, and the coarse programme does decide some
    rooms (the test can tell)."""
    nr = node_refill_module
    rng = np.random.default_rng(seed)
    room, items = _random_items(rng)
    room = (max(2, room[0]), room[1], int(rng.integers(130, 1000)))  # 2+ free GPUs: the tables, not the ways
    items = [(mand, [(c, m * 3 + int(rng.integers(0, 3)), v) for c, m, v in opts], g) for mand, opts, g in items]
    best = _best(room, items)
    choice = nr._solve_node(room, items)
    if not np.isfinite(best):
        assert choice is None
        return
    _assert_best_choice(room, items, choice, best)
    exact = []
    tables = nr._tables
    monkeypatch.setattr(nr, "_tables", lambda room, items, sizes=([], []), units=None: exact.append(units) or tables(room, items, sizes, units))
    nr._solve_node(room, items)
    assert exact and exact[0] != nr._units(room, items)  # the coarse programme ran first


def test_the_coarse_programme_decides_most_large_rooms_alone(monkeypatch):
    """On rooms of many GB whose sizes are fine-grained, the coarse programme's best choice fits
    the room on most of them, so the exact table is not built."""
    nr = node_refill_module
    built = []
    tables = nr._tables
    monkeypatch.setattr(nr, "_tables", lambda room, items, sizes=([], []), units=None: built.append(units) or tables(room, items, sizes, units))
    decided = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        room, items = _random_items(rng)
        room = (max(2, room[0]), room[1], 500)
        items = [(mand, [(c, m * 2 + 1, v) for c, m, v in opts], g) for mand, opts, g in items]
        built.clear()
        nr._solve_node(room, items)
        decided += len(built) == 1
    assert decided >= 15


def test_the_refill_with_the_relaxed_skip_equals_the_refill_without(monkeypatch):
    """Skipping the nodes that the relaxed programmes prove already best leaves every refill as it
    was (the same jobs at the same points), and on schedules the refill already left best it
    builds fewer full programmes."""
    solve_node, built = node_refill_module._solve_node, []
    monkeypatch.setattr(node_refill_module, "_solve_node", lambda room, items: built.append(1) or solve_node(room, items))
    rounds = [_pinned_round(seed, waiting=4) for seed in range(12)]
    greedy = [fungible_greedy_schedule(inst) for inst in rounds]
    refilled = [node_refill(inst, s) for inst, s in zip(rounds, greedy, strict=True)]
    built.clear()
    again = [node_refill(inst, s) for inst, s in zip(rounds, refilled, strict=True)]
    with_skip = len(built)
    monkeypatch.setattr(node_refill_module, "_relaxed", lambda room, items: (np.inf, None))
    built.clear()
    assert [node_refill(inst, s).jobs for inst, s in zip(rounds, refilled, strict=True)] == [s.jobs for s in again]
    assert with_skip < len(built)
    assert [node_refill(inst, s).jobs for inst, s in zip(rounds, greedy, strict=True)] == [s.jobs for s in refilled]
