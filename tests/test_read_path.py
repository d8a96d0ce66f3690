"""The fast reading of a round gives exactly what the field-by-field reading gives.

Reading a round takes shortcuts (``optsched.io._plain_text`` tells a document's depth and
overflow from its characters; ``optsched.job._plain_job`` builds a plain job, and
``Profile.from_dict`` shares a profile read before, without re-checking them;
``optsched.limits._job_in_range`` tests a job's ranges before naming anything). Each test here
reads the same input twice, with the shortcuts and with them switched off
(:func:`field_by_field`), and requires the same outcome: an equal instance whose fields have the
same types, or the same error (type, field, value and message). Every malformed job is the
*second* job with its profile, read after an intact one, so the shortcuts are warm: a shortcut
that accepted what the full reading refuses fails here.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optsched.io as io_mod
import optsched.job as job_mod
import optsched.limits as limits_mod
from optsched.errors import InputError
from optsched.io import load_json, parse_json
from optsched.limits import MAX_DEPTH
from optsched.model import Instance, Job

sys.path.insert(0, str(Path(__file__).parent))
from conftest import MISSING, mutated  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = sorted(p for p in (ROOT / "instances").rglob("*.json*") if p.parent.name != "traces")
NAN, INF = float("nan"), float("inf")


@contextlib.contextmanager
def field_by_field() -> Iterator[None]:
    """The reading with every shortcut off: each profile and job checked field by field, each
    job's ranges checked by name, each parsed document walked."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(job_mod, "_profile_key", lambda d: None)  # no profile cache, hence no plain jobs
        mp.setattr(limits_mod, "_job_in_range", lambda j, in_range: False)
        mp.setattr(io_mod, "_plain_text", lambda text, raw: False)
        yield


def outcome(read: Any, *args: Any) -> tuple:
    """What ``read(*args)`` gives, comparably: the value (with the types of its fields, through
    ``repr``) or the error."""
    try:
        value = read(*args)
    except InputError as e:
        return "InputError", e.field, repr(e.value), e.problem, str(e)
    except Exception as e:  # noqa: BLE001 - any other outcome must be the same too
        return type(e).__name__, str(e)
    return "ok", value, repr(value)


def both(read: Any, *args: Any) -> tuple[tuple, tuple]:
    """The outcome of ``read(*args)`` with the shortcuts (read twice: the second time warm) and
    without them."""
    outcome(read, *copy.deepcopy(args))
    fast = outcome(read, *copy.deepcopy(args))
    with field_by_field():
        slow = outcome(read, *copy.deepcopy(args))
    return fast, slow


# --- the library rounds ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", LIBRARY, ids=[p.name for p in LIBRARY])
def test_library_rounds_read_the_same(path):
    fast = Instance.from_dict(load_json(path))
    with field_by_field():
        slow = Instance.from_dict(load_json(path))
    assert fast == slow
    assert repr(fast) == repr(slow)  # the same types too (1 == 1.0 == True, but not in a repr)
    assert Instance.from_dict(fast.to_dict()) == fast


def test_equal_profiles_and_speeds_are_one_object():
    inst = Instance.from_dict(load_json(ROOT / "instances" / "large" / "l-1024n-4000j-het-run-01.json.gz"))
    profiles, speeds = {}, {}
    for j in inst.jobs:
        assert profiles.setdefault(j.profile, j.profile) is j.profile
        if j.gpu_speed is not None:
            assert speeds.setdefault(tuple(j.gpu_speed.items()), j.gpu_speed) is j.gpu_speed
    assert len(profiles) < len(inst.jobs) / 10


# --- malformed jobs, each read after an intact job with the same profile --------------------------


def _round() -> dict:
    """A small round whose jobs 0 and 1 share a profile (job 1 is the one broken below)."""
    d = load_json(ROOT / "instances" / "small" / "s-8n-32j-het-run-01.json")
    jobs = d["jobs"]
    runner = next(j for j in jobs if "placement" in j)
    twin = copy.deepcopy(runner)
    twin["id"] = "twin"
    d["jobs"] = [copy.deepcopy(runner) | {"id": "first"}, twin, *[j for j in jobs if j is not runner]]
    d["jobs"][0].pop("placement")
    return d


ROUND = _round()
NODE = next(iter(ROUND["jobs"][1]["placement"]))
GPUS = ROUND["jobs"][1]["gpus"]
OTHER = next(n["id"] for n in ROUND["nodes"] if n["id"] != NODE)
MUTATIONS: list[tuple[tuple, Any]] = [
    *((("id",), v) for v in (MISSING, "", 7, True, None, "first")),
    *((("gpus",), v) for v in (MISSING, 0, -1, float(GPUS), True, str(GPUS), 10**7, 10**400)),
    *((("weight",), v) for v in (0, -0.0, -1, NAN, INF, True, "1", None, 1e7, 1e-7, 10**400, 2)),
    *((("model",), v) for v in ("", 3, [], None)),
    *((("profile",), v) for v in (MISSING, [], None, {})),
    *((("profile", "cpus_per_gpu", 0), v) for v in (True, 1.0, -1, "1", 10**7)),
    *((("profile", "cpus_per_gpu"), v) for v in ([], MISSING, "123", (1, 2, 3))),
    *((("profile", "mem_per_gpu_gb", -1), v) for v in (False, 10**7, 250.0)),
    *((("profile", "throughput", 0, 0), v) for v in (True, 0, -1.0, NAN, INF, None, "1", 1e13, 1e-7, 10**400, 5)),
    *((("profile", "throughput", 0), v) for v in ([1.0], "abc", (1.0,), None)),
    *((("profile", "throughput"), v) for v in ([], MISSING, "x")),
    *((("profile", "extra"), v) for v in (1, NAN)),
    *((("demand",), v) for v in (MISSING, [], {"cpus_per_gpu": 3}, {"mem_per_gpu_gb": 62}, None)),
    *((("demand", "cpus_per_gpu"), v) for v in (7, True, 3.0, -3, "3", 10**400)),
    *((("demand", "mem_per_gpu_gb"), v) for v in (61, 62.0, None)),
    *((("gpu_speed",), v) for v in ({}, {"V100": 0}, {"V100": True}, {"": 1.0}, {"V100": NAN}, {"V100": 1e7},
                                     {1: 1.0}, {"V100": "1"}, "fast", [], None, {"K80": 1.0}, {"V100": 10**400})),
    *((("spread_factor",), v) for v in (0, 1.5, True, NAN, -0.5, 1, "0.9")),
    *((("placement",), v) for v in ({}, {NODE: 0}, {NODE: GPUS, OTHER: 0}, {NODE: GPUS + 1, OTHER: -1}, {NODE: True}, {NODE: float(GPUS)}, {"nowhere": GPUS},
                                     {NODE: GPUS + 1}, {"": GPUS}, {1: GPUS}, [], {NODE: 10**7}, None)),
    *((("restart_s",), v) for v in (-1, NAN, True, 1e10, 0, -0.0, "60")),
    (("comment",), "an unknown field is ignored"),
    (("tenant",), "a"),
    (("preemptible",), False),
    (("deadline_s",), 10.0),
    (("elastic",), {"gpus": [GPUS], "scaling": [1.0], "x": 1}),
]


def test_broken_job_would_take_the_shortcut():
    """The intact twin is read by the shortcut, so each mutation below tests it."""
    Instance.from_dict(copy.deepcopy(ROUND))
    assert job_mod._plain_job(copy.deepcopy(ROUND["jobs"][1])) is not None


def _id(path: tuple, value: Any) -> str:
    return f"{'.'.join(map(str, path))}={'MISSING' if value is MISSING else repr(value)}"[:60]


@pytest.mark.parametrize(("path", "value"), MUTATIONS, ids=[_id(p, v) for p, v in MUTATIONS])
def test_malformed_job_refused_the_same(path, value):
    fast, slow = both(Instance.from_dict, mutated(ROUND, ("jobs", 1, *path), value))
    assert fast == slow


@pytest.mark.parametrize("value", [True, 2**63, -1, 1.5])
def test_malformed_node_refused_the_same(value):
    fast, slow = both(Instance.from_dict, mutated(ROUND, ("nodes", 3, "cpus"), value))
    assert fast == slow


#: (field, a value job 0 has, a value equal to it that job 1 may not have)
TWINS = [
    (("profile", "throughput", 0, 0), 1.0, True),
    (("profile", "throughput", 0, 0), 1, False),
    (("profile", "cpus_per_gpu", 0), 1, True),
    (("profile", "cpus_per_gpu", 0), 1, 1.0),
    (("profile", "mem_per_gpu_gb", 0), 21, 21.0),
    (("weight",), 1, True),
    (("spread_factor",), 1, True),
    (("restart_s",), 1.0, True),
    (("gpus",), GPUS, float(GPUS)),
]


@pytest.mark.parametrize(("path", "good", "bad"), TWINS, ids=[f"{'.'.join(map(str, p))}={b!r}" for p, _g, b in TWINS])
def test_a_bool_or_float_equal_to_a_read_value_is_refused_the_same(path, good, bad):
    """``True == 1 == 1.0``: a value equal to one read before is still of the wrong type."""
    d = mutated(mutated(ROUND, ("jobs", 0, *path), good), ("jobs", 1, *path), bad)
    d = mutated(d, ("jobs", 1, "placement"), MISSING)
    fast, slow = both(Instance.from_dict, d)
    assert fast == slow and fast[0] == "InputError" and fast[1].startswith("jobs[1].")


def test_range_error_in_a_shared_profile_names_its_first_job():
    d = copy.deepcopy(ROUND)
    d["jobs"][1]["profile"]["throughput"][0][0] = 1e13
    d["jobs"][0]["profile"] = copy.deepcopy(d["jobs"][1]["profile"])
    fast, slow = both(Instance.from_dict, d)
    assert fast == slow and fast[1] == "jobs[0].profile.throughput[0][0]"


WEIRD = st.sampled_from([True, False, 0, -1, 1, 2, 3, 0.5, -0.0, 1e-7, 1e7, 1e13, NAN, INF, -INF, "", "x", None, [], {},
                         [1], [[1.0]], {"V100": 1.0}, 10**400, MISSING])
FIELDS = st.sampled_from([("id",), ("gpus",), ("weight",), ("model",), ("spread_factor",), ("restart_s",), ("gpu_speed",),
                          ("gpu_speed", "V100"), ("placement",), ("demand",), ("demand", "cpus_per_gpu"),
                          ("demand", "mem_per_gpu_gb"), ("profile",), ("profile", "cpus_per_gpu"), ("profile", "cpus_per_gpu", 0),
                          ("profile", "mem_per_gpu_gb", 0), ("profile", "throughput"), ("profile", "throughput", 0),
                          ("profile", "throughput", 0, 0), ("profile", "throughput", 1, 0)])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations=st.lists(st.tuples(FIELDS, WEIRD), min_size=1, max_size=3), job=st.integers(0, 4))
def test_any_mutation_refused_or_read_the_same(mutations, job):
    d = copy.deepcopy(ROUND)
    for path, value in mutations:
        with contextlib.suppress(LookupError, TypeError):  # a path the previous mutation removed
            d = mutated(d, ("jobs", job, *path), value)
    fast, slow = both(Instance.from_dict, d)
    assert fast == slow


def test_a_plain_job_is_the_checked_job():
    """The shortcut's job equals the dataclass's own construction, type by type."""
    d = copy.deepcopy(ROUND["jobs"][1])
    Job.from_dict(copy.deepcopy(d))
    plain = job_mod._plain_job(copy.deepcopy(d))
    assert plain is not None
    built = Job(id=d["id"], gpus=d["gpus"], profile=plain.profile, demand=(d["demand"]["cpus_per_gpu"], d["demand"]["mem_per_gpu_gb"]),
                weight=d.get("weight", 1.0), model=d.get("model"), gpu_speed=d.get("gpu_speed"),
                spread_factor=d.get("spread_factor", 1.0), placement=d.get("placement"), restart_s=d.get("restart_s", 0.0))
    assert plain == built and repr(plain) == repr(built) and vars(plain) .keys() == vars(built).keys()
    with pytest.raises(TypeError):
        plain.placement[NODE] = 1  # type: ignore[index]


# --- parsing: what the text alone tells ------------------------------------------------------------


def _nest(depth: int) -> str:
    return "[" * (depth - 1) + "{}" + "]" * (depth - 1)


TEXTS = [
    '{"a": "[[[[", "b": [1, 2]}',
    '{"a": "]]", "b": "[["}',
    '{"a": "\\"[", "b": 1e400}',
    '{"a": "\\\\", "b": [[1]]}',
    '{"k[": 1, "k]": {"x": "{"}}',
    _nest(MAX_DEPTH), _nest(MAX_DEPTH + 1), '{"a": ' + _nest(MAX_DEPTH - 1) + "}", '{"a": ' + _nest(MAX_DEPTH) + "}",
    '{"s": "' + "[" * 200 + '", "t": ' + _nest(10) + "}",
    # 66 deep; read without its escapes, the brackets in its strings would make it look 33 deep
    "[" * 33 + '"\\"' + "]" * 33 + '\\""' + "," + "[" * 33 + "]" * 33 + "," + '"\\"' + "[" * 33 + '\\""' + "]" * 33,
    "[1e400]", "[1E+400]", "[-1e400]", "[1e0400]", "[1e308]", "[1.8e308]", "[1.7e308]", "[1e100, 2E-400]",
    "[" + "1" * 400 + ".0]", "[" + "1" * 309 + "]", "[" + "9" * 250 + "e60]", "[" + "9" * 250 + "e-60]",
    '{"e000": 1, "x": "e+000"}', '{"a": NaN}', '{"a": Infinity}', '{"a": 1, "a": 2}', '["\\ud800"]', '["\\ud83d\\ude00"]',
    "[" + "1" * 5000 + "]", "1e400", '"[["', "[]", "{}", "0",
]


@pytest.mark.parametrize("text", TEXTS, ids=[t[:40] for t in TEXTS])
def test_parse_refuses_and_reads_the_same(text):
    for data in (text, text.encode()):
        fast, slow = both(parse_json, data)
        assert fast[:2] == slow[:2] and fast[-1] == slow[-1]


def _json_values() -> st.SearchStrategy:
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-10**5, 10**5), st.floats(allow_nan=False, allow_infinity=False),
                       st.text(alphabet='ab[]{}"\\ ', max_size=4))
    return st.recursive(leaves, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(alphabet='ab[]"', max_size=2), kids, max_size=3),
                        max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(value=_json_values(), wrap=st.integers(0, MAX_DEPTH + 2))
def test_plain_text_never_vouches_for_a_deep_or_overflowing_document(value, wrap):
    text = "[" * wrap + json.dumps(value) + "]" * wrap
    fast, slow = both(parse_json, text)
    assert fast[:2] == slow[:2] and fast[-1] == slow[-1]
    if io_mod._plain_text(text, None):
        depth, overflow = io_mod._shape(json.loads(text))
        assert depth <= MAX_DEPTH and not overflow


def test_gc_state_is_restored():
    assert gc.isenabled()
    parse_json(json.dumps(ROUND))
    Instance.from_dict(copy.deepcopy(ROUND))
    with pytest.raises(InputError):
        parse_json('{"a": 1, "a": 2}')
    with pytest.raises(InputError):
        Instance.from_dict(mutated(ROUND, ("jobs", 1, "gpus"), 0))
    assert gc.isenabled()
    gc.disable()
    try:
        parse_json("[1]")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overflowing_integer_in_a_number_field_names_it():
    with pytest.raises(InputError) as info:
        Instance.from_dict(mutated(ROUND, ("jobs", 1, "weight"), 10**400))
    assert info.value.field == "jobs[1].weight" and "too large for a 64-bit float" in info.value.problem
    assert math.isinf(float("inf"))
