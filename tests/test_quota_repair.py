"""policy_repair.repair under tenant quotas (rule 6): on random tiny rounds and any
contract-feasible input its output keeps every rule and is never worth less than the previous
repair's (reclaim everything borrowed, then re-add quota jobs at their demand point); on
hand-built rounds the targeted reclaim keeps the borrowers the previous repair evicted."""

from __future__ import annotations

import copy

from bruteforce import feasible_schedules, search_size
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import draw_two_tenants, elastic_rounds, tiny_instance_dicts

from optsched import check_schedule
from optsched import policy_repair as pr
from optsched import quota_reclaim as qr
from optsched import round_policies as rp
from optsched.model import Instance
from optsched.schedule import Assignment, Schedule
from optsched.values import assignment_value, is_move, schedule_value

PROF = {"cpus_per_gpu": [1, 2], "mem_per_gpu_gb": [8], "throughput": [[1.0], [1.5]]}


def _previous_repair(instance: Instance, schedule: Schedule) -> Schedule:
    """The repair before the targeted reclaim (reference): borrowers' jobs out, lowest value per
    GPU first, until nobody borrows, then waiting quota jobs where they fit at their demand point."""
    jobs = dict(schedule.jobs)
    if instance.round.max_moves is not None:
        moved = sorted(rp.moved_jobs(instance, jobs),
                       key=lambda j: (rp.urgent(instance, instance.job(j)), assignment_value(instance, instance.job(j), jobs[j]), j))
        for jid in moved[: max(0, len(moved) - instance.round.max_moves)]:
            del jobs[jid]
    cl = qr.cluster_of(instance, jobs)
    if instance.round.tenants is not None:
        pr._add_quota_jobs(instance, jobs, cl)
        used = rp.tenant_gpus(instance, jobs)
        if rp.borrowers(instance, used) and rp.owner_waiting(instance, jobs, used):
            for t in rp.borrowers(instance, used):
                mine = sorted((j for j in jobs if instance.job(j).tenant == t),
                              key=lambda j: (assignment_value(instance, instance.job(j), jobs[j]) / jobs[j].gpus, j))
                for jid in mine:
                    if used[t] <= rp.quota_of(instance, t):
                        break
                    a = jobs.pop(jid)
                    cl.take(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb, sign=-1)
                    used[t] -= a.gpus
            pr._add_quota_jobs(instance, jobs, cl)
    for jid in rp.urgent_jobs(instance):
        if jid in jobs:
            continue
        a = qr.fit_at_demand(instance, cl, instance.job(jid))
        if a is None:
            continue
        jobs[jid] = a
        if rp.policy_feasible(instance, Schedule(instance.name, jobs)):
            cl.take(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb)
        else:
            del jobs[jid]
    return Schedule(schedule.instance, jobs)


@st.composite
def quota_inputs(draw, elastic: bool = False):
    """A tiny quota round (two tenants and jobs without one; sometimes a move budget and deadlines)
    and one of its contract-feasible schedules, half the time one that breaks rule 6."""
    if elastic:
        inst = draw(elastic_rounds(policies=True))
        assume(inst.round.tenants is not None)
        d = inst.to_dict()
    else:
        d = draw(tiny_instance_dicts(max_nodes=3, max_jobs=5))
        d["version"] = 2
        draw_two_tenants(draw, d)
        for j in d["jobs"]:
            if draw(st.integers(0, 3)) == 0:
                j["remaining_s"] = draw(st.floats(10.0, 2000.0))
                j["deadline_s"] = draw(st.floats(0.0, 2000.0))
        if draw(st.booleans()):
            d["round"]["max_moves"] = draw(st.integers(0, 2))
    inst = Instance.from_dict(d)
    assume(search_size(inst) <= 4000)
    scheds = [s for _t, s, _l in feasible_schedules(inst)]
    if draw(st.booleans()):
        breaking = [s for s in scheds if not _rule6(inst, s)]
        scheds = breaking or scheds
    pick = scheds[draw(st.integers(0, len(scheds) - 1))]
    return inst, Schedule(inst.name, {j: Assignment(dict(u), c, m) for j, (u, c, m) in pick.items()})


def _rule6(inst, sched) -> bool:
    jobs = {j: Assignment(dict(u), c, m) for j, (u, c, m) in sched.items()}
    used = rp.tenant_gpus(inst, jobs)
    return not (rp.borrowers(inst, used) and rp.owner_waiting(inst, jobs, used))


def _check(inst, given_schedule):
    out = pr.repair(inst, given_schedule)
    assert not check_schedule(inst, out), check_schedule(inst, out)
    assert rp.policy_feasible(inst, out)
    old = _previous_repair(inst, given_schedule)
    assert schedule_value(inst, out) >= schedule_value(inst, old) - 1e-9
    if rp.policy_feasible(inst, given_schedule):  # nothing to repair: no job is dropped
        assert set(given_schedule.jobs) <= set(out.jobs)
    if inst.round.max_moves is not None:  # with a move budget no addition is a move
        assert all(given_schedule.jobs.get(j) == a for j, a in out.jobs.items() if is_move(inst.job(j), a.nodes))
    # the targeted reclaim alone (before the better of it and reclaim-all is kept) keeps the rules too
    jobs = {j: a for j, a in given_schedule.jobs.items() if not is_move(inst.job(j), a.nodes)} \
        if inst.round.max_moves is not None else dict(given_schedule.jobs)
    for lean in (True, False):
        mine = qr.Reclaim(inst, dict(jobs), lean).run()
        s = Schedule(inst.name, mine)
        assert not check_schedule(inst, s) and rp.policy_feasible(inst, s), lean


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(quota_inputs())
def test_repair_keeps_the_rules_and_never_loses_to_the_previous_repair(case):
    _check(*case)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(quota_inputs(elastic=True))
def test_repair_keeps_the_rules_with_elastic_jobs(case):
    _check(*case)


def _job(i, g, tenant=None, w=1.0, **kw):
    d = {"id": f"j{i}", "gpus": g, "weight": w, "profile": copy.deepcopy(PROF), "demand": {"cpus_per_gpu": 1, "mem_per_gpu_gb": 8}}
    if tenant is not None:
        d["tenant"] = tenant
    d.update(kw)
    return d


def _round(jobs, n_nodes=4, **rnd):
    nodes = [{"id": f"n{i}", "gpu_type": "V100", "gpus": 8, "cpus": 64, "mem_gb": 500} for i in range(n_nodes)]
    return Instance.from_dict({"version": 2, "name": "q", "round": {"duration_s": 300, **rnd}, "nodes": nodes, "jobs": jobs})


def _packed(inst, ids):
    """The listed 4-GPU jobs two to a node, n0 first."""
    return Schedule(inst.name, {j: Assignment({f"n{k // 2}": 4}, 1, 8) for k, j in enumerate(ids)})


def test_an_owner_job_reclaims_one_slot_not_every_borrowed_gpu():
    """Eight 4-GPU jobs without a tenant fill 32 GPUs; tenant a (quota 8) has a 4-GPU job waiting.
    The previous repair evicted all eight; the targeted one evicts one, and a runs."""
    jobs = [_job(i, 4, w=1.0 + i / 10) for i in range(8)] + [_job(9, 4, "a")]
    inst = _round(jobs, tenants={"a": {"quota_gpus": 8}})
    given_schedule = _packed(inst, [f"j{i}" for i in range(8)])
    assert not rp.policy_feasible(inst, given_schedule)
    old, new = _previous_repair(inst, given_schedule), pr.repair(inst, given_schedule)
    assert set(old.jobs) == {"j9"}
    assert "j9" in new.jobs and set(new.jobs) == {f"j{i}" for i in range(1, 8)} | {"j9"}  # the cheapest one out
    assert not check_schedule(inst, new) and rp.policy_feasible(inst, new)


def test_a_running_owner_job_moves_to_where_one_eviction_makes_room():
    """Tenant b (quota 8) borrows 32 GPUs with eight 4-GPU jobs, its two on n0 worth most; tenant
    a's running 4-GPU job was on n0. The previous repair kept b's two on n0 (its quota) and could
    put a's job only back home, so a got nothing and 24 GPUs idled; the targeted repair evicts
    b's cheapest job, moves a's job there and keeps b's other seven."""
    jobs = [_job(i, 4, "b", w=3.0 if i < 2 else 1.0 + i / 10) for i in range(8)]
    jobs.append(_job(9, 4, "a", placement={"n0": 4}, restart_s=30))
    inst = _round(jobs, tenants={"a": {"quota_gpus": 8}, "b": {"quota_gpus": 8}})
    given_schedule = _packed(inst, [f"j{i}" for i in range(8)])
    old, new = _previous_repair(inst, given_schedule), pr.repair(inst, given_schedule)
    assert set(old.jobs) == {"j0", "j1"}
    assert set(new.jobs) == {f"j{i}" for i in range(8) if i != 2} | {"j9"}
    assert new.jobs["j9"].nodes == {"n1": 4}
    assert not check_schedule(inst, new) and rp.policy_feasible(inst, new)
    # with no move left, a's job can only go home: evicting b's cheaper job there still beats reclaiming all
    capped = _round(jobs, tenants={"a": {"quota_gpus": 8}, "b": {"quota_gpus": 8}}, max_moves=0)
    out = pr.repair(capped, _packed(capped, [f"j{i}" for i in range(8)]))
    assert out.jobs["j9"].nodes == {"n0": 4} and len(out.jobs) == 8
    assert not check_schedule(capped, out) and rp.policy_feasible(capped, out)


def test_an_owner_job_goes_to_a_leaner_point_instead_of_evicting():
    """Borrowers leave 4 free GPUs on n0 but only 4 cores: a's 4-GPU job does not fit at its demand
    (2 cores per GPU) but does at 1 core per GPU, so b's job stays (the previous repair evicted it)."""
    prof = {"cpus_per_gpu": [1, 2], "mem_per_gpu_gb": [8], "throughput": [[1.0], [1.5]]}
    jobs = [_job(0, 4, "b", profile=copy.deepcopy(prof)), _job(1, 4, "a", demand={"cpus_per_gpu": 2, "mem_per_gpu_gb": 8})]
    inst = Instance.from_dict({"version": 2, "name": "q", "round": {"duration_s": 300, "tenants": {"a": {"quota_gpus": 4}, "b": {"quota_gpus": 0}}},
                               "nodes": [{"id": "n0", "gpu_type": "V100", "gpus": 8, "cpus": 12, "mem_gb": 500}], "jobs": jobs})
    given_schedule = Schedule(inst.name, {"j0": Assignment({"n0": 4}, 2, 8)})
    assert not rp.policy_feasible(inst, given_schedule)
    new = pr.repair(inst, given_schedule)
    assert set(new.jobs) == {"j0", "j1"} and new.jobs["j1"].cpus_per_gpu == 1
    assert set(_previous_repair(inst, given_schedule).jobs) == {"j1"}  # b's job evicted
    assert not check_schedule(inst, new)


def test_the_move_budget_drops_a_non_urgent_move_before_an_urgent_one():
    """max_moves 1, two running jobs moved: urgent j0 (worth 1) and j1 (worth 2). Leaving j1 out
    keeps the budget and j0's deadline; before, the lowest-valued move (the urgent j0) went."""
    nodes = [{"id": f"n{i}", "gpu_type": "V100", "gpus": 4, "cpus": 64, "mem_gb": 500} for i in range(3)]
    jobs = [_job(0, 4, placement={"n0": 4}, remaining_s=100, deadline_s=200), _job(1, 4, w=2.0, placement={"n1": 4}), _job(2, 4, w=3.0)]
    inst = Instance.from_dict({"version": 2, "name": "u", "round": {"duration_s": 300, "max_moves": 1}, "nodes": nodes, "jobs": jobs})
    assert rp.urgent_jobs(inst) == ["j0"]
    given_schedule = Schedule(inst.name, {"j0": Assignment({"n2": 4}, 1, 8), "j1": Assignment({"n0": 4}, 1, 8),
                                          "j2": Assignment({"n1": 4}, 1, 8)})
    out = pr.repair(inst, given_schedule)
    assert set(out.jobs) == {"j0", "j2"} and out.jobs["j0"].nodes == {"n2": 4}
    assert not check_schedule(inst, out) and not check_schedule(inst, out).deadline_misses


def test_the_targeted_reclaim_places_the_owners_jobs_that_fit_once_nobody_borrows():
    """An 8-GPU job without a tenant fills n0; tenant a (quota 8) waits with two 4-GPU jobs.
    Evicting it for a's first job leaves nobody borrowing, so the rule holds; a's second job fits
    the freed room and must run too (before, the pass stopped there and 4 GPUs idled)."""
    jobs = [_job(0, 8), _job(1, 4, "a", w=2.0), _job(2, 4, "a")]
    inst = _round(jobs, n_nodes=1, tenants={"a": {"quota_gpus": 8}})
    given_schedule = Schedule(inst.name, {"j0": Assignment({"n0": 8}, 1, 8)})
    out = qr.Reclaim(inst, dict(given_schedule.jobs), True).run()
    assert set(out) == {"j1", "j2"}
    assert set(pr.repair(inst, given_schedule).jobs) == {"j1", "j2"}


def test_the_eviction_candidates_are_the_least_bounds_of_all_nodes_ties_by_index():
    """40 nodes filled by 1-GPU jobs without a tenant, of two worths (many equal bounds); tenant a
    waits with 1-GPU jobs. After each targeted placement, _candidates (vectorised, partial
    selection) equals sorting every node by (lower bound, index) and keeping EVICT_NODES."""
    jobs = [_job(i, 1, w=1.0 + (i % 3 == 0) / 2) for i in range(320)] + [_job(1000 + i, 1, "a") for i in range(30)]
    inst = _round(jobs, n_nodes=40, tenants={"a": {"quota_gpus": 160}})
    r = qr.Reclaim(inst, {f"j{i}": Assignment({f"n{i // 8}": 1}, 1, 8) for i in range(320)}, True)
    _pts, least = r.points(inst.job("j1000"))
    assert qr.EVICT_NODES < 40
    for i in range(30):
        ref = []
        for n in r.cl.by_type["V100"].tolist():
            low = r._cheapest(n)
            if low is not None and low[2] >= 1 and any(low[3] >= c and low[4] >= m for c, m in least):
                ref.append((max(low[0], low[1] * (1 - int(r.cl.free_g[n]))), n))
        got = r._candidates("V100", 1, least)
        assert got == sorted(ref)[: qr.EVICT_NODES] and len({lb for lb, _ in got}) < len(got)  # ties among them
        assert r.evict_place(inst.job(f"j{1000 + i}"), r.st.rest("a"))
