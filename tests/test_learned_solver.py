"""The ``maifs`` solve method: shipped weights, solve_round integration, options, warm starts, validate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_learned_policy import random_round

import optsched.learned
from optsched import InputError, Instance, Schedule, Status, check_schedule, save_instance, solve_round
from optsched.learned.features import featurise
from optsched.learned.inference import NumpyPolicy
from optsched.learned.policy import PolicyNet, export_weights
from optsched.learned.solver import DEFAULT_WEIGHTS, LearnedSolver, load_policy
from optsched.values import schedule_value

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny_weights(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    return export_weights(PolicyNet(d_model=16, heads=2, layers=1, d_point=8), tmp_path_factory.mktemp("w") / "tiny.npz", note="test")


def test_shipped_weights_load_and_have_a_model_card() -> None:
    """The shipped weights are package data, load for numpy inference, and their model card sits beside them."""
    assert DEFAULT_WEIGHTS.is_file() and DEFAULT_WEIGHTS.suffix == ".npz"
    assert DEFAULT_WEIGHTS.parent.parent == Path(optsched.learned.__file__).parent
    net = load_policy()
    assert isinstance(net, NumpyPolicy)
    assert load_policy() is net  # cached
    assert DEFAULT_WEIGHTS.with_suffix(".md").is_file()
    assert net.n_parameters * 4 < 5_000_000  # a few MB at most


def test_torch_checkpoints_load_too(tmp_path: Path) -> None:
    """A training checkpoint (.pt) is converted for numpy inference: same scores as its module."""
    torch.manual_seed(1)
    net = PolicyNet(d_model=16, heads=2, layers=1, d_point=8).eval()
    torch.save(net.checkpoint(note="test"), tmp_path / "c.pt")
    inst = random_round(3, 3, 7)
    a = load_policy(tmp_path / "c.pt").scores(featurise(inst))
    b = net.to_numpy().scores(featurise(inst))
    assert (a.node == b.node).all() and (a.admit == b.admit).all()


@pytest.mark.parametrize("seed", range(4))
def test_solve_round_learned_is_feasible(seed: int) -> None:
    """``method="learned"`` uses the shipped weights; solve_round's checker accepts the result."""
    inst = random_round(seed, 4, 12, fair=seed % 2 == 1)
    res = solve_round(inst, method="learned", time_limit=5.0, seed=seed)
    assert res.status is Status.FEASIBLE and res.bound is None and res.solver == "maifs"
    assert check_schedule(inst, res.schedule).feasible
    assert res.objective == pytest.approx(schedule_value(inst, res.schedule))


def test_sampling_never_worse_and_deterministic(tiny_weights: Path) -> None:
    inst = random_round(9, 4, 14)
    greedy = LearnedSolver().solve(inst, time_limit=5.0, seed=0, weights=str(tiny_weights))
    a = LearnedSolver().solve(inst, time_limit=5.0, seed=3, weights=str(tiny_weights), samples=8)
    b = LearnedSolver().solve(inst, time_limit=5.0, seed=3, weights=str(tiny_weights), samples=8)
    assert a.objective >= greedy.objective - 1e-9
    assert a.schedule == b.schedule
    assert a.stats["samples"] == 8


def test_better_hint_is_kept(tiny_weights: Path) -> None:
    inst = random_round(4, 3, 8)
    ref = solve_round(inst, solver="cpsat", time_limit=5.0, seed=0, num_workers=1)
    res = solve_round(inst, solver="maifs", time_limit=5.0, seed=0, hint=ref.schedule, weights=str(tiny_weights))
    assert res.objective >= ref.objective - 1e-9


def test_bad_options_and_weights_are_refused(tiny_weights: Path, tmp_path: Path) -> None:
    inst = random_round(1, 2, 3)
    with pytest.raises(InputError, match="unknown option"):
        LearnedSolver().solve(inst, time_limit=1.0, seed=0, weights=str(tiny_weights), beam=3)
    with pytest.raises(InputError, match="samples"):
        LearnedSolver().solve(inst, time_limit=1.0, seed=0, weights=str(tiny_weights), samples=-1)
    with pytest.raises(InputError, match="no such file"):
        LearnedSolver().solve(inst, time_limit=1.0, seed=0, weights=str(tmp_path / "missing.pt"))
    bad = tmp_path / "bad.pt"
    torch.save({"format": "other"}, bad)
    with pytest.raises(InputError, match="not a usable"):
        LearnedSolver().solve(inst, time_limit=1.0, seed=0, weights=str(bad))
    for name, data in (("junk.npz", b"not a zip"), ("junk.bin", b"\x93NUMPY"), ("junk.pt", b"not a pickle")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(InputError, match="weights.*not a usable"):
            LearnedSolver().solve(inst, time_limit=1.0, seed=0, weights=str(tmp_path / name))
    with pytest.raises(InputError, match="threads"):
        LearnedSolver().solve(inst, time_limit=1.0, seed=0, weights=str(tiny_weights), threads=0)


def test_warm_start_and_diving(tiny_weights: Path) -> None:
    """The policy schedule is a valid CP-SAT hint; diving returns a feasible joined schedule."""
    from optsched.learned.warmstart import dive_solve, policy_hint, warm_solve

    inst = random_round(6, 3, 9)
    hint = policy_hint(inst, weights=tiny_weights)
    assert check_schedule(inst, hint).feasible
    warm = warm_solve(inst, time_limit=5.0, weights=tiny_weights, num_workers=1)
    assert check_schedule(inst, warm.schedule).feasible
    assert warm.objective >= schedule_value(inst, hint) - 1e-9 and warm.bound is not None
    dive = dive_solve(inst, time_limit=5.0, share=0.5, weights=tiny_weights, num_workers=1)
    assert check_schedule(inst, dive.schedule).feasible and dive.bound is None
    assert dive.objective >= schedule_value(inst, hint) - 1e-9


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optsched", *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_validate_verb(tmp_path: Path) -> None:
    """`optsched validate`: a feasible decision exits 0 with its gap and diff; an infeasible one
    exits 1 naming the violation; directories give a summary table."""
    inst = random_round(2, 2, 5)
    (tmp_path / "i").mkdir()
    (tmp_path / "d").mkdir()
    save_instance(inst, tmp_path / "i" / "r.json")
    empty = Schedule.empty(inst.name).to_dict()
    (tmp_path / "d" / "r.json").write_text(json.dumps(empty))
    p = _cli("validate", str(tmp_path / "i" / "r.json"), str(tmp_path / "d" / "r.json"), "--time-limit", "5", "--json", "--loglik")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["feasible"] and rep["objective"] == 0.0
    assert rep["reference"]["status"] == "optimal" and rep["gap_to_reference"] == pytest.approx(1.0)
    assert rep["diff_counts"].get("left_out", 0) == len(rep["diff"]) > 0
    assert rep["loglik"]["node"] == 0.0
    bad = dict(empty, jobs={inst.jobs[0].id: {"nodes": {"nowhere": 1}, "cpus_per_gpu": 1, "mem_per_gpu_gb": 1}})
    (tmp_path / "d" / "r.json").write_text(json.dumps(bad))
    p = _cli("validate", str(tmp_path / "i"), str(tmp_path / "d"), "--time-limit", "5")
    assert p.returncode == 1
    assert "nowhere" in p.stdout and "1 decisions, 0 feasible" in p.stdout
    p = _cli("validate", str(tmp_path / "i" / "r.json"), str(tmp_path / "missing.json"))
    assert p.returncode == 2 and "decision" in p.stderr


def test_tiny_time_limit_still_returns_a_feasible_schedule(tiny_weights: Path) -> None:
    """Past its deadline the decoder stops placing jobs; the partial schedule is feasible."""
    inst = random_round(12, 6, 30)
    res = LearnedSolver().solve(inst, time_limit=1e-4, seed=0, weights=str(tiny_weights))
    assert check_schedule(inst, res.schedule).feasible
    assert res.stats["greedy_cut_by_deadline"] and len(res.schedule) < len(inst.jobs)


def test_a_round_too_large_for_the_policy_gets_the_greedy_without_features(monkeypatch, tiny_weights: Path) -> None:
    """Where the policy's features would pass the memory cap, or take most of the time limit,
    ``maifs`` answers with fungible-greedy's schedule (a better hint kept) and says why, without
    building them."""
    import optsched.learned.solver as solver
    from optsched.heuristics.fungible_greedy import fungible_greedy_schedule

    inst = random_round(12, 6, 30)
    monkeypatch.setattr(solver, "featurise", lambda *a, **k: pytest.fail("the features were built"))
    monkeypatch.setattr(solver, "FEATURE_MEMORY", 1000)
    res = LearnedSolver().solve(inst, time_limit=10, seed=0, weights=str(tiny_weights))
    assert check_schedule(inst, res.schedule).feasible and res.stats["source"] == "fungible-greedy"
    assert "GB" in res.stats["policy_skipped"] and "partitioned" in res.stats["policy_skipped"]
    assert res.objective == pytest.approx(schedule_value(inst, fungible_greedy_schedule(inst)))
    monkeypatch.setattr(solver, "FEATURE_MEMORY", 2**40)
    monkeypatch.setattr(solver, "FEATURE_S_PER_CELL", 1.0)
    res = LearnedSolver().solve(inst, time_limit=10, seed=0, weights=str(tiny_weights))
    assert "of the 10 s limit" in res.stats["policy_skipped"]


# --- method="auto" with the learned policy ---------------------------------------------------------


def _with_deadline(inst: Instance) -> Instance:
    d = inst.to_dict()
    d["version"] = 2
    d["jobs"][0].update(deadline_s=900.0, remaining_s=600.0)
    return Instance.from_dict(d)


def test_auto_choice_uses_the_policy_where_measured_to_help(monkeypatch) -> None:
    """Exact rounds above AUTO_HINT_CELLS get the policy's warm start, rounds above
    AUTO_EXACT_CELLS the policy itself; small rounds, short time limits, contract-v2 policy rounds
    and weights that do not load keep the plain methods. The choice is a function of the round and limit."""
    from optsched import solve as solve_mod
    from optsched.gen import generate
    from optsched.solve import AUTO_EXACT_CELLS, AUTO_HINT_CELLS, choose_auto

    small = generate(4, AUTO_HINT_CELLS // 4, seed=1)
    medium = generate(16, AUTO_HINT_CELLS // 16 + 1, seed=1)
    big = generate(64, AUTO_EXACT_CELLS // 64 + 1, seed=1)
    assert choose_auto(small, 10.0).name == "cpsat"
    assert choose_auto(medium, 10.0).name == "cpsat+maifs" and choose_auto(medium, 10.0).family == "exact"
    assert choose_auto(big, 10.0).name == "maifs" and choose_auto(big, 10.0).family == "learned"
    assert choose_auto(medium, 1.0).name == "cpsat" and choose_auto(big, 1.0).name == "lns"
    assert choose_auto(_with_deadline(medium), 10.0).name == "cpsat"
    assert choose_auto(_with_deadline(big), 10.0).name == "lns"
    monkeypatch.setattr(solve_mod, "learned_problem", lambda: "weights: no such file")
    assert choose_auto(medium, 10.0).name == "cpsat" and choose_auto(big, 10.0).name == "lns"


def test_auto_runs_the_warm_start_and_the_policy_within_the_limit(monkeypatch) -> None:
    """Through solve_round: both learned auto methods return checked schedules no worse than the
    policy's own, about within the time limit, and the warm start keeps CP-SAT's bound."""
    from optsched import solve as solve_mod
    from optsched.learned.solver import LearnedSolver

    inst = random_round(21, 4, 12)
    policy_value = LearnedSolver().solve(inst, time_limit=10.0, seed=0).objective
    solve_round(inst, "exact", time_limit=1.0, num_workers=1)  # first-use loading (LP bound) outside the timing
    monkeypatch.setattr(solve_mod, "AUTO_HINT_CELLS", 0)
    res = solve_round(inst, "auto", time_limit=3.0, seed=0, num_workers=1)
    assert res.solver == "cpsat+maifs" and res.method == "exact" and res.bound is not None
    assert res.stats["policy_hint_objective"] <= policy_value + 1e-9  # cut short on a slow machine, else equal
    assert res.objective >= res.stats["policy_hint_objective"] - 1e-9 and res.time_s <= 3.0 + 1.5
    monkeypatch.setattr(solve_mod, "AUTO_EXACT_CELLS", 0)
    res = solve_round(inst, "auto", time_limit=3.0, seed=0)
    assert (res.solver, res.method, res.stats["auto"]) == ("maifs", "learned", "maifs")
    assert res.objective == pytest.approx(policy_value) and res.time_s <= 3.0 + 0.5


def test_optsched_import_does_not_load_torch() -> None:
    """torch stays optional: importing optsched and choosing auto (which loads the policy's weights
    with numpy) load no torch, and lns's price-guided start (optsched.learned.repair.price_schedule) runs without it."""
    code = ("import sys, optsched; from optsched.gen import generate; from optsched.solve import choose_auto; "
            "from optsched.heuristics.lns import LargeNeighbourhoodSearch; inst = generate(16, 80, seed=1); "
            "choose_auto(inst, 10.0); r = LargeNeighbourhoodSearch().solve(inst, time_limit=1.0, seed=0, bound=False); "
            "print('price-repack' in r.stats['starts'], 'torch' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "True False"


def test_warm_start_starts_the_bound_worker_before_the_policy(monkeypatch) -> None:
    """cpsat+maifs starts cpsat's configuration-LP bound worker before the policy decodes and hands
    that worker to cpsat, which uses it (and starts no other)."""
    from optsched.exact import cpsat as cpsat_mod
    from optsched.gen import SIZE_CLASSES, generate
    from optsched.learned import auto as auto_mod

    events: list[str] = []
    started = cpsat_mod.start_bound_worker
    policy = auto_mod._policy
    solve = cpsat_mod.CpSatSolver.solve

    def start(*args, **kwargs):
        w = started(*args, **kwargs)
        events.append("worker" if w is not None else "no worker")
        return w

    def decode(*args, **kwargs):
        events.append("policy")
        return policy(*args, **kwargs)

    def cpsat_solve(self, instance, **kwargs):
        events.append("cpsat with its worker" if not isinstance(kwargs.get("bound_worker", True), bool) else "cpsat")
        return solve(self, instance, **kwargs)

    monkeypatch.setattr(auto_mod, "start_bound_worker", start)
    monkeypatch.setattr(auto_mod, "_policy", decode)
    monkeypatch.setattr(cpsat_mod.CpSatSolver, "solve", cpsat_solve)
    inst = generate(16, 80, seed=1, **SIZE_CLASSES["medium"].options)  # 1,280 cells: cpsat has an lns stage
    res = auto_mod.WarmCpSat().solve(inst, time_limit=4.0, seed=0, num_workers=1)
    assert events[:3] == ["worker", "policy", "cpsat with its worker"]
    assert "bound_worker_done" in res.stats and res.bound is not None and res.bound >= res.objective - 1e-6


def test_auto_says_when_the_policy_cannot_load(monkeypatch, caplog, tmp_path: Path) -> None:
    """Weights that do not load: auto runs the plain method, and says so in Result.stats["warnings"]
    and on the `optsched` logger (never a silent change of method); method="learned" refuses."""
    import logging

    from optsched.gen import generate
    from optsched.learned import solver as solver_mod

    monkeypatch.setattr(solver_mod, "DEFAULT_WEIGHTS", tmp_path / "gone.npz")
    inst = generate(16, 70, seed=1)  # 1,120 cells: auto would warm-start cpsat from the policy
    with caplog.at_level(logging.WARNING, logger="optsched"):
        res = solve_round(inst, "auto", time_limit=2.0, seed=0, num_workers=1)
    assert res.solver == "cpsat"
    (warning,) = res.stats["warnings"]
    assert "instead of cpsat+maifs" in warning and "gone.npz" in warning
    assert [r.name for r in caplog.records if r.levelno == logging.WARNING] == ["optsched"]
    assert warning in caplog.records[0].getMessage()
    assert "warnings" in res.to_dict()["stats"]
    with pytest.raises(InputError, match="gone.npz"):
        solve_round(inst, "learned", time_limit=2.0)
    caplog.clear()
    small = generate(4, 12, seed=1)  # auto would not use the policy here: nothing to say
    with caplog.at_level(logging.WARNING, logger="optsched"):
        assert "warnings" not in solve_round(small, "auto", time_limit=2.0, num_workers=1).stats
    assert not caplog.records
