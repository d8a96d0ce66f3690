"""The exact model's greedy hint (optsched.exact.hint): feasible in both orders of running jobs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.checker import check_schedule
from optsched.exact.hint import greedy_schedule
from optsched.model import Instance, Job, Node, Profile, Round
from optsched.values import schedule_value

sys.path.insert(0, str(Path(__file__).parent))
from strategies import tiny_instances  # noqa: E402


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_instances(max_nodes=4, max_jobs=6), running_first=st.booleans())
def test_greedy_is_feasible(inst, running_first):
    s = greedy_schedule(inst, running_first=running_first)
    report = check_schedule(inst, s)
    assert report.feasible, list(report)
    assert report.objective == pytest.approx(schedule_value(inst, s), rel=1e-9, abs=1e-12)


def test_dense_order_moves_a_running_gang_off_the_fast_gpus():
    """A running 8-GPU gang on the only fast node, eight waiting 1-GPU jobs worth more there: kept
    first, the gang holds the node; in value-per-GPU order the small jobs take it and the gang moves."""
    flat = Profile((1,), (10,), ((1.0,),))
    nodes = (Node("fast", "V100", 8, 48, 500), Node("slow", "P100", 8, 48, 500))
    speed = {"V100": 1.0, "P100": 0.5}
    gang = Job("gang", 8, flat, (1, 10), weight=1.0, gpu_speed=speed, placement={"fast": 8}, restart_s=30)
    small = tuple(Job(f"s{i}", 1, flat, (1, 10), weight=1.0, gpu_speed=speed) for i in range(8))
    inst = Instance("dense", nodes, (gang, *small), Round(300.0, False))
    first = greedy_schedule(inst)
    dense = greedy_schedule(inst, running_first=False)
    assert first.jobs["gang"].nodes == {"fast": 8}
    assert dense.jobs["gang"].nodes == {"slow": 8}
    assert schedule_value(inst, dense) > schedule_value(inst, first)
