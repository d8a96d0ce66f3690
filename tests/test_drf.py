"""Dominant resource fairness across tenants (contract v2 ``round.fairness = "drf"``): the field and
its version, the checker's report, which methods honour it, and CP-SAT's lexicographic optimum
(largest smallest dominant share, then worth) against brute force on random tiny rounds."""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest
from bruteforce import _options, feasible_schedules, search_size
from conftest import base_round
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import tiny_instance_dicts

from optsched import check_schedule, solve_round
from optsched.errors import InputError
from optsched.model import Instance

PROF = {"cpus_per_gpu": [1, 2], "mem_per_gpu_gb": [8], "throughput": [[1.0], [1.5]]}


def _job(i, g, tenant, w=1.0, cpus=1):
    return {"id": f"j{i}", "gpus": g, "weight": w, "tenant": tenant, "profile": copy.deepcopy(PROF),
            "demand": {"cpus_per_gpu": cpus, "mem_per_gpu_gb": 8}}


def _round(jobs, nodes=None, **rnd):
    nodes = nodes or [{"id": "n0", "gpu_type": "V100", "gpus": 8, "cpus": 16, "mem_gb": 500}]
    return Instance.from_dict({"version": 2, "name": "drf", "round": {"duration_s": 300, "fairness": "drf", **rnd},
                               "nodes": nodes, "jobs": jobs})


@pytest.mark.parametrize("fairness", ["drf", "hug"])
def test_fairness_is_a_version_2_field_and_bad_values_are_refused_by_name(fairness):
    d = base_round()
    d["version"] = 2
    d["round"]["fairness"] = fairness
    inst = Instance.from_dict(d)
    assert inst.version == 2 and inst.round.fairness == fairness
    assert Instance.from_dict(inst.to_dict()).to_dict() == inst.to_dict()
    d["version"] = 1
    with pytest.raises(InputError) as e:
        Instance.from_dict(d)
    assert e.value.field == "version" and "round.fairness" in str(e.value)
    d["version"] = 2
    for bad in ("max-min", fairness.upper(), fairness + "2", 1):
        d["round"]["fairness"] = bad
        with pytest.raises(InputError) as e:
            Instance.from_dict(d)
        assert e.value.field == "round.fairness" and str(bad) in str(e.value) and f"'{fairness}'" in str(e.value), bad
    assert "fairness" not in Instance.from_dict(base_round()).to_dict()["round"]


def test_cpsat_gives_the_cheap_tenant_its_share_and_the_checker_reports_it():
    # tenant a: valuable 4-GPU jobs that could fill the node; tenant b: cheap 1-GPU jobs using 4 cores per GPU.
    # Shares: a job of a = 4/8 GPUs; a job of b = max(1/8 GPUs, 4/16 cores) = 1/4.
    jobs = [_job(0, 4, "a", 10.0), _job(1, 4, "a", 10.0), *[_job(i, 1, "b", 0.1, cpus=2) for i in range(2, 6)]]
    jobs[2]["profile"] = {"cpus_per_gpu": [2, 4], "mem_per_gpu_gb": [8], "throughput": [[1.0], [1.1]]}
    for j in jobs[2:]:
        j["profile"] = jobs[2]["profile"]
        j["demand"]["cpus_per_gpu"] = 4
    inst = _round(jobs)
    plain = solve_round(Instance.from_dict({**inst.to_dict(), "version": 1, "round": {"duration_s": 300}} | {
        "jobs": [{k: v for k, v in j.items() if k != "tenant"} for j in inst.to_dict()["jobs"]]}), solver="cpsat", time_limit=3)
    assert sorted(plain.schedule.jobs) == ["j0", "j1"]  # worth alone: a takes the node
    res = solve_round(inst, solver="cpsat", time_limit=3, num_workers=1)
    rep = check_schedule(inst, res.schedule)
    assert not rep and res.status.value == "optimal"
    # a second job of a would leave b nothing (min 0); one job of a (share 1/2) beside all four of b
    # (GPUs 4/8, cores 16/16 at demand: share 1; they run at 2 cores, so 8 + 8 cores fit): min 1/2
    assert sorted(res.schedule.jobs) == ["j0", "j2", "j3", "j4", "j5"] or sorted(res.schedule.jobs) == ["j1", "j2", "j3", "j4", "j5"]
    assert rep.dominant_shares == pytest.approx({"a": 0.5, "b": 1.0})
    assert min(rep.dominant_shares.values()) == pytest.approx(res.stats["drf_min_share"]) == pytest.approx(0.5)
    assert res.stats["drf_level_proven"] is True
    assert "dominant_shares" in rep.to_dict()


def test_cpsat_and_the_heuristics_honour_drf_and_the_mip_solvers_refuse_it():
    inst = _round([_job(0, 1, "a"), _job(1, 1, "b")])
    for m in ("scip", "cbc", "pulp", "maifs"):
        with pytest.raises(InputError) as e:
            solve_round(inst, solver=m, time_limit=1)
        assert e.value.field == "solver" and "drf" in str(e.value) and "cpsat" in str(e.value) and "lns" in str(e.value), m
    for m in ("fixed-demand", "fungible-greedy", "lns"):  # optsched.heuristics.drf; tests/test_drf_heuristics.py
        assert "drf_min_share" in solve_round(inst, solver=m, time_limit=1).stats, m
    assert solve_round(inst, time_limit=2).solver == "cpsat"  # auto: exact on a small round


# --- random rounds: CP-SAT's lexicographic optimum equals brute force's ------------------------------


@st.composite
def drf_rounds(draw):
    d = draw(tiny_instance_dicts(max_nodes=2, max_jobs=4))
    d["version"] = 2
    d["round"]["fairness"] = "drf"
    d["jobs"][0]["tenant"] = "a"  # at least two tenants whenever there are two jobs
    for j in d["jobs"][1:]:
        t = draw(st.sampled_from(["b", "a", None]))
        if t is not None:
            j["tenant"] = t
    return Instance.from_dict(d)


def _lexicographic_brute(inst):
    """(max over feasible schedules of the smallest dominant share, best worth among those), from
    the contract: shares at fixed demand over the cluster totals, tenants with a runnable job."""
    caps = [sum(n.gpus for n in inst.nodes), sum(n.cpus for n in inst.nodes), sum(n.mem_gb for n in inst.nodes)]
    tenants = {j.tenant or "" for j in inst.jobs if _options(inst, j)}
    best = None
    for total, sched, _load in feasible_schedules(inst):
        held = {t: [0, 0, 0] for t in tenants}
        for j in inst.jobs:
            if j.id in sched:
                row = held[j.tenant or ""]
                for r, a in enumerate((j.gpus, j.gpus * j.demand[0], j.gpus * j.demand[1])):
                    row[r] += a
        level = min((max((Fraction(u, c) for u, c in zip(row, caps, strict=True) if c > 0), default=Fraction(0))
                     for row in held.values()), default=Fraction(0))
        if best is None or (level, total) > best:
            best = (level, total)
    return best


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(drf_rounds())
def test_cpsat_maximises_the_smallest_dominant_share_then_worth(inst):
    assume(search_size(inst) <= 3000)
    res = solve_round(inst, solver="cpsat", time_limit=2, num_workers=1)
    rep = check_schedule(inst, res.schedule)
    level, worth = _lexicographic_brute(inst)
    tenants = {j.tenant or "" for j in inst.jobs if _options(inst, j)}
    got = min((Fraction(rep.dominant_shares[t]).limit_denominator(10**6) for t in tenants), default=Fraction(0))
    assert got <= level
    if res.stats.get("drf_level_proven"):
        assert got == level, (got, level)
    if res.status.value == "optimal":
        assert res.objective == pytest.approx(worth, rel=1e-5, abs=1e-6)
    assert res.stats["drf_min_share"] == pytest.approx(float(got))
