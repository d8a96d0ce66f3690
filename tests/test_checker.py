"""The independent checker: one hand-made violation per feasibility rule, hand-computed Worth."""

from __future__ import annotations

import pytest

from optsched.checker import check_schedule
from optsched.model import Instance

INST = Instance.from_dict({
    "version": 1, "name": "t", "round": {"duration_s": 300, "fair": True},
    "nodes": [{"id": "n0", "gpu_type": "A", "gpus": 2, "cpus": 4, "mem_gb": 32},
              {"id": "n1", "gpu_type": "A", "gpus": 2, "cpus": 4, "mem_gb": 32},
              {"id": "n2", "gpu_type": "B", "gpus": 2, "cpus": 4, "mem_gb": 32}],
    "jobs": [{"id": "j0", "gpus": 2, "gpu_speed": {"A": 1.0},
              "profile": {"cpus_per_gpu": [1, 2], "mem_per_gpu_gb": [8],
                          "throughput": [[1.0], [2.0]]},
              "demand": {"cpus_per_gpu": 2, "mem_per_gpu_gb": 8},
              "spread_factor": 0.5, "placement": {"n0": 2}, "restart_s": 150}]})


def _sched(assign):
    return {"instance": "t", "jobs": {"j0": assign}}


@pytest.mark.parametrize(("assign", "rule"), [
    ({"nodes": {"nX": 2}, "cpus_per_gpu": 2, "mem_per_gpu_gb": 8}, 1),
    ({"nodes": {"n0": 1}, "cpus_per_gpu": 2, "mem_per_gpu_gb": 8}, 2),
    ({"nodes": {"n2": 2}, "cpus_per_gpu": 2, "mem_per_gpu_gb": 8}, 2),
    ({"nodes": {"n0": 2}, "cpus_per_gpu": 3, "mem_per_gpu_gb": 8}, 3),
    ({"nodes": {"n0": 2}, "cpus_per_gpu": 2, "mem_per_gpu_gb": 8, "x": 0}, None),
    ({"nodes": {"n0": 2}, "cpus_per_gpu": 1, "mem_per_gpu_gb": 8}, 5),
])
def test_each_rule_detected(assign, rule):
    assign.pop("x", None)
    report = check_schedule(INST, _sched(assign))
    if rule is None:
        assert list(report) == []
    else:
        assert rule in {v.rule for v in report}, list(report)


def test_worth_spread_and_restart_by_hand():
    stay = check_schedule(INST, _sched({"nodes": {"n0": 2}, "cpus_per_gpu": 2, "mem_per_gpu_gb": 8}))
    assert list(stay) == [] and stay.objective == pytest.approx(1.0)
    split = check_schedule(INST, _sched({"nodes": {"n0": 1, "n1": 1}, "cpus_per_gpu": 2,
                                         "mem_per_gpu_gb": 8}))
    assert list(split) == [] and split.objective == pytest.approx(1.0 * 0.5 * (1 - 150 / 300))
