"""Contract v2 policy families (quotas, max_moves, deadlines): fields and versions, the checker's
rules 6 and 7, every supporting method against the checker, CP-SAT against brute force, and each
family's guarantee on random tiny rounds."""

from __future__ import annotations

import copy

import pytest
from bruteforce import feasible_schedules, rules_hold, search_size
from conftest import base_round
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import tiny_instance_dicts

from optsched import check_schedule, solve_round
from optsched.errors import InputError
from optsched.model import Instance
from optsched.schedule import Assignment, Schedule

METHODS = ("cpsat", "fixed-demand", "fungible-greedy", "lns")
PROF = {"cpus_per_gpu": [1, 2], "mem_per_gpu_gb": [8], "throughput": [[1.0], [1.5]]}


def _job(i, g=1, tenant=None, w=1.0, **kw):
    d = {"id": f"j{i}", "gpus": g, "weight": w, "profile": copy.deepcopy(PROF), "demand": {"cpus_per_gpu": 1, "mem_per_gpu_gb": 8}}
    if tenant is not None:
        d["tenant"] = tenant
    d.update(kw)
    return d


def _round(jobs, *, nodes=None, **rnd):
    nodes = nodes or [{"id": "n0", "gpu_type": "V100", "gpus": 8, "cpus": 64, "mem_gb": 500}]
    return Instance.from_dict({"version": 2, "name": "p", "round": {"duration_s": 300, **rnd}, "nodes": nodes, "jobs": jobs})


# --- fields and versions ---------------------------------------------------------------------------


def test_v1_rounds_round_trip_unchanged_and_v2_fields_round_trip():
    d = base_round()
    inst = Instance.from_dict(d)
    assert inst.version == 1 and inst.to_dict() == Instance.from_dict(inst.to_dict()).to_dict()
    assert "tenants" not in inst.to_dict()["round"] and all("tenant" not in j for j in inst.to_dict()["jobs"])
    d["version"] = 2
    d["round"].update(tenants={"a": {"quota_gpus": 4}}, max_moves=1)
    d["jobs"][0].update(tenant="a", deadline_s=900.0, remaining_s=600.0)
    v2 = Instance.from_dict(d)
    assert v2.version == 2 and v2.round.tenants == {"a": 4} and v2.jobs[0].deadline_s == 900.0
    assert Instance.from_dict(v2.to_dict()).to_dict() == v2.to_dict()


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d["jobs"][0].update(tenant="a"), "version"),  # a v2 field in a version-1 file
    (lambda d: d.update(version=2), "version"),  # version 2 without a v2 field
    (lambda d: d.update(version=2) or d["round"].update(tenants={"a": {"quota_gpus": 4}}) or d["jobs"][0].update(tenant="b"),
     "jobs[0].tenant"),
    (lambda d: d.update(version=2) or d["round"].update(tenants={"a": {"quota_gpus": 13}}), "round.tenants"),
    (lambda d: d.update(version=2) or d["round"].update(tenants={"a": {"quota_gpus": -1}}), "round.tenants.a.quota_gpus"),
    (lambda d: d.update(version=2) or d["round"].update(tenants={"a": {}}), "round.tenants.a.quota_gpus"),
    (lambda d: d.update(version=2) or d["round"].update(max_moves=-1), "round.max_moves"),
    (lambda d: d.update(version=2) or d["jobs"][1].update(deadline_s=100.0), "jobs[1].remaining_s"),
    (lambda d: d.update(version=2) or d["jobs"][1].update(deadline_s=-5.0, remaining_s=1.0), "jobs[1].deadline_s"),
    (lambda d: d.update(version=2) or d["jobs"][1].update(remaining_s=0), "jobs[1].remaining_s"),
    (lambda d: d.update(version=2) or d["jobs"][1].update(tenant=""), "jobs[1].tenant"),
])
def test_bad_policy_fields_are_refused_by_name(change, field):
    d = base_round()
    change(d)
    with pytest.raises(InputError) as e:
        Instance.from_dict(d)
    assert e.value.field == field, str(e.value)


# --- the checker's rules ---------------------------------------------------------------------------


def _sched(inst, jobs):
    return Schedule(inst.name, {j: Assignment(nodes, 1, 8) for j, nodes in jobs.items()})


def test_rule_6_refuses_borrowing_while_an_owner_waits_within_its_quota():
    inst = _round([_job(0, 4, "a"), _job(1, 4, "a"), _job(2, 2, "b")], tenants={"a": {"quota_gpus": 4}, "b": {"quota_gpus": 4}})
    borrow = check_schedule(inst, _sched(inst, {"j0": {"n0": 4}, "j1": {"n0": 4}}))
    assert [v.rule for v in borrow] == [6] and "tenant a holds 8" in str(borrow[0])
    assert not check_schedule(inst, _sched(inst, {"j0": {"n0": 4}, "j2": {"n0": 2}}))
    # nobody waits within a quota: borrowing is fine
    alone = _round([_job(0, 4, "a"), _job(1, 4, "a")], tenants={"a": {"quota_gpus": 4}, "b": {"quota_gpus": 4}})
    assert not check_schedule(alone, _sched(alone, {"j0": {"n0": 4}, "j1": {"n0": 4}}))
    # jobs without a tenant borrow too
    free = _round([_job(0, 2), _job(1, 2, "b")], tenants={"b": {"quota_gpus": 2}},
                  nodes=[{"id": "n0", "gpu_type": "V100", "gpus": 2, "cpus": 64, "mem_gb": 500}])
    assert [v.rule for v in check_schedule(free, _sched(free, {"j0": {"n0": 2}}))] == [6]


def test_rule_7_counts_moves_not_preemptions():
    nodes = [{"id": f"n{i}", "gpu_type": "V100", "gpus": 2, "cpus": 64, "mem_gb": 500} for i in range(3)]
    jobs = [_job(i, 2, placement={f"n{i}": 2}) for i in range(2)]
    inst = _round(jobs, nodes=nodes, max_moves=1)
    assert not check_schedule(inst, _sched(inst, {"j0": {"n1": 2}}))  # one move, one preemption
    two = check_schedule(inst, _sched(inst, {"j0": {"n1": 2}, "j1": {"n2": 2}}))
    assert [v.rule for v in two] == [7]


def test_deadline_misses_are_reported_not_violations():
    # needs 600 s alone at its best rate (1.5x): due in 700 s, it cannot wait a 300 s round
    inst = _round([_job(0, 8, deadline_s=700.0, remaining_s=900.0), _job(1, 8, deadline_s=5000.0, remaining_s=900.0)])
    rep = check_schedule(inst, Schedule(inst.name, {}))
    assert rep.feasible and rep.deadline_misses == ["j0"]
    assert check_schedule(inst, _sched(inst, {"j0": {"n0": 8}})).deadline_misses == []


# --- solvers ---------------------------------------------------------------------------------------


def test_cpsat_gives_each_tenant_its_quota_before_anyone_borrows():
    inst = _round([_job(0, 4, "a", 5.0), _job(1, 4, "a", 5.0), _job(2, 2, "b", 0.1), _job(3, 2, "b", 0.1)],
                  tenants={"a": {"quota_gpus": 4}, "b": {"quota_gpus": 4}})
    res = solve_round(inst, solver="cpsat", time_limit=3)
    assert res.status.value == "optimal" and sorted(res.schedule.jobs) == ["j0", "j2", "j3"]
    for m in ("fixed-demand", "fungible-greedy", "lns"):
        got = solve_round(inst, solver=m, time_limit=1).schedule.jobs
        assert {"j2", "j3"} <= set(got), m


def test_cpsat_forces_urgent_jobs_in_and_reports_the_ones_that_cannot_fit():
    heavy = [_job(i, 4, w=10.0) for i in range(2)]
    inst = _round([*heavy, _job(9, 4, w=0.01, deadline_s=700.0, remaining_s=900.0)])
    res = solve_round(inst, solver="cpsat", time_limit=3)
    assert "j9" in res.schedule.jobs and res.stats["deadline_misses"] == []
    for m in ("fixed-demand", "fungible-greedy", "lns"):
        assert "j9" in solve_round(inst, solver=m, time_limit=1).schedule.jobs, m
    both = _round([_job(0, 8, deadline_s=700.0, remaining_s=900.0), _job(1, 8, w=2.0, deadline_s=700.0, remaining_s=900.0)])
    res = solve_round(both, solver="cpsat", time_limit=3)
    assert res.stats["deadline_misses"] == ["j0"] and list(res.schedule.jobs) == ["j1"]



def test_cpsat_keeps_ranking_by_misses_when_the_round_cannot_hold_its_urgent_jobs():
    # one GPU, two urgent jobs and one past its deadline (not urgent), all worth 1: forcing both
    # urgent jobs is infeasible, and the relaxed optimum may run the late job (two misses); the
    # greedy start runs an urgent one (one miss) and must win (found by a random example)
    late = _job(2, 8, deadline_s=0.0, remaining_s=900.0)
    inst = _round([_job(0, 8, deadline_s=700.0, remaining_s=900.0), _job(1, 8, deadline_s=700.0, remaining_s=900.0), late])
    for seed in range(3):
        res = solve_round(inst, solver="cpsat", time_limit=3, seed=seed, num_workers=1)
        assert res.stats["forcing_infeasible"] == ["j0", "j1"]
        assert len(res.stats["deadline_misses"]) == 1 and "j2" not in res.schedule.jobs, seed
        assert res.status.value != "optimal" or res.objective == pytest.approx(1.5)


def test_a_round_that_cannot_hold_its_urgent_jobs_runs_as_many_as_fit_then_maximises_worth():
    # one 8-GPU node: two 4-GPU urgent jobs worth 1 each, one 8-GPU urgent job worth 10. Forcing
    # all three is infeasible; the worth-only optimum runs the 8-GPU job (two misses), the
    # fewest misses run both small ones (one miss), and no hint holds that (greedy runs worth first)
    inst = _round([_job(0, 4, deadline_s=700.0, remaining_s=900.0), _job(1, 4, deadline_s=700.0, remaining_s=900.0),
                   _job(2, 8, w=10.0, deadline_s=700.0, remaining_s=900.0)])
    res = solve_round(inst, solver="cpsat", time_limit=3, num_workers=1)
    assert res.stats["forcing_infeasible"] == ["j0", "j1", "j2"]
    assert res.stats["deadline_misses"] == ["j2"] and res.stats["deadline_met"] == 2
    assert res.status.value == "optimal" and res.stats["deadline_met_proven"]


def test_a_staged_solve_whose_worth_stage_finds_nothing_reports_no_bound_below_the_optimum(monkeypatch):
    # the worth stage out of time before it searches (simulated), the deadline stage's schedule
    # short of the optimum (simulated): the solver's last objective bound is the deadline stage's
    # count, not a worth, and must not become the round's bound
    from ortools.sat.python import cp_model

    import optsched.exact.policies as pol
    from optsched.exact.model import RoundModel

    inst = _round([_job(0, 4, deadline_s=700.0, remaining_s=900.0), _job(1, 4, w=3.0, deadline_s=700.0, remaining_s=900.0),
                   _job(2, 8, w=10.0, deadline_s=700.0, remaining_s=900.0)])
    best = solve_round(inst, solver="cpsat", time_limit=3, num_workers=1)
    assert best.status.value == "optimal" and best.objective == pytest.approx(6.0)
    lean = Schedule(inst.name, {"j0": Assignment({"n0": 4}, 1, 8), "j1": Assignment({"n0": 4}, 1, 8)})  # worth 4
    real_stage, calls = pol._stage, []

    def stage(solver, m, share, budget):
        calls.append(share)
        return real_stage(solver, m, share, budget) if len(calls) == 1 else cp_model.UNKNOWN

    monkeypatch.setattr(pol, "_stage", stage)
    monkeypatch.setattr(RoundModel, "read_schedule", lambda self, solver: lean)
    res = solve_round(inst, solver="cpsat", time_limit=3, num_workers=1)
    assert len(calls) == 2 and res.status.value != "optimal"
    assert res.objective == pytest.approx(4.0) and res.stats["deadline_misses"] == ["j2"]
    assert res.bound is None or res.bound >= best.objective - 1e-9


def test_packing_ranks_a_hint_against_schedules_with_its_own_misses():
    # packing with deadlines: a greedy start that runs the 8-GPU job (two misses) is worth the
    # most, but packing's tolerance is taken against the best worth with the fewest misses, so the
    # spread-out hint (3.2) loses to the packed schedule (3.0, a whole node free)
    nodes = [{"id": f"n{i}", "gpu_type": "V100", "gpus": 4, "cpus": 4, "mem_gb": 100} for i in range(2)]
    urgent = {"deadline_s": 700.0, "remaining_s": 900.0,
              "profile": {"cpus_per_gpu": [1, 2, 4], "mem_per_gpu_gb": [8], "throughput": [[1.0], [1.5], [1.6]]}}
    inst = _round([_job(0, 8, w=10.0, **urgent), _job(1, 1, **urgent), _job(2, 1, **urgent)], nodes=nodes,
                  packing="consolidate", packing_tolerance=0.3)
    hint = Schedule(inst.name, {"j1": Assignment({"n0": 1}, 4, 8), "j2": Assignment({"n1": 1}, 4, 8)})
    for h in (None, hint):
        res = solve_round(inst, solver="cpsat", time_limit=3, num_workers=1, hint=h)
        assert res.stats["deadline_misses"] == ["j0"] and res.stats["deadline_met"] == 2
        assert res.stats["whole_free_gpus"] == 4 and res.objective == pytest.approx(3.0), h

def test_methods_without_policy_support_are_refused():
    inst = _round([_job(0, 1, "a")], tenants={"a": {"quota_gpus": 1}})
    with pytest.raises(InputError) as e:
        solve_round(inst, solver="maifs", time_limit=1)
    assert e.value.field == "solver" and "quotas" in str(e.value) and "cpsat" in str(e.value)


def test_a_hint_breaking_only_a_policy_rule_is_repaired():
    inst = _round([_job(0, 4, "a"), _job(1, 4, "a"), _job(2, 2, "b")], tenants={"a": {"quota_gpus": 4}, "b": {"quota_gpus": 4}})
    hint = _sched(inst, {"j0": {"n0": 4}, "j1": {"n0": 4}})
    res = solve_round(inst, solver="cpsat", time_limit=2, hint=hint)
    assert not check_schedule(inst, res.schedule)


# --- random rounds: every method keeps the rules; CP-SAT matches brute force ------------------------


@st.composite
def policy_rounds(draw):
    d = draw(tiny_instance_dicts(max_nodes=2, max_jobs=4))
    d["version"] = 2
    total = sum(n["gpus"] for n in d["nodes"])
    tenants = ["a", "b"]
    quotas = {}
    left = total
    for t in tenants:
        q = draw(st.integers(0, left))
        quotas[t] = {"quota_gpus": q}
        left -= q
    if draw(st.booleans()):
        d["round"]["tenants"] = quotas
        for j in d["jobs"]:
            t = draw(st.sampled_from([*tenants, None]))
            if t is not None:
                j["tenant"] = t
    if draw(st.booleans()):
        d["round"]["max_moves"] = draw(st.integers(0, 2))
    for j in d["jobs"]:
        if draw(st.integers(0, 3)) == 0:
            j["remaining_s"] = draw(st.floats(10.0, 2000.0))
            j["deadline_s"] = draw(st.floats(0.0, 2000.0))
    if "tenants" not in d["round"] and "max_moves" not in d["round"] and not any("deadline_s" in j for j in d["jobs"]):
        d["round"]["max_moves"] = 0
    return Instance.from_dict(d)


def _brute(inst):
    """(fewest deadline misses, best worth) over schedules that keep rules 6 and 7."""
    from optsched.checker import check_schedule as chk

    best = None
    for total, sched, _load in feasible_schedules(inst):
        if not rules_hold(inst, sched):
            continue
        misses = len(chk(inst, Schedule(inst.name, {j: Assignment(u, c, m) for j, (u, c, m) in sched.items()})).deadline_misses)
        key = (-misses, total)
        if best is None or key > best:
            best = key
    return best


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(policy_rounds())
def test_every_supporting_method_keeps_the_rules_and_cpsat_matches_brute_force(inst):
    assume(search_size(inst) <= 3000)
    for m in METHODS:
        res = solve_round(inst, solver=m, time_limit=2 if m == "cpsat" else 0.3, num_workers=1) if m in ("cpsat", "lns") \
            else solve_round(inst, solver=m, time_limit=1)
        sched = {j: (dict(a.nodes), a.cpus_per_gpu, a.mem_per_gpu_gb) for j, a in res.schedule.jobs.items()}
        assert rules_hold(inst, sched), m
        if m == "cpsat":
            cp = res
    neg_misses, best = _brute(inst)
    if cp.status.value == "optimal":  # fewest misses first, then worth: also where forcing was relaxed
        assert len(cp.stats["deadline_misses"]) == -neg_misses
        assert cp.objective == pytest.approx(best, rel=1e-5, abs=1e-6)
    assert cp.objective <= best + 1e-6 or len(cp.stats["deadline_misses"]) > -neg_misses


@st.composite
def quota_rounds(draw):
    """One GPU type, ample cores and memory, 1-GPU jobs of two tenants (and some without one)."""
    gpus = draw(st.integers(2, 6))
    qa = draw(st.integers(0, gpus))
    qb = draw(st.integers(0, gpus - qa))
    jobs = [_job(i, 1, draw(st.sampled_from(["a", "b", None])), draw(st.floats(0.1, 5.0))) for i in range(draw(st.integers(1, 9)))]
    return _round(jobs, nodes=[{"id": "n0", "gpu_type": "V100", "gpus": gpus, "cpus": 64, "mem_gb": 500}],
                  tenants={"a": {"quota_gpus": qa}, "b": {"quota_gpus": qb}})


@settings(max_examples=12, deadline=None)
@given(quota_rounds())
def test_a_tenant_with_demand_gets_its_quota(inst):
    demand = {t: sum(1 for j in inst.jobs if j.tenant == t) for t in ("a", "b")}
    for m in METHODS:
        res = solve_round(inst, solver=m, time_limit=2 if m == "cpsat" else 0.3)
        used = {t: sum(1 for j in res.schedule.jobs if inst.job(j).tenant == t) for t in ("a", "b")}
        for t in ("a", "b"):
            assert used[t] >= min(inst.round.tenants[t], demand[t]), (m, t, used, demand)


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 3), st.integers(2, 4), st.integers(0, 200))
def test_moves_stay_within_the_budget(budget, n_running, restart):
    """Running jobs packed badly (each alone on a node, the 4-GPU job waits): consolidating pays
    unless it is capped."""
    nodes = [{"id": f"n{i}", "gpu_type": "V100", "gpus": 4, "cpus": 64, "mem_gb": 500} for i in range(n_running)]
    jobs = [_job(i, 2, placement={f"n{i}": 2}, restart_s=restart) for i in range(n_running)]
    jobs.append(_job(9, 4, w=5.0))
    inst = _round(jobs, nodes=nodes, max_moves=budget)
    for m in METHODS:
        res = solve_round(inst, solver=m, time_limit=2 if m == "cpsat" else 0.3)
        moves = sum(1 for j, a in res.schedule.jobs.items() if inst.job(j).placement and dict(inst.job(j).placement) != dict(a.nodes))
        assert moves <= budget, m
