"""Typed method options (optsched.options): one class per method, validated once, the same
refusals through the Python API, the CLI and the HTTP service."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from optsched import solve_round
from optsched.cli import main
from optsched.errors import InputError
from optsched.exact.options import CpsatOptions
from optsched.heuristics.fixed_demand import FixedDemand
from optsched.heuristics.fungible_greedy import FungibleGreedy
from optsched.heuristics.options import LnsOptions
from optsched.io import load_instance
from optsched.learned.options import MaifsOptions, WarmCpsatOptions
from optsched.mip.options import MipOptions
from optsched.options import MethodOptions, NoOptions
from optsched.partition.options import PartitionedOptions
from optsched.registry import get_method, methods
from optsched.service import ServiceConfig, create_app
from optsched.solve import AUTO_LARGE, AUTO_WARM, method_options

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "instances" / "tiny" / "t-2n-4j-01.json"
#: every method solve_round can run: the registered ones and the two that only ``auto`` picks
ALL = [*methods(), AUTO_WARM, AUTO_LARGE]
IDS = [f"{m.name}:{m.target}" for m in ALL]


@pytest.fixture(scope="module")
def tiny():
    return load_instance(TINY)


def test_every_method_names_an_options_class():
    expected = {"cpsat": CpsatOptions, "lns": LnsOptions, "scip": MipOptions, "cbc": MipOptions, "pulp": MipOptions,
                "maifs": MaifsOptions, "fixed-demand": NoOptions, "fungible-greedy": NoOptions,
                "partitioned": PartitionedOptions}
    assert {m.name: m.options_class() for m in methods()} == expected
    assert AUTO_WARM.options_class() is WarmCpsatOptions and AUTO_LARGE.options_class() is MaifsOptions


# --- unknown names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("info", ALL, ids=IDS)
def test_unknown_name_is_refused_by_name_listing_the_known(info):
    cls = info.options_class()
    with pytest.raises(InputError) as e:
        method_options(info, {"bogus": 7})
    assert e.value.field == "options.bogus" and e.value.value == 7
    assert info.name in e.value.problem
    for name in cls.names():
        assert name in e.value.problem
    if not cls.names():
        assert "takes none" in e.value.problem


@pytest.mark.parametrize("info", methods(), ids=[m.name for m in methods()])
def test_solve_round_refuses_an_unknown_name_for_every_method(tiny, info):
    with pytest.raises(InputError) as e:
        solve_round(tiny, solver=info.name, time_limit=1.0, bogus=1)
    assert e.value.field == "options.bogus"


@pytest.mark.parametrize("solver", [FixedDemand, FungibleGreedy])
def test_heuristics_without_options_refuse_any(tiny, solver):
    """Called directly too (the simulator's unchecked path): nothing is silently ignored."""
    with pytest.raises(InputError, match="takes none") as e:
        solver().solve(tiny, time_limit=1.0, seed=0, num_workers=2)
    assert e.value.field == "options.num_workers"


# --- types and ranges -------------------------------------------------------------------------------


@pytest.mark.parametrize(("cls", "name", "value"), [
    (CpsatOptions, "num_workers", True),
    (CpsatOptions, "num_workers", 0),
    (CpsatOptions, "num_workers", 2.0),
    (CpsatOptions, "num_workers", "2"),
    (CpsatOptions, "deterministic_time", 0),
    (CpsatOptions, "deterministic_time", math.nan),
    (CpsatOptions, "deterministic_time", math.inf),
    (CpsatOptions, "log", 1),
    (CpsatOptions, "job_symmetry", "true"),
    (CpsatOptions, "lns_share", 1.0),
    (CpsatOptions, "portfolio", "fast"),
    (CpsatOptions, "cp_params", {"no_such_parameter": 1}),
    (CpsatOptions, "cp_params", [1]),
    (CpsatOptions, "bound_worker", "yes"),
    (CpsatOptions, "usage_floor", [(["a"], 3, 1)]),
    (LnsOptions, "nodes", 0),
    (LnsOptions, "sub_time", -0.1),
    (LnsOptions, "targeted", 1.5),
    (LnsOptions, "bound", "yes"),
    (LnsOptions, "bound", 1),
    (LnsOptions, "prices", {"a": 1.0}),
    (MipOptions, "num_threads", False),
    (MipOptions, "greedy", None),
    (MaifsOptions, "samples", -1),
    (MaifsOptions, "temperature", 0),
    (MaifsOptions, "temperature", "1.0"),
    (MaifsOptions, "threads", 1.5),
    (MaifsOptions, "repair", "no"),
    (MaifsOptions, "weights", 3),
    # beyond what a machine can start or a loop can honour within its time limit
    (CpsatOptions, "num_workers", 10**6),
    (LnsOptions, "num_workers", 2**70),
    (LnsOptions, "nodes", 10**12),
    (MipOptions, "num_threads", 10**6),
    (MaifsOptions, "threads", 5000),
    (MaifsOptions, "samples", 10**18),
    (MaifsOptions, "temperature", 1e308),
    (PartitionedOptions, "passes", 10**9),
    (PartitionedOptions, "parts", 10**18),
    (PartitionedOptions, "workers", 10**5),
])
def test_wrong_type_or_range_is_refused_naming_field_and_value(cls, name, value):
    with pytest.raises(InputError) as e:
        cls.from_mapping({name: value})
    assert e.value.field == f"options.{name}"
    assert e.value.value is value or e.value.value in value  # cp_params names the bad parameter


@pytest.mark.parametrize("info", ALL, ids=IDS)
def test_every_field_refuses_a_foreign_object(info):
    for name in info.options_class().names():
        with pytest.raises(InputError) as e:
            method_options(info, {name: object()})
        assert e.value.field == f"options.{name}"


def test_construction_validates_and_the_object_is_frozen():
    with pytest.raises(InputError, match="num_workers"):
        CpsatOptions(num_workers=0)
    opts = LnsOptions(sub_time=1)
    assert opts.sub_time == 1.0 and isinstance(opts.sub_time, float)  # normalised once
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.nodes = 2  # type: ignore[misc]
    assert opts.replace(nodes=6).nodes == 6 and opts.nodes == 4
    with pytest.raises(InputError, match="options.bogus"):
        opts.replace(bogus=1)
    with pytest.raises(InputError) as e:
        CpsatOptions.from_mapping([("num_workers", 1)])  # type: ignore[arg-type]
    assert e.value.field == "options"


# --- defaults ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("info", ALL, ids=IDS)
def test_defaults_round_trip(info):
    """Defaults pass their own checks, survive to_dict -> from_mapping and (the HTTP-able
    fields) JSON, and the listing shows them."""
    cls = info.options_class()
    default = cls()
    assert cls.from_mapping(default.to_dict()) == default == cls.from_mapping(None) == cls.from_mapping({})
    remote = {k: v for k, v in default.to_dict().items() if k in {o.name for o in cls.describe() if o.remote}}
    assert cls.from_mapping(json.loads(json.dumps(remote))) == default
    for o in cls.describe():
        assert o.default == getattr(default, o.name) and o.help and o.type
        json.dumps(o.to_dict())


def test_the_legacy_defaults_are_kept():
    """The values the methods used before their options were typed."""
    assert CpsatOptions().to_dict() == {
        "num_workers": None, "deterministic_time": None, "log": False, "node_symmetry": False, "job_symmetry": True,
        "type_cuts": False, "greedy_hint": True, "lns_share": None, "lifted_rows": True, "split_cuts": False,
        "portfolio": "auto", "cp_params": None, "bound_worker": True, "lp_fallback": True, "config_fixing": True,
        "greedy_starts": None, "usage_floor": None}
    assert LnsOptions().to_dict() == {"num_workers": 1, "nodes": 4, "extra_jobs": 16, "sub_time": 0.25, "bound": True,
                                      "targeted": 0.5, "linked": 0.5, "priced": 0.75, "deterministic_time": None,
                                      "prices": None}
    assert MipOptions().to_dict() == {"num_threads": 1, "log": False, "greedy": True}
    assert MaifsOptions().to_dict() == {"weights": None, "samples": None, "temperature": 1.0, "threads": 1, "repair": None}


# --- one API: an options object or a mapping --------------------------------------------------------


@pytest.mark.parametrize(("solver", "opts"), [
    ("cpsat", CpsatOptions(num_workers=1, deterministic_time=1.0)),
    ("lns", LnsOptions(deterministic_time=0.5, bound=False)),
    ("maifs", MaifsOptions(samples=4)),
    ("cbc", MipOptions(greedy=False)),
])
def test_an_options_object_and_the_mapping_give_the_same_schedule(tiny, solver, opts):
    given = {k: v for k, v in opts.to_dict().items() if v != getattr(type(opts)(), k)}
    by_object = solve_round(tiny, solver=solver, time_limit=10.0, seed=3, options=opts)
    by_mapping = solve_round(tiny, solver=solver, time_limit=10.0, seed=3, options=given)
    by_keywords = solve_round(tiny, solver=solver, time_limit=10.0, seed=3, **given)
    assert by_object.schedule == by_mapping.schedule == by_keywords.schedule
    assert by_object.objective == by_mapping.objective == by_keywords.objective


def test_options_of_another_method_or_twice_are_refused(tiny):
    with pytest.raises(InputError, match="LnsOptions") as e:
        solve_round(tiny, solver="lns", time_limit=1.0, options=CpsatOptions())
    assert e.value.field == "options"
    with pytest.raises(InputError, match="not both"):
        solve_round(tiny, solver="cpsat", time_limit=1.0, options={"num_workers": 1}, log=False)


def test_base_class_options_serve_a_derived_method():
    """``CpsatOptions`` for ``cpsat+maifs`` (what ``auto`` runs on medium rounds), which adds ``weights``."""
    opts = method_options(AUTO_WARM, CpsatOptions(num_workers=2))
    assert isinstance(opts, WarmCpsatOptions) and opts.num_workers == 2 and opts.weights is None
    assert method_options(get_method("cpsat"), opts) is opts  # a WarmCpsatOptions is a CpsatOptions


# --- the same refusal from the CLI and the HTTP service ---------------------------------------------


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([str(a) for a in argv])
    return code, err.getvalue()


@pytest.fixture(scope="module")
def http() -> TestClient:
    # no lifespan, no pool: a request that names its method has its options checked before queueing
    return TestClient(create_app(ServiceConfig(workers=1)))


@pytest.mark.parametrize(("solver", "key", "text", "value"), [
    ("cpsat", "bogus", "1", 1),
    ("cpsat", "num_workers", "0", 0),
    ("cpsat", "job_symmetry", "1", 1),
    ("lns", "bound", '"maybe"', "maybe"),
    ("lns", "sub_time", "-1", -1),
    ("scip", "num_threads", "true", True),
    ("maifs", "samples", "-2", -2),
    ("fixed-demand", "nodes", "4", 4),
    ("fungible-greedy", "num_workers", "2", 2),
])
def test_cli_and_http_refuse_the_same_bad_option_with_the_same_message(http, solver, key, text, value):
    code, err = _cli("solve", TINY, "--solver", solver, "--time-limit", "1", "--option", f"{key}={text}")
    assert code == 2 and err.startswith("optsched: bad input: "), err
    r = http.post("/v1/solve", json={"instance": json.loads(TINY.read_text()), "solver": solver, "time_limit": 1,
                                     "options": {key: value}})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["field"] == f"options.{key}" and body["value"] == value
    assert err.strip() == f"optsched: bad input: {body['message']}"


@pytest.mark.parametrize("key", ["weights", "log", "cp_params", "prices", "usage_floor"])
def test_http_refuses_python_only_options_by_name(http, key):
    r = http.post("/v1/solve", json={"instance": json.loads(TINY.read_text()), "options": {key: "x"}})
    assert r.status_code == 422 and r.json()["field"] == f"options.{key}" and "HTTP" in r.json()["problem"]


def test_http_lists_each_methods_options(http):
    listed = {m["name"]: m["options"] for m in http.get("/v1/methods").json()}
    assert [o["name"] for o in listed["cpsat"]] == list(CpsatOptions.names())
    assert listed["fixed-demand"] == []
    assert {o["name"]: o["remote"] for o in listed["maifs"]}["weights"] is False


def test_cli_methods_lists_options():
    code = None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["methods", "--options", "--family", "heuristic"])
    assert code == 0
    text = out.getvalue()
    for name in LnsOptions.names():
        assert f"    {name} " in text
    assert "(no options)" in text
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["methods", "--json"])
    rows = {r["name"]: r for r in json.loads(out.getvalue())}
    assert [o["name"] for o in rows["scip"]["options"]] == ["num_threads", "log", "greedy"]


def test_options_base_is_a_contract_module():
    """optsched.options imports only the errors and limits modules of optsched (the contract layer)."""
    import ast

    tree = ast.parse((ROOT / "optsched" / "options.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert {m for m in imported if m.startswith("optsched")} == {"optsched.errors", "optsched.limits"}
    assert issubclass(NoOptions, MethodOptions)
