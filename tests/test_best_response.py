"""Single-job best responses (optsched.heuristics.best_response)."""

from __future__ import annotations

import pytest

from optsched.checker import check_schedule
from optsched.gen import generate
from optsched.heuristics.best_response import best_response
from optsched.heuristics.fungible_greedy import fungible_greedy_schedule
from optsched.model import Instance, Job, Node, Profile
from optsched.schedule import Assignment, Schedule


@pytest.mark.parametrize("seed", range(10))
def test_best_responses_keep_the_schedule_feasible_and_never_lower_its_worth(seed):
    sizes = {1: 0.4, 2: 0.2, 4: 0.2, 8: 0.1, 12: 0.1}
    inst = generate(nodes=3, jobs=8 + seed, seed=seed, running_fraction=0.4, gpu_types=("V100", "K80"), job_sizes=sizes,
                    fair=seed % 3 == 0, cpus_per_node=24 + 8 * (seed % 3))
    start = fungible_greedy_schedule(inst)
    before = check_schedule(inst, start)
    assert not before
    after = check_schedule(inst, best_response(inst, start))
    assert not after, after[:2]
    assert after.objective >= before.objective - 1e-9


def test_a_lone_gang_takes_the_point_and_the_nodes_worth_most():
    """One 8-GPU job on four empty 8-GPU nodes with 48 cores: 12 cores per GPU on two nodes
    (spread 0.9 once) beats 6 cores per GPU on one node (throughput 1.0 vs 1.5)."""
    prof = Profile((6, 12), (62,), ((1.0,), (1.5,)))
    nodes = tuple(Node(f"n{i}", "V100", 8, 48, 512) for i in range(4))
    inst = Instance("lone", nodes, (Job("g", 8, prof, (6, 62), spread_factor=0.9),))
    packed = Schedule("lone", {"g": Assignment({"n0": 8}, 6, 62)})
    out = best_response(inst, packed)
    a = out.jobs["g"]
    assert (a.cpus_per_gpu, sorted(a.nodes.values())) == (12, [4, 4])
    assert check_schedule(inst, out).objective == pytest.approx(1.5 * 0.9)


def test_pinned_jobs_stay_where_they_run():
    prof = Profile((2, 4), (16,), ((1.0,), (2.0,)))
    nodes = (Node("n0", "V100", 8, 16, 512), Node("n1", "V100", 8, 64, 512))
    pinned = Job("p", 4, prof, (2, 16), placement={"n0": 4}, preemptible=False)
    inst = Instance("pin", nodes, (pinned,))
    out = best_response(inst, Schedule("pin", {"p": Assignment({"n0": 4}, 2, 16)}))
    assert dict(out.jobs["p"].nodes) == {"n0": 4}
