"""Round chains (optsched.incremental): each round solved from the previous one's answer."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from optsched.checker import check_schedule
from optsched.errors import InputError
from optsched.gen import generate
from optsched.incremental import (
    BACKOFF_WIDER,
    PATHS,
    RoundSolver,
    RoundState,
    carry_over,
    gpu_knapsack_bound,
    round_key,
)
from optsched.model import Instance
from optsched.sim import cluster, policies
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate
from optsched.sim.experiment import prepare, run
from optsched.sim.solving import SolveRoundAllocator
from optsched.sim.workload import Trace, build_workload
from optsched.solve import solve_round

FAST = {"num_workers": 1}


def _workload(nodes, sizes, probs, n=36, seed=3, span_h=6.0):
    rng = np.random.default_rng(seed)
    g = rng.choice(sizes, size=n, p=probs)
    dur = rng.lognormal(np.log(900), 1.0, size=n)
    sub = np.sort(rng.uniform(0, span_h * 3600, size=n))
    tr = Trace.from_columns("chain", {"job_id": [f"j{i}" for i in range(n)], "submit_s": sub, "duration_s": dur, "gpus": g})
    return build_workload(tr, nodes, seed=seed, spread_factor=0.9, restart_s=60.0)


HOMOGENEOUS = cluster.homogeneous(4, gpus=8, cpus=32, mem_gb=256)
MIXED = cluster.heterogeneous([(2, "V100", 8, 64, 512), (2, "K80", 8, 48, 384)])
#: (name, nodes, job sizes, their probabilities, arrival span in hours)
SHAPES = [
    ("single-gpu", HOMOGENEOUS, [1], [1.0], 6.0),
    ("gang-heavy", HOMOGENEOUS, [1, 8, 16, 24], [0.2, 0.4, 0.3, 0.1], 6.0),
    ("heterogeneous", MIXED, [1, 2, 4, 8], [0.4, 0.3, 0.2, 0.1], 6.0),
    ("overload", HOMOGENEOUS, [1, 2, 4, 8], [0.3, 0.3, 0.2, 0.2], 0.2),
]


class _Recorder:
    """A warm RoundSolver as the simulator's allocator, keeping every round and its answer."""

    def __init__(self) -> None:
        self.chain = RoundSolver("cpsat", time_limit=0.1, options=FAST)
        self.rounds: list[tuple[Instance, object]] = []

    def __call__(self, instance):
        res = self.chain.solve(instance)
        self.rounds.append((instance, res))
        return res


@pytest.mark.parametrize("policy", ["las", "fifo"])
@pytest.mark.parametrize("shape", SHAPES, ids=[s[0] for s in SHAPES])
def test_warm_rounds_are_feasible_and_never_worse_than_the_carried_schedule(shape, policy):
    """On every round of a replay (single-GPU stream, gangs, two GPU types, a burst far beyond
    the cluster; FIFO pins running jobs, LAS preempts), the warm answer passes the independent
    checker, is worth at least the carried-over schedule, reports a bound at least its worth,
    and the cold solve of the same round is feasible too."""
    _, nodes, sizes, probs, span = shape
    rec = _Recorder()
    simulate(_workload(nodes, sizes, probs, span_h=span), nodes, policies.get_policy(policy), rec,
             SimConfig(round_s=300.0, progress=False, reuse_unchanged=False))
    assert len(rec.rounds) >= 8
    paths = set()
    for inst, res in rec.rounds:
        report = check_schedule(inst, res.schedule)
        assert not report, report[:2]
        assert res.objective == pytest.approx(report.objective, rel=1e-6, abs=1e-6)
        paths.add(res.stats["incremental"])
        if "carried_objective" in res.stats:
            assert res.objective >= res.stats["carried_objective"] - 1e-6
        if res.bound is not None:
            assert res.bound >= res.objective - 1e-6
    for inst, _ in rec.rounds[:: max(1, len(rec.rounds) // 4)]:
        cold = solve_round(inst, solver="cpsat", time_limit=0.1, **FAST)
        assert not check_schedule(inst, cold.schedule)
    assert paths <= set(PATHS)


def _chain_paths(search_backoff: int, time_limit: float = 0.1, deterministic: bool = True, work: float = 0.02) -> list:
    """(path, skipped, improved) of every round of the gang-heavy FIFO replay under one chain
    (``work``: CP-SAT's deterministic seconds where ``deterministic``)."""
    _, nodes, sizes, probs, span = SHAPES[1]
    opts = {**FAST, "deterministic_time": work} if deterministic else FAST
    chain = RoundSolver("cpsat", time_limit=time_limit, options=opts, search_backoff=search_backoff)
    out = []

    def alloc(inst):
        res = chain.solve(inst)
        assert not check_schedule(inst, res.schedule)
        assert res.bound is None or res.bound >= res.objective - 1e-6
        base = res.stats.get("refilled_objective", res.stats.get("carried_objective"))  # what the search starts from
        improved = base is not None and (res.objective > base * (1 + 1e-9) or res.status.value == "optimal")
        # what the solver added to the best responses' schedule (its hint), or a proof
        given = res.stats.get("improved_objective", res.stats.get("carried_objective"))
        found = given is not None and (res.objective > given * (1 + 1e-9) or res.status.value == "optimal")
        left = 1.0 - res.objective / res.bound if res.bound else 0.0  # the gap the round left
        out.append((res.stats["incremental"], res.stats.get("skipped"), improved, res.stats.get("open_gap"), left, found))
        return res

    simulate(_workload(nodes, sizes, probs, span_h=span), nodes, policies.get_policy("fifo"), alloc,
             SimConfig(round_s=300.0, progress=False, reuse_unchanged=False))
    return out


def test_search_backoff_skips_after_fruitless_searches_doubling_up_to_its_cap():
    """After a search that does not improve the carried-over (or refilled) schedule, the chain
    skips the search in the next 1, 2, 4, ... rounds not closed by the bound (at most
    ``search_backoff``) whose gap is at most ``BACKOFF_WIDER`` times the one that search left, and
    a search that improves resets it; the solver, after the best responses, backs off by the same
    rule on what it alone adds; ``search_backoff=0`` searches every such round. (CP-SAT gets no
    work here, so that its searches find nothing and the backoffs run.)"""
    assert all(r[0] != "skipped" for r in _chain_paths(0, work=1e-9))
    rounds = _chain_paths(2, work=1e-9)
    assert any(r[0] == "skipped" for r in rounds)
    skip, nxt, ref = 0, 1, 0.0
    solver = [0, 1, 0.0]  # the solver's own backoff: skip, next skip, gap
    kinds = set()
    for path, why, improved, open_gap, left, found in rounds:
        if path in ("cold", "reused", "carried"):
            continue
        if skip and open_gap <= BACKOFF_WIDER * ref:
            assert (path, why) == ("skipped", "backoff")
            skip -= 1
            continue
        if why != "time" and solver[0] and left <= BACKOFF_WIDER * solver[2]:
            assert (path, why) == ("skipped", "solver-backoff")
            solver[0] -= 1
        elif path == "searched":
            solver = [0, 1, solver[2]] if found else [min(solver[1], 2), min(2 * solver[1], 2), left]
        else:
            assert why == "time"
        kinds.add(why or path)
        skip, nxt, ref = (0, 1, ref) if improved else (min(nxt, 2), min(2 * nxt, 2), left)
    assert {"searched", "solver-backoff"} <= kinds


def test_a_search_that_would_overrun_the_time_limit_is_skipped_unless_deterministic():
    """Where the best responses leave less than a quarter of the round's time limit, the round
    returns their schedule with the knapsack bound (``skipped``: ``time``); with
    ``deterministic_time`` the chain searches anyway, so that it stays reproducible."""
    assert ("skipped", "time") in {r[:2] for r in _chain_paths(0, time_limit=1e-6, deterministic=False)}
    assert all(r[1] != "time" for r in _chain_paths(0, time_limit=1e-6, deterministic=True))


@pytest.mark.parametrize("value", [-1, 1.5, True, "8", None])
def test_search_backoff_must_be_a_count(value):
    with pytest.raises(InputError, match="search_backoff"):
        RoundSolver(search_backoff=value)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["mixed", "gangs", "fair"])
def test_the_knapsack_bound_is_at_least_the_proven_optimum(seed, kind):
    """The cheap bound that ends a round early is a bound: never below a proven optimum (two GPU
    types, gangs over several nodes that pay their spread, fair rounds that restrict the points)."""
    sizes = {1: 0.3, 4: 0.2, 8: 0.2, 12: 0.2, 16: 0.1} if kind == "gangs" else {1: 0.9, 2: 0.1}
    inst = generate(nodes=3 if kind == "gangs" else 2, jobs=4 + seed, seed=seed, running_fraction=0.3, gpu_types=("V100", "K80"),
                    job_sizes=sizes, fair=kind == "fair", cpus_per_node=24 if kind == "gangs" else 48)
    res = solve_round(inst, solver="cpsat", time_limit=10.0, **FAST)
    assert res.status.value == "optimal"
    assert gpu_knapsack_bound(inst) >= res.objective - 1e-9


@pytest.mark.parametrize("seed", range(8))
def test_the_knapsack_bound_with_pinned_jobs_is_at_least_the_proven_optimum(seed):
    """Where running jobs are pinned, the bound shares each node's cores and memory among the
    jobs pinned there: tighter, and still never below a proven optimum."""
    d = generate(nodes=2, jobs=8, seed=seed, running_fraction=0.6, cpus_per_node=24, gpu_types=("V100", "K80")).to_dict()
    for j in d["jobs"]:
        if j.get("placement"):
            j["preemptible"] = False
    inst = Instance.from_dict(d)
    res = solve_round(inst, solver="cpsat", time_limit=10.0, **FAST)
    assert res.status.value == "optimal"
    assert gpu_knapsack_bound(inst) >= res.objective - 1e-9


@pytest.mark.parametrize("seed", range(8))
def test_the_knapsack_bound_with_restarts_is_at_least_the_proven_optimum(seed):
    """A running job that moves pays its restart, one that stays is held to the grid points that
    fit on its own nodes: the bound counts the better of the two, and stays a bound."""
    d = generate(nodes=3, jobs=6 + seed % 3, seed=seed, running_fraction=0.6, cpus_per_node=24, gpu_types=("V100", "K80"),
                 job_sizes={1: 0.3, 4: 0.3, 8: 0.2, 12: 0.2}).to_dict()
    for j in d["jobs"]:
        j["restart_s"] = d["round"]["duration_s"] * (0.2 + 0.1 * (seed % 4))
        j["spread_factor"] = 0.8
    inst = Instance.from_dict(d)
    res = solve_round(inst, solver="cpsat", time_limit=10.0, **FAST)
    assert res.status.value == "optimal"
    assert gpu_knapsack_bound(inst) >= res.objective - 1e-9


def _split_gang(restart_s: float) -> Instance:
    """One 8-GPU job running 4 + 4 over two 8-GPU nodes (spread factor 0.5), a third node free."""
    d = generate(nodes=3, jobs=1, seed=0, job_sizes={8: 1.0}).to_dict()
    d["jobs"][0].update(placement={d["nodes"][0]["id"]: 4, d["nodes"][1]["id"]: 4}, restart_s=restart_s, spread_factor=0.5)
    return Instance.from_dict(d)


def test_the_knapsack_bound_charges_a_moved_running_job_its_restart():
    """Moving the split gang onto the free node doubles its spread factor but costs 90 % of the
    round: the best schedule keeps it where it runs, and the bound is that schedule's worth (one
    that ignored the restart would count the moved job at its full worth)."""
    d = generate(nodes=3, jobs=1, seed=0, job_sizes={8: 1.0}).to_dict()
    inst = _split_gang(restart_s=0.9 * d["round"]["duration_s"])
    res = solve_round(inst, solver="cpsat", time_limit=10.0, **FAST)
    assert res.status.value == "optimal"
    free = _split_gang(restart_s=0.0)
    assert gpu_knapsack_bound(inst) >= res.objective - 1e-9
    assert gpu_knapsack_bound(inst) <= res.objective * (1 + 1e-6)  # tight: staying is optimal
    assert gpu_knapsack_bound(free) > 1.1 * gpu_knapsack_bound(inst)  # without a restart, moving pays


def test_the_knapsack_bound_cache_keys_on_the_nodes():
    """A fit-factor cache shared between rounds on different nodes gives each round the bound it
    gets without one."""
    small = generate(nodes=2, jobs=6, seed=1, cpus_per_node=12, job_sizes={4: 0.5, 8: 0.5})
    big = generate(nodes=2, jobs=6, seed=1, cpus_per_node=96, job_sizes={4: 0.5, 8: 0.5})
    cache: dict = {}
    for inst in (small, big, small):
        assert gpu_knapsack_bound(inst, cache=cache) == gpu_knapsack_bound(inst)
    assert cache


def _renamed(inst: Instance, name: str) -> Instance:
    d = inst.to_dict()
    d["name"] = name
    return Instance.from_dict(d)


def test_an_identical_round_reuses_the_answer_and_a_changed_round_does_not():
    inst = generate(nodes=3, jobs=10, seed=4)
    chain = RoundSolver("cpsat", time_limit=1.0, options=FAST)
    first = chain.solve(inst)
    again = chain.solve(_renamed(inst, "next"))  # only the name differs
    assert again.stats["incremental"] == "reused"
    assert again.schedule.jobs == first.schedule.jobs and again.schedule.instance == "next"
    assert again.objective == pytest.approx(first.objective)
    d = inst.to_dict()
    d["jobs"][0]["weight"] = d["jobs"][0].get("weight", 1.0) * 2
    changed = Instance.from_dict(d)
    assert round_key(changed) != round_key(inst)
    res = chain.solve(changed)
    assert res.stats["incremental"] != "reused"
    assert not check_schedule(changed, res.schedule)
    off = RoundSolver("cpsat", time_limit=1.0, reuse=False, options=FAST)
    off.solve(inst)
    assert off.solve(inst).stats["incremental"] != "reused"


def test_the_carried_schedule_keeps_what_stays_feasible_and_drops_the_rest():
    inst = generate(nodes=3, jobs=8, seed=2)
    prev = solve_round(inst, solver="cpsat", time_limit=1.0, **FAST).schedule
    d = inst.to_dict()
    gone = next(iter(prev.jobs))
    d["jobs"] = [j for j in d["jobs"] if j["id"] != gone]
    d["nodes"] = d["nodes"][:2]  # the third node is gone too: its jobs are placed again
    nxt = Instance.from_dict(d)
    carried = carry_over(nxt, prev)
    assert not check_schedule(nxt, carried)
    assert gone not in carried.jobs
    kept = {j for j, a in prev.jobs.items() if j != gone and set(a.nodes) <= {n["id"] for n in d["nodes"]}}
    assert kept <= set(carried.jobs)


def test_a_previous_schedule_that_no_longer_fits_is_cut_to_its_feasible_part(monkeypatch):
    """A node lost most of its cores and one job's profile lost the grid point it ran at: the
    chain's round is still feasible, keeps every job on the untouched nodes, and equals the
    carry-over of the previous schedule's largest feasible part."""
    inst = generate(nodes=3, jobs=8, seed=2)
    chain = RoundSolver("cpsat", time_limit=1.0, options=FAST)
    prev = chain.solve(inst).schedule
    d = inst.to_dict()
    shrunk = d["nodes"][0]["id"]
    d["nodes"][0]["cpus"] = 1
    regridded = next(j for j, a in prev.jobs.items() if shrunk not in a.nodes)
    for j in d["jobs"]:
        if j["id"] == regridded:
            prof = j["profile"]
            point = prev.jobs[regridded].cpus_per_gpu
            prof["cpus_per_gpu"] = [c + 100 if c == point else c for c in prof["cpus_per_gpu"]]
            prof["cpus_per_gpu"], rows = zip(*sorted(zip(prof["cpus_per_gpu"], prof["throughput"], strict=True)), strict=True)
            prof["cpus_per_gpu"], prof["throughput"] = list(prof["cpus_per_gpu"]), [list(r) for r in rows]
            j["demand"] = {"cpus_per_gpu": prof["cpus_per_gpu"][0], "mem_per_gpu_gb": prof["mem_per_gpu_gb"][0]}
    nxt = Instance.from_dict(d)
    import optsched.incremental as incremental

    cut = []
    monkeypatch.setattr(incremental, "carry_over", lambda i, p: cut.append(1) or carry_over(i, p))
    res = chain.solve(nxt)
    assert cut == [1]  # the schedule as it stood failed the check
    assert not check_schedule(nxt, res.schedule)
    assert res.stats["carried_objective"] == pytest.approx(check_schedule(nxt, carry_over(nxt, prev)).objective)


def test_state_is_one_round_and_round_trips():
    inst = generate(nodes=2, jobs=6, seed=1)
    chain = RoundSolver("cpsat", time_limit=1.0, options=FAST)
    for i in range(5):
        chain.solve(_renamed(inst, f"r{i}"))
    assert isinstance(chain.state, RoundState)
    size = sys.getsizeof(chain.state.to_dict()["result"]["jobs"])
    chain.solve(_renamed(inst, "r5"))
    assert sys.getsizeof(chain.state.to_dict()["result"]["jobs"]) == size  # nothing accumulates
    back = RoundState.from_dict(chain.state.to_dict())
    assert back.key == chain.state.key and back.result.schedule.jobs == chain.state.result.schedule.jobs
    resumed = RoundSolver("cpsat", time_limit=1.0, options=FAST, state=back)
    assert resumed.solve(_renamed(inst, "r6")).stats["incremental"] == "reused"
    chain.reset()
    assert chain.state is None
    with pytest.raises(InputError, match="state"):
        RoundState.from_dict({"key": "k", "result": {"jobs": {}}})


def test_the_digest_is_computed_only_where_a_round_may_repeat_the_last(monkeypatch):
    """A round whose jobs or nodes differ from the last one's is solved without its digest; the
    state's key is computed when asked for, and equals the digest of the round it answered."""
    import optsched.incremental as incremental

    calls = []
    monkeypatch.setattr(incremental, "round_key", lambda inst: calls.append(inst.name) or round_key(inst))
    inst = generate(nodes=3, jobs=8, seed=5)
    d = inst.to_dict()
    d["jobs"] = d["jobs"][:-1]
    fewer = Instance.from_dict(d)
    chain = RoundSolver("cpsat", time_limit=1.0, options=FAST)
    chain.solve(inst)
    chain.solve(fewer)
    assert calls == []
    assert chain.state.key == round_key(fewer) and calls == [fewer.name]
    calls.clear()
    assert chain.solve(_renamed(fewer, "again")).stats["incremental"] == "reused"
    assert calls == ["again"]
    off = RoundSolver("cpsat", time_limit=1.0, reuse=False, options=FAST)
    off.solve(inst)
    assert off.state.key == ""


def test_a_searched_round_gives_cpsat_the_greedy_starts_it_built(monkeypatch):
    """The greedy starts of a round's best responses go to cpsat (option ``greedy_starts``), which
    then builds none of its own: one build per round."""
    import optsched.exact.core as core
    import optsched.incremental as incremental

    built = []
    real = core.greedy_starts
    monkeypatch.setattr(core, "greedy_starts", lambda *a, **k: built.append("cpsat") or real(*a, **k))
    monkeypatch.setattr(incremental, "greedy_starts", lambda *a, **k: built.append("chain") or real(*a, **k))
    chain = RoundSolver("cpsat", time_limit=0.5, gap_target=0.0, options=FAST)
    inst = generate(nodes=3, jobs=12, seed=7)
    chain.solve(inst)
    d = inst.to_dict()
    d["jobs"] = d["jobs"][1:]
    built.clear()
    res = chain.solve(Instance.from_dict(d))
    assert res.stats["incremental"] == "searched"
    assert built == ["chain"]


def _staying_reference(instance, job):
    """The staying value as array operations (what :func:`optsched.knapsack_bound._staying_value` computes)."""
    nodes = [instance.node(n) for n in job.placement]
    k = np.array(list(job.placement.values()))
    c, m = np.asarray(job.profile.cpus_per_gpu), np.asarray(job.profile.mem_per_gpu_gb)
    fits_c = (c[:, None] * k[None, :] <= np.array([n.cpus for n in nodes])[None, :]).all(axis=1)
    fits_m = (m[:, None] * k[None, :] <= np.array([n.mem_gb for n in nodes])[None, :]).all(axis=1)
    thr = np.asarray(job.profile.throughput, dtype=np.float64)
    if instance.round.fair:
        thr = np.where(thr >= job.demand_throughput * (1 - 1e-12), thr, 0.0)
    thr = np.where(fits_c[:, None] & fits_m[None, :], thr, 0.0)
    base = instance.spread_base(nodes[0].gpu_type, job.gpus)
    return job.speed(nodes[0].gpu_type) * float(thr.max()) * job.spread_factor ** (len(job.placement) - base)


@pytest.mark.parametrize("fair", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_the_staying_value_is_the_array_formula_exactly(seed, fair):
    from optsched.knapsack_bound import _staying_value

    inst = generate(nodes=6, jobs=30, seed=seed, running_fraction=0.6, fair=fair, cpus_per_node=24, mem_per_node_gb=200)
    running = [j for j in inst.jobs if j.placement]
    assert running
    for j in running:
        assert _staying_value(inst, j) == _staying_reference(inst, j)


def test_bad_settings_are_refused_by_name():
    with pytest.raises(InputError, match="solver"):
        RoundSolver("fungible-greedy")
    with pytest.raises(InputError, match="gap_target"):
        RoundSolver(gap_target=1.5)
    with pytest.raises(InputError, match="time_limit"):
        RoundSolver(time_limit=0)


def test_the_simulator_runs_a_warm_chain_by_its_allocator_variant():
    """``cpsat@warm`` in the simulator: every round answered by the chain, schedules checked."""
    setup = prepare("synthetic:synergy:jobs=30", cluster="4x8", cpus=24, mem_gb=500, restart_s=0.0, seed=0)
    res = run(setup, policy="fifo", allocator="cpsat@warm", time_limit=0.1, config=SimConfig(progress=False, check=True),
              num_workers=1)
    assert res.summary()["finished"] == 30
    alloc = SolveRoundAllocator("cpsat", time_limit=0.1, incremental=True, num_workers=1)
    assert alloc._chain is not None
    assert res.info["chain_paths"]
    with pytest.raises(InputError, match="allocator"):
        run(setup, allocator="cpsat@hot", time_limit=0.1)
    with pytest.raises(InputError, match="hint"):  # a chain needs a solver that takes the last round's schedule
        run(setup, allocator="fungible-greedy@warm", time_limit=0.1)


def test_the_sim_env_reference_is_a_checked_chain_over_the_episode():
    """``SimEnv.reference()``: the exact chain's answer to the round the agent is deciding."""
    from optsched.envs import SimEnv

    nodes = cluster.homogeneous(2, gpus=8, cpus=32, mem_gb=256)
    env = SimEnv(_workload(nodes, [1, 2], [0.7, 0.3], n=12, span_h=0.5), nodes, round_s=300, max_jobs=10,
                 reference_chain=RoundSolver("cpsat", time_limit=0.2, options=FAST))
    _, info = env.reset(seed=0)
    paths = []
    for _ in range(2_000):
        if env._steps is None or len(paths) >= 3:
            break
        ref = env.reference()
        assert not check_schedule(env.instance, ref.schedule)
        paths.append(ref.stats["incremental"])
        start = env._round
        while env._round == start and env._steps is not None:
            _, _, term, trunc, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    assert paths and paths[0] in ("cold", "carried")
    assert len(paths) >= 2 and all(p in ("carried", "searched", "reused") for p in paths[1:])
    env.reset(seed=0)
    assert env.reference_chain.state is None


@pytest.mark.parametrize("seed", range(30))
def test_the_knapsack_is_the_brute_force_optimum(seed):
    """The GPU knapsack (one pass per job size) equals the best subset found by enumeration, and
    its fractional relaxation beyond the cell limit is never below it."""
    import itertools

    from optsched import knapsack_bound

    rng = np.random.default_rng(seed)
    items = [(float(rng.uniform(0, 3)) if rng.random() > 0.1 else 0.0, int(rng.choice([1, 1, 2, 4, 8]))) for _ in range(int(rng.integers(1, 11)))]
    capacity = int(rng.integers(0, 17))
    best = max(sum(v for v, _ in s) for r in range(len(items) + 1) for s in itertools.combinations(items, r)
               if sum(g for _, g in s) <= capacity)
    assert knapsack_bound._knapsack(items, capacity) == pytest.approx(best)
    old = knapsack_bound.KNAPSACK_CELLS
    try:
        knapsack_bound.KNAPSACK_CELLS = 0
        assert knapsack_bound._knapsack(items, capacity) >= best - 1e-9
    finally:
        knapsack_bound.KNAPSACK_CELLS = old


@pytest.mark.parametrize(("solver", "family"), [("cpsat", "exact"), ("lns", "heuristic")])
def test_a_round_answered_without_the_solver_reports_its_family(solver, family):
    """A carried round names the chain's solver and that solver's family, as a searched one does."""
    inst = generate(3, 8, seed=4)
    chain = RoundSolver(solver, time_limit=0.5, options={"deterministic_time": 0.1})
    first = chain.solve(inst)
    second = chain.solve(inst.to_dict() | {"name": "again"})
    for res in (first, second):
        assert (res.solver, res.method) == (solver, family)
        assert not check_schedule(inst, res.schedule)
