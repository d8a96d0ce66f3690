"""The independent checker, rule by rule, on the shared base round: the cases ``test_checker.py``
leaves out (rule 4 capacities, rule 1 counts and ids, two GPU types, raw-JSON junk) and more
hand-computed worth (speeds, staying at a new grid point, exact-capacity boundaries).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from optsched.checker import check_schedule
from optsched.model import Instance

sys.path.insert(0, str(Path(__file__).parent))
from conftest import base_round  # noqa: E402

# base round: n0, n1 V100 (4 GPUs, 24 cores, 250 GB); n2 P100 (4 GPUs, 16 cores, 128 GB)
# j0: 1 GPU, grid (1|2, 8), demand (1, 8); j1: 2 GPUs, weight 0.5, demand (3, 32);
# j2: 4 GPUs, weight 2, V100 1.0 / P100 0.55, spread 0.9, running on n0:2 + n1:2, restart 60 s of 300.


def _inst(**node_changes) -> Instance:
    d = base_round()
    for nid, fields in node_changes.items():
        next(n for n in d["nodes"] if n["id"] == nid).update(fields)
    return Instance.from_dict(d)


def _a(nodes, c, m):
    return {"nodes": nodes, "cpus_per_gpu": c, "mem_per_gpu_gb": m}


def _check(inst, jobs):
    return check_schedule(inst, {"instance": "base", "jobs": jobs})


def _rules(report):
    return sorted({v.rule for v in report})


# --- rule 4: per-node capacity, summed over the jobs there --------------------------------------


def test_capacity_exactly_reached_is_feasible():
    report = _check(_inst(), {"j2": _a({"n2": 4}, 4, 32)})  # 4 GPUs, 16 cores, 128 GB: all of n2
    assert list(report) == [] and report.objective == pytest.approx(2.0 * 0.55 * 6.0 / 4.0 * (1 - 60 / 300))


@pytest.mark.parametrize(("node_change", "what"), [
    ({"gpus": 3}, "GPUs"), ({"cpus": 15}, "CPU cores"), ({"mem_gb": 127}, "GB of memory"),
])
def test_one_short_on_a_node_is_rule_4(node_change, what):
    report = _check(_inst(n2=node_change), {"j2": _a({"n2": 4}, 4, 32)})
    assert _rules(report) == [4], list(report)
    (v,) = report
    assert v.node == "n2" and what in v.message


def test_capacity_is_summed_over_jobs_on_a_node():
    # n0: j1 2 GPUs x 6 cores + j2 2 GPUs x 4 cores = 20 cores; j0 on n1
    jobs = {"j1": _a({"n0": 2}, 6, 16), "j2": _a({"n0": 2, "n1": 2}, 4, 16), "j0": _a({"n1": 1}, 2, 8)}
    assert list(_check(_inst(), jobs)) == []
    report = _check(_inst(n0={"cpus": 19}), jobs)
    assert _rules(report) == [4] and report[0].node == "n0" and "20 CPU cores" in report[0].message
    report = _check(_inst(n0={"mem_gb": 95}), jobs)  # 2 x 16 + 2 x 16 = 64 GB: fits
    assert list(report) == []
    report = _check(_inst(n0={"mem_gb": 63}), jobs)
    assert _rules(report) == [4] and "64 GB of memory" in report[0].message
    over = {**jobs, "j0": _a({"n0": 1}, 2, 8)}  # a fifth GPU on n0
    report = _check(_inst(), over)
    assert _rules(report) == [4] and report[0].node == "n0" and "5 GPUs" in report[0].message


def test_gpu_overflow_counted_even_off_the_grid():
    report = _check(_inst(), {"j1": _a({"n2": 2}, 5, 16), "j2": _a({"n2": 4}, 2, 32)})
    assert _rules(report) == [3, 4]


# --- rules 1-3: ids, counts, one type, grid points ----------------------------------------------


@pytest.mark.parametrize(("jobs", "rule", "says"), [
    ({"j9": _a({"n0": 1}, 1, 8)}, 1, "'j9' does not exist"),
    ({"j0": _a({"n0": 0}, 1, 8)}, 1, "positive integer"),
    ({"j0": _a({"n0": -1}, 1, 8)}, 1, "positive integer"),
    ({"j0": _a({"n0": 1.0}, 1, 8)}, 1, "positive integer"),
    ({"j0": _a({"n0": True}, 1, 8)}, 1, "positive integer"),
    ({"j0": _a({}, 1, 8)}, 1, "non-empty 'nodes'"),
    ({"j0": _a(["n0"], 1, 8)}, 1, "non-empty 'nodes'"),
    ({"j0": [1, 8]}, 1, "non-empty 'nodes'"),
    ({"j1": _a({"n0": 3}, 3, 32)}, 2, "gets 3 GPUs, needs exactly 2"),
    ({"j2": _a({"n1": 2, "n2": 2}, 2, 32)}, 2, "spans GPU types"),
    ({"j1": _a({"n0": 2}, 3, 24)}, 3, "not a point of its profile grid"),
    ({"j1": _a({"n0": 2}, 3.0, 32)}, 3, "not a point"),
    ({"j1": _a({"n0": 2}, True, 32)}, 3, "not a point"),
    ({"j1": {"nodes": {"n0": 2}, "cpus_per_gpu": 3}}, 3, "None"),
])
def test_rules_1_to_3(jobs, rule, says):
    report = _check(_inst(), jobs)
    assert rule in _rules(report), list(report)
    assert any(v.rule == rule and says in v.message for v in report), list(report)
    jid = next(iter(jobs))
    assert all(v.job == jid for v in report if v.rule == rule)


@pytest.mark.parametrize("doc", [[], None, "x", {"jobs": [1]}, {"jobs": "j0"}])
def test_unreadable_schedule_is_a_violation_not_a_crash(doc):
    report = check_schedule(_inst(), doc)
    assert _rules(report) == [1] and report.objective == 0.0


def test_every_violation_is_reported_not_just_the_first():
    jobs = {"j9": _a({"n0": 1}, 1, 8), "j1": _a({"n0": 3}, 3, 24), "j2": _a({"n0": 4}, 4, 32)}
    report = _check(_inst(), jobs)
    assert _rules(report) == [1, 2, 3, 4]
    assert report.to_dict()["feasible"] is False and len(report.to_dict()["violations"]) == len(report)


# --- worth by hand ------------------------------------------------------------------------------


def test_worth_by_hand():
    inst = _inst()
    # j2 stays put at another grid point: no restart; 2 x 1.0 x 5/4 x 0.9^(2-1)
    stay = _check(inst, {"j2": _a({"n1": 2, "n0": 2}, 4, 16)})
    assert list(stay) == [] and stay.objective == pytest.approx(2 * 5 / 4 * 0.9)
    # j2 moves onto one node: restart paid, no spread
    moved = _check(inst, {"j2": _a({"n0": 4}, 4, 32)})
    assert moved.objective == pytest.approx(2 * 6 / 4 * (1 - 60 / 300))
    # j1 (not running) split across two nodes with spread 1.0 (default): no penalty at all
    split = _check(inst, {"j1": _a({"n0": 1, "n1": 1}, 6, 16)})
    assert split.objective == pytest.approx(0.5 * 25 / 22)
    # j0 (no gpu_speed: every type at 1.0) on the P100 node, plus null-mapped jobs worth 0
    p100 = _check(inst, {"j0": _a({"n2": 1}, 2, 8), "j1": None, "j2": None})
    assert list(p100) == [] and p100.objective == pytest.approx(1.5)
    # the sum, and the schedule's own report fields are not trusted
    both = check_schedule(inst, {"jobs": {"j0": _a({"n2": 1}, 2, 8), "j2": _a({"n1": 2, "n0": 2}, 4, 16)},
                                 "objective": 1e9, "status": "optimal", "bound": -1})
    assert list(both) == [] and both.objective == pytest.approx(1.5 + 2 * 5 / 4 * 0.9)


def test_fair_round_allows_equal_and_faster_points_only():
    d = base_round()
    d["round"]["fair"] = True
    inst = Instance.from_dict(d)
    assert list(_check(inst, {"j1": _a({"n0": 2}, 3, 32)})) == []  # at demand
    assert list(_check(inst, {"j1": _a({"n0": 2}, 6, 16)})) == []  # 25 >= 22
    assert _rules(_check(inst, {"j1": _a({"n0": 2}, 3, 16)})) == [5]  # 20 < 22
    assert list(_check(_inst(), {"j1": _a({"n0": 2}, 3, 16)})) == []  # unfair round: allowed
