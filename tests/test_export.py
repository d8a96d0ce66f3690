"""``optsched export``: the MPS/LP files hold the very model the MIP solvers solve.

A second solver (HiGHS through highspy, and PuLP's CBC through ``LpProblem.fromMPS``) reads the
exported file and must reach the optimum that SCIP reaches on the in-memory model, and the
enumerated optimum on random tiny rounds.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import highspy
import pytest
from hypothesis import HealthCheck, given, settings
from test_mip import brute_force, hand_instance, tiny_instances

from optsched import solve_round
from optsched.mip.backends import export_text
from optsched.mip.bound import lp_bound
from optsched.mip.description import build
from optsched.mip.linear import LinearModel


def _highs(path: Path) -> tuple[str, float]:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 1e-9)
    h.setOptionValue("threads", 1)
    if h.readModel(str(path)) != highspy.HighsStatus.kOk:
        raise AssertionError(f"HiGHS could not read {path}")
    h.run()
    return h.modelStatusToString(h.getModelStatus()), h.getInfo().objective_function_value


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


@pytest.mark.parametrize("fmt", ["mps", "lp"])
@pytest.mark.parametrize("fair", [False, True])
def test_highs_solves_exported_file_to_same_optimum(tmp_path: Path, fmt: str, fair: bool) -> None:
    inst = hand_instance(fair)
    path = tmp_path / f"round.{fmt}"
    path.write_text(export_text(build(inst).model, fmt))
    status, value = _highs(path)
    assert status == "Optimal"
    assert _close(value, solve_round(inst, solver="scip", time_limit=20.0).objective)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_pulp_cbc_solves_exported_mps_to_same_optimum(tmp_path: Path) -> None:
    import pulp

    inst = hand_instance()
    path = tmp_path / "round.mps"
    path.write_text(export_text(build(inst).model, "mps"))
    _, prob = pulp.LpProblem.fromMPS(str(path), sense=pulp.LpMaximize)
    prob.solve(pulp.PULP_CBC_CMD(msg=False, gapRel=1e-9))
    assert pulp.LpStatus[prob.status] == "Optimal"
    assert _close(pulp.value(prob.objective), solve_round(inst, solver="cbc", time_limit=20.0).objective)


def test_relaxed_export_equals_full_lp_bound(tmp_path: Path) -> None:
    inst = hand_instance()
    path = tmp_path / "round_lp.mps"
    path.write_text(export_text(build(inst).model.relaxed(), "mps"))
    _, value = _highs(path)
    assert _close(value, lp_bound(inst, relaxation="full"))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(tiny_instances())
def test_random_tiny_exported_mps_matches_enumeration(tmp_path: Path, inst) -> None:
    path = tmp_path / "tiny.mps"
    path.write_text(export_text(build(inst).model, "mps"))
    status, value = _highs(path)
    best = brute_force(inst)
    if build(inst).model.num_vars == 0:
        assert best == 0.0
        return
    assert status == "Optimal" and _close(value, best), (value, best)


def test_full_precision_numbers() -> None:
    """Coefficients survive the round trip exactly (MPSolver's exporter prints six digits)."""
    m = LinearModel("prec")
    a = m.add_var("a", 0, 1, integer=True, obj=1 / 3)
    m.le("r", [(a, 2 / 7)], 0.123456789012345678)
    text = export_text(m, "mps")
    assert repr(1 / 3) in text and repr(2 / 7) in text
    assert repr(1 / 3) in export_text(m, "lp")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optsched", *args], capture_output=True, text=True, timeout=120)


def test_cli_export_writes_file_and_stdout(tmp_path: Path) -> None:
    inst_path = tmp_path / "hand.json"
    inst_path.write_text(json.dumps(hand_instance().to_dict()))
    out = tmp_path / "hand.mps"
    r = _cli("export", str(inst_path), "--format", "mps", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("*") and "ENDATA" in out.read_text()
    assert "columns" in r.stderr
    r = _cli("export", str(inst_path), "--format", "lp")
    assert r.returncode == 0 and "Maximize" in r.stdout and r.stdout.rstrip().endswith("End")


def test_cli_export_bad_input_exits_2(tmp_path: Path) -> None:
    r = _cli("export", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "missing.json" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**hand_instance().to_dict(), "version": 9}))
    r = _cli("export", str(bad))
    assert r.returncode == 2 and "version" in r.stderr
    r = _cli("export", str(bad), "--format", "xls")
    assert r.returncode == 2


def test_cli_exports_a_policy_round_that_highs_solves_to_the_brute_force_optimum_and_refuses_drf(tmp_path: Path) -> None:
    # contract v2: elastic job, two quota'd tenants, one move (the MIP_FAMILIES); DRF is lexicographic: refused
    from bruteforce import best_with_rules, brute_force

    from optsched.model import Instance

    prof = {"cpus_per_gpu": [1, 2], "mem_per_gpu_gb": [8], "throughput": [[1.0], [1.4]]}
    dem = {"cpus_per_gpu": 1, "mem_per_gpu_gb": 8}
    jobs = [{"id": "a0", "gpus": 2, "weight": 1.0, "tenant": "a", "profile": prof, "demand": dem,
             "elastic": {"gpus": [1, 2, 4], "scaling": [0.6, 1.0, 1.7]}},
            {"id": "a1", "gpus": 1, "weight": 2.0, "tenant": "a", "profile": prof, "demand": dem,
             "placement": {"n1": 1}, "restart_s": 30},
            {"id": "b0", "gpus": 2, "weight": 1.5, "tenant": "b", "profile": prof, "demand": dem},
            {"id": "b1", "gpus": 1, "weight": 0.5, "tenant": "b", "profile": prof, "demand": dem, "placement": {"n1": 1}}]
    nodes = [{"id": "n0", "gpu_type": "V100", "gpus": 4, "cpus": 6, "mem_gb": 64},
             {"id": "n1", "gpu_type": "V100", "gpus": 2, "cpus": 2, "mem_gb": 16}]
    d = {"version": 2, "name": "pol", "nodes": nodes, "jobs": jobs,
         "round": {"duration_s": 300, "tenants": {"a": {"quota_gpus": 2}, "b": {"quota_gpus": 3}}, "max_moves": 0}}
    src = tmp_path / "pol.json"
    src.write_text(json.dumps(d))
    out = tmp_path / "pol.lp"
    cmd = [sys.executable, "-m", "optsched", "export", str(src), "--format", "lp", "-o", str(out)]
    assert subprocess.run(cmd, capture_output=True, text=True).returncode == 0
    status, value = _highs(out)
    best = best_with_rules(Instance.from_dict(d))
    assert best == pytest.approx(5.74) and brute_force(Instance.from_dict(d))[0] == pytest.approx(6.0)  # the rules bind
    assert status == "Optimal" and _close(value, best)
    d["round"]["fairness"] = "drf"
    src.write_text(json.dumps(d))
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 2 and "drf" in run.stderr
