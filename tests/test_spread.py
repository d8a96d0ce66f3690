"""The spread rule (contract "Worth"): a gang pays its spread factor per node beyond the fewest nodes
of its GPU type that hold it (``round.spread_from = "fewest"``, version 3) or beyond one (``"one"``,
the meaning of versions 1 and 2): the worth, the JSON versions, every method and bound, the simulator."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from optsched import Assignment, Instance, Job, Node, Profile, Round, Schedule, check_schedule, solve_round
from optsched.elastic import Elastic
from optsched.errors import InputError
from optsched.mip.bound import lp_bound
from optsched.mip.colgen import config_bound
from optsched.model import CONTRACT_VERSION, CONTRACT_VERSIONS
from optsched.values import schedule_value

REPO = Path(__file__).resolve().parents[1]
FLAT = Profile((1, 2), (8, 16), ((1.0, 1.0), (1.0, 1.0)))


def _round(sizes, jobs, spread_from="fewest", gpu_type="V100"):
    nodes = tuple(Node(f"n{i}", gpu_type, g, 8 * g, 64 * g) for i, g in enumerate(sizes))
    return Instance("spread", nodes, tuple(jobs), Round(spread_from=spread_from))


def _worth(inst, nodes, gpus=None):
    """The worth of job ``j`` on ``nodes`` by the solvers' values and by the checker (which must agree)."""
    s = Schedule(inst.name, {"j": Assignment(nodes, 1, 8)})
    report = check_schedule(inst, s)
    assert report.feasible, list(report)
    assert schedule_value(inst, s) == pytest.approx(report.objective, rel=1e-12)
    return report.objective


# --- the worth ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("spread_from", "two", "three"), [("fewest", 1.0, 0.9), ("one", 0.9, 0.81)])
def test_a_16_gpu_gang_on_8_gpu_nodes(spread_from, two, three):
    """16 GPUs on 8-GPU nodes: two nodes are the fewest, so they cost nothing counted from the
    fewest (0.9 counted from one); three cost one factor (two)."""
    inst = _round((8, 8, 8), [Job("j", 16, FLAT, (1, 8), spread_factor=0.9)], spread_from)
    assert inst.fewest_nodes("V100", 16) == 2
    assert _worth(inst, {"n0": 8, "n1": 8}) == pytest.approx(two)
    assert _worth(inst, {"n0": 8, "n1": 4, "n2": 4}) == pytest.approx(three)


@pytest.mark.parametrize(("spread_from", "two", "three"), [("fewest", 1.0, 0.9), ("one", 0.9, 0.81)])
def test_nodes_of_different_sizes_count_largest_first(spread_from, two, three):
    """8 + 4 + 4 GPUs of one type (and a larger node of another type, which does not count): 12 GPUs
    need two nodes (8 + 4), 16 need all three; a gang of 12 on three nodes pays one factor."""
    nodes = (Node("n0", "V100", 8, 64, 512), Node("n1", "V100", 4, 32, 256), Node("n2", "V100", 4, 32, 256),
             Node("k0", "K80", 16, 128, 1024))
    job = Job("j", 12, FLAT, (1, 8), spread_factor=0.9, gpu_speed={"V100": 1.0})
    inst = Instance("het", nodes, (job,), Round(spread_from=spread_from))
    assert [inst.fewest_nodes("V100", g) for g in (1, 8, 9, 12, 13, 16)] == [1, 1, 2, 2, 3, 3]
    assert inst.fewest_nodes("V100", 17) == 4  # more than the type holds: no placement exists
    assert inst.fewest_nodes("K80", 16) == 1 and inst.fewest_nodes("A100", 1) == 1
    assert inst.spread_base("V100", 12) == (2 if spread_from == "fewest" else 1)
    assert _worth(inst, {"n0": 8, "n1": 4}) == pytest.approx(two)
    assert _worth(inst, {"n0": 4, "n1": 4, "n2": 4}) == pytest.approx(three)


def test_an_elastic_gang_counts_from_the_fewest_nodes_at_its_chosen_size():
    """An elastic job (8 GPUs nominal, 16 allowed at 1.6x) on 8-GPU nodes: at 16 GPUs two nodes
    are its fewest (1.6), at 8 GPUs one is, so 4 + 4 pays a factor (0.9)."""
    job = Job("j", 8, FLAT, (1, 8), spread_factor=0.9, elastic=Elastic((8, 16), (1.0, 1.6)))
    inst = _round((8, 8), [job])
    assert inst.version == 3 and inst.uses_policies
    assert _worth(inst, {"n0": 8, "n1": 8}) == pytest.approx(1.6)
    assert _worth(inst, {"n0": 4, "n1": 4}) == pytest.approx(0.9)
    assert _worth(replace(inst, round=Round(spread_from="one")), {"n0": 8, "n1": 8}) == pytest.approx(1.6 * 0.9)


def test_a_subround_keeps_the_whole_rounds_fewest_nodes():
    """A round on part of the nodes (LNS neighbourhoods, residual rounds) values a gang as the
    whole round does: kmin stays taken over the whole round's nodes."""
    inst = _round((8, 8, 8), [Job("j", 16, FLAT, (1, 8), spread_factor=0.9)])
    part = inst.subround("part", (Node("n0", "V100", 8, 64, 512), Node("n1", "V100", 4, 32, 256), Node("n2", "V100", 4, 32, 256)), inst.jobs)
    assert part.fewest_nodes("V100", 16) == 2 and replace(part, name="again").fewest_nodes("V100", 16) == 2
    assert Instance("alone", part.nodes, part.jobs).fewest_nodes("V100", 16) == 3


# --- contract versions and JSON ------------------------------------------------------------------


def test_versions_follow_the_spread_rule_and_the_policy_fields():
    assert CONTRACT_VERSION == 3 and CONTRACT_VERSIONS == (1, 2, 3)
    job = Job("j", 1, FLAT, (1, 8))
    assert _round((8,), [job]).version == 3 and Round().spread_from == "fewest"
    assert _round((8,), [job], "one").version == 1
    assert Instance("q", (), (), Round(spread_from="one", max_moves=1)).version == 2
    assert Instance("q", (), (), Round(max_moves=1)).version == 3
    with pytest.raises(InputError) as e:
        Round(spread_from="two")
    assert e.value.field == "spread_from" and e.value.value == "two"


@pytest.mark.parametrize("path", ["instances/tiny/t-2n-4j-01.json", "instances/small/s-4n-12j-01.json"])
def test_library_files_read_as_one_and_write_back_unchanged(path):
    """Version-1 files keep their meaning (spread from one node) and their version, byte for byte."""
    text = (REPO / path).read_text()
    inst = Instance.from_dict(json.loads(text))
    assert inst.version == 1 and inst.round.spread_from == "one"
    assert inst.to_dict() == json.loads(text)


def test_version_2_and_3_files_round_trip():
    d = {"version": 2, "name": "v2", "round": {"duration_s": 300.0, "fair": False, "max_moves": 1},
         "nodes": [{"id": "n0", "gpu_type": "V100", "gpus": 8, "cpus": 64, "mem_gb": 512}], "jobs": []}
    v2 = Instance.from_dict(d)
    assert v2.version == 2 and v2.round.spread_from == "one" and v2.to_dict() == d
    d3 = {**d, "version": 3, "name": "v3"}
    v3 = Instance.from_dict(d3)
    assert v3.version == 3 and v3.round.spread_from == "fewest" and v3.to_dict() == d3
    assert Instance.from_dict(v3.to_dict()) == v3
    plain = {**d3, "round": {"duration_s": 300.0, "fair": False}}
    assert Instance.from_dict(plain).version == 3 and Instance.from_dict(plain).to_dict() == plain
    # the field may be written, with its version's value
    assert Instance.from_dict({**d3, "round": {"spread_from": "fewest"}}).round.spread_from == "fewest"
    assert Instance.from_dict({**d, "version": 1, "round": {"spread_from": "one"}}).version == 1


@pytest.mark.parametrize(("version", "value"), [(3, "one"), (1, "fewest"), (2, "fewest"), (3, "nodes"), (1, 1), (3, None)])
def test_a_spread_rule_off_its_version_or_unknown_is_refused_by_name(version, value):
    d = {"version": version, "name": "bad", "round": {"duration_s": 300, "spread_from": value, **({"max_moves": 1} if version == 2 else {})},
         "nodes": [], "jobs": []}
    with pytest.raises(InputError) as e:
        Instance.from_dict(d)
    assert e.value.field == "round.spread_from" and e.value.value == value


def test_the_http_schema_accepts_version_3():
    pytest.importorskip("pydantic")
    from optsched.service.schemas import InstanceModel

    d = _round((8,), [Job("j", 1, FLAT, (1, 8))]).to_dict()
    assert d["version"] == 3
    assert Instance.from_dict(InstanceModel.model_validate(d).contract_dict()).version == 3


# --- every method and bound ------------------------------------------------------------------------

EXACT = ("cpsat", "scip", "cbc", "pulp")
METHODS = (*EXACT, "lns", "fungible-greedy", "fixed-demand")


def _gang_rounds(spread_from):
    """(round, optimum): a 16-GPU gang (spread 0.9) on three 8-GPU nodes, alone (two nodes: 1.0,
    from one node 0.9) and with two pinned 2-GPU jobs on n0 and n1 (then 8 + 6 + 2 over three
    nodes, one beyond its fewest: 2 + 0.9, from one node 2 + 0.81); and 12 GPUs on 8 + 4 + 4."""
    gang = Job("g", 16, FLAT, (1, 8), spread_factor=0.9)
    pinned = [Job(f"p{k}", 2, FLAT, (1, 8), placement={f"n{k}": 2}, restart_s=300) for k in range(2)]
    one = spread_from == "one"
    het = Instance("het", (Node("n0", "V100", 8, 64, 512), Node("n1", "V100", 4, 32, 256), Node("n2", "V100", 4, 32, 256)),
                   (replace(gang, gpus=12), Job("s", 4, FLAT, (1, 8), weight=0.5)), Round(spread_from=spread_from))
    return [
        (_round((8, 8, 8), [gang], spread_from), 0.9 if one else 1.0),
        (_round((8, 8, 8), [gang, *pinned], spread_from), 2.0 + (0.81 if one else 0.9)),
        # 12 GPUs on 8 + 4 (the fewest), the small job on the other 4-GPU node
        (het, 0.5 + (0.9 if one else 1.0)),
    ]


@pytest.mark.parametrize("spread_from", ["fewest", "one"])
@pytest.mark.parametrize("method", METHODS)
def test_methods_agree_with_the_checker(method, spread_from):
    for inst, optimum in _gang_rounds(spread_from):
        res = solve_round(inst, solver=method, time_limit=10.0, seed=0, **({"num_workers": 1} if method == "cpsat" else {}))
        report = check_schedule(inst, res.schedule)
        assert report.feasible, (method, list(report))
        assert res.objective == pytest.approx(report.objective, rel=1e-9), method
        assert res.objective <= optimum + 1e-9
        if method in EXACT or method == "lns":
            assert res.objective == pytest.approx(optimum, rel=1e-6), (method, inst.name, res.schedule.to_dict())
        if res.bound is not None:
            assert res.bound >= res.objective - 1e-6


@pytest.mark.parametrize("spread_from", ["fewest", "one"])
def test_bounds_stay_above_the_optimum(spread_from):
    for inst, optimum in _gang_rounds(spread_from):
        for relaxation in ("full", "pooled", "pooled-plain", "type"):
            assert lp_bound(inst, relaxation=relaxation) >= optimum - 1e-6, (inst.name, relaxation)
        if inst.round.max_moves is None:
            assert config_bound(inst, time_limit=5.0).bound >= optimum - 1e-6, inst.name


def test_an_lns_neighbourhood_values_a_gang_as_the_whole_round():
    """The sub-round of an LNS neighbourhood has less room on its nodes (n0 and n1 keep 2 GPUs each
    for a job that also runs outside it); an 8-GPU gang's spread still starts at the whole round's
    fewest nodes (one 8-GPU node), not at the sub-round's (two nodes of 6 free GPUs)."""
    from optsched.heuristics.lns import sub_instance

    gang = Job("g", 8, FLAT, (1, 8), spread_factor=0.9)
    wide = Job("w", 6, FLAT, (1, 8), placement={"n0": 2, "n1": 2, "n2": 2})
    inst = _round((8, 8, 8), [gang, wide])
    placed = Schedule(inst.name, {"w": Assignment({"n0": 2, "n1": 2, "n2": 2}, 1, 8)})
    sub, ids = sub_instance(inst, placed, ["n0", "n1"], ["g"])
    assert ids == ["g"] and [n.gpus for n in sub.nodes] == [6, 6]
    assert sub.fewest_nodes("V100", 8) == inst.fewest_nodes("V100", 8) == 1
    assert Instance("alone", sub.nodes, sub.jobs).fewest_nodes("V100", 8) == 2
    split = Schedule(sub.name, {"g": Assignment({"n0": 6, "n1": 2}, 1, 8)})
    assert schedule_value(sub, split) == pytest.approx(0.9)


@pytest.mark.parametrize(("flags", "version"), [([], 3), (["--spread-from", "one"], 1), (["--spread-from", "one", "--elastic-share", "0.5"], 2)])
def test_gen_writes_the_spread_rule_asked_for(tmp_path, flags, version):
    from optsched.cli import main

    path = tmp_path / "r.json"
    assert main(["gen", "--nodes", "2", "--jobs", "6", "--seed", "1", *flags, "-o", str(path)]) == 0
    assert json.loads(path.read_text())["version"] == version
