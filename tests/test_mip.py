"""The shared MIP description and its solvers (scip, cbc, pulp) and LP bound.

Every solver must reach the same optimum (1e-6 relative) as an independent enumeration on tiny
instances; every schedule must pass the independent checker; the LP bound must be >= the optimum,
which must be >= every heuristic; the description must accept (encode) every feasible schedule.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import check_schedule, load_instance, solve_round
from optsched.mip.bound import lp_bound
from optsched.mip.data import RoundData, pareto_points
from optsched.mip.description import build
from optsched.mip.solvers import CbcSolver, PulpSolver, ScipSolver
from optsched.model import Instance, Job, Node, Profile, Round
from optsched.result import Status
from optsched.schedule import Assignment, Schedule

MIP_SOLVERS = ("scip", "cbc", "pulp")
REL = 1e-6


# --- instances ---------------------------------------------------------------------------------------


def _profile(rows: int = 3, cols: int = 2, base: float = 10.0) -> Profile:
    return Profile(
        tuple(range(1, rows + 1)),
        tuple(8 * (b + 1) for b in range(cols)),
        tuple(tuple(base + 3 * a + 2 * b + (a * b) % 3 for b in range(cols)) for a in range(rows)),
    )


def hand_instance(fair: bool = False) -> Instance:
    """Two GPU types, a spreading gang, a running job with a restart cost, a type-restricted job."""
    prof = Profile((1, 2, 4), (8, 16), ((10, 12), (14, 18), (15, 25)))
    nodes = (Node("n0", "V100", 4, 8, 64), Node("n1", "V100", 4, 8, 64), Node("n2", "K80", 2, 16, 64))
    jobs = (
        Job("a", 4, prof, (2, 16), gpu_speed={"V100": 1.0, "K80": 0.5}, spread_factor=0.9),
        Job("b", 2, prof, (2, 16), spread_factor=0.8, placement={"n0": 1, "n1": 1}, restart_s=60),
        Job("c", 3, prof, (1, 8), weight=2.0),
        Job("d", 1, prof, (4, 16), gpu_speed={"K80": 1.0}),
    )
    return Instance("hand-3n-4j" + ("-fair" if fair else ""), nodes, jobs, Round(300, fair))


@st.composite
def tiny_instances(draw, max_nodes: int = 3, max_jobs: int = 3, max_gpus: int = 3) -> Instance:
    """Random valid rounds small enough to enumerate: 1-3 nodes, 1-3 jobs, 2x2 grids."""
    types = ["A", "B"]
    n_nodes = draw(st.integers(1, max_nodes))
    nodes = tuple(
        Node(
            f"n{i}",
            draw(st.sampled_from(types)),
            draw(st.integers(1, max_gpus)),
            draw(st.integers(1, 12)),
            draw(st.sampled_from([16, 24, 32, 48, 64])),
        )
        for i in range(n_nodes)
    )
    jobs = []
    for j in range(draw(st.integers(1, max_jobs))):
        thr = tuple(tuple(draw(st.floats(1.0, 20.0).map(lambda v: round(v, 2))) for _ in range(2)) for _ in range(2))
        prof = Profile((draw(st.sampled_from([1, 2])), 4), (8, draw(st.sampled_from([12, 16, 32]))), thr)
        speed = draw(st.sampled_from([None, {"A": 1.0, "B": 0.6}, {"A": 1.0}, {"B": 1.5}]))
        allowed = [n for n in nodes if speed is None or n.gpu_type in speed]
        gpus = draw(st.integers(1, max_gpus))
        placement, restart = None, 0.0
        if allowed and draw(st.booleans()):
            t = draw(st.sampled_from(sorted({n.gpu_type for n in allowed})))
            on = [n.id for n in allowed if n.gpu_type == t]
            k = draw(st.integers(1, min(len(on), gpus)))
            split = [1] * k
            for _ in range(gpus - k):
                split[draw(st.integers(0, k - 1))] += 1
            placement = dict(zip(on[:k], split, strict=True))
            restart = draw(st.sampled_from([0.0, 60.0, 150.0, 300.0, 450.0]))
        jobs.append(
            Job(
                f"j{j}",
                gpus,
                prof,
                (prof.cpus_per_gpu[draw(st.integers(0, 1))], prof.mem_per_gpu_gb[draw(st.integers(0, 1))]),
                weight=draw(st.sampled_from([0.5, 1.0, 2.0])),
                gpu_speed=speed,
                spread_factor=draw(st.sampled_from([1.0, 0.9, 0.6])),
                placement=placement,
                restart_s=restart,
            )
        )
    return Instance("tiny", nodes, tuple(jobs), Round(300.0, draw(st.booleans()), spread_from=draw(st.sampled_from(["fewest", "one"]))))


# --- an independent enumeration (from the contract, not from the description) --------------------------


def _splits(total: int, caps: list[int]):
    """Every way to put ``total`` GPUs on nodes with these free capacities (each node 0..cap)."""
    if not caps:
        if total == 0:
            yield ()
        return
    for k in range(min(total, caps[0]) + 1):
        for rest in _splits(total - k, caps[1:]):
            yield (k, *rest)


def brute_force(inst: Instance) -> float:
    """The optimum by enumerating every job's (skip | type, grid point, split over nodes)."""
    nodes = inst.nodes

    def kmin(t: str, g: int) -> int:
        """Spread is paid beyond this many nodes: the fewest of type t holding g GPUs (largest
        first) when the round counts from the fewest, else one."""
        if inst.round.spread_from == "one":
            return 1
        sizes = sorted((n.gpus for n in nodes if n.gpu_type == t), reverse=True)
        return next(k for k in range(1, len(sizes) + 1) if sum(sizes[:k]) >= g)

    def worth(job: Job, t: str, thr: float, used: dict[str, int]) -> float:
        speed = 1.0 if job.gpu_speed is None else job.gpu_speed[t]
        v = job.weight * speed * thr / job.profile.at(*job.demand) * job.spread_factor ** (len(used) - kmin(t, job.gpus))
        if job.placement is not None and dict(job.placement) != used:
            v *= 1 - job.restart_s / inst.round.duration_s
        return v

    options = []
    for job in inst.jobs:
        opts = [None]
        floor = job.profile.at(*job.demand) if inst.round.fair else 0.0
        for t in {n.gpu_type for n in nodes}:
            if job.gpu_speed is not None and t not in job.gpu_speed:
                continue
            idx = [i for i, n in enumerate(nodes) if n.gpu_type == t]
            for c, m, thr in job.profile.points():
                if thr < floor:
                    continue
                for split in _splits(job.gpus, [nodes[i].gpus for i in idx]):
                    used = {nodes[i].id: k for i, k in zip(idx, split, strict=True) if k}
                    load = [0] * len(nodes)
                    for i, k in zip(idx, split, strict=True):
                        load[i] = k
                    opts.append((worth(job, t, thr, used), tuple(load), c, m))
        options.append(opts)

    best = 0.0
    n = len(nodes)

    def dfs(j: int, g: list[int], c: list[int], m: list[int], value: float) -> None:
        nonlocal best
        if j == len(options):
            best = max(best, value)
            return
        for opt in options[j]:
            if opt is None:
                dfs(j + 1, g, c, m, value)
                continue
            v, load, cc, mm = opt
            g2 = [g[i] + load[i] for i in range(n)]
            c2 = [c[i] + cc * load[i] for i in range(n)]
            m2 = [m[i] + mm * load[i] for i in range(n)]
            if all(g2[i] <= nodes[i].gpus and c2[i] <= nodes[i].cpus and m2[i] <= nodes[i].mem_gb for i in range(n)):
                dfs(j + 1, g2, c2, m2, value + v)

    dfs(0, [0] * n, [0] * n, [0] * n, 0.0)
    return best


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=1e-9)


# --- hand-built instances ----------------------------------------------------------------------------


@pytest.mark.parametrize("fair", [False, True])
@pytest.mark.parametrize("solver", MIP_SOLVERS)
def test_hand_instance_matches_enumeration(solver: str, fair: bool) -> None:
    """scip, cbc and pulp prove the enumerated optimum on a hand-built round, with a bound equal to it."""
    inst = hand_instance(fair)
    best = brute_force(inst)
    res = solve_round(inst, solver=solver, time_limit=20.0)
    assert res.status is Status.OPTIMAL
    assert _close(res.objective, best), (res.objective, best)
    assert res.bound is not None and _close(res.bound, best)
    assert not check_schedule(inst, res.schedule)


def test_restart_cost_keeps_running_job_in_place() -> None:
    """A running job whose restart costs half the round stays where it is when nothing forces a move."""
    prof = _profile()
    nodes = (Node("n0", "A", 4, 16, 64), Node("n1", "A", 4, 16, 64))
    job = Job("r", 2, prof, (1, 8), placement={"n1": 2}, restart_s=150.0)
    inst = Instance("stay", nodes, (job,), Round(300.0))
    for s in MIP_SOLVERS:
        res = solve_round(inst, solver=s, time_limit=10.0)
        assert dict(res.schedule.jobs["r"].nodes) == {"n1": 2}, s
        assert _close(res.objective, prof.at(3, 16) / prof.at(1, 8))


def test_restart_at_least_round_forbids_moves_but_not_staying() -> None:
    """restart_s >= duration_s: moving is worth <= 0, so the job runs only where it is (or not at all)."""
    prof = _profile()
    nodes = (Node("n0", "A", 4, 16, 64), Node("n1", "A", 2, 2, 64))
    # on n1 it only fits at 1 core per GPU; on n0 it could get 3, but moving costs the whole round
    job = Job("r", 2, prof, (1, 8), placement={"n1": 2}, restart_s=300.0)
    inst = Instance("stuck", nodes, (job,), Round(300.0))
    res = solve_round(inst, solver="scip", time_limit=10.0)
    assert dict(res.schedule.jobs["r"].nodes) == {"n1": 2}
    assert res.schedule.jobs["r"].cpus_per_gpu == 1


def test_spread_factor_prefers_one_node() -> None:
    """A 4-GPU gang with spread_factor 0.5 takes one node over two when both fit."""
    prof = _profile()
    nodes = (Node("n0", "A", 2, 16, 64), Node("n1", "A", 2, 16, 64), Node("n2", "A", 4, 16, 64))
    inst = Instance("spread", nodes, (Job("s", 4, prof, (1, 8), spread_factor=0.5),), Round())
    for s in MIP_SOLVERS:
        res = solve_round(inst, solver=s, time_limit=10.0)
        assert dict(res.schedule.jobs["s"].nodes) == {"n2": 4}, s


def test_empty_rounds() -> None:
    """No nodes, or no job that fits anywhere: the empty schedule, proven optimal, bound 0."""
    prof = _profile()
    no_fit = Instance("nofit", (Node("n0", "A", 1, 1, 8),), (Job("big", 2, prof, (1, 8)),), Round())
    no_nodes = Instance("nonodes", (), (Job("j", 1, prof, (1, 8)),), Round())
    for inst in (no_fit, no_nodes):
        for s in MIP_SOLVERS:
            res = solve_round(inst, solver=s, time_limit=5.0)
            assert len(res.schedule) == 0 and res.status is Status.OPTIMAL and res.bound == 0.0
        assert lp_bound(inst) == 0.0


# --- the description itself ---------------------------------------------------------------------------


def test_pareto_points_keep_fair_demand_and_drop_dominated() -> None:
    prof = Profile((1, 2), (8, 16), ((5.0, 5.0), (9.0, 4.0)))
    job = Job("p", 1, prof, (2, 16))  # (2, 16) gives 4.0: dominated by (1, 8) at 5.0
    assert pareto_points(job, fair=False) == [(1, 8, 5.0), (2, 8, 9.0)]
    job_fair = Job("p", 1, prof, (1, 16))  # fair floor 5.0 keeps (1, 8) and (2, 8)
    assert pareto_points(job_fair, fair=True) == [(1, 8, 5.0), (2, 8, 9.0)]


def test_encode_decode_round_trip_and_row_check() -> None:
    """A feasible schedule encodes to a vector that satisfies every row and decodes back to itself."""
    inst = hand_instance()
    sched = Schedule(
        inst.name,
        {
            "a": Assignment({"n0": 2, "n1": 2}, 1, 8),
            "b": Assignment({"n0": 1, "n1": 1}, 2, 16),
            "d": Assignment({"n2": 1}, 4, 16),
        },
    )
    assert not check_schedule(inst, sched)
    mip = build(inst)
    x = mip.encode(sched)
    assert mip.model.violations(x) == []
    back = mip.decode(x)
    assert back.jobs["b"] == sched.jobs["b"] and dict(back.jobs["a"].nodes) == {"n0": 2, "n1": 2}
    assert _close(mip.model.objective_value(x), check_schedule(inst, back).objective)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_instances(), st.randoms(use_true_random=False))
def test_every_feasible_schedule_is_in_the_description(inst: Instance, rnd) -> None:
    """Random feasible schedules (random greedy) encode to vectors satisfying every row, worth at least as much."""
    mip = build(inst)
    sched = _random_feasible(inst, rnd)
    assert not check_schedule(inst, sched)
    x = mip.encode(sched, skip_unencodable=True)
    assert mip.model.violations(x) == []
    kept = Schedule(inst.name, {j: a for j, a in sched.jobs.items() if _encodable(mip, inst, j, a)})
    assert mip.model.objective_value(x) >= check_schedule(inst, kept).objective - 1e-9


def _encodable(mip, inst, j, a) -> bool:
    try:
        mip.encode(Schedule(inst.name, {j: a}))
        return True
    except ValueError:
        return False


def _random_feasible(inst: Instance, rnd) -> Schedule:
    """A random schedule built job by job, keeping only assignments that leave it feasible."""
    jobs: dict[str, Assignment] = {}
    for job in inst.jobs:
        for _ in range(6):
            t = rnd.choice(inst.gpu_types) if inst.nodes else None
            if t is None or job.speed(t) is None:
                continue
            c = rnd.choice(job.profile.cpus_per_gpu)
            m = rnd.choice(job.profile.mem_per_gpu_gb)
            on = [n.id for n in inst.nodes if n.gpu_type == t]
            alloc: dict[str, int] = {}
            for _ in range(job.gpus):
                nid = rnd.choice(on)
                alloc[nid] = alloc.get(nid, 0) + 1
            if job.placement and rnd.random() < 0.5:
                alloc, c, m = dict(job.placement), job.demand[0], job.demand[1]
            trial = Schedule(inst.name, {**jobs, job.id: Assignment(alloc, c, m)})
            if not check_schedule(inst, trial):
                jobs[job.id] = trial.jobs[job.id]
                break
    return Schedule(inst.name, jobs)


# --- agreement on random tiny rounds ----------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_instances())
def test_random_tiny_all_solvers_agree_with_enumeration(inst: Instance) -> None:
    """scip == cbc == pulp == enumeration (1e-6 relative); lp_bound >= optimum; all schedules feasible."""
    best = brute_force(inst)
    for s in MIP_SOLVERS:
        res = solve_round(inst, solver=s, time_limit=10.0)
        assert res.status is Status.OPTIMAL, (s, res.stats)
        assert _close(res.objective, best), (s, res.objective, best)
        assert not check_schedule(inst, res.schedule)
    for relaxation in ("full", "pooled", "type"):
        assert lp_bound(inst, relaxation=relaxation) >= best - 1e-6 * max(1.0, best), relaxation


def test_cpsat_agrees_on_tiny_instances() -> None:
    """cpsat == scip == cbc == pulp on the hand-built rounds."""
    for inst in (hand_instance(False), hand_instance(True)):
        values = {s: solve_round(inst, solver=s, time_limit=20.0).objective for s in ("cpsat", *MIP_SOLVERS)}
        assert all(_close(v, values["cpsat"]) for v in values.values()), values


# --- time limits, statuses, hints --------------------------------------------------------------------


def _medium(n_nodes: int = 8, n_jobs: int = 24, seed: int = 0) -> Instance:
    import random

    rnd = random.Random(seed)
    nodes = tuple(Node(f"n{i}", "A" if i % 2 else "B", 4, rnd.choice([16, 24, 32]), rnd.choice([128, 192])) for i in range(n_nodes))
    jobs = tuple(
        Job(
            f"j{k}",
            rnd.choice([1, 1, 2, 2, 4, 8]),
            _profile(4, 3, base=rnd.uniform(5, 20)),
            (2, 16),
            weight=rnd.choice([1.0, 2.0]),
            spread_factor=rnd.choice([1.0, 0.9]),
        )
        for k in range(n_jobs)
    )
    return Instance(f"medium-{n_nodes}n-{n_jobs}j", nodes, jobs, Round())


@pytest.mark.parametrize("cls", [ScipSolver, CbcSolver, PulpSolver])
def test_time_limit_honoured_and_schedule_feasible(cls) -> None:
    """A short time limit on a round none of them proves in time: they return on time, feasible, status time_limit."""
    import time

    inst = _medium(16, 60)
    limit = 1.0
    cpu = time.process_time()
    res = cls().solve(inst, time_limit=limit, seed=0)
    cpu = time.process_time() - cpu
    if cls is CbcSolver:  # MPSolver's CBC counts CPU seconds (documented): on a busy machine wall time runs over
        assert cpu <= limit + 1.5, cpu
    else:
        assert res.time_s <= limit + 1.5, res.time_s
    assert not check_schedule(inst, res.schedule)
    assert res.status in (Status.TIME_LIMIT, Status.OPTIMAL)
    if res.status is Status.TIME_LIMIT and res.bound is not None:
        assert res.bound >= res.objective - 1e-6
    # never worse than the greedy schedule it starts from (returned when the solver found worse or nothing)
    assert res.objective >= res.stats["greedy_value"] - 1e-9
    assert res.stats["incumbent_from"] in ("solver", "greedy")


def test_greedy_off_gives_the_bare_solver() -> None:
    res = ScipSolver().solve(hand_instance(), time_limit=10.0, seed=0, greedy=False)
    assert "greedy_value" not in res.stats and res.stats["hint"] == "none" and res.status is Status.OPTIMAL


def test_scip_uses_hint_and_cbc_says_it_ignores_it() -> None:
    """SCIP receives the hint (its value shows in stats); CBC says plainly that it drops hints."""
    inst = hand_instance()
    hint = solve_round(inst, solver="cbc", time_limit=10.0).schedule
    scip = ScipSolver().solve(inst, time_limit=10.0, seed=0, hint=hint)
    assert scip.stats["hint"] == "used" and scip.stats["hint_value"] > 0
    cbc = CbcSolver().solve(inst, time_limit=10.0, seed=0, hint=hint)
    assert "ignored" in cbc.stats["hint"] and "ignored" in cbc.stats["seed"]


@pytest.mark.parametrize(("threads", "passed"), [(1, None), (2, 2)])
def test_pulp_runs_cbc_serially_with_one_thread(monkeypatch, threads: int, passed: int | None) -> None:
    """One thread is CBC's serial search: PuLP gets no ``threads`` (CBC's "-threads 1" starts a worker
    thread, which CBC 2.10.3 at times never runs, waiting out the time limit on a solved round)."""
    import pulp

    seen: dict[str, object] = {}
    real = pulp.PULP_CBC_CMD

    def spy(**kwargs):
        seen.update(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(pulp, "PULP_CBC_CMD", spy)
    res = PulpSolver().solve(hand_instance(), time_limit=10.0, seed=0, num_threads=threads)
    assert res.status is Status.OPTIMAL and seen["threads"] == passed and res.stats["threads"] == threads


def test_unknown_option_is_refused() -> None:
    from optsched.errors import InputError

    with pytest.raises(InputError, match="options"):
        ScipSolver().solve(hand_instance(), time_limit=1.0, seed=0, bogus=1)


# --- bounds ----------------------------------------------------------------------------------------


def test_lp_bound_is_above_optimum_and_heuristics() -> None:
    """lp_bound >= optimum >= every registered heuristic, for every relaxation and backend."""
    from optsched.registry import methods

    inst = _medium(6, 16, seed=3)
    opt = solve_round(inst, solver="scip", time_limit=30.0)
    assert opt.status is Status.OPTIMAL
    for relaxation in ("full", "pooled", "type"):
        assert lp_bound(inst, relaxation=relaxation) >= opt.objective - 1e-6 * opt.objective
    assert lp_bound(inst, backend="cvxpy") >= opt.objective - 1e-5 * opt.objective
    for m in methods("heuristic"):
        h = solve_round(inst, solver=m.name, time_limit=2.0, seed=0)
        assert h.objective <= opt.objective + 1e-6 * opt.objective, m.name


def test_lp_bound_full_is_tighter_than_pooled() -> None:
    inst = _medium(6, 16, seed=4)
    full, pooled, typed = (lp_bound(inst, relaxation=r) for r in ("full", "pooled", "type"))
    assert full <= pooled + 1e-6 and pooled <= typed + 1e-6


def test_lp_bound_refuses_unknown_backend() -> None:
    from optsched.errors import InputError

    with pytest.raises(InputError, match="backend"):
        lp_bound(hand_instance(), backend="nope")
    with pytest.raises(InputError, match="relaxation"):
        lp_bound(hand_instance(), relaxation="nope")


def test_round_data_options_respect_gpu_speed_and_capacity() -> None:
    inst = hand_instance()
    data = RoundData(inst)
    types = data.types
    d = data.jobs[inst.job_idx("d")]
    assert {types[t] for t, _ in d.options} == {"K80"}
    big = replace(inst, jobs=(replace(inst.jobs[0], gpus=9),))
    assert RoundData(big).jobs[0].options == {}


# --- the instance library -------------------------------------------------------------------------

LIBRARY = Path(__file__).resolve().parents[1] / "instances"


@pytest.mark.parametrize("path", sorted((LIBRARY / "tiny").glob("*.json")), ids=lambda p: p.stem)
def test_tiny_library_all_exact_solvers_agree(path: Path) -> None:
    """cpsat == scip == cbc == pulp (1e-6 relative) on every tiny library round; lp_bound >= optimum."""
    inst = load_instance(path)
    results = {s: solve_round(inst, solver=s, time_limit=20.0, seed=0) for s in ("cpsat", *MIP_SOLVERS)}
    ref = results["scip"].objective
    for s, r in results.items():
        assert r.status is Status.OPTIMAL, s
        assert _close(r.objective, ref), (s, r.objective, ref)
    assert lp_bound(inst) >= ref - REL * ref


def test_small_library_round_mip_solvers_agree() -> None:
    """scip == cbc == pulp on the smallest 'small' library round (4 nodes, 12 jobs), all proven optimal."""
    inst = load_instance(LIBRARY / "small" / "s-4n-12j-01.json")
    values = {}
    for s in MIP_SOLVERS:
        r = solve_round(inst, solver=s, time_limit=30.0, seed=0)
        assert r.status is Status.OPTIMAL, s
        values[s] = r.objective
    assert all(_close(v, values["scip"]) for v in values.values()), values


@pytest.mark.slow
def test_lp_bound_is_fast_on_a_large_round() -> None:
    """1,024 nodes x 4,000 jobs, three GPU types: lp_bound in a few seconds (prints the time)."""
    import time

    from optsched.gen import generate

    inst = generate(1024, 4000, seed=1, gpu_types=("V100", "P100", "K80"), grid="coarse", running_fraction=0.3, restrict_fraction=0.2)
    start = time.perf_counter()
    bound = lp_bound(inst)
    elapsed = time.perf_counter() - start
    print(f"lp_bound 1024x4000: {bound:.6g} in {elapsed:.2f}s")
    assert elapsed < 15.0
    heuristic = solve_round(inst, method="heuristic", time_limit=10.0, seed=0)
    assert bound >= heuristic.objective - 1e-6 * bound


def test_cbc_saying_infeasible_at_its_time_limit_is_a_stop_not_a_bug(monkeypatch) -> None:
    """CBC stopped by its time limit before its first solution may say "infeasible": at the limit
    that is a stop without an incumbent (greedy fallback, no bound); well before it, a bug."""
    import time

    from ortools.linear_solver import pywraplp

    from optsched.solve import SolverBug

    inst = hand_instance()
    pause = [0.0]

    def infeasible(self, *args):
        time.sleep(pause[0])
        return pywraplp.Solver.INFEASIBLE

    monkeypatch.setattr(pywraplp.Solver, "Solve", infeasible)
    pause[0] = 1.0  # the whole time limit
    res = CbcSolver().solve(inst, time_limit=1.0, seed=0)
    assert res.status is Status.TIME_LIMIT and res.bound is None
    assert res.stats["incumbent_from"] == "greedy" and "infeasible" in res.stats["stopped"]
    assert not check_schedule(inst, res.schedule) and len(res.schedule) > 0
    pause[0] = 0.0  # at once: a real contradiction
    with pytest.raises(SolverBug, match="infeasible"):
        CbcSolver().solve(inst, time_limit=1.0, seed=0)


@pytest.mark.parametrize("seed", range(3))
def test_without_time_for_the_lp_the_knapsack_bound_stands_in(seed) -> None:
    """``lp_bound_within`` past its deadline gives the knapsack bound (no LP), which still bounds
    the proven optimum; a round whose rules it does not cover (an elastic gang) gets none."""
    import time

    from optsched.gen import generate
    from optsched.mip.bound import lp_bound_within

    inst = generate(nodes=3, jobs=10, seed=seed, running_fraction=0.3)
    stats: dict = {}
    b = lp_bound_within(inst, time.perf_counter(), stats)
    assert stats["bound_from"] == "knapsack" and b is not None
    best = solve_round(inst, solver="cpsat", time_limit=10, num_workers=1)
    assert best.status is Status.OPTIMAL and b >= best.objective - 1e-9
    d = inst.to_dict()
    g = d["jobs"][0]["gpus"]
    d["jobs"][0]["elastic"] = {"gpus": [g, 2 * g], "scaling": [1.0, 1.5]}
    d["jobs"][0].pop("placement", None)
    assert lp_bound_within(Instance.from_dict(d), time.perf_counter(), {}) is None
