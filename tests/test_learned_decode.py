"""Coordinated decoding (always feasible under the independent checker) and Evaluate mode."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_learned_policy import random_round

from optsched import Assignment, Instance, Job, Node, Profile, Schedule, check_schedule
from optsched.learned.decode import Scores, decode, log_likelihood, scores_of, target_arrays
from optsched.learned.features import featurise
from optsched.learned.labels import Label
from optsched.learned.policy import PolicyNet, collate
from optsched.learned.train import make_examples, train_epoch
from optsched.values import schedule_value


@pytest.fixture(scope="module")
def net() -> PolicyNet:
    torch.manual_seed(1)
    return PolicyNet(d_model=16, heads=2, layers=1, d_point=8).eval()


def _decode(net: PolicyNet, inst: Instance, **kw) -> Schedule:
    f = featurise(inst)
    with torch.no_grad():
        out = net(collate([f]))
    return decode(inst, f, scores_of(out, 0, f), **kw)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    n_nodes=st.integers(1, 7),
    n_jobs=st.integers(0, 25),
    fair=st.booleans(),
    sample=st.booleans(),
)
def test_decoded_schedules_are_feasible(net, seed, n_nodes, n_jobs, fair, sample) -> None:
    """Greedy and sampled decodes of random rounds pass the checker, whatever the network says."""
    inst = random_round(seed, n_nodes, n_jobs, fair=fair)
    rng = np.random.default_rng(seed) if sample else None
    sched = _decode(net, inst, rng=rng)
    report = check_schedule(inst, sched)
    assert report.feasible, list(report)
    assert report.objective == pytest.approx(schedule_value(inst, sched))


def test_decoding_splits_a_gang_that_fits_no_node(net) -> None:
    """A 6-GPU job on two 4-GPU nodes is split (the only way to run it)."""
    prof = Profile((1, 2), (8,), ((1.0,), (1.5,)))
    inst = Instance("split", (Node("a", "V100", 4, 16, 64), Node("b", "V100", 4, 16, 64)), (Job("j", 6, prof, (1, 8), spread_factor=0.9),))
    sched = _decode(net, inst)
    assert check_schedule(inst, sched).feasible
    assert sched.jobs["j"].gpus == 6 and len(sched.jobs["j"].nodes) == 2
    assert sched.jobs["j"].cpus_per_gpu == 2  # the leftover pass upgrades to the better point


@pytest.mark.parametrize("prefer_lean", [True, False])
def test_decoding_spreads_a_gang_its_node_starves(prefer_lean) -> None:
    """A 2-GPU gang whose memory-hungry point fits one 2-GPU node only at its lean point (2 x 62
    GB > 90 GB) runs on both nodes at the rich point (5x the throughput, 0.9 for the spread),
    whatever point the scores prefer; where the rich point fits one node, it stays whole."""
    prof = Profile((1, 9), (21, 62), ((1.0, 1.0), (1.0, 5.0)))
    job = Job("j", 2, prof, (1, 21), spread_factor=0.9)
    nodes = (Node("a", "V100M32", 2, 20, 90), Node("b", "V100M32", 2, 20, 90))
    inst = Instance("starved", nodes, (job,))
    f = featurise(inst)
    point = np.array([[1.0, 0.0, 0.0, 0.0] if prefer_lean else [0.0, 0.0, 0.0, 1.0]])[:, : f.point.shape[1]]
    scores = Scores(admit=np.zeros(1), node=np.zeros((1, 2)), point=point, fit=np.zeros(1))
    sched = decode(inst, f, scores)
    assert check_schedule(inst, sched).feasible
    assert dict(sched.jobs["j"].nodes) == {"a": 1, "b": 1} and sched.jobs["j"].mem_per_gpu_gb == 62
    roomy = Instance("roomy", tuple(Node(n.id, n.gpu_type, 2, 20, 130) for n in nodes), (job,))
    f = featurise(roomy)
    sched = decode(roomy, f, Scores(admit=np.zeros(1), node=np.zeros((1, 2)), point=point, fit=np.zeros(1)))
    assert len(sched.jobs["j"].nodes) == 1 and sched.jobs["j"].mem_per_gpu_gb == 62


def test_leftover_goes_to_the_best_marginal_gain() -> None:
    """Two one-GPU jobs share a node with room for one upgrade: the bigger gain gets it."""
    flat = Profile((1, 3), (8,), ((1.0,), (1.1,)))
    steep = Profile((1, 3), (8,), ((1.0,), (2.0,)))
    inst = Instance("left", (Node("a", "V100", 2, 4, 64),), (Job("f", 1, flat, (1, 8)), Job("s", 1, steep, (1, 8))))
    f = featurise(inst)
    # scores that place both jobs at their cheap point first: only the leftover pass upgrades
    scores = Scores(admit=np.zeros(2), node=np.zeros((2, 1)), point=np.array([[1.0, 0.0], [1.0, 0.0]]), fit=np.zeros(2))
    sched = decode(inst, f, scores)
    assert set(sched.jobs) == {"f", "s"}
    assert sched.jobs["s"].cpus_per_gpu == 3 and sched.jobs["f"].cpus_per_gpu == 1


def test_fixed_jobs_are_kept(net) -> None:
    """``fixed`` pre-places jobs and decoding completes around them."""
    inst = random_round(11, 4, 10)
    f = featurise(inst)
    with torch.no_grad():
        out = net(collate([f]))
    sc = scores_of(out, 0, f)
    full = decode(inst, f, sc, leftover=False)
    jid, a = next(iter(full.jobs.items()))
    j = inst.job_idx(jid)
    g, p = target_arrays(inst, f, Schedule(inst.name, {jid: a}))
    fixed = {j: ({int(n): int(k) for n, k in zip(*np.nonzero(g[j])[0:1], g[j][g[j] > 0], strict=True)}, int(p[j]))}
    again = decode(inst, f, sc, fixed=fixed, leftover=False)
    assert again.jobs[jid] == a
    assert check_schedule(inst, again).feasible


def _random_schedule(inst: Instance, rng: np.random.Generator) -> Schedule:
    """A feasible random schedule: jobs in random order, whole on a random node that fits."""
    free = {n.id: [n.gpus, n.cpus, n.mem_gb] for n in inst.nodes}
    jobs = {}
    for j in rng.permutation(len(inst.jobs)):
        job = inst.jobs[int(j)]
        c, m, _ = job.profile.points()[int(rng.integers(len(job.profile.points())))]
        if inst.round.fair and job.profile.at(c, m) < job.demand_throughput:
            c, m = job.demand
        for n in rng.permutation(len(inst.nodes)):
            node = inst.nodes[int(n)]
            fr = free[node.id]
            if job.speed(node.gpu_type) and fr[0] >= job.gpus and fr[1] >= c * job.gpus and fr[2] >= m * job.gpus:
                fr[0] -= job.gpus
                fr[1] -= c * job.gpus
                fr[2] -= m * job.gpus
                jobs[job.id] = Assignment({node.id: job.gpus}, c, m)
                break
    return Schedule(inst.name, jobs)


def test_evaluate_mode_scores_own_decode_above_random_after_training() -> None:
    """After a few behaviour-cloning steps on its own greedy decodes, the policy's log-likelihood
    is finite, and higher for its greedy decode than for random feasible schedules."""
    torch.manual_seed(0)
    net = PolicyNet(d_model=16, heads=2, layers=1, d_point=8).eval()
    rounds = [random_round(100 + s, 3, 8) for s in range(12)]
    labels = [Label(r, _decode(net, r), 0.0, None, "feasible", 0.0) for r in rounds]
    ex = make_examples(labels)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    for _ in range(15):
        train_epoch(net, opt, ex, batch_size=4, rng=rng)
    wins = 0
    for r in rounds:
        f = featurise(r)
        with torch.no_grad():
            out = net(collate([f]))
        own = _decode(net, r)
        ll_own = log_likelihood(out, 0, f, *target_arrays(r, f, own))["total"].item()
        ll_rand = log_likelihood(out, 0, f, *target_arrays(r, f, _random_schedule(r, rng)))["total"].item()
        assert np.isfinite(ll_own) and np.isfinite(ll_rand)
        wins += ll_own > ll_rand
    assert wins >= 10


def test_evaluate_mode_parts() -> None:
    """The empty schedule has only the queue term; terms are non-positive."""
    torch.manual_seed(0)
    net = PolicyNet(d_model=16, heads=2, layers=1, d_point=8).eval()
    r = random_round(3, 3, 6)
    f = featurise(r)
    with torch.no_grad():
        out = net(collate([f]))
    ll = log_likelihood(out, 0, f, *target_arrays(r, f, Schedule.empty(r.name)))
    assert ll["node"].item() == 0.0 and ll["point"].item() == 0.0
    assert ll["total"].item() == pytest.approx(ll["admit"].item()) and ll["admit"].item() < 0
    bad = Schedule(r.name, {r.jobs[0].id: Assignment({r.nodes[0].id: r.jobs[0].gpus}, 999, 999)})
    with pytest.raises(ValueError, match="grid point"):
        target_arrays(r, f, bad)
