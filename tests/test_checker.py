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


GOOD = {"nodes": {"n0": 2}, "cpus_per_gpu": 2, "mem_per_gpu_gb": 8}


@pytest.mark.parametrize(("schedule", "named"), [
    ({"instance": "t"}, "'jobs'"),                                                 # no decision at all
    ({"instance": "t", "jobz": {"j0": GOOD}}, "did you mean 'jobs'"),              # a misspelt decision
    ({"jobs": {"j0": {**GOOD, "mem_per_gb": 8}}}, "did you mean 'mem_per_gpu_gb'"),  # a misspelt assignment field
    ({"jobs": {"j0": GOOD}, "objectiv": 1.0}, "did you mean 'objective'"),
    ({"instance": 5, "jobs": {"j0": GOOD}}, "instance: must be a string"),         # the HTTP schema's rule too
    ({"instance": None, "jobs": {"j0": GOOD}}, "instance: must be a string"),
])
def test_a_schedule_without_its_decision_or_with_unknown_fields_is_refused(schedule, named):
    """A schedule whose decision is missing or misspelt, or whose instance name is not a string,
    is not a valid schedule: the checker reports rule 1 naming the field, and reading it raises."""
    from optsched.errors import InputError
    from optsched.schedule import Schedule

    report = check_schedule(INST, schedule)
    assert not report.feasible and any(v.rule == 1 and named in v.message for v in report), list(report)
    with pytest.raises(InputError, match="jobs|unknown field|instance"):
        Schedule.from_dict(schedule)


def test_reports_and_extension_fields_are_read_past():
    from optsched.schedule import Schedule

    doc = {"instance": "t", "jobs": {"j0": {**GOOD, "x-note": "pinned"}}, "objective": 9.0, "status": "optimal",
           "time_limit": 5.0, "session_id": "s", "incremental": "carried", "x-origin": "replay"}
    assert list(check_schedule(INST, doc)) == []
    assert Schedule.from_dict(doc).jobs["j0"].point == (2, 8)


def test_a_point_a_rounding_error_below_a_fair_demand_is_named_with_every_digit():
    below = 1.0 - 1e-13
    inst = Instance.from_dict({
        "version": 1, "name": "hair", "round": {"duration_s": 300.0, "fair": True},
        "nodes": [{"id": "n0", "gpu_type": "V100", "gpus": 8, "cpus": 8, "mem_gb": 500}],
        "jobs": [{"id": "j0", "gpus": 1, "weight": 1.0, "demand": {"cpus_per_gpu": 2, "mem_per_gpu_gb": 10},
                  "profile": {"cpus_per_gpu": [1, 2], "mem_per_gpu_gb": [10, 20], "throughput": [[below, below], [1.0, 1.0]]}}]})
    report = check_schedule(inst, {"jobs": {"j0": {"nodes": {"n0": 1}, "cpus_per_gpu": 1, "mem_per_gpu_gb": 10}}})
    (v,) = list(report)
    assert v.rule == 5 and f"throughput {below!r} at (1, 10) is below 1.0 at its demand" in v.message
