"""The partitioned solver: partitions, price re-balancing, determinism across backends, feasibility."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import optsched.partition.solver as partition_solver
from optsched import load_instance
from optsched.checker import check_schedule
from optsched.errors import InputError
from optsched.model import Instance, Job, Node, Profile, Round
from optsched.parallel import Serial
from optsched.partition import PartitionedSolver, draw_partition
from optsched.partition.exchange import encode_part, part_instance
from optsched.partition.prices import moved_in, rebalance
from optsched.schedule import Assignment, Schedule
from optsched.solve import solve_round
from optsched.values import schedule_value

ROOT = Path(__file__).resolve().parent.parent
PROF = Profile((2, 4), (16, 32), ((1.0, 1.2), (1.3, 1.5)))


def _round(n_nodes=8, n_jobs=24, *, racks=False, types=("V100",), running=()):
    nodes = [Node(f"n{i}", types[i % len(types)], 4, 16, 128, rack=f"r{i // 2}" if racks else None) for i in range(n_nodes)]
    jobs = [Job(f"j{k}", 1 + (k % 3 == 0) + 2 * (k % 7 == 0), PROF, (2, 16), weight=1 + (k % 5) / 5) for k in range(n_jobs)]
    for k, place in running:
        jobs[k] = replace(jobs[k], gpus=sum(place.values()), placement=place, restart_s=30.0)
    return Instance("part", tuple(nodes), tuple(jobs), Round())


def _medium():
    return load_instance(ROOT / "instances/medium/m-48n-200j-run-01.json")


# --- partitions -----------------------------------------------------------------------------------


def test_partition_covers_every_node_and_job_once_and_is_drawn_from_the_seed():
    inst = _round(12, 40, types=("V100", "P100"))
    a = draw_partition(inst, 3, seed=5)
    assert a == draw_partition(inst, 3, seed=5)
    assert sorted(n for part in a.nodes for n in part) == sorted(n.id for n in inst.nodes)
    assert sorted([j for part in a.jobs for j in part] + list(a.rest)) == sorted(j.id for j in inst.jobs)
    # POP-style: each part gets a share of each GPU type
    for part in a.nodes:
        assert {inst.node(n).gpu_type for n in part} == {"V100", "P100"}
    assert any(draw_partition(inst, 3, seed=s) != a for s in range(6, 12))


def test_running_gangs_keep_their_nodes_in_one_part_with_the_job():
    inst = _round(8, 20, running=[(0, {"n0": 4, "n5": 4}), (3, {"n5": 2, "n6": 2})])
    for seed in range(8):
        p = draw_partition(inst, 4, seed=seed)
        part_of = {n: q for q, part in enumerate(p.nodes) for n in part}
        assert part_of["n0"] == part_of["n5"] == part_of["n6"]
        assert "j0" in p.jobs[part_of["n0"]] and "j3" in p.jobs[part_of["n0"]]


def test_gangs_no_part_can_hold_wait_for_the_final_repair_and_get_placed():
    inst = _round(4, 6)
    big = Job("big", 12, PROF, (2, 16), weight=50.0)  # 12 GPUs: 3 of the 4 nodes, no part of 2 nodes holds it
    inst = replace(inst, jobs=(*inst.jobs, big))
    p = draw_partition(inst, 2, seed=0)
    assert p.rest == ("big",)
    res = solve_round(inst, solver="partitioned", time_limit=20.0, seed=0, parts=2, backend="serial", work=0.2)
    assert "big" in res.schedule.jobs and res.stats["rest"] == 1 and res.stats["repair_gain"] > 0
    assert check_schedule(inst, res.schedule).feasible


def test_rack_and_type_partitions():
    inst = _round(8, 20, racks=True, types=("V100", "P100"))
    p = draw_partition(inst, 2, by="rack", seed=1)
    for q, part in enumerate(p.nodes):
        for n in part:
            buddy = f"n{int(n[1:]) ^ 1}"  # racks hold nodes 2i and 2i+1
            assert buddy in part, (q, n)
    t = draw_partition(inst, None, by="type", seed=1)
    assert t.parts == 2 and [{inst.node(n).gpu_type for n in part} for part in t.nodes] == [{"V100"}, {"P100"}]
    with pytest.raises(InputError, match="parts"):
        draw_partition(inst, 3, by="type")
    with pytest.raises(InputError, match="by"):
        draw_partition(inst, 2, by="zone")
    with pytest.raises(InputError, match="parts"):
        draw_partition(inst, 0)


# --- what travels to workers ------------------------------------------------------------------------


def test_a_part_task_is_plain_data_and_rebuilds_the_subround():
    import pickle

    inst = _medium()
    p = draw_partition(inst, 2, seed=0)
    nodes = [inst.node(n) for n in p.nodes[0]]
    jobs = [inst.job(j) for j in p.jobs[0]]
    task = encode_part(inst, 0, nodes, jobs, None, seed=0, work=0.1, deadline=0.0, sub_time=0.1, prices=False)
    sub = part_instance(pickle.loads(pickle.dumps(task)))
    ref = inst.subround(task.name, tuple(nodes), tuple(jobs))
    assert sub == ref
    # gangs are valued as in the whole round (the whole round's kmin)
    for t in inst.gpu_types:
        for g in (1, 8, 16, 32):
            assert sub.fewest_nodes(t, g) == inst.fewest_nodes(t, g)
    assert len(pickle.dumps(task)) < len(pickle.dumps(inst.to_dict())) * 0.75


# --- price re-balancing -----------------------------------------------------------------------------


def _three_parts():
    nodes = tuple(Node(f"n{i}", "V100", 4, 16, 128) for i in range(3))
    jobs = tuple(Job(f"j{k}", 2, PROF, (2, 16)) for k in range(4))
    inst = Instance("rb", nodes, jobs, Round())
    full = Schedule("rb", {"j0": Assignment({"n0": 2}, 2, 16), "j1": Assignment({"n0": 2}, 2, 16)})
    return inst, (("n0",), ("n1",), ("n2",)), [full, Schedule("rb", {}), Schedule("rb", {})], [["j0", "j1", "j2", "j3"], [], []]


def test_rebalance_moves_left_out_jobs_to_the_part_whose_prices_are_lowest():
    inst, nodes, scheds, offered = _three_parts()
    cheap_2 = [{"V100": (0.5, 0.0, 0.0)}, {"V100": (0.4, 0.0, 0.0)}, {"V100": (0.0, 0.0, 0.0)}]
    out, moves = rebalance(inst, nodes, scheds, offered, cheap_2)
    assert out[0] == ["j0", "j1"] and sorted(out[2]) == ["j2", "j3"] and out[1] == []
    assert {(j, a, b) for j, a, b, _r in moves} == {("j2", 0, 2), ("j3", 0, 2)}
    cheap_1 = [{"V100": (0.5, 0.0, 0.0)}, {"V100": (0.0, 0.0, 0.0)}, {"V100": (0.4, 0.0, 0.0)}]
    out, _ = rebalance(inst, nodes, scheds, offered, cheap_1)
    assert sorted(out[1]) == ["j2", "j3"]
    # a part's room is booked: it is not promised twice (node n2 holds two 2-GPU jobs, not three)
    inst5 = replace(inst, jobs=(*inst.jobs, Job("j4", 2, PROF, (2, 16))))
    out, _ = rebalance(inst5, nodes, scheds, [["j0", "j1", "j2", "j3", "j4"], [], []], cheap_2)
    assert len(out[2]) == 2 and len(out[1]) == 1
    # a price above a job's worth keeps it home
    dear = [{"V100": (9.0, 0.0, 0.0)}] * 3
    assert rebalance(inst, nodes, scheds, offered, dear)[1] == []


def test_rebalance_never_moves_pinned_jobs_and_folds_a_mover_s_restart():
    inst, nodes, scheds, offered = _three_parts()
    jobs = list(inst.jobs)
    jobs[2] = replace(jobs[2], placement={"n0": 2}, restart_s=150.0, preemptible=False)
    pinned = replace(inst, jobs=tuple(jobs))
    free = [{"V100": (0.0, 0.0, 0.0)}] * 3
    out, moves = rebalance(pinned, nodes, scheds, offered, free)
    assert "j2" in out[0] and [m[0] for m in moves] == ["j3"]
    runner = replace(jobs[2], preemptible=True)
    assert moved_in(inst, runner).weight == pytest.approx(0.5) and moved_in(inst, runner).placement is None


# --- the solver ---------------------------------------------------------------------------------------


def _solve(inst, **kw):
    opts = {"parts": 3, "work": 0.15, "backend": "serial", **kw}
    return PartitionedSolver().solve(inst, time_limit=60.0, seed=4, **opts)


def test_partitioned_schedule_passes_the_independent_checker_and_counts_its_worth():
    inst = _medium()
    res = _solve(inst)
    report = check_schedule(inst, res.schedule)
    assert list(report) == []
    assert res.objective == pytest.approx(report.objective)
    assert res.objective >= res.stats["merged_objective"] - 1e-9
    assert res.stats["pass_objectives"][1] >= res.stats["pass_objectives"][0] - 1e-9  # pass 2 starts from pass 1
    assert res.stats["cut_parts"] == 0


@pytest.mark.parametrize("seed", range(4))
def test_partitioned_reports_a_proven_bound_at_least_the_optimum(seed):
    """The partitioned answer carries the knapsack bound (no LP): never below the proven optimum,
    never below its own worth, and OPTIMAL only where the worth reaches it."""
    inst = _round(n_nodes=4, n_jobs=10 + seed, running=((0, {"n0": 1}),) if seed % 2 else ())
    res = _solve(inst)
    best = solve_round(inst, solver="cpsat", time_limit=10, num_workers=1)
    assert best.status.value == "optimal"
    assert res.bound is not None and res.bound >= best.objective - 1e-9 and res.bound >= res.objective
    assert (res.status.value == "optimal") == (res.objective >= res.bound - 1e-6 * max(1.0, res.bound))


def test_a_round_with_a_rule_the_knapsack_bound_does_not_cover_gets_no_bound():
    """Where the knapsack bound does not bound the optimum (here an elastic gang: its size changes
    its worth), ``worth_bound`` gives none."""
    from optsched.knapsack_bound import worth_bound

    d = _round(n_nodes=2, n_jobs=4).to_dict()
    g = d["jobs"][0]["gpus"]
    d["jobs"][0]["elastic"] = {"gpus": [g, 2 * g], "scaling": [1.0, 1.8]}
    assert worth_bound(Instance.from_dict(d)) is None
    assert worth_bound(_round(n_nodes=2, n_jobs=4)) is not None


def test_pool_and_serial_give_the_same_schedule():
    inst = _medium()
    serial = _solve(inst, backend="serial")
    pool = _solve(inst, backend="local", workers=2)
    assert pool.stats["workers"] == 2 and pool.stats["cut_parts"] == serial.stats["cut_parts"] == 0
    assert pool.schedule.to_dict() == serial.schedule.to_dict()


class _Reversed(Serial):
    """Answers in the reverse of the submission order, as a pool may."""

    def imap_unordered(self, fn, tasks):
        return reversed([fn(t) for t in tasks])


def test_answers_are_taken_in_part_order_not_completion_order(monkeypatch):
    inst = _medium()
    ref = _solve(inst)
    monkeypatch.setattr(partition_solver, "get_backend", lambda *a, **k: _Reversed())
    assert _solve(inst).schedule.to_dict() == ref.schedule.to_dict()


def test_ray_gives_the_same_schedule_as_the_pool():
    pytest.importorskip("ray")
    inst = _medium()
    ray_res = _solve(inst, backend="ray", workers=2)
    assert ray_res.schedule.to_dict() == _solve(inst, backend="local", workers=2).schedule.to_dict()


def test_pinned_jobs_stay_and_other_policies_are_refused():
    inst = _round(6, 18, running=[(0, {"n1": 2, "n4": 2}), (5, {"n2": 1})])
    jobs = list(inst.jobs)
    jobs[0] = replace(jobs[0], preemptible=False)
    jobs[5] = replace(jobs[5], preemptible=False)
    inst = replace(inst, jobs=tuple(jobs))
    res = solve_round(inst, solver="partitioned", time_limit=20.0, seed=0, parts=3, work=0.1, backend="serial")
    assert res.schedule.jobs["j0"].nodes == {"n1": 2, "n4": 2} and res.schedule.jobs["j5"].nodes == {"n2": 1}
    quota = replace(inst, jobs=tuple(replace(j, preemptible=True) for j in inst.jobs),
                    round=Round(tenants={"a": 4}))
    with pytest.raises(InputError, match="quotas"):
        solve_round(quota, solver="partitioned", time_limit=2.0)


def test_a_hint_warm_starts_the_parts_it_lies_in():
    from optsched.heuristics.fungible_greedy import fungible_greedy_schedule

    inst = _medium()
    hint = fungible_greedy_schedule(inst)
    p = draw_partition(inst, 3, seed=4)
    part_of = {n: q for q, ns in enumerate(p.nodes) for n in ns}
    offered, hints = partition_solver._warm(inst, p, hint)
    for j, a in hint.jobs.items():
        parts = {part_of[n] for n in a.nodes}
        if len(parts) == 1:  # offered to the part its hinted nodes lie in, with that assignment as hint
            q = parts.pop()
            assert j in offered[q] and hints[q].jobs[j] == a
            assert all(j not in offered[r] for r in range(3) if r != q)
        else:
            assert all(j not in h.jobs for h in hints)
    assert sorted(j for js in offered for j in js) == sorted(j for js in p.jobs for j in js)  # no job lost or doubled
    res = _solve(inst, hint=hint, work=0.05, passes=1)
    assert res.objective >= schedule_value(inst, hint) - 1e-9


def test_options_are_checked_by_name():
    inst = _round(4, 6)
    for bad, field in (({"passes": 0}, "passes"), ({"by": "zone"}, "by"), ({"rebalance": "x"}, "rebalance"),
                       ({"backend": "mpi"}, "backend"), ({"work": -1.0}, "work"), ({"parts": 0}, "parts"),
                       ({"nope": 1}, "options")):
        with pytest.raises(InputError, match=field):
            PartitionedSolver().solve(inst, time_limit=2.0, seed=0, **bad)


def test_the_time_limit_holds_with_the_default_budget():
    import time

    inst = load_instance(ROOT / "instances/large/l-256n-1000j-01.json.gz")
    t0 = time.perf_counter()
    res = solve_round(inst, solver="partitioned", time_limit=4.0, seed=0)
    assert time.perf_counter() - t0 < 4.0 * 1.25 + 0.5
    assert res.objective > 0.9 * schedule_value(inst, res.schedule) and res.stats["parts"] >= 2


def test_a_part_whose_share_of_time_is_spent_answers_with_its_greedy_schedule_at_once():
    import time

    from optsched.heuristics.fungible_greedy import fungible_greedy_schedule
    from optsched.partition.exchange import solve_part

    inst = load_instance(ROOT / "instances/large/l-256n-1000j-01.json.gz")
    p = draw_partition(inst, 2, seed=0)
    nodes = [inst.node(n) for n in p.nodes[0]]
    jobs = [inst.job(j) for j in p.jobs[0]]
    # a large budget, but the part's deadline is already past: no lns starts, no prices
    task = encode_part(inst, 0, nodes, jobs, None, seed=0, work=5.0, deadline=time.time() - 1.0, sub_time=0.03, prices=True)
    t0 = time.perf_counter()
    ans = solve_part(task)
    assert time.perf_counter() - t0 < 1.5
    assert ans.greedy and ans.cut and ans.prices is None and ans.steps == 0
    sub = part_instance(task)
    sched = Schedule(sub.name, {j: Assignment(dict(a[0]), a[1], a[2]) for j, a in ans.jobs})
    assert check_schedule(sub, sched).feasible
    assert sched.to_dict() == fungible_greedy_schedule(sub, seed=0).to_dict()
    assert ans.objective == pytest.approx(schedule_value(sub, sched)) and ans.objective > 0


def test_the_residual_fill_places_left_out_jobs_in_the_free_room_only():
    from optsched.partition.repair import fill_residual

    inst = _round(4, 10)
    partial = Schedule("part", {"j3": Assignment({"n0": 2}, 2, 16), "j2": Assignment({"n1": 1}, 4, 32)})
    out = fill_residual(inst, partial, seed=0)
    assert check_schedule(inst, out).feasible
    assert out.jobs["j3"] == partial.jobs["j3"] and out.jobs["j2"] == partial.jobs["j2"]
    assert len(out.jobs) > len(partial.jobs)


def test_a_part_planned_too_short_for_lns_answers_with_the_price_guided_repack():
    import time

    from optsched.heuristics.fungible_greedy import fungible_greedy_schedule
    from optsched.partition.exchange import PRICED_S_PER_JOB, SETUP_S_PER_JOB, solve_part

    inst = load_instance(ROOT / "instances/large/l-256n-1000j-01.json.gz")
    p = draw_partition(inst, 2, seed=0)
    nodes = [inst.node(n) for n in p.nodes[0]]
    jobs = [inst.job(j) for j in p.jobs[0]]
    share = (PRICED_S_PER_JOB + SETUP_S_PER_JOB) / 2 * len(jobs)  # enough for the repack, not for lns's set-up
    task = encode_part(inst, 0, nodes, jobs, None, seed=0, work=5.0, deadline=time.time() + 60.0, sub_time=0.03,
                       prices=False, share=share)
    ans = solve_part(task)
    assert ans.greedy and not ans.cut and ans.steps == 0
    sub = part_instance(task)
    sched = Schedule(sub.name, {j: Assignment(dict(a[0]), a[1], a[2]) for j, a in ans.jobs})
    assert check_schedule(sub, sched).feasible
    assert ans.objective > 1.05 * schedule_value(sub, fungible_greedy_schedule(sub, seed=0))
