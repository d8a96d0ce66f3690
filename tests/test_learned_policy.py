"""The attention policy: output shapes with padding masks, and permutation equivariance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from optsched import Instance, Job, Node, Profile, Round
from optsched.learned.features import JOB_FEATURES, NODE_FEATURES, POINT_FEATURES, featurise
from optsched.learned.policy import NEG, PolicyNet, collate


def random_round(seed: int, n_nodes: int, n_jobs: int, *, fair: bool = False, running: float = 0.3) -> Instance:
    """A small random round with two GPU types, varied grids, running jobs and restart costs."""
    rng = np.random.default_rng(seed)
    nodes = tuple(
        Node(f"n{i}", str(rng.choice(["V100", "P100"])), int(rng.choice([2, 4, 8])), int(rng.choice([8, 24, 48])),
             int(rng.choice([64, 200, 500])), f"r{i // 2}")
        for i in range(n_nodes)
    )
    jobs = []
    for i in range(n_jobs):
        cg = tuple(sorted(rng.choice([1, 2, 3, 4, 6, 8], size=int(rng.integers(1, 5)), replace=False).tolist()))
        mg = tuple(sorted(rng.choice([8, 16, 32, 62], size=int(rng.integers(1, 4)), replace=False).tolist()))
        tp = np.sort(rng.uniform(0.2, 2.0, size=(len(cg), len(mg))), axis=0)
        prof = Profile(cg, mg, tuple(tuple(float(x) for x in row) for row in tp))
        g = int(rng.choice([1, 1, 2, 3, 4, 8]))
        speed = {"V100": 1.0, "P100": float(rng.uniform(0.3, 1.0))} if rng.random() < 0.6 else {str(rng.choice(["V100", "P100"])): 1.0}
        placement = None
        if rng.random() < running:
            cands = [n for n in nodes if n.gpu_type in speed and n.gpus >= g]
            if cands:
                placement = {cands[int(rng.integers(len(cands)))].id: g}
        jobs.append(Job(f"j{i}", g, prof, (int(rng.choice(cg)), int(rng.choice(mg))), weight=float(rng.uniform(0.5, 2.0)),
                        gpu_speed=speed, spread_factor=float(rng.uniform(0.6, 1.0)), placement=placement,
                        restart_s=float(rng.integers(0, 120))))
    return Instance(f"rand-{seed}", nodes, tuple(jobs), Round(300.0, fair))


@pytest.fixture(scope="module")
def net() -> PolicyNet:
    torch.manual_seed(0)
    return PolicyNet(d_model=16, heads=2, layers=1, d_point=8).eval()


def test_forward_shapes_and_masks(net: PolicyNet) -> None:
    """A padded batch gives each round the same scores as running it alone; padding is masked."""
    rounds = [random_round(1, 3, 5), random_round(2, 5, 9), random_round(3, 1, 2)]
    feats = [featurise(r) for r in rounds]
    batch = collate(feats)
    assert batch.job.shape == (3, 9, JOB_FEATURES)
    assert batch.cls.shape[0] == 3 and batch.cls.shape[2] == NODE_FEATURES and batch.node_class.shape == (3, 5)
    assert batch.point.shape[-1] == POINT_FEATURES
    with torch.no_grad():
        out = net(batch)
        assert out.admit.shape == (3, 9) and out.node.shape == (3, 9, 5) and out.fit.shape == (3, 9)
        assert out.point.shape == batch.point.shape[:3]
        assert torch.isfinite(out.admit).all() and torch.isfinite(out.node).all()
        for b, f in enumerate(feats):
            alone = net(collate([f]))
            J, N, P = f.n_jobs, f.n_nodes, f.point.shape[1]
            torch.testing.assert_close(out.admit[b, :J], alone.admit[0], atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(out.node[b, :J, :N], alone.node[0], atol=1e-3, rtol=1e-4)
            torch.testing.assert_close(out.point[b, :J, :P], alone.point[0, :, :P], atol=1e-3, rtol=1e-4)
            assert (out.node[b, J:] <= NEG / 2).all() and (out.node[b, :, N:] <= NEG / 2).all()
            assert (out.point[b, J:] <= NEG / 2).all()


def test_disallowed_nodes_and_points_are_masked(net: PolicyNet) -> None:
    """Nodes of a GPU type the job may not use, and dominated/unfair points, score NEG."""
    inst = random_round(5, 6, 10, fair=True)
    f = featurise(inst)
    with torch.no_grad():
        out = net(collate([f]))
    node = out.node[0].numpy()
    assert ((node > NEG / 2) == (f.speed > 0)).all()
    pt = out.point[0].numpy()[:, : f.point.shape[1]]
    assert ((pt > NEG / 2) == f.point_ok).all()
    # fairness: allowed points are never slower than the demand
    assert (f.point_value[f.point_ok] / np.repeat([j.weight for j in inst.jobs], f.point.shape[1]).reshape(f.point_ok.shape)[f.point_ok] >= 1 - 1e-9).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_permutation_equivariance(net: PolicyNet, seed: int) -> None:
    """Permuting jobs and nodes permutes every output the same way (no positional information)."""
    inst = random_round(seed, 5, 8)
    rng = np.random.default_rng(seed)
    pj, pn = rng.permutation(8), rng.permutation(5)
    perm = Instance(inst.name, tuple(inst.nodes[i] for i in pn), tuple(inst.jobs[i] for i in pj), inst.round)
    with torch.no_grad():
        a = net(collate([featurise(inst)]))
        b = net(collate([featurise(perm)]))
    torch.testing.assert_close(b.admit[0], a.admit[0][pj], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(b.fit[0], a.fit[0][pj], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(b.node[0], a.node[0][pj][:, pn], atol=1e-3, rtol=1e-4)
    P = b.point.shape[2]
    torch.testing.assert_close(b.point[0], a.point[0][pj][:, :P], atol=1e-3, rtol=1e-4)


def test_checkpoint_round_trip(net: PolicyNet) -> None:
    """A checkpoint rebuilds the same network; other objects are refused."""
    again = PolicyNet.from_checkpoint(net.checkpoint(note="x"))
    f = collate([featurise(random_round(7, 3, 4))])
    with torch.no_grad():
        torch.testing.assert_close(again(f).admit, net(f).admit)
    with pytest.raises(ValueError, match="optsched-maifs-1"):
        PolicyNet.from_checkpoint({"format": "other"})
