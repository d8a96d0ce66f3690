"""Distillation: canonical labels, residual rounds, cached labelling, loss going down, a tiny run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_learned_decode import _random_schedule
from test_learned_policy import random_round

from optsched import Assignment, Instance, Job, Node, Profile, Schedule, check_schedule
from optsched.learned import labels as labels_mod
from optsched.learned.inference import load_npz
from optsched.learned.labels import Label, canonicalise, label_rounds, residual_round
from optsched.learned.policy import PolicyNet
from optsched.learned.train import TrainConfig, bc_loss, make_examples, run_training, train_epoch
from optsched.values import schedule_value

PROF = Profile((1, 2), (8, 16), ((1.0, 1.2), (1.5, 1.8)))


def _twins() -> Instance:
    nodes = tuple(Node(f"n{i}", "V100", 4, 16, 64) for i in range(3)) + (Node("big", "V100", 8, 32, 128),)
    jobs = tuple(Job(f"j{i}", g, PROF, (1, 8)) for i, g in enumerate([1, 2, 3, 4, 2]))
    return Instance("twins", nodes, jobs)


def test_canonicalise_sorts_identical_nodes_and_keeps_worth() -> None:
    """Loads move between identical nodes only, heaviest to the lowest index; worth is unchanged."""
    inst = _twins()
    s = Schedule(inst.name, {
        "j0": Assignment({"n0": 1}, 1, 8), "j2": Assignment({"n2": 3}, 2, 8), "j1": Assignment({"n1": 2}, 1, 16),
        "j3": Assignment({"big": 4}, 2, 16),
    })
    c = canonicalise(inst, s)
    assert check_schedule(inst, c).feasible
    assert schedule_value(inst, c) == pytest.approx(schedule_value(inst, s))
    assert dict(c.jobs["j2"].nodes) == {"n0": 3} and dict(c.jobs["j1"].nodes) == {"n1": 2} and dict(c.jobs["j0"].nodes) == {"n2": 1}
    assert dict(c.jobs["j3"].nodes) == {"big": 4}
    assert canonicalise(inst, c) == c
    # any relabelling of the identical nodes has the same canonical form
    swapped = Schedule(inst.name, {j: Assignment({{"n0": "n1", "n1": "n2", "n2": "n0"}.get(n, n): k for n, k in a.nodes.items()}, a.cpus_per_gpu, a.mem_per_gpu_gb) for j, a in s.jobs.items()})
    assert canonicalise(inst, swapped) == c


@pytest.mark.parametrize("seed", range(6))
def test_canonicalise_random_rounds(seed: int) -> None:
    inst = random_round(seed, 6, 14)
    s = _random_schedule(inst, np.random.default_rng(seed))
    c = canonicalise(inst, s)
    assert check_schedule(inst, c).feasible
    assert schedule_value(inst, c) == pytest.approx(schedule_value(inst, s))


def test_residual_round_completes_to_a_feasible_schedule() -> None:
    """Placed jobs leave; their resources leave their nodes; prefix + residual schedule is feasible."""
    inst = random_round(3, 5, 12)
    full = _random_schedule(inst, np.random.default_rng(0))
    items = list(full.jobs.items())
    prefix = Schedule(inst.name, dict(items[: len(items) // 2]))
    res = residual_round(inst, prefix)
    assert {j.id for j in res.jobs} == {j.id for j in inst.jobs} - set(prefix.jobs)
    for n, r in zip(inst.nodes, res.nodes, strict=True):
        assert r.gpus == n.gpus - prefix.gpus_on(n.id)
    rest = Schedule(res.name, dict(items[len(items) // 2 :]))
    assert check_schedule(res, rest).feasible
    assert check_schedule(inst, Schedule(inst.name, {**prefix.jobs, **rest.jobs})).feasible


def test_label_rounds_solves_once_and_caches(tmp_path, monkeypatch) -> None:
    """Exact labels are optimal on tiny rounds, canonical, and read back from the cache."""
    rounds = [random_round(s, 2, 4) for s in range(3)]
    labs = label_rounds(rounds, tmp_path, time_limit=5.0, workers=1, options={"num_workers": 1}, progress=False)
    assert len(list(tmp_path.glob("*.json"))) == 3
    for r, lab in zip(rounds, labs, strict=True):
        assert lab.status == "optimal" and lab.instance == r
        assert check_schedule(r, lab.schedule).feasible
        assert lab.objective == pytest.approx(schedule_value(r, lab.schedule))
        assert canonicalise(r, lab.schedule) == lab.schedule

    def boom(*a, **k):
        raise AssertionError("cache miss")

    monkeypatch.setattr(labels_mod, "_solve_one", boom)
    again = label_rounds(rounds, tmp_path, time_limit=5.0, workers=1, options={"num_workers": 1}, progress=False)
    assert [a.schedule for a in again] == [b.schedule for b in labs]


def test_a_few_training_steps_reduce_the_loss() -> None:
    """Behaviour cloning on fixed labels lowers the negative log-likelihood."""
    torch.manual_seed(0)
    rounds = [random_round(200 + s, 3, 8) for s in range(16)]
    rng = np.random.default_rng(0)
    labs = [Label(r, canonicalise(r, _random_schedule(r, rng)), 0.0, None, "feasible", 0.0) for r in rounds]
    ex = make_examples(labs)
    net = PolicyNet(d_model=16, heads=2, layers=1, d_point=8)
    with torch.no_grad():
        before = float(bc_loss(net, ex))
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(25):
        train_epoch(net, opt, ex, batch_size=8, rng=rng)
    with torch.no_grad():
        after = float(bc_loss(net, ex))
    assert after < 0.85 * before


def tiny_generator(nodes: int, jobs: int, *, seed: int) -> Instance:
    return random_round(seed, nodes, jobs)


def test_training_pipeline_end_to_end(tmp_path) -> None:
    """A tiny run (BC + one DAgger iteration) writes its log, checkpoints, curve and summary."""
    cfg = TrainConfig(
        out=str(tmp_path / "run"), cache=str(tmp_path / "cache"), sizes=[(2, 4)], train_rounds=6, val_rounds=2, epochs=2,
        dagger_iters=1, dagger_rounds=3, dagger_epochs=1, batch_size=4, d_model=16, heads=2, layers=1,
        label_time_limit=5.0, label_workers=1, progress=False, generator=f"{__name__}:tiny_generator",
    )
    summary = run_training(cfg)
    out = tmp_path / "run"
    for name in ("log.jsonl", "ckpt-last.pt", "best.pt", "ckpt-last.npz", "best.npz", "curves.png", "summary.json"):
        assert (out / name).exists(), name
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in log] == ["bc", "bc", "dagger1"]
    assert log[-1]["examples"] > log[0]["examples"]  # DAgger added relabelled states
    assert summary["val_rounds"] == 2 and np.isfinite(summary["val_gap_mean"])
    ckpt = torch.load(out / "best.pt", weights_only=True)
    net = PolicyNet.from_checkpoint(ckpt)
    # the exporter keeps the numpy weights in step with the checkpoint, metadata included
    exported = load_npz(out / "best.npz")
    assert exported.config == net.config and exported.meta["epoch"] == ckpt["meta"]["epoch"]
    for k, v in net.state_dict().items():
        assert np.array_equal(exported.params[k], v.numpy()), k


def test_train_config_refuses_bad_values() -> None:
    from optsched.errors import InputError

    with pytest.raises(InputError, match="d_model"):
        TrainConfig(d_model=10, heads=4, generator=f"{__name__}:tiny_generator").validate()
    with pytest.raises(InputError, match="generator"):
        TrainConfig(generator="nowhere:nothing").validate()
    with pytest.raises(InputError, match="device"):
        TrainConfig(device="tpu", generator=f"{__name__}:tiny_generator").validate()
