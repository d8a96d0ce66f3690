"""HUG-style progress fairness (contract v2 ``round.fairness = "hug"``): the field and its version,
the checker's per-tenant progress, a round where DRF and HUG differ, CP-SAT's lexicographic optimum
(largest smallest progress, then worth) against brute force on random tiny rounds, the heuristics,
the MIP solvers' refusal and the simulator's ``--fairness hug``.

Progress is restated here from the definition (formulations/policies.md, "HUG-style progress
fairness"), in exact fractions: a tenant's demand vector is the fixed demand of its runnable jobs
over the cluster totals, normalised to a largest component of 1; its progress is the least, over
the resources it demands, of what it got (GPUs, and cores and GB at the chosen points) over the
total, divided by that component."""

from __future__ import annotations

import copy
import json
from fractions import Fraction

import pytest
from bruteforce import _options, feasible_schedules, search_size
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import tiny_instance_dicts

from optsched import check_schedule, solve_round
from optsched.errors import InputError
from optsched.model import Instance
from optsched.round_policies import hug_coefficients, hug_level, hug_levels

HEURISTICS = ("fixed-demand", "fungible-greedy", "lns")


def _progress(inst, sched):
    """{tenant: progress} for ``sched`` {job_id: (nodes, c, m)}, tenants with a runnable job."""
    caps = [sum(n.gpus for n in inst.nodes), sum(n.cpus for n in inst.nodes), sum(n.mem_gb for n in inst.nodes)]
    demand, used = {}, {}
    for j in inst.jobs:
        t = j.tenant or ""
        if _options(inst, j):
            row = demand.setdefault(t, [0, 0, 0])
            for r, a in enumerate((j.gpus, j.gpus * j.demand[0], j.gpus * j.demand[1])):
                row[r] += a
        if j.id in sched:
            nodes, c, m = sched[j.id]
            g = sum(nodes.values())
            row = used.setdefault(t, [0, 0, 0])
            for r, a in enumerate((g, g * c, g * m)):
                row[r] += a
    out = {}
    for t, dem in demand.items():
        share = [Fraction(d, c) if c else Fraction(0) for d, c in zip(dem, caps, strict=True)]
        top = max(share)
        u = used.get(t, [0, 0, 0])
        out[t] = min(Fraction(u[r], caps[r]) / (share[r] / top) for r in range(3) if share[r] > 0)
    return out


def _as_brute(schedule):
    return {j: (dict(a.nodes), a.cpus_per_gpu, a.mem_per_gpu_gb) for j, a in schedule.jobs.items()}


def _lexicographic_brute(inst):
    """(max over feasible schedules of the smallest progress, best worth among the schedules reaching it)."""
    best = None
    for total, sched, _load in feasible_schedules(inst):
        level = min(_progress(inst, sched).values(), default=Fraction(0))
        if best is None or (level, total) > best:
            best = (level, total)
    return best


# --- a round where DRF and HUG differ --------------------------------------------------------------


def _lean_round(fairness):
    """One node: 4 GPUs, 8 cores, 64 GB. Tenant a: two 1-GPU jobs demanding 4 cores per GPU that
    run almost as fast on 1 core (1.0 vs 1.05); tenant b: two 1-GPU jobs demanding 1 core that run
    3x as fast on 3. At fixed demand a's jobs hold half the cores each, so DRF counts a at share 1
    with both jobs running, and worth then runs them on 1 core each (b takes 6 cores). HUG counts
    those 2 cores: a's progress is 2/8 against its demand vector (1/2, 1, 1/4)."""
    gb = {"mem_per_gpu_gb": [8]}
    a = {"cpus_per_gpu": [1, 4], **gb, "throughput": [[1.0], [1.05]]}
    b = {"cpus_per_gpu": [1, 2, 3], **gb, "throughput": [[1.0], [2.0], [3.0]]}
    jobs = [{"id": f"{t}{i}", "gpus": 1, "weight": 1.0, "tenant": t, "profile": copy.deepcopy(p),
             "demand": {"cpus_per_gpu": c, "mem_per_gpu_gb": 8}} for t, p, c in (("a", a, 4), ("b", b, 1)) for i in range(2)]
    return Instance.from_dict({"version": 2, "name": "lean", "round": {"duration_s": 300, "fairness": fairness},
                               "nodes": [{"id": "n0", "gpu_type": "V100", "gpus": 4, "cpus": 8, "mem_gb": 64}], "jobs": jobs})


def test_hug_counts_the_cores_jobs_get_and_gives_the_lean_tenant_more_than_drf():
    drf, hug = _lean_round("drf"), _lean_round("hug")
    s, coef = hug_coefficients(hug)
    assert all(den == 1 for rows in coef.values() for _r, _n, den in rows)  # exact on this round
    res_d = solve_round(drf, solver="cpsat", time_limit=5, num_workers=1)
    res_h = solve_round(hug, solver="cpsat", time_limit=5, num_workers=1)
    assert res_d.status.value == res_h.status.value == "optimal" and res_h.stats["hug_level_proven"]

    def cores(res, t):
        return sum(a.gpus * a.cpus_per_gpu for j, a in res.schedule.jobs.items() if j.startswith(t))

    # DRF: every job runs, a on 1 core each (shares a 1, b 1/2); its HUG progress a = 2/8
    assert sorted(res_d.schedule.jobs) == ["a0", "a1", "b0", "b1"] and cores(res_d, "a") == 2
    assert check_schedule(drf, res_d.schedule).dominant_shares == pytest.approx({"a": 1.0, "b": 0.5})
    as_hug = _progress(hug, _as_brute(res_d.schedule))
    assert as_hug == {"a": Fraction(1, 4), "b": Fraction(1, 2)}
    assert hug_levels(hug, res_d.schedule.jobs) == {"a": s // 4, "b": s // 2}
    # HUG: a gets 4 cores (one job at its demand point) and both tenants reach 1/2, the optimum
    rep = check_schedule(hug, res_h.schedule)
    assert not rep and cores(res_h, "a") >= 4
    assert rep.hug_progress == pytest.approx({"a": 0.5, "b": 0.5})
    assert res_h.stats["hug_min_progress"] == pytest.approx(0.5) and "hug_progress" in rep.to_dict()
    level, worth = _lexicographic_brute(hug)
    assert level == Fraction(1, 2) and res_h.objective == pytest.approx(worth) == pytest.approx(5.0)
    assert res_d.objective > res_h.objective  # the price of counting a's cores
    # extra cores beyond the demand ratio do not raise progress: b at 3 cores per GPU is still 1/2
    assert _progress(hug, {"b0": ({"n0": 1}, 3, 8), "b1": ({"n0": 1}, 3, 8)})["b"] == Fraction(1, 2)
    assert hug_level(hug, res_h.schedule.jobs) == s // 2


def test_the_mip_solvers_refuse_hug_and_the_heuristics_report_their_progress(tmp_path, capsys):
    from optsched.cli import main

    inst = _lean_round("hug")
    src = tmp_path / "hug.json"
    src.write_text(json.dumps(inst.to_dict()))
    assert main(["export", str(src), "--format", "lp", "-o", str(tmp_path / "hug.lp")]) == 2  # the MIP does not model it
    assert "hug" in capsys.readouterr().err and not (tmp_path / "hug.lp").exists()
    for m in ("scip", "cbc", "pulp", "maifs"):
        with pytest.raises(InputError) as e:
            solve_round(inst, solver=m, time_limit=1)
        assert e.value.field == "solver" and "hug" in str(e.value) and "cpsat" in str(e.value), m
    for m in HEURISTICS:
        res = solve_round(inst, solver=m, time_limit=1)
        assert res.stats["hug_min_progress"] == pytest.approx(min(check_schedule(inst, res.schedule).hug_progress.values())), m
        assert "drf_min_share" not in res.stats


# --- random tiny rounds: CP-SAT's lexicographic optimum equals brute force's -------------------------


@st.composite
def hug_rounds(draw):
    d = draw(tiny_instance_dicts(max_nodes=2, max_jobs=4))
    d["version"] = 2
    d["round"]["fairness"] = "hug"
    d["jobs"][0]["tenant"] = "a"
    for j in d["jobs"][1:]:
        t = draw(st.sampled_from(["b", "a", None]))
        if t is not None:
            j["tenant"] = t
    for j in d["jobs"]:  # elastic demands: the round picks the gang size too (progress counts what it got)
        if "placement" not in j and j["gpus"] <= 2 and draw(st.booleans()):
            j["elastic"] = {"gpus": [j["gpus"], 2 * j["gpus"]], "scaling": [1.0, draw(st.floats(1.0, 2.0))]}
    return Instance.from_dict(d)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hug_rounds())
def test_cpsat_maximises_the_smallest_progress_then_worth(inst):
    assume(search_size(inst) <= 3000)
    s, coef = hug_coefficients(inst)
    assert all(den == 1 for rows in coef.values() for _r, _n, den in rows)  # tiny rounds: exact levels
    res = solve_round(inst, solver="cpsat", time_limit=2, num_workers=1)
    rep = check_schedule(inst, res.schedule)
    assert not rep
    level, worth = _lexicographic_brute(inst)
    got = min(_progress(inst, _as_brute(res.schedule)).values(), default=Fraction(0))
    assert got <= level
    assert hug_level(inst, res.schedule.jobs) == got * s  # an exact integer level
    if res.stats.get("hug_level_proven"):
        assert got == level, (got, level)
    if res.status.value == "optimal":
        assert res.stats.get("hug_level_proven", not coef)  # no tenant with a runnable job: no stage 1
        assert res.objective == pytest.approx(worth, rel=1e-5, abs=1e-6)
    assert res.stats["hug_min_progress"] == pytest.approx(float(got))
    assert min(rep.hug_progress.values(), default=0.0) == pytest.approx(float(got))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hug_rounds(), st.sampled_from(HEURISTICS))
def test_heuristics_are_feasible_and_never_below_their_plain_schedules_progress(inst, method):
    assume(search_size(inst) <= 3000)
    res = solve_round(inst, solver=method, time_limit=1)
    assert not check_schedule(inst, res.schedule)
    level, _worth = _lexicographic_brute(inst)
    got = min(_progress(inst, _as_brute(res.schedule)).values(), default=Fraction(0))
    assert got <= level
    assert res.stats["hug_min_progress"] == pytest.approx(float(got))
    if method == "lns":  # starts from fungible-greedy's pick and never accepts a lower level
        fg = solve_round(inst, solver="fungible-greedy", time_limit=1)
        assert hug_level(inst, res.schedule.jobs) >= hug_level(inst, fg.schedule.jobs)
        return
    plain_inst = Instance.from_dict({**inst.to_dict(), "round": {k: v for k, v in inst.to_dict()["round"].items() if k != "fairness"}})
    plain = solve_round(plain_inst, solver=method, time_limit=1)
    assert hug_level(inst, res.schedule.jobs) >= hug_level(inst, plain.schedule.jobs)


def test_the_leftover_pass_only_adds_cores_and_memory_in_a_hug_round():
    from optsched.heuristics.common import Cluster
    from optsched.heuristics.fungible_greedy import _redistribute

    # one job on 1 GPU at (2 cores, 8 GB), throughput 2; (1, 32) gives 3 at fewer cores, (2, 32) 2.5
    prof = {"cpus_per_gpu": [1, 2], "mem_per_gpu_gb": [8, 32], "throughput": [[1.0, 3.0], [2.0, 2.5]]}
    for fairness, want in ((None, (1, 32)), ("hug", (2, 32))):
        rnd = {"duration_s": 300, **({"fairness": fairness} if fairness else {})}
        inst = Instance.from_dict({"version": 2, "name": "up", "round": rnd,
                                   "nodes": [{"id": "n0", "gpu_type": "V100", "gpus": 1, "cpus": 2, "mem_gb": 32}],
                                   "jobs": [{"id": "j", "gpus": 1, "weight": 1.0, "tenant": "a", "profile": prof,
                                             "demand": {"cpus_per_gpu": 2, "mem_per_gpu_gb": 8}}]})
        cl = Cluster(inst)
        cl.take({"n0": 1}, 2, 8)
        chosen = {"j": ({"n0": 1}, 2, 8)}
        _redistribute(inst, cl, chosen, 2.0, 32.0, up_only=inst.round.fairness == "hug")
        assert chosen["j"][1:] == want, fairness
    res = solve_round(inst, solver="fungible-greedy", time_limit=1)
    assert res.schedule.jobs["j"].point == (2, 32)


def _generated_hug_round(seed):
    import random
    from dataclasses import replace

    from optsched.gen import generate
    from optsched.model import Round

    inst = generate(nodes=3, jobs=12, seed=seed, gpu_types=("V100", "K80"), running_fraction=0.3, gpus_per_node=4,
                    cpus_per_node=16, mem_per_node_gb=128)
    rng = random.Random(seed)
    jobs = tuple(replace(j, tenant=f"t{rng.randrange(3)}") for j in inst.jobs)
    return replace(inst, version=2, jobs=jobs, round=Round(duration_s=300, fairness="hug"))


def test_lns_under_hug_keeps_the_level_and_its_neighbourhoods_earn_worth():
    from optsched.heuristics.lns import LargeNeighbourhoodSearch, hug_floor

    gains = []
    for seed in (2, 3):  # fungible-greedy reaches CP-SAT's level here, at about 60 % of its worth
        inst = _generated_hug_round(seed)
        fg = solve_round(inst, solver="fungible-greedy", time_limit=1)
        level = hug_level(inst, fg.schedule.jobs)
        # the floors hold for the schedule they come from (the sub-problem's hint stays feasible)
        ids = sorted(fg.schedule.jobs)[:4]
        for mine, r, need in hug_floor(inst, fg.schedule, ids, level):
            assert sum((a.gpus, a.gpus * a.cpus_per_gpu, a.gpus * a.mem_per_gpu_gb)[r] for j, a in fg.schedule.jobs.items() if j in mine) >= need
        res = LargeNeighbourhoodSearch().solve(inst, time_limit=1.0, seed=0, bound=False)
        assert not check_schedule(inst, res.schedule)
        assert hug_level(inst, res.schedule.jobs) >= level
        gains.append(res.objective / fg.objective)
    # without the floors every neighbourhood solved for worth alone lowered some tenant's progress
    # and lns returned fungible-greedy's schedule (measured: 0 improvements in 87-174 steps)
    assert max(gains) > 1.2, gains


def test_large_hug_rounds_keep_pareto_demand_and_hint_points_and_claim_no_proof(monkeypatch):
    from optsched.exact import prep

    # tenant a's 4-core demand point is dominated (1 core runs faster): only the demand point keeps it
    d = _lean_round("hug").to_dict()
    for j in d["jobs"][:2]:
        j["profile"]["throughput"] = [[1.05], [1.0]]
    inst = Instance.from_dict(d)
    full = solve_round(inst, solver="cpsat", time_limit=5, num_workers=1)
    assert full.stats["hug_points"] == "all" and full.status.value == "optimal" and full.stats["hug_min_progress"] == pytest.approx(0.5)
    monkeypatch.setattr(prep, "HUG_ALL_POINTS_MAX", 0)  # as on a round past the limit
    assert prep.job_data(inst, prune=True)[0].points == (prep.Point(1, 8, 1.05),)
    res = solve_round(inst, solver="cpsat", time_limit=5, num_workers=1)
    assert res.stats["hug_points"] == "reduced" and res.stats["hug_level_proven_reduced"] is True
    assert res.stats["hug_level_proven"] is False and res.status.value == "time_limit"  # proven over the kept points only
    assert res.stats["hug_min_progress"] == pytest.approx(0.5)  # a's demand point is kept: a still gets 4 cores
    assert res.objective == pytest.approx(full.objective)


def test_past_the_exact_scale_levels_are_rounded_down_never_up():
    from optsched.round_policies import DRF_SCALE

    # demands in several primes: the lcm of the ratios' denominators passes 1e9, so S = DRF_SCALE
    nodes = [{"id": "n0", "gpu_type": "V100", "gpus": 7, "cpus": 97, "mem_gb": 1009}]
    grid = {"cpus_per_gpu": [1, 3, 5, 7, 11], "mem_per_gpu_gb": [13, 17, 19, 23, 29]}
    jobs = []
    for i, (c, m) in enumerate([(3, 13), (5, 17), (7, 19), (11, 23), (1, 29)]):
        prof = {**grid, "throughput": [[1.0 + 0.1 * a + 0.05 * b for b in range(5)] for a in range(5)]}
        jobs.append({"id": f"j{i}", "gpus": 1, "weight": 1.0, "tenant": f"t{i}", "profile": prof,
                     "demand": {"cpus_per_gpu": c, "mem_per_gpu_gb": m}})
    inst = Instance.from_dict({"version": 2, "name": "primes", "round": {"duration_s": 300, "fairness": "hug"}, "nodes": nodes, "jobs": jobs})
    s, coef = hug_coefficients(inst)
    assert s == DRF_SCALE and any(den > 1 for rows in coef.values() for _r, _n, den in rows)
    for method in ("cpsat", *HEURISTICS):
        res = solve_round(inst, solver=method, time_limit=2, num_workers=1) if method == "cpsat" else solve_round(inst, solver=method, time_limit=1)
        exact = _progress(inst, _as_brute(res.schedule))
        levels = hug_levels(inst, res.schedule.jobs)
        for t, p in exact.items():  # conservative, and off by less than 2**-20 relative plus one unit
            assert p * s - 1 - p * s / 2**20 <= levels[t] <= p * s, (method, t)


def test_an_elastic_round_reduced_only_as_variants_keeps_the_hints_points(monkeypatch):
    from optsched.exact import core, cpsat, prep
    from optsched.schedule import Assignment, Schedule

    # 16 elastic jobs x 16 points x 3 nodes: 768 cells as given, 1,536 as size variants, so the
    # variant model is reduced while the round itself is under HUG_ALL_POINTS_MAX
    grid = {"cpus_per_gpu": [1, 2, 4, 8], "mem_per_gpu_gb": [8, 16, 32, 64],
            "throughput": [[1.0] * 4, [2.0] * 4, [2.0] * 4, [2.0] * 4]}  # (8, 64) is dominated by (2, 8)
    jobs = [{"id": f"j{i}", "gpus": 1, "weight": 1.0, "tenant": "ab"[i % 2], "profile": copy.deepcopy(grid),
             "demand": {"cpus_per_gpu": 1, "mem_per_gpu_gb": 8}, "elastic": {"gpus": [1, 2], "scaling": [1.0, 1.5]}}
            for i in range(16)]
    nodes = [{"id": f"n{k}", "gpu_type": "V100", "gpus": 4, "cpus": 64, "mem_gb": 512} for k in range(3)]
    inst = Instance.from_dict({"version": 2, "name": "band", "round": {"duration_s": 300, "fairness": "hug"}, "nodes": nodes, "jobs": jobs})
    assert prep.hug_keep(inst, ()) is None
    built = []

    def spy(*args, **kwargs):
        built.append(prep.job_data(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(core, "job_data", spy)
    hint = Schedule(inst.name, {"j0": Assignment({"n0": 2}, 8, 64)})
    res = cpsat.CpSatSolver().solve(inst, time_limit=1, seed=0, hint=hint, num_workers=1)
    assert res.stats["hug_points"] == "reduced" and not check_schedule(inst, res.schedule)
    for d in built[-1]:  # the model's variants of j0 hold the hint's point (its cores and GB count)
        if d.job.id.startswith("j0@"):
            assert prep.Point(8, 64, 2.0) in d.points, d.job.id


def test_a_reduced_hug_models_bound_is_not_below_the_lexicographic_optimum(monkeypatch):
    from optsched.exact import prep

    # a's 2-core point is dominated (1 core runs as fast) and not its demand point (3 cores), so the
    # reduced model leaves it out; the optimum runs a and b on 2 cores each (progress 1/2 both, worth
    # 3), the reduced model only a on 3 and b on 1 (worth 2), and its worth bound (2) is no bound
    gb = {"mem_per_gpu_gb": [8]}
    jobs = [{"id": "a0", "gpus": 1, "weight": 1.0, "tenant": "a", "profile": {"cpus_per_gpu": [1, 2, 3], **gb, "throughput": [[1.0]] * 3},
             "demand": {"cpus_per_gpu": 3, "mem_per_gpu_gb": 8}},
            {"id": "b0", "gpus": 1, "weight": 1.0, "tenant": "b",
             "profile": {"cpus_per_gpu": [1, 2, 3, 4], **gb, "throughput": [[1.0], [2.0], [3.0], [4.0]]},
             "demand": {"cpus_per_gpu": 1, "mem_per_gpu_gb": 8}}]
    inst = Instance.from_dict({"version": 2, "name": "bound", "round": {"duration_s": 300, "fairness": "hug"},
                               "nodes": [{"id": "n0", "gpu_type": "V100", "gpus": 2, "cpus": 4, "mem_gb": 64}], "jobs": jobs})
    level, worth = _lexicographic_brute(inst)
    assert (level, worth) == (Fraction(1, 2), 3.0)
    monkeypatch.setattr(prep, "HUG_ALL_POINTS_MAX", 0)
    res = solve_round(inst, solver="cpsat", time_limit=3, num_workers=1)
    assert res.stats["hug_points"] == "reduced" and res.objective == pytest.approx(2.0)
    assert res.bound is None or res.bound >= worth - 1e-6, res.bound
