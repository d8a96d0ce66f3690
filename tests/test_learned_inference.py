"""Numpy inference of the policy: the same outputs and schedules as the torch module, no torch needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from test_learned_policy import random_round

from optsched import InputError
from optsched.gen import generate
from optsched.learned.decode import decode, scores_of
from optsched.learned.features import NEG, featurise
from optsched.learned.inference import DEFAULT_WEIGHTS, FORMAT, NumpyPolicy, collate_arrays, load_npz, save_npz
from optsched.learned.policy import PolicyNet, collate, export_weights

ROOT = Path(__file__).resolve().parents[1]

#: the test set: random rounds of several shapes (fair, running jobs, one node, one job) and generated ones
ROUNDS = [random_round(s, n, j, fair=s % 3 == 0) for s, (n, j) in enumerate([(1, 1), (1, 4), (2, 6), (3, 9), (4, 12), (5, 16), (6, 20), (8, 30)])]
ROUNDS += [generate(n, j, seed=s) for s, (n, j) in enumerate([(4, 12), (8, 24), (16, 64)])]


@pytest.fixture(scope="module")
def shipped() -> tuple[NumpyPolicy, PolicyNet]:
    numpy_net = load_npz(DEFAULT_WEIGHTS)
    return numpy_net, PolicyNet.from_weights(numpy_net).eval()


def _torch_out(net: PolicyNet, feats: list) -> dict[str, np.ndarray]:
    with torch.no_grad():
        out = net(collate(feats))
    return {k: getattr(out, k).numpy() for k in ("admit", "node", "point", "fit")}


def test_numpy_forward_equals_torch_on_the_test_rounds(shipped) -> None:
    """The shipped network's logits in numpy equal torch's within 1e-5, one round at a time and
    padded in a batch; impossible choices are NEG in both."""
    numpy_net, net = shipped
    feats = [featurise(r) for r in ROUNDS]
    for batch in [[f] for f in feats] + [feats[:8]]:
        want = _torch_out(net, batch)
        got = numpy_net.forward(collate_arrays(batch))
        for k in want:
            assert got[k].shape == want[k].shape and got[k].dtype == np.float32, k
            np.testing.assert_allclose(got[k], want[k], atol=1e-5, rtol=1e-5, err_msg=k)
            assert np.array_equal(got[k] <= NEG / 2, want[k] <= NEG / 2), k


def test_numpy_and_torch_decode_the_same_schedules(shipped) -> None:
    """Greedy and seeded sampled decodes from numpy scores equal those from torch scores."""
    numpy_net, net = shipped
    for inst in ROUNDS:
        f = featurise(inst)
        with torch.no_grad():
            s_torch = scores_of(net(collate([f])), 0, f)
        s_numpy = numpy_net.scores(f)
        assert decode(inst, f, s_numpy) == decode(inst, f, s_torch), inst.name
        for seed in (0, 1):
            a = decode(inst, f, s_numpy, rng=np.random.default_rng(seed))
            assert a == decode(inst, f, s_torch, rng=np.random.default_rng(seed)), inst.name


@pytest.mark.parametrize("shape", [dict(d_model=16, heads=2, layers=1, d_point=8), dict(d_model=24, heads=3, layers=3, ff=3, d_point=8, inducing=5)])
def test_exporter_round_trip(tmp_path: Path, shape: dict) -> None:
    """export_weights -> load_npz gives the same parameters, outputs and a module that torch rebuilds exactly."""
    torch.manual_seed(2)
    net = PolicyNet(**shape).eval()
    path = export_weights(net, tmp_path / "w.npz", epoch=3, note="x")
    loaded = load_npz(path)
    assert loaded.config == net.config and loaded.meta == {"epoch": 3, "note": "x"}
    assert set(loaded.params) == set(net.state_dict())
    again = PolicyNet.from_weights(path)
    for k, v in net.state_dict().items():
        assert torch.equal(again.state_dict()[k], v), k
    feats = [featurise(r) for r in ROUNDS[:5]]
    want = _torch_out(net, feats)
    got = loaded.forward(collate_arrays(feats))
    for k in want:
        np.testing.assert_allclose(got[k], want[k], atol=1e-5, rtol=1e-5, err_msg=k)


def test_bad_weights_files_are_refused(tmp_path: Path) -> None:
    """Not a zip, another format, missing parameters: an InputError naming the weights file."""
    (tmp_path / "junk.npz").write_bytes(b"junk")
    np.savez(tmp_path / "other.npz", a=np.zeros(2))
    params = PolicyNet(d_model=16, heads=2, layers=1, d_point=8).to_numpy().params
    cfg = dict(d_model=16, heads=2, layers=1, ff=2, d_point=8, inducing=16)
    save_npz(tmp_path / "ok.npz", cfg, params)
    load_npz(tmp_path / "ok.npz")
    with pytest.raises(ValueError, match="lack"):
        save_npz(tmp_path / "short.npz", cfg, {k: v for k, v in params.items() if k != "coef.weight"})
    with pytest.raises(ValueError, match="layers"):
        save_npz(tmp_path / "short.npz", dict(cfg, layers=2), params)
    for name in ("junk.npz", "other.npz", "missing.npz"):
        with pytest.raises(InputError, match="weights") as e:
            load_npz(tmp_path / name)
        assert name in str(e.value)
    assert FORMAT in str(pytest.raises(InputError, load_npz, tmp_path / "other.npz").value)


def test_the_shipped_policy_runs_without_torch() -> None:
    """With torch unimportable: method="learned" solves with the packaged weights, auto uses the
    policy on a medium round (no warning), and the training modules name the `train` extra."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from optsched import solve_round\nfrom optsched.gen import generate\n"
        "from optsched.extras import MissingExtra\n"
        "r = solve_round(generate(4, 12, seed=0), method='learned', time_limit=5.0)\n"
        "assert r.solver == 'maifs' and r.objective > 0, r\n"
        "a = solve_round(generate(16, 70, seed=1), method='auto', time_limit=2.0, num_workers=1)\n"
        "assert a.solver == 'cpsat+maifs' and 'warnings' not in a.stats, (a.solver, dict(a.stats))\n"
        "for m in ('optsched.learned.policy', 'optsched.learned.train'):\n"
        "    try:\n        __import__(m)\n    except MissingExtra as e:\n        assert e.extra == 'train' and '.[train]' in str(e), e\n"
        "    else:\n        raise AssertionError(m)\n"
        "print('ok', sys.modules['torch'])\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "ok None"
