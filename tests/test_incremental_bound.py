"""The pinned jobs' worth bound (optsched.incremental_bound) and the round-chain bound built on it."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from optsched import incremental_bound
from optsched.checker import check_schedule
from optsched.errors import InputError
from optsched.gen import generate
from optsched.incremental import RoundSolver, gpu_knapsack_bound
from optsched.incremental_bound import pinned_worth_bound
from optsched.model import Instance
from optsched.solve import solve_round
from optsched.values import assignment_value

FAST = {"num_workers": 1}


def _place_running(free: dict[str, list[int]], job: dict, order: list[str], halve: Callable[[], bool],
                   fits: Callable[[str, dict[str, int]], bool] = lambda nid, place: True) -> dict[str, int] | None:
    """Where a running ``job`` (a contract dict) sits at its smallest grid point: over the nodes in
    ``order`` that ``fits`` allows (node id, placement so far), as many GPUs on each as ``free``
    (id -> [GPUs, cores, GB] left) holds, only half of them on the first node where ``halve()``;
    ``free`` is charged. ``None`` (``free`` untouched) where the nodes cannot hold it."""
    c0, m0 = job["profile"]["cpus_per_gpu"][0], job["profile"]["mem_per_gpu_gb"][0]
    place: dict[str, int] = {}
    left = job["gpus"]
    for nid in order:
        if not fits(nid, place):
            continue
        take = min(left, free[nid][0], free[nid][1] // c0, free[nid][2] // m0, max(1, left // 2) if halve() and not place else left)
        if take > 0:
            place[nid] = take
            left -= take
        if not left:
            break
    if left:
        return None
    for nid, k in place.items():
        free[nid][0] -= k
        free[nid][1] -= k * c0
        free[nid][2] -= k * m0
    return place


def _pinned_round(seed: int, waiting: int = 2, all_pinned: bool = False) -> Instance:
    """A small round on 3 tight nodes (4 GPUs, few cores and GB) where most running jobs are
    pinned, some of them gangs split over two nodes, plus ``waiting`` new jobs and (unless
    ``all_pinned``) a preemptible running one that pays a restart when it moves."""
    rng = np.random.default_rng(seed)
    d = generate(nodes=3, jobs=7 + waiting, seed=seed, gpus_per_node=4, cpus_per_node=int(rng.integers(8, 17)),
                 mem_per_node_gb=int(rng.integers(60, 140)), job_sizes={1: 0.5, 2: 0.3, 4: 0.2}, grid="coarse").to_dict()
    free = {n["id"]: [n["gpus"], n["cpus"], n["mem_gb"]] for n in d["nodes"]}
    ids = list(free)
    for i, j in enumerate(d["jobs"][: len(d["jobs"]) - waiting]):
        order = [ids[k] for k in rng.permutation(len(ids))]
        split = j["gpus"] > 1 and rng.random() < 0.6
        place = _place_running(free, j, order, lambda split=split: split)
        if place is None:
            continue
        j["placement"] = place
        j["preemptible"] = i == 0 and not all_pinned
        j["restart_s"] = 0.3 * d["round"]["duration_s"]
    return Instance.from_dict(d)


def _optimum(inst: Instance):
    res = solve_round(inst, solver="cpsat", time_limit=20.0, **FAST)
    assert res.status.value == "optimal"
    return res


def _pinned_worth(inst: Instance, schedule) -> float:
    return sum(assignment_value(inst, j, schedule.jobs[j.id]) for j in inst.jobs if j.pinned)


def test_the_random_rounds_have_pinned_gangs_split_over_nodes():
    """The rounds below exercise what the bound couples: most have a pinned gang on two nodes."""
    split = [any(j.pinned and len(j.placement) > 1 for j in _pinned_round(seed).jobs) for seed in range(16)]
    assert sum(split) >= 8


@pytest.mark.parametrize("seed", range(16))
def test_the_bound_with_pinned_gangs_is_at_least_the_proven_optimum(seed, monkeypatch):
    """On small rounds with pinned gangs split over nodes, pinned single jobs, a preemptible
    running job and waiting jobs that compete with them for cores and memory: the round bound is
    never below CP-SAT's proven optimum, and the pinned jobs' bound never below their worth in it;
    nor are they with the two relaxations (coarse node tables, gangs cut into per-node copies)
    forced on."""
    inst = _pinned_round(seed)
    res = _optimum(inst)
    assert gpu_knapsack_bound(inst) >= res.objective - 1e-9
    assert pinned_worth_bound(inst)[0] >= _pinned_worth(inst, res.schedule) - 1e-9
    monkeypatch.setattr(incremental_bound, "ENUM_LIMIT", 1)
    monkeypatch.setattr(incremental_bound, "TABLE_CELLS", 5)
    assert gpu_knapsack_bound(inst) >= res.objective - 1e-9
    assert pinned_worth_bound(inst)[0] >= _pinned_worth(inst, res.schedule) - 1e-9


@pytest.mark.parametrize("seed", range(12))
def test_with_every_job_pinned_the_bound_is_the_optimum(seed):
    """When every job is pinned the bound is exact: the best choice of grid points over each
    component of nodes that pinned gangs link equals CP-SAT's proven optimum."""
    inst = _pinned_round(seed, waiting=0, all_pinned=True)
    inst = Instance.from_dict({**inst.to_dict(), "jobs": [j.to_dict() for j in inst.jobs if j.pinned]})
    res = _optimum(inst)
    assert pinned_worth_bound(inst)[0] == pytest.approx(res.objective, rel=1e-9, abs=1e-9)


def _gang_and_single() -> Instance:
    """Two 8-GPU nodes with 100 GB each; a 4-GPU gang pinned 2 + 2 over both and a 1-GPU job
    pinned on the first: at 40 GB per GPU both cannot have their fast point on the first node.
    A third node is empty."""
    prof = {"cpus_per_gpu": [2], "mem_per_gpu_gb": [10, 40], "throughput": [[1.0, 2.0]]}
    job = {"profile": prof, "demand": {"cpus_per_gpu": 2, "mem_per_gpu_gb": 10}, "preemptible": False}
    return Instance.from_dict({
        "version": 2, "name": "gang-and-single", "round": {"duration_s": 300},
        "nodes": [{"id": f"n{i}", "gpu_type": "V100", "gpus": 8, "cpus": 48, "mem_gb": 100} for i in range(3)],
        "jobs": [{**job, "id": "gang", "gpus": 4, "weight": 1.0, "placement": {"n0": 2, "n1": 2}},
                 {**job, "id": "single", "gpus": 1, "weight": 0.5, "placement": {"n0": 1}}]})


def test_the_bound_couples_a_gang_s_grid_point_across_its_nodes():
    """The gang's point is one on both of its nodes, so on the first node either it or the
    single job gives up its fast point: the bound is the optimum (the gang fast, the single job
    slow: 2 + 0.5), where bounding each node alone counted both fast (2 + 1)."""
    inst = _gang_and_single()
    res = _optimum(inst)
    assert res.objective == pytest.approx(2.5)
    assert gpu_knapsack_bound(inst) == pytest.approx(res.objective, rel=1e-6)


def test_a_round_chain_ends_a_round_of_pinned_jobs_without_a_search():
    """A job arrives on the empty node: the carried-over schedule is optimal and the bound proves
    it, so the round is ``carried`` (no search)."""
    inst = _gang_and_single()
    chain = RoundSolver("cpsat", time_limit=1.0, options=FAST)
    chain.solve(inst)
    d = inst.to_dict()
    d["jobs"].append({"id": "new", "gpus": 8, "profile": d["jobs"][0]["profile"], "demand": d["jobs"][0]["demand"]})
    nxt = Instance.from_dict(d)
    res = chain.solve(nxt)
    assert res.stats["incremental"] == "carried"
    assert res.objective == pytest.approx(_optimum(nxt).objective)


def test_the_component_value_is_cached_between_rounds():
    """A cache shared between rounds gives each round the bound it gets without one."""
    cache: dict = {}
    for seed in (0, 1, 0):
        inst = _pinned_round(seed)
        assert pinned_worth_bound(inst, cache) == pinned_worth_bound(inst)
    assert any(k[0] == "pinned-shape" for k in cache)


def _node_items(seed: int) -> tuple[int, int, list]:
    """A node (cores, GB) and 2-5 pinned jobs' options (cores, GB, worth) trading one resource
    for the other, often too many to fit."""
    rng = np.random.default_rng(seed)
    cpus, mem = int(rng.integers(10, 30)), int(rng.integers(80, 200))
    items = []
    for _ in range(int(rng.integers(2, 6))):
        k, n = int(rng.integers(1, 3)), int(rng.integers(2, 6))
        c, m = rng.integers(1, 7, n), rng.integers(5, 50, n)
        items.append((c * k, m * k, np.sqrt(c) * rng.uniform(0.5, 1) + np.sqrt(m / 8) * rng.uniform(0.5, 1)))
    return cpus, mem, items


@pytest.mark.parametrize("node_ways", [incremental_bound.NODE_WAYS, 1])
def test_a_node_alone_gets_the_programme_optimum(monkeypatch, node_ways):
    """The one-resource programmes with their feasibility test (``_node_best``) give exactly the
    two-resource table's optimum (``-inf`` where nothing fits), on 40 nodes where each way is taken:
    a relaxation's choice fits, neither fits (the node's useful ways decide or, where they are too
    many, ``node_ways`` 1 here, the table), nothing fits."""
    monkeypatch.setattr(incremental_bound, "NODE_WAYS", node_ways)
    table, enumerate_ways = incremental_bound._node_table, incremental_bound.node_ways
    ways = {"relaxed": 0, "two-resource": 0, "none": 0}
    used = {"table": 0, "ways": 0}

    def counted_table(*args):
        used["table"] += 1
        return table(*args)

    def counted_ways(*args, **kwargs):
        out = enumerate_ways(*args, **kwargs)
        used["ways"] += out is not None
        return out

    for seed in range(40):
        cpus, mem, items = _node_items(seed)
        exact = float(table(cpus, mem, (1, 1), items)[-1, -1])
        before = sum(used.values())
        monkeypatch.setattr(incremental_bound, "_node_table", counted_table)
        monkeypatch.setattr(incremental_bound, "node_ways", counted_ways)
        got = incremental_bound._node_best(cpus, mem, items)
        monkeypatch.setattr(incremental_bound, "_node_table", table)
        monkeypatch.setattr(incremental_bound, "node_ways", enumerate_ways)
        assert got == pytest.approx(exact) if math.isfinite(exact) else got == -math.inf
        ways["none"] += not math.isfinite(exact)
        ways["relaxed"] += sum(used.values()) == before and math.isfinite(exact)
        ways["two-resource"] += sum(used.values()) > before and math.isfinite(exact)
    assert min(ways.values()) >= 5, ways
    assert used["ways" if node_ways > 1 else "table"] >= 5 and used["table" if node_ways > 1 else "ways"] == 0, used


def test_a_node_s_ways_are_kept_whatever_order_its_jobs_come_in():
    """``node_ways`` without picks answers the same jobs listed in another order from what it
    kept, with the table's optimum as its best way, and the arrays it shares are read-only."""
    incremental_bound._WAYS.clear()
    for seed in range(20):
        cpus, mem, items = _node_items(seed)
        exact = float(incremental_bound._node_table(cpus, mem, (1, 1), items)[-1, -1])
        first = incremental_bound.node_ways(items, cpus, 10**6, mem=mem)
        again = incremental_bound.node_ways(items[::-1], cpus, 10**6, mem=mem)
        assert first is again
        assert (float(first[2].max()) if first[2].size else -math.inf) == pytest.approx(exact)
        assert not first[2].flags.writeable
    assert len(incremental_bound._WAYS) == 20  # one answer kept per node


@pytest.mark.parametrize("seed", range(16))
def test_the_fill_bound_is_at_least_the_proven_optimum(seed, monkeypatch):
    """Sharing each node's cores and memory between its pinned jobs and the unpinned jobs that
    may fill its free GPUs stays an upper bound: never below CP-SAT's proven optimum, also with
    coarse node tables and gangs cut into per-node copies."""
    inst = _pinned_round(seed, waiting=4)
    res = _optimum(inst)
    assert incremental_bound.fill_bound(inst) >= res.objective - 1e-9
    monkeypatch.setattr(incremental_bound, "ENUM_LIMIT", 1)
    monkeypatch.setattr(incremental_bound, "TABLE_CELLS", 5)
    monkeypatch.setattr(incremental_bound, "FILL_CELLS", (5,))
    assert incremental_bound.fill_bound(inst) >= res.objective - 1e-9


def _squeeze(gpus: int = 4) -> Instance:
    """One node of ``gpus`` GPUs (4 by default), 8 cores and 100 GB: a pinned job on 3 GPUs whose fast point takes 2
    cores per GPU, and a waiting 1-GPU job that is worth much more at 4 cores than at 2. The best
    schedule slows the pinned job down (1 core per GPU) so that the new job gets 4 cores."""
    slow = {"cpus_per_gpu": [1, 2], "mem_per_gpu_gb": [10], "throughput": [[0.9], [1.0]]}
    fast = {"cpus_per_gpu": [2, 4], "mem_per_gpu_gb": [10], "throughput": [[1.0], [3.0]]}
    return Instance.from_dict({
        "version": 2, "name": "squeeze", "round": {"duration_s": 300},
        "nodes": [{"id": "n0", "gpu_type": "V100", "gpus": gpus, "cpus": 8, "mem_gb": 100}],
        "jobs": [{"id": "pinned", "gpus": 3, "weight": 1.0, "profile": slow, "demand": {"cpus_per_gpu": 2, "mem_per_gpu_gb": 10},
                  "placement": {"n0": 3}, "preemptible": False},
                 {"id": "new", "gpus": 1, "weight": 1.0, "profile": fast, "demand": {"cpus_per_gpu": 2, "mem_per_gpu_gb": 10}}]})


def test_the_fill_bound_shares_a_node_between_pinned_and_waiting_jobs():
    """On the squeeze round the pinned-jobs bound counts both at their fast points (1 + 3); the
    fill bound sees that they share 8 cores and is the optimum (0.9 + 3)."""
    inst = _squeeze()
    res = _optimum(inst)
    assert res.objective == pytest.approx(3.9)
    assert gpu_knapsack_bound(inst) == pytest.approx(4.0, rel=1e-6)
    assert incremental_bound.fill_bound(inst) == pytest.approx(res.objective, rel=1e-9)


def test_the_fill_bound_gives_up_beyond_its_work_limit(monkeypatch):
    """With two free GPUs the node's table is a dynamic programme, which the work limit stops
    before it is built (one free GPU needs only a running maximum)."""
    inst = _squeeze(gpus=5)
    assert incremental_bound.fill_bound(inst) == pytest.approx(_optimum(inst).objective, rel=1e-9)
    monkeypatch.setattr(incremental_bound, "FILL_WORK", 0)
    assert incremental_bound.fill_bound(inst) == float("inf")
    assert incremental_bound.fill_bound(_squeeze()) == pytest.approx(3.9)


def test_the_fill_bound_builds_coarser_tables_before_giving_up(monkeypatch):
    """Where the fine tables would exceed the work limit, coarser ones (sizes rounded down) still
    give a bound: never below the optimum, and finite where the coarsest table fits the limit."""
    inst = _squeeze(gpus=5)
    fine = incremental_bound.fill_bound(inst)
    cells = (inst.nodes[0].cpus + 1) * (inst.nodes[0].mem_gb + 1)
    monkeypatch.setattr(incremental_bound, "FILL_WORK", cells)  # the fine table needs more, one of 2 x 2 cells fits
    monkeypatch.setattr(incremental_bound, "FILL_CELLS", (incremental_bound.TABLE_CELLS, 2))
    coarse = incremental_bound.fill_bound(inst)
    assert fine - 1e-9 <= coarse < float("inf")
    for seed in range(8):
        assert incremental_bound.fill_bound(_pinned_round(seed, waiting=4)) >= _optimum(_pinned_round(seed, waiting=4)).objective - 1e-9


def test_many_gangs_on_the_same_nodes_are_enumerated_or_cut_without_limits_of_numpy():
    """Forty pinned gangs over the same two nodes, each with one useful point, and two with a
    choice: the one-point gangs are folded in exactly (their copies cannot disagree) and the
    value is the best of the four joint choices, found by hand."""
    inst = generate(nodes=2, jobs=1, seed=0, cpus_per_node=100, mem_per_node_gb=1000)
    one = (np.array([1]), np.array([10]), np.array([1.0]))
    two = (np.array([1, 20]), np.array([10, 10]), np.array([1.0, 1.5]))
    jobs = [incremental_bound._Pinned({0: 1, 1: 1}, one, 1.0) for _ in range(40)]
    jobs += [incremental_bound._Pinned({0: 1, 1: 1}, two, w) for w in (1.0, 2.0)]
    # 40 + 2 cores used at the slow points; each fast point adds 19 per node: both fit (80 <= 100)
    assert incremental_bound._component_bound(inst, jobs) == pytest.approx(40 + 1.5 + 3.0)
    tight = generate(nodes=2, jobs=1, seed=0, cpus_per_node=70, mem_per_node_gb=1000)
    # 42 + 19 = 61 <= 70 but 42 + 38 = 80 > 70: only the heavier gang goes fast
    assert incremental_bound._component_bound(tight, jobs) == pytest.approx(40 + 1.0 + 3.0)


def _scattered(cores_left: int = 8) -> Instance:
    """Four 4-GPU nodes, each with three GPUs held by a pinned 1-GPU job (``cores_left`` cores
    free beside it at its smallest point), and a waiting 4-GPU gang (spread factor 0.5) that
    fits only one GPU on each node: it must span all four nodes, three beyond the one it
    needs on empty nodes."""
    small = {"cpus_per_gpu": [2], "mem_per_gpu_gb": [10], "throughput": [[1.0]]}
    gang = {"cpus_per_gpu": [2, 8], "mem_per_gpu_gb": [10], "throughput": [[1.0], [2.0]]}
    nodes = [{"id": f"n{i}", "gpu_type": "V100", "gpus": 4, "cpus": 6 + cores_left, "mem_gb": 100} for i in range(4)]
    jobs = [{"id": f"p{i}{k}", "gpus": 1, "weight": 0.1, "profile": small, "demand": {"cpus_per_gpu": 2, "mem_per_gpu_gb": 10},
             "placement": {f"n{i}": 1}, "preemptible": False} for i in range(4) for k in range(3)]
    jobs.append({"id": "gang", "gpus": 4, "weight": 1.0, "spread_factor": 0.5, "profile": gang,
                 "demand": {"cpus_per_gpu": 2, "mem_per_gpu_gb": 10}})
    return Instance.from_dict({"version": 3, "name": "scattered", "round": {"duration_s": 300}, "nodes": nodes, "jobs": jobs})


def test_the_bounds_charge_a_waiting_gang_the_spread_of_the_room_the_pinned_jobs_leave():
    """On four nodes with one GPU free each, the waiting 4-GPU gang spans four nodes where it
    would need one: both bounds charge it 0.5 ** 3 of its worth (at its fast point: 8 cores per
    GPU fit beside the pinned jobs), and the bound is the proven optimum (12 x 0.1 + 2 x 0.125)."""
    inst = _scattered()
    res = _optimum(inst)
    assert res.objective == pytest.approx(1.2 + 2.0 * 0.5 ** 3)
    assert gpu_knapsack_bound(inst) == pytest.approx(res.objective, rel=1e-6)
    assert incremental_bound.fill_bound(inst) == pytest.approx(res.objective, rel=1e-9)
    # with too few cores left for the fast point, the cap follows the slow one (1.0 x 0.125)
    slow = _scattered(cores_left=4)
    assert gpu_knapsack_bound(slow) == pytest.approx(_optimum(slow).objective, rel=1e-6)
    assert _optimum(slow).objective == pytest.approx(1.2 + 0.125)


def _gang_round(seed: int) -> Instance:
    """:func:`_pinned_round` with waiting gangs of 2-4 GPUs and spread factors down to 0.5: on the
    few GPUs the pinned jobs leave they often must span more nodes than on empty ones."""
    d = _pinned_round(seed, waiting=4).to_dict()
    rng = np.random.default_rng(seed + 1000)
    for j in d["jobs"]:
        if "placement" not in j:
            j["gpus"] = int(rng.choice([2, 3, 4]))
            j["spread_factor"] = round(float(rng.uniform(0.5, 0.9)), 2)
    return Instance.from_dict(d)


@pytest.mark.parametrize("seed", range(16))
def test_the_bounds_with_the_room_pinned_jobs_leave_are_at_least_the_proven_optimum(seed):
    """Waiting gangs that must spread over the pinned jobs' leftover GPUs: the knapsack and fill
    bounds, which cap each waiting job's worth by the spread it pays there, stay at least CP-SAT's
    proven optimum."""
    inst = _gang_round(seed)
    res = _optimum(inst)
    assert gpu_knapsack_bound(inst) >= res.objective - 1e-9
    assert incremental_bound.fill_bound(inst) >= res.objective - 1e-9


def test_the_gang_rounds_charge_spread_beyond_the_empty_nodes_one():
    """The rounds above exercise the cap: in most of them some waiting gang's fewest nodes on the
    room left are more than on empty nodes."""
    from optsched.room import fewest_holding, residual_nodes

    more = 0
    for seed in range(16):
        inst = _gang_round(seed)
        room = residual_nodes(inst).get("V100")
        for j in inst.jobs:
            if j.placement is None and room is not None:
                c, m = np.array([min(j.profile.cpus_per_gpu)]), np.array([min(j.profile.mem_per_gpu_gb)])
                fits, k = fewest_holding(j.gpus, c, m, room)
                more += bool(fits[0] and k[0] > inst.spread_base("V100", j.gpus))
    assert more >= 8


def _mixed_round(seed: int) -> Instance | None:
    """A small round drawn more broadly than :func:`_pinned_round`: one or two GPU types, 4 or 8
    GPUs a node, fair rounds, both spread rules, waiting gangs of up to 6 GPUs, some running jobs
    preemptible; ``None`` where the draw is not a valid round."""
    rng = np.random.default_rng(seed)
    d = generate(nodes=int(rng.integers(2, 5)), jobs=int(rng.integers(6, 12)), seed=seed, gpus_per_node=int(rng.choice([4, 8])),
                 cpus_per_node=int(rng.integers(8, 33)), mem_per_node_gb=int(rng.integers(60, 300)),
                 job_sizes={1: 0.4, 2: 0.25, 3: 0.1, 4: 0.15, 6: 0.1}, grid="coarse",
                 gpu_types=["V100"] if rng.random() < 0.5 else ["V100", "K80"], fair=bool(rng.random() < 0.3),
                 spread_from="fewest" if rng.random() < 0.7 else "one").to_dict()
    free = {n["id"]: [n["gpus"], n["cpus"], n["mem_gb"]] for n in d["nodes"]}
    kind = {n["id"]: n["gpu_type"] for n in d["nodes"]}
    waiting = int(rng.integers(2, 6))
    for j in d["jobs"][: len(d["jobs"]) - waiting]:
        allowed = None if j.get("gpu_speed") is None else set(j["gpu_speed"])

        def fits(nid: str, place: dict[str, int], allowed: set[str] | None = allowed) -> bool:
            # a type the job may use, and one type for all its nodes
            return (allowed is None or kind[nid] in allowed) and (not place or kind[nid] == kind[next(iter(place))])

        place = _place_running(free, j, [list(free)[k] for k in rng.permutation(len(free))], lambda: rng.random() < 0.5, fits)
        if place is None:
            continue
        j["placement"] = place
        j["preemptible"] = bool(rng.random() < 0.15)
        j["restart_s"] = 0.3 * d["round"]["duration_s"]
    try:
        return Instance.from_dict(d)
    except InputError:
        return None


def test_the_bounds_and_the_squeezed_greedy_on_broader_rounds():
    """On rounds drawn more broadly (two GPU types, fair rounds, both spread rules, preemptible
    running jobs): the knapsack, fill and priced bounds stay at least CP-SAT's proven optimum, and
    the squeezed greedy is feasible and at most it (on at least a dozen rounds it proves)."""
    from optsched.gang_prices import GangPrices
    from optsched.heuristics.node_refill import squeezed_greedy

    checked = 0
    for seed in range(30):
        inst = _mixed_round(seed)
        if inst is None:
            continue
        res = solve_round(inst, solver="cpsat", time_limit=20.0, **FAST)
        if res.status.value != "optimal":
            continue
        checked += 1
        assert gpu_knapsack_bound(inst) >= res.objective - 1e-9, seed
        assert incremental_bound.fill_bound(inst) >= res.objective - 1e-9, seed
        assert incremental_bound.fill_bound(inst, {}, refine=GangPrices()) >= res.objective - 1e-9, seed
        report = check_schedule(inst, squeezed_greedy(inst))
        assert not report, (seed, report)
        assert report.objective <= res.objective + 1e-6, seed
    assert checked >= 12
