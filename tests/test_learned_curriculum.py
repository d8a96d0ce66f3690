"""Curriculum distillation: the broad and unfamiliar round generators, the config, a tiny budgeted run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optsched import check_schedule, solve_round
from optsched.catalogue import MODELS, profile
from optsched.errors import InputError
from optsched.learned.curriculum import (
    _TYPES,
    CurriculumConfig,
    broad_round,
    run_curriculum,
    shapes_round,
    unfamiliar_round,
)
from optsched.learned.inference import load_npz
from optsched.learned.solver import policy_schedule


@pytest.mark.parametrize(("nodes", "jobs"), [(2, 6), (6, 16), (16, 64), (64, 256)])
def test_broad_round_is_deterministic_valid_and_varied(nodes: int, jobs: int) -> None:
    rounds = [broad_round(nodes, jobs, seed=s) for s in range(12)]
    assert broad_round(nodes, jobs, seed=3) == rounds[3]
    assert all(len(r.nodes) == nodes and len(r.jobs) == jobs for r in rounds)
    shapes = {(r.nodes[0].gpus, r.nodes[0].cpus, r.nodes[0].mem_gb) for r in rounds}
    types = {n.gpu_type for r in rounds for n in r.nodes}
    assert len(shapes) > 3 and len(types) > 2 and types <= set(_TYPES)
    assert any(j.placement for r in rounds for j in r.jobs)  # running jobs in some rounds
    assert {r.round.spread_from for r in rounds} == {"one", "fewest"}


def test_unfamiliar_round_uses_settings_outside_the_broad_distribution() -> None:
    for s in range(20):
        r = unfamiliar_round(5, 18, seed=s)
        assert len(r.jobs) == 18
        assert {n.gpu_type for n in r.nodes}.isdisjoint(_TYPES)
        assert r.nodes[0].gpus in (2, 6)


def test_shapes_round_draws_profiles_of_no_catalogue_model() -> None:
    rounds = [shapes_round(4, 12, seed=s) for s in range(12)]
    assert shapes_round(4, 12, seed=5) == rounds[5]
    known = {profile(m, g, grid=grid) for m in MODELS for g in (1, 2, 4, 8) for grid in ("full", "coarse", "minimal")}
    for r in rounds:
        assert len(r.jobs) == 12 and all(j.model is None and j.profile not in known for j in r.jobs)
        assert all(j.demand in {(c, m) for c, m, _ in j.profile.points()} for j in r.jobs)
    assert len({j.profile.shape for r in rounds for j in r.jobs}) > 10
    assert any(j.placement for r in rounds for j in r.jobs)
    r = solve_round(rounds[0], method="learned")
    assert check_schedule(rounds[0], r.schedule).feasible


def test_curriculum_config_refuses_bad_values() -> None:
    with pytest.raises(InputError, match="stage_starts"):
        CurriculumConfig(stage_starts=[0.0, 0.5]).validate()
    with pytest.raises(InputError, match="stage_starts"):
        CurriculumConfig(stage_starts=[0.1, 0.2, 0.3, 0.4]).validate()
    with pytest.raises(InputError, match="budget_s"):
        CurriculumConfig(budget_s=0).validate()
    with pytest.raises(InputError, match="generator"):
        CurriculumConfig(generator="nowhere:nothing").validate()


def test_curriculum_run_end_to_end(tmp_path) -> None:
    """A tiny budgeted run labels in a pool, trains through both stages, decodes the proxy, writes
    its files, and ships weights that numpy inference loads and decodes with."""
    cfg = CurriculumConfig(
        out=str(tmp_path / "run"), cache=str(tmp_path / "cache"), stages=[[(2, 4)], [(3, 8)]], stage_starts=[0.0, 0.3],
        rounds_per_size=[4, 3], label_time_limits=[2.0, 2.0], val_per_size=1, budget_s=30.0, workers=1, batch_size=4,
        d_model=16, heads=2, layers=1, proxies=[(4, 12, 5, {})],
    )
    summary = run_curriculum(cfg, log=lambda _m: None)
    out = tmp_path / "run"
    for name in ("log.jsonl", "ckpt-last.npz", "best.npz", "summary.json"):
        assert (out / name).exists(), name
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert {r["stage"] for r in log} == {0, 1}
    assert any("proxy_gap_to_lp" in r for r in log if r["stage"] == 1)
    assert summary["labels"]["train"].get("3x8", 0) > 0
    assert len(list((tmp_path / "cache").glob("*.json"))) == 9  # every label cached
    w = load_npz(out / "best.npz")
    inst = broad_round(3, 8, seed=11)
    assert check_schedule(inst, policy_schedule(w, inst)).feasible
    assert np.isfinite(summary["best_score"])


def test_shipped_broad_weights_load_and_solve() -> None:
    """maifs-broad.npz (package data) loads without torch's help, solves feasibly, and its metadata
    records the curriculum its model card describes (up to 64 x 256, started from maifs-small)."""
    from optsched import solve_round
    from optsched.learned.inference import DEFAULT_WEIGHTS

    path = DEFAULT_WEIGHTS.parent / "maifs-broad.npz"
    w = load_npz(path)
    assert w.meta["config"]["stages"][-1] == [[64, 256]]
    assert w.meta["config"]["init"].endswith("maifs-small.npz") and w.meta["epoch"] == 44
    inst = unfamiliar_round(4, 12, seed=2)
    r = solve_round(inst, method="learned", weights=str(path), time_limit=5.0)
    assert check_schedule(inst, r.schedule).feasible and r.stats["weights"] == str(path)



def test_learned_round_that_stalled_glop_keeps_its_time_limit():
    """The price LPs of the repair once stalled in GLOP on this round (no time limit on them), so
    ``method="learned"`` ran past its limit without end; they now share a wall-clock budget. In a
    child process, so that a stall fails the test instead of hanging the suite."""
    import subprocess
    import sys

    code = ("from optsched import solve_round, check_schedule\n"
            "from optsched.learned.curriculum import broad_round\n"
            "inst = broad_round(16, 64, seed=2012011)\n"
            "res = solve_round(inst, method='learned', time_limit=4)\n"
            "assert check_schedule(inst, res.schedule).feasible\n")
    try:
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("method='learned' ran 60 s past a 4 s limit")
