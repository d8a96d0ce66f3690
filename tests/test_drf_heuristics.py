"""DRF in the heuristics (optsched.heuristics.drf: progressive filling across tenants in
fixed-demand, fungible-greedy and lns): feasible schedules, a smallest dominant share never above
the brute-force optimum nor below the plain (worth-order) schedule's, the max-min level where worth
order starves tenants, and on unit jobs exactly the water-filling level."""

from __future__ import annotations

from fractions import Fraction

import pytest
from bruteforce import search_size
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_drf import _lexicographic_brute, drf_rounds

from optsched import check_schedule, solve_round
from optsched.heuristics.drf import progressive_fill
from optsched.model import Instance
from optsched.round_policies import drf_level, drf_scale

HEURISTICS = ("fixed-demand", "fungible-greedy", "lns")


def _job(name, tenant, g, w, c, m):
    return {"id": name, "gpus": g, "weight": w, "tenant": tenant,
            "profile": {"cpus_per_gpu": [c], "mem_per_gpu_gb": [m], "throughput": [[1.0]]},
            "demand": {"cpus_per_gpu": c, "mem_per_gpu_gb": m}}


def _starving_round(fairness=True):
    """2 nodes x (4 GPUs, 16 cores, 64 GB). vision: four valuable 2-GPU jobs (GPU-dominant, 1/4
    each); nlp: three 1-GPU jobs at 8 cores (core-dominant, 1/4 each); rl: two 1-GPU jobs at 32 GB
    (memory-dominant, 1/4 each). Worth order gives vision all 8 GPUs and the others nothing; the
    max-min optimum gives every tenant two jobs (1/2 each: one of each tenant per node)."""
    jobs = ([_job(f"vision{i}", "vision", 2, 5.0, 2, 8) for i in range(4)] + [_job(f"nlp{i}", "nlp", 1, 1.0, 8, 8) for i in range(3)]
            + [_job(f"rl{i}", "rl", 1, 0.5, 1, 32) for i in range(2)])
    nodes = [{"id": f"n{k}", "gpu_type": "V100", "gpus": 4, "cpus": 16, "mem_gb": 64} for k in range(2)]
    rnd = {"duration_s": 300, **({"fairness": "drf"} if fairness else {})}
    return Instance.from_dict({"version": 2, "name": "starve", "round": rnd, "nodes": nodes, "jobs": jobs})


@pytest.mark.parametrize("method", HEURISTICS)
def test_progressive_filling_reaches_the_max_min_level_where_worth_order_starves_tenants(method):
    plain = solve_round(_starving_round(fairness=False), solver=method, time_limit=1)
    inst = _starving_round()
    shares = check_schedule(inst, plain.schedule).dominant_shares
    assert shares["nlp"] == shares["rl"] == 0.0  # worth order: vision takes every GPU
    res = solve_round(inst, solver=method, time_limit=1)
    rep = check_schedule(inst, res.schedule)
    assert not rep
    assert rep.dominant_shares == pytest.approx({"vision": 0.5, "nlp": 0.5, "rl": 0.5})
    assert res.stats["drf_min_share"] == pytest.approx(0.5)
    exact = solve_round(inst, solver="cpsat", time_limit=3, num_workers=1)
    assert exact.stats["drf_level_proven"] and exact.stats["drf_min_share"] == pytest.approx(0.5)  # 0.5 is the optimum


def test_the_fill_stops_at_a_target_and_leaves_the_rest_in_order():
    inst = _starving_round()
    order = sorted(inst.jobs, key=lambda j: (-j.weight, j.id))
    offered = []

    def admit(job):  # an unbounded cluster: every job fits
        offered.append(job.id)
        return job.gpus

    rest, level = progressive_fill(inst, order, admit)
    assert rest == [] and len(offered) == len(order)
    # shares in units of 1/S: each job is worth a quarter; vision offers first (ties: order), then the others
    s = drf_scale(inst)
    assert offered[:3] == ["vision0", "nlp0", "rl0"] and level == s * 2 // 4  # rl has two jobs: it ends at 1/2
    offered.clear()
    rest, level = progressive_fill(inst, order, admit, target=s // 4)
    assert offered == ["vision0", "nlp0", "rl0"] and level == s // 4
    assert [j.id for j in rest] == [j.id for j in order if j.id not in offered]


# --- random tiny rounds -----------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(drf_rounds(), st.sampled_from(HEURISTICS))
def test_heuristic_schedules_are_feasible_no_fairer_than_the_optimum_and_no_less_fair_than_worth_order(inst, method):
    assume(search_size(inst) <= 3000)
    res = solve_round(inst, solver=method, time_limit=1)  # solve_round also runs the checker
    rep = check_schedule(inst, res.schedule)
    assert not rep
    level, _worth = _lexicographic_brute(inst)
    got = drf_level(inst, res.schedule.jobs)
    assert Fraction(got, drf_scale(inst)) <= level
    assert res.stats["drf_min_share"] == pytest.approx(got / drf_scale(inst))
    if method == "lns":  # starts from fungible-greedy's pick and never accepts a lower level
        fg = solve_round(inst, solver="fungible-greedy", time_limit=1)
        assert got >= drf_level(inst, fg.schedule.jobs)
        return
    # the plain (worth-order) schedule of the same method is one of its candidates
    plain_inst = Instance.from_dict({**inst.to_dict(), "round": {k: v for k, v in inst.to_dict()["round"].items() if k != "fairness"}})
    plain = solve_round(plain_inst, solver=method, time_limit=1)
    assert got >= drf_level(inst, plain.schedule.jobs)


@st.composite
def unit_job_rounds(draw):
    """One GPU type, every job 1 GPU, cores and memory ample (4 cores and 16 GB per GPU, demands at
    most that): dominant shares are GPU shares and any job fits wherever a GPU is free."""
    nodes = [{"id": f"n{i}", "gpu_type": "A", "gpus": (g := draw(st.integers(1, 4))), "cpus": 4 * g, "mem_gb": 16 * g}
             for i in range(draw(st.integers(1, 3)))]
    jobs = []
    for i in range(draw(st.integers(1, 10))):
        c, m = draw(st.integers(1, 4)), draw(st.integers(1, 16))
        jobs.append({**_job(f"j{i}", draw(st.sampled_from("abc")), 1, draw(st.floats(0.1, 5.0)), c, m),
                     "profile": {"cpus_per_gpu": sorted({1, c}), "mem_per_gpu_gb": sorted({1, m}),
                                 "throughput": [[1.0 + a + b for b in range(len({1, m}))] for a in range(len({1, c}))]}})
    return Instance.from_dict({"version": 2, "name": "unit", "round": {"duration_s": 300, "fairness": "drf"}, "nodes": nodes, "jobs": jobs})


@settings(max_examples=30, deadline=None)
@given(unit_job_rounds(), st.sampled_from(HEURISTICS))
def test_on_unit_jobs_the_heuristics_reach_the_water_filling_level(inst, method):
    res = solve_round(inst, solver=method, time_limit=0.5)
    gpus = sum(n.gpus for n in inst.nodes)
    per_tenant: dict[str, int] = {}
    for j in inst.jobs:
        per_tenant[j.tenant] = per_tenant.get(j.tenant, 0) + 1
    # max min_t h_t s.t. h_t <= n_t, sum h_t <= G: min(min_t n_t, floor(G / T)) GPUs
    best = min(min(per_tenant.values()), gpus // len(per_tenant))
    shares = check_schedule(inst, res.schedule).dominant_shares
    assert min(shares.values()) == pytest.approx(best / gpus)
