"""The data model against the contract: every refusal names its JSON path and the value found,
raw-JSON oddities, round trips (dict, JSON file) and immutability.

Each bad-input case is the valid base round of ``conftest.py`` broken by exactly one mutation.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.errors import InputError
from optsched.io import load_instance, load_schedule, save_instance, write_json
from optsched.model import Instance, Job, Node, Profile, Round
from optsched.schedule import Assignment, Schedule

sys.path.insert(0, str(Path(__file__).parent))
from conftest import INSTANCES, MISSING, base_round, mutated  # noqa: E402
from strategies import tiny_instance_dicts  # noqa: E402

NAN = float("nan")
REQUIRED = object()  # the expected refusal: the field is missing ("is required", value None)


def _mutated(path: tuple, value: Any) -> dict:
    return mutated(base_round(), path, value)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _refused(d: Any, field: str, value: Any) -> InputError:
    with pytest.raises(InputError) as info:
        Instance.from_dict(d)
    _names(info.value, field, value)
    return info.value


def _names(e: InputError, field: str, value: Any) -> None:
    """``e`` is about ``field``, carries ``value`` and shows it in its message."""
    assert e.field == field, str(e)
    assert str(e).startswith(f"{field}: ")
    if value is REQUIRED:
        assert e.value is None and "is required" in str(e), str(e)
    else:
        assert _same(e.value, value), (e.value, value)
        assert repr(value)[:60] in str(e), str(e)


def test_base_round_is_valid():
    inst = Instance.from_dict(base_round())
    assert inst.size == (3, 3) and inst.gpu_types == ("V100", "P100")


# --- the contract's "Errors" list: one case per error, named by the contract's words -------------

CONTRACT_ERRORS = [
    # unknown version
    ("unknown version 2", ("version",), 2, "version", 2),
    ("unknown version 0", ("version",), 0, "version", 0),
    ("version as a string", ("version",), "1", "version", "1"),
    # missing fields
    ("missing version", ("version",), MISSING, "version", REQUIRED),
    ("missing name", ("name",), MISSING, "name", REQUIRED),
    ("missing nodes", ("nodes",), MISSING, "nodes", REQUIRED),
    ("missing jobs", ("jobs",), MISSING, "jobs", REQUIRED),
    ("missing node id", ("nodes", 1, "id"), MISSING, "nodes[1].id", REQUIRED),
    ("missing node gpu_type", ("nodes", 2, "gpu_type"), MISSING, "nodes[2].gpu_type", REQUIRED),
    ("missing node gpus", ("nodes", 0, "gpus"), MISSING, "nodes[0].gpus", REQUIRED),
    ("missing node cpus", ("nodes", 1, "cpus"), MISSING, "nodes[1].cpus", REQUIRED),
    ("missing node mem_gb", ("nodes", 2, "mem_gb"), MISSING, "nodes[2].mem_gb", REQUIRED),
    ("missing job id", ("jobs", 1, "id"), MISSING, "jobs[1].id", REQUIRED),
    ("missing job gpus", ("jobs", 2, "gpus"), MISSING, "jobs[2].gpus", REQUIRED),
    ("missing profile", ("jobs", 1, "profile"), MISSING, "jobs[1].profile", REQUIRED),
    ("missing cpus grid", ("jobs", 1, "profile", "cpus_per_gpu"), MISSING, "jobs[1].profile.cpus_per_gpu", REQUIRED),
    ("missing mem grid", ("jobs", 1, "profile", "mem_per_gpu_gb"), MISSING, "jobs[1].profile.mem_per_gpu_gb", REQUIRED),
    ("missing throughput", ("jobs", 0, "profile", "throughput"), MISSING, "jobs[0].profile.throughput", REQUIRED),
    ("missing demand", ("jobs", 2, "demand"), MISSING, "jobs[2].demand", REQUIRED),
    ("missing demand cpus", ("jobs", 2, "demand", "cpus_per_gpu"), MISSING, "jobs[2].demand.cpus_per_gpu", REQUIRED),
    ("missing demand mem", ("jobs", 2, "demand", "mem_per_gpu_gb"), MISSING, "jobs[2].demand.mem_per_gpu_gb", REQUIRED),
    # negative (or, where the contract says so, non-positive) fields
    ("negative node gpus", ("nodes", 1, "gpus"), -4, "nodes[1].gpus", -4),
    ("negative node cpus", ("nodes", 0, "cpus"), -1, "nodes[0].cpus", -1),
    ("negative node mem", ("nodes", 2, "mem_gb"), -128, "nodes[2].mem_gb", -128),
    ("zero job gpus", ("jobs", 1, "gpus"), 0, "jobs[1].gpus", 0),
    ("negative job gpus", ("jobs", 1, "gpus"), -2, "jobs[1].gpus", -2),
    ("zero weight", ("jobs", 1, "weight"), 0, "jobs[1].weight", 0),
    ("negative weight", ("jobs", 2, "weight"), -1.5, "jobs[2].weight", -1.5),
    ("negative restart", ("jobs", 2, "restart_s"), -60, "jobs[2].restart_s", -60),
    ("negative duration", ("round", "duration_s"), -300, "round.duration_s", -300),
    ("zero duration", ("round", "duration_s"), 0, "round.duration_s", 0),
    ("negative speed", ("jobs", 2, "gpu_speed", "P100"), -0.5, "jobs[2].gpu_speed.P100", -0.5),
    ("zero speed", ("jobs", 2, "gpu_speed", "V100"), 0, "jobs[2].gpu_speed.V100", 0),
    ("zero spread", ("jobs", 2, "spread_factor"), 0, "jobs[2].spread_factor", 0),
    ("spread above 1", ("jobs", 2, "spread_factor"), 1.1, "jobs[2].spread_factor", 1.1),
    ("negative grid value", ("jobs", 1, "profile", "cpus_per_gpu", 0), -1, "jobs[1].profile.cpus_per_gpu[0]", -1),
    ("zero placement count", ("jobs", 2, "placement", "n1"), 0, "jobs[2].placement.n1", 0),
    ("negative placement count", ("jobs", 2, "placement", "n1"), -2, "jobs[2].placement.n1", -2),
    # non-increasing grids
    ("repeated cpus level", ("jobs", 1, "profile", "cpus_per_gpu"), [1, 3, 3], "jobs[1].profile.cpus_per_gpu[2]", 3),
    ("decreasing mem grid", ("jobs", 1, "profile", "mem_per_gpu_gb"), [32, 16], "jobs[1].profile.mem_per_gpu_gb[1]", 16),
    # a demand off the grid
    ("demand cpus off grid", ("jobs", 1, "demand", "cpus_per_gpu"), 2, "jobs[1].demand.cpus_per_gpu", 2),
    ("demand mem off grid", ("jobs", 2, "demand", "mem_per_gpu_gb"), 24, "jobs[2].demand.mem_per_gpu_gb", 24),
    # NaN or non-positive throughput
    ("NaN throughput", ("jobs", 1, "profile", "throughput", 1, 0), NAN, "jobs[1].profile.throughput[1][0]", NAN),
    ("infinite throughput", ("jobs", 1, "profile", "throughput", 2, 1), math.inf, "jobs[1].profile.throughput[2][1]", math.inf),
    ("zero throughput", ("jobs", 0, "profile", "throughput", 1, 0), 0, "jobs[0].profile.throughput[1][0]", 0),
    ("negative throughput", ("jobs", 2, "profile", "throughput", 0, 1), -4.0, "jobs[2].profile.throughput[0][1]", -4.0),
    ("null throughput", ("jobs", 2, "profile", "throughput", 0, 1), None, "jobs[2].profile.throughput[0][1]", None),
    # duplicate ids
    ("duplicate node id", ("nodes", 2, "id"), "n0", "nodes[2].id", "n0"),
    ("duplicate job id", ("jobs", 2, "id"), "j1", "jobs[2].id", "j1"),
]


@pytest.mark.parametrize(("path", "value", "field", "found"), [c[1:] for c in CONTRACT_ERRORS],
                         ids=[c[0] for c in CONTRACT_ERRORS])
def test_contract_error_names_field_and_value(path, value, field, found):
    _refused(_mutated(path, value), field, found)


# --- further bad input: types, shapes, cross-references -----------------------------------------

MORE_ERRORS = [
    # booleans and floats where the contract says integer (JSON true is not 1; 2.0 is not 2)
    ("version true", ("version",), True, "version", True),
    ("version 1.0", ("version",), 1.0, "version", 1.0),
    ("node gpus true", ("nodes", 0, "gpus"), True, "nodes[0].gpus", True),
    ("node gpus 4.0", ("nodes", 0, "gpus"), 4.0, "nodes[0].gpus", 4.0),
    ("node cpus 2.5", ("nodes", 1, "cpus"), 2.5, "nodes[1].cpus", 2.5),
    ("node mem NaN", ("nodes", 1, "mem_gb"), NAN, "nodes[1].mem_gb", NAN),
    ("job gpus 2.0", ("jobs", 1, "gpus"), 2.0, "jobs[1].gpus", 2.0),
    ("job gpus false", ("jobs", 1, "gpus"), False, "jobs[1].gpus", False),
    ("grid level 3.0", ("jobs", 1, "profile", "cpus_per_gpu", 1), 3.0, "jobs[1].profile.cpus_per_gpu[1]", 3.0),
    ("demand 3.0", ("jobs", 1, "demand", "cpus_per_gpu"), 3.0, "jobs[1].demand.cpus_per_gpu", 3.0),
    ("placement 2.0", ("jobs", 2, "placement", "n0"), 2.0, "jobs[2].placement.n0", 2.0),
    ("weight true", ("jobs", 1, "weight"), True, "jobs[1].weight", True),
    ("weight as string", ("jobs", 1, "weight"), "1.0", "jobs[1].weight", "1.0"),
    ("weight NaN", ("jobs", 1, "weight"), NAN, "jobs[1].weight", NAN),
    ("weight infinite", ("jobs", 1, "weight"), math.inf, "jobs[1].weight", math.inf),
    ("spread NaN", ("jobs", 2, "spread_factor"), NAN, "jobs[2].spread_factor", NAN),
    ("restart infinite", ("jobs", 2, "restart_s"), math.inf, "jobs[2].restart_s", math.inf),
    ("duration NaN", ("round", "duration_s"), NAN, "round.duration_s", NAN),
    ("fair 1", ("round", "fair"), 1, "round.fair", 1),
    ("fair string", ("round", "fair"), "false", "round.fair", "false"),
    ("speed NaN", ("jobs", 2, "gpu_speed", "P100"), NAN, "jobs[2].gpu_speed.P100", NAN),
    # strings
    ("empty name", ("name",), "", "name", ""),
    ("numeric name", ("name",), 7, "name", 7),
    ("empty node id", ("nodes", 1, "id"), "", "nodes[1].id", ""),
    ("numeric job id", ("jobs", 0, "id"), 0, "jobs[0].id", 0),
    ("numeric rack", ("nodes", 0, "rack"), 3, "nodes[0].rack", 3),
    ("numeric gpu type", ("nodes", 2, "gpu_type"), 100, "nodes[2].gpu_type", 100),
    ("numeric model", ("jobs", 1, "model"), 50, "jobs[1].model", 50),
    # shapes and extra nesting
    ("instance nodes as object", ("nodes",), {"n0": {}}, "nodes", {"n0": {}}),
    ("jobs as object", ("jobs",), {"j0": {}}, "jobs", {"j0": {}}),
    ("node nested in a list", ("nodes", 1), [{"id": "n1"}], "nodes[1]", [{"id": "n1"}]),
    ("job as a string", ("jobs", 0), "j0", "jobs[0]", "j0"),
    ("round as a list", ("round",), [300, False], "round", [300, False]),
    ("throughput one level deeper", ("jobs", 1, "profile", "throughput", 1, 0), [20.0],
     "jobs[1].profile.throughput[1][0]", [20.0]),
    ("throughput flat", ("jobs", 0, "profile", "throughput"), [1.0, 1.5], "jobs[0].profile.throughput[0]", 1.0),
    ("throughput row short", ("jobs", 1, "profile", "throughput", 2), [25.0], "jobs[1].profile.throughput[2]", "1 values"),
    ("throughput rows short", ("jobs", 1, "profile", "throughput"), [[10.0, 11.0]], "jobs[1].profile.throughput", "1 rows"),
    ("grid as a string", ("jobs", 1, "profile", "cpus_per_gpu"), "136", "jobs[1].profile.cpus_per_gpu", "136"),
    ("demand as a list", ("jobs", 1, "demand"), [3, 32], "jobs[1].demand", [3, 32]),
    ("gpu_speed as a list", ("jobs", 2, "gpu_speed"), ["V100"], "jobs[2].gpu_speed", ["V100"]),
    ("placement as a list", ("jobs", 2, "placement"), ["n0"], "jobs[2].placement", ["n0"]),
    # empty lists and maps where the contract needs content
    ("empty cpus grid", ("jobs", 1, "profile", "cpus_per_gpu"), [], "jobs[1].profile.cpus_per_gpu", []),
    ("empty mem grid", ("jobs", 0, "profile", "mem_per_gpu_gb"), [], "jobs[0].profile.mem_per_gpu_gb", []),
    ("empty throughput", ("jobs", 0, "profile", "throughput"), [], "jobs[0].profile.throughput", "0 rows"),
    ("empty gpu_speed", ("jobs", 2, "gpu_speed"), {}, "jobs[2].gpu_speed", {}),
    # cross-references
    ("placement on unknown node", ("jobs", 2, "placement"), {"n9": 4}, "jobs[2].placement", "n9"),
    ("placement GPU total wrong", ("jobs", 2, "placement"), {"n0": 3}, "jobs[2].placement", {"n0": 3}),
    ("placement on a disallowed type", ("jobs", 2, "gpu_speed"), {"P100": 1.0}, "jobs[2].placement", "n0"),
    ("placement across two GPU types", ("jobs", 2, "placement"), {"n1": 2, "n2": 2}, "jobs[2].placement",
     {"n1": 2, "n2": 2}),
]


@pytest.mark.parametrize(("path", "value", "field", "found"), [c[1:] for c in MORE_ERRORS],
                         ids=[c[0] for c in MORE_ERRORS])
def test_bad_input_names_field_and_value(path, value, field, found):
    _refused(_mutated(path, value), field, found)


@pytest.mark.parametrize("doc", [None, [], "round", 1], ids=repr)
def test_instance_must_be_an_object(doc):
    _refused(doc, "instance", doc)


def test_instance_wrapped_in_another_object():
    with pytest.raises(InputError, match="^instance: unknown field of a round file") as info:
        Instance.from_dict({"instance": base_round()})
    assert info.value.field == "instance"


@pytest.mark.parametrize(("path", "key", "field", "close"), [
    ((), "verison", "verison", "version"),
    (("round",), "fiar", "round.fiar", "fair"),
    (("nodes", 0), "mem", "nodes[0].mem", "mem_gb"),
    (("jobs", 1), "weigth", "jobs[1].weigth", "weight"),
    (("jobs", 1), "placment", "jobs[1].placment", "placement"),
    (("jobs", 0, "profile"), "troughput", "jobs[0].profile.troughput", "throughput"),
    (("jobs", 0, "demand"), "cpu_per_gpu", "jobs[0].demand.cpu_per_gpu", "cpus_per_gpu"),
])
def test_misspelt_fields_are_refused(path, key, field, close):
    """A field the contract does not have is refused, naming it and the closest known field: read
    as absent, a misspelt ``weight`` or ``placement`` would silently take its default."""
    for plain in (True, False):  # also past the fast path for plain jobs (a version-2 field forces the full reading)
        d = base_round()
        if not plain:
            d["jobs"][1]["tenant"] = "a"
            d["version"] = 2
        target = d
        for p in path:
            target = target[p]
        target[key] = 2
        e = _refused(d, field, 2)
        assert f"did you mean {close!r}" in str(e)


def test_numpy_values_are_refused_with_a_hint():
    """A round built from pandas or numpy holds numpy scalars and arrays: refused as any wrong
    type is, with the hint to pass plain Python values."""
    import numpy as np

    for path, value in [(("jobs", 0, "gpus"), np.int64(2)), (("jobs", 0, "weight"), np.float32(1.5)),
                        (("jobs", 0, "profile", "cpus_per_gpu"), np.array([1, 2]))]:
        with pytest.raises(InputError, match="numpy value: pass plain Python ones"):
            Instance.from_dict(_mutated(path, value))


def test_accepted_edge_cases():
    """What the contract allows: extension fields, empty rounds, zero capacities, defaults."""
    d = base_round()
    d["x-extension"] = {"anything": [1]}
    d["nodes"][0]["x-note"] = "spare"
    d["jobs"][1]["x-owner"] = "team-a"
    assert Instance.from_dict(d).to_dict() == Instance.from_dict(base_round()).to_dict()
    empty = Instance.from_dict({"version": 1, "name": "e", "nodes": [], "jobs": []})
    assert empty.size == (0, 0) and empty.round == Round(300.0, False, spread_from="one")
    d = base_round()
    d["nodes"][2].update(gpus=0, cpus=0, mem_gb=0)
    d["jobs"][0]["profile"]["cpus_per_gpu"] = [0, 2]
    d["jobs"][0]["demand"]["cpus_per_gpu"] = 0
    d["jobs"][2]["placement"] = {}  # an empty placement means not running
    inst = Instance.from_dict(d)
    assert inst.node("n2").gpus == 0 and inst.job("j0").demand == (0, 8) and not inst.job("j2").running
    j = inst.job("j0")
    assert (j.weight, j.spread_factor, j.restart_s, j.gpu_speed, j.placement) == (1.0, 1.0, 0.0, None, None)


# --- raw JSON files: NaN/Infinity literals, duplicate keys, junk ---------------------------------


def _write(tmp_path: Path, text: str, name: str = "r.json") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_json_nan_and_infinity_literals(tmp_path, literal):
    """Refused where they stand, the literal echoed as text (an error body must stay valid JSON)."""
    text = json.dumps(base_round()).replace('"throughput": [[10.0, 11.0]', f'"throughput": [[{literal}, 11.0]')
    assert literal in text
    with pytest.raises(InputError) as info:
        load_instance(_write(tmp_path, text))
    assert info.value.field == "jobs[1].profile.throughput[0][0]" and info.value.value == literal
    assert repr(literal) in str(info.value)
    json.dumps(info.value.to_dict(), allow_nan=False)


def test_json_duplicate_keys_refused(tmp_path):
    text = json.dumps(base_round())
    dup = text.replace('"gpus": 4, "cpus": 24', '"gpus": 4, "gpus": -1, "cpus": 24', 1)
    with pytest.raises(InputError, match="'gpus' twice") as info:
        load_instance(_write(tmp_path, dup))
    assert info.value.field == "path" and "r.json" in str(info.value)
    sched = '{"instance": "base", "jobs": {"j0": {"nodes": {"n0": 1}, "cpus_per_gpu": 1, "mem_per_gpu_gb": 8},' \
            ' "j0": null}}'
    with pytest.raises(InputError, match="'j0' twice"):
        load_schedule(_write(tmp_path, sched, "s.json"))


@pytest.mark.parametrize(("text", "problem"), [
    ("", "not valid JSON"), ("{", "not valid JSON"), ('{"version": 1,}', "not valid JSON"),
    ("[]", "must be an object"), ("null", "must be an object"),
])
def test_json_junk(tmp_path, text, problem):
    with pytest.raises(InputError, match=problem):
        load_instance(_write(tmp_path, text))


def test_unreadable_files(tmp_path):
    with pytest.raises(InputError, match="no such file") as info:
        load_instance(tmp_path / "absent.json")
    assert info.value.field == "path"
    (tmp_path / "bad.json.gz").write_bytes(b"not gzip")
    with pytest.raises(InputError, match="cannot be read"):
        load_instance(tmp_path / "bad.json.gz")
    (tmp_path / "latin.json").write_bytes(b'{"name": "\xe9"}')
    with pytest.raises(InputError, match="not UTF-8|not valid JSON"):
        load_instance(tmp_path / "latin.json")


# --- round trips ----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=tiny_instance_dicts())
def test_dict_and_json_round_trip(d):
    inst = Instance.from_dict(d)
    out = inst.to_dict()
    assert Instance.from_dict(out) == inst
    assert Instance.from_dict(out).to_dict() == out
    assert json.loads(json.dumps(out, allow_nan=False)) == out  # strict JSON, no NaN
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("r.json", "r.json.gz"):
            save_instance(inst, Path(tmp) / name)
            assert load_instance(Path(tmp) / name) == inst


def test_library_files_are_exactly_what_to_dict_writes(library):
    from optsched.io import load_json

    for path in sorted(INSTANCES.glob("[ts]*/*.json*")):
        assert load_instance(path).to_dict() == load_json(path), path.name
    assert library("t-2n-4j-01").name == "t-2n-4j-01"


def test_schedule_round_trip_and_json(tmp_path):
    s = Schedule("base", {"j2": Assignment({"n1": 2, "n0": 2}, 4, 32), "j0": Assignment({"n2": 1}, 2, 8)})
    doc = s.to_dict()
    assert list(doc["jobs"]) == ["j0", "j2"] and list(doc["jobs"]["j2"]["nodes"]) == ["n0", "n1"]
    assert Schedule.from_dict(doc) == s
    write_json(doc, tmp_path / "s.json")
    assert load_schedule(tmp_path / "s.json") == s
    # report fields are ignored; null assignments mean "not scheduled"
    assert Schedule.from_dict({**doc, "objective": "n/a", "jobs": {**doc["jobs"], "j1": None}}) == s


# --- immutability -------------------------------------------------------------------------------


def test_frozen_types():
    inst = Instance.from_dict(base_round())
    node, job = inst.nodes[0], inst.job("j2")
    for obj, attr, value in [(inst, "name", "x"), (node, "gpus", 99), (job, "weight", 9.0),
                             (job.profile, "throughput", ()), (inst.round, "fair", True)]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, attr, value)
    assert isinstance(inst.nodes, tuple) and isinstance(inst.jobs, tuple)
    assert isinstance(job.profile.cpus_per_gpu, tuple) and all(isinstance(r, tuple) for r in job.profile.throughput)
    assert isinstance(job.demand, tuple)
    for mapping in (job.gpu_speed, job.placement):
        with pytest.raises(TypeError):
            mapping["n0"] = 1  # type: ignore[index]


def test_no_aliasing_of_input_structures():
    d = base_round()
    inst = Instance.from_dict(d)
    before = inst.to_dict()
    j2 = d["jobs"][2]
    j2["profile"]["throughput"][0][0] = 99.0
    j2["profile"]["cpus_per_gpu"].append(8)
    j2["gpu_speed"]["K80"] = 0.2
    j2["placement"]["n2"] = 1
    d["nodes"].append({"id": "n9", "gpu_type": "V100", "gpus": 1, "cpus": 1, "mem_gb": 1})
    assert inst.to_dict() == before
    # nor of what to_dict hands out
    out = inst.to_dict()
    out["jobs"][2]["placement"]["n0"] = 4
    out["jobs"][1]["profile"]["throughput"][0][0] = -1.0
    assert inst.to_dict() == before
    # direct construction copies lists and dicts too
    grid, table, speeds = [1, 2], [[1.0], [2.0]], {"V100": 1.0}
    prof = Profile(grid, [8], table)  # type: ignore[arg-type]
    job = Job("j", 1, prof, (1, 8), gpu_speed=speeds)
    grid.append(3)
    table[0][0] = 5.0
    speeds["P100"] = 1.0
    assert prof.cpus_per_gpu == (1, 2) and prof.throughput == ((1.0,), (2.0,)) and dict(job.gpu_speed) == {"V100": 1.0}
    nodes = [Node("a", "V100", 1, 1, 1)]
    built = Instance("i", nodes, ())  # type: ignore[arg-type]
    nodes.append(Node("b", "V100", 1, 1, 1))
    assert built.size == (1, 0)


def test_replace_revalidates():
    inst = Instance.from_dict(base_round())
    with pytest.raises(InputError) as info:
        dataclasses.replace(inst.nodes[0], gpus=-1)
    assert info.value.field == "gpus"
    with pytest.raises(InputError, match="duplicate job id"):
        dataclasses.replace(inst, jobs=inst.jobs + (inst.jobs[0],))
    with pytest.raises(InputError, match="version"):
        dataclasses.replace(inst, version=True)
    assert dataclasses.replace(inst, name="other").name == "other"


def test_schedule_is_immutable_and_copies_its_input():
    nodes = {"n0": 2}
    a = Assignment(nodes, 1, 8)
    jobs = {"j1": a}
    s = Schedule("base", jobs)
    nodes["n1"] = 1
    jobs["j0"] = a
    assert dict(a.nodes) == {"n0": 2} and list(s.jobs) == ["j1"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.cpus_per_gpu = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.jobs["j0"] = a  # type: ignore[index]
    with pytest.raises(TypeError):
        a.nodes["n0"] = 1  # type: ignore[index]


# --- schedule JSON errors ---------------------------------------------------------------------------

_A = {"nodes": {"n0": 2}, "cpus_per_gpu": 3, "mem_per_gpu_gb": 32}

SCHEDULE_ERRORS = [
    ("not an object", [_A], "schedule", [_A]),
    ("jobs as a list", {"jobs": [_A]}, "jobs", [_A]),
    ("assignment as a list", {"jobs": {"j1": [1]}}, "jobs.j1", [1]),
    ("missing nodes", {"jobs": {"j1": {"cpus_per_gpu": 3, "mem_per_gpu_gb": 32}}}, "jobs.j1.nodes", REQUIRED),
    ("missing cpus", {"jobs": {"j1": {"nodes": {"n0": 2}, "mem_per_gpu_gb": 32}}}, "jobs.j1.cpus_per_gpu", REQUIRED),
    ("missing mem", {"jobs": {"j1": {"nodes": {"n0": 2}, "cpus_per_gpu": 3}}}, "jobs.j1.mem_per_gpu_gb", REQUIRED),
    ("empty nodes", {"jobs": {"j1": {**_A, "nodes": {}}}}, "jobs.j1.nodes", {}),
    ("nodes as a list", {"jobs": {"j1": {**_A, "nodes": ["n0"]}}}, "jobs.j1.nodes", ["n0"]),
    ("zero GPUs", {"jobs": {"j1": {**_A, "nodes": {"n0": 0}}}}, "jobs.j1.nodes.n0", 0),
    ("GPUs 2.0", {"jobs": {"j1": {**_A, "nodes": {"n0": 2.0}}}}, "jobs.j1.nodes.n0", 2.0),
    ("GPUs true", {"jobs": {"j1": {**_A, "nodes": {"n0": True}}}}, "jobs.j1.nodes.n0", True),
    ("negative cpus", {"jobs": {"j1": {**_A, "cpus_per_gpu": -3}}}, "jobs.j1.cpus_per_gpu", -3),
    ("cpus 3.0", {"jobs": {"j1": {**_A, "cpus_per_gpu": 3.0}}}, "jobs.j1.cpus_per_gpu", 3.0),
    ("mem NaN", {"jobs": {"j1": {**_A, "mem_per_gpu_gb": NAN}}}, "jobs.j1.mem_per_gpu_gb", NAN),
    ("mem string", {"jobs": {"j1": {**_A, "mem_per_gpu_gb": "32"}}}, "jobs.j1.mem_per_gpu_gb", "32"),
]


@pytest.mark.parametrize(("doc", "field", "found"), [c[1:] for c in SCHEDULE_ERRORS],
                         ids=[c[0] for c in SCHEDULE_ERRORS])
def test_schedule_errors_name_field_and_value(doc, field, found):
    with pytest.raises(InputError) as info:
        Schedule.from_dict(doc)
    _names(info.value, field, found)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_profile_best_within_is_the_maximum_over_the_points_that_fit(data) -> None:
    """Profile.best_within (a prefix-maximum lookup) equals the plain maximum over the grid points
    of at most the given cores and memory per GPU, 0.0 when none; points() is the grid, fresh each call."""
    cs = sorted(data.draw(st.sets(st.integers(0, 24), min_size=1, max_size=6)))
    ms = sorted(data.draw(st.sets(st.integers(1, 200), min_size=1, max_size=6)))
    thr = [[data.draw(st.floats(0.01, 100.0)) for _ in ms] for _ in cs]
    prof = Profile(tuple(cs), tuple(ms), tuple(map(tuple, thr)))
    for _ in range(5):
        c = data.draw(st.one_of(st.integers(-1, 30), st.floats(-1.0, 30.0)))
        m = data.draw(st.one_of(st.integers(0, 250), st.floats(0.0, 250.0)))
        want = max((t for pc, pm, t in prof.points() if pc <= c and pm <= m), default=0.0)
        assert prof.best_within(c, m) == want
    pts = prof.points()
    pts.clear()
    assert prof.points() == [(c, m, thr[a][b]) for a, c in enumerate(cs) for b, m in enumerate(ms)]


def test_demand_throughput_follows_the_demand_of_each_job() -> None:
    """The looked-up throughput at the demand is per job: a job made with another demand
    (dataclasses.replace) reads its own, not the first job's."""
    inst = Instance.from_dict(base_round())
    job = next(j for j in inst.jobs if len(j.profile.cpus_per_gpu) > 1)
    first = job.demand_throughput
    assert first == job.profile.at(*job.demand)
    other = (job.profile.cpus_per_gpu[-1], job.demand[1])
    moved = dataclasses.replace(job, demand=other)
    assert moved.demand_throughput == job.profile.at(*other)
    assert job.demand_throughput == first


def test_a_profile_s_frontier_is_its_undominated_points():
    """``Profile.frontier``: every grid point is matched or beaten by a frontier point needing no
    more of either resource, and the dominated points are left out."""
    prof = Profile.from_dict({"cpus_per_gpu": [1, 2, 4], "mem_per_gpu_gb": [10, 20],
                              "throughput": [[0.4, 0.5], [0.6, 0.6], [0.6, 0.9]]})
    c, m, thr = prof.frontier()
    front = set(zip(c.tolist(), m.tolist(), thr.tolist(), strict=True))
    assert front == {(1, 10, 0.4), (1, 20, 0.5), (2, 10, 0.6), (4, 20, 0.9)}
    for pc, pm, pt in prof.points():
        assert any(fc <= pc and fm <= pm and ft >= pt for fc, fm, ft in front)
    assert prof.frontier() is prof.frontier()
