"""The HTTP service: a real uvicorn server on loopback, a real HTTP client (httpx), schemathesis.

One server (2 worker processes, queue 6, time limits capped at 1.5 s) runs in a thread of this
process for the module, so methods registered here (tests/service_fakes.py) reach its workers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from strategies import tiny_instance_dicts

from optsched import Instance, check_schedule, solve_round
from optsched.commands.validate import validate_decision
from optsched.errors import InputError
from optsched.io import load_json
from optsched.model import Job, Node, Profile, Round
from optsched.registry import _METHODS, methods, register_method
from optsched.service import ServiceConfig, create_app
from optsched.service.loadtest import percentile, run_load
from optsched.service.schemas import InstanceModel, JobModel, NodeModel, ProfileModel, RoundModel

ROOT = Path(__file__).resolve().parents[1]
TINY = sorted((ROOT / "instances" / "tiny").glob("*.json"))
CONFIG = ServiceConfig(workers=2, queue=6, max_time_limit=1.5, default_time_limit=0.5, grace_s=20.0)
#: a second, smaller server with a short grace period, for the capacity and hung-solver tests
SMALL = ServiceConfig(workers=1, queue=1, max_time_limit=2.0, default_time_limit=1.0, grace_s=0.5)
FAKES = {"test-boom": "Boom", "test-die": "Die", "test-hang": "Hang", "test-sleepy": "Sleepy"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(config: ServiceConfig):
    """Run the app under uvicorn on a free loopback port; yield its base URL."""
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def fakes():
    for name, cls in FAKES.items():
        register_method(name, "heuristic", "test only", f"service_fakes:{cls}")
    yield
    for name in FAKES:
        _METHODS.pop(name, None)  # other modules iterate the registry's heuristics


@pytest.fixture(scope="module")
def base_url(fakes):
    with serving(CONFIG) as url:
        yield url


@pytest.fixture(scope="module")
def small_url(fakes):
    with serving(SMALL) as url:
        # one answered solve: its worker has started and imported its solvers, so timings below are the pool's
        assert httpx.post(f"{url}/v1/solve", json={"instance": _tiny(0), "solver": "fungible-greedy"}, timeout=120).status_code == 200
        yield url


@pytest.fixture(scope="module")
def http(base_url):
    with httpx.Client(base_url=base_url, timeout=60) as c:
        yield c


def _tiny(i: int = 0) -> dict:
    return load_json(TINY[i])


# --- the models mirror the contract types -------------------------------------------------------


def test_models_have_the_contract_fields():
    """Every field of the contract types is a field of its HTTP model and vice versa."""
    pairs = [(NodeModel, Node), (ProfileModel, Profile), (JobModel, Job), (RoundModel, Round), (InstanceModel, Instance)]
    for model, typ in pairs:
        names = {f.name for f in dataclasses.fields(typ) if not f.name.startswith("_")}
        assert set(model.model_fields) == names, typ.__name__


def test_every_bundled_instance_passes_the_models_unchanged():
    files = sorted((ROOT / "instances").glob("*/*.json"))
    assert len(files) >= 20
    for f in files:
        d = load_json(f)
        assert InstanceModel.model_validate(d).contract_dict() == d, f.name


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_instance_dicts())
def test_random_valid_rounds_pass_the_models(d):
    assert Instance.from_dict(InstanceModel.model_validate(d).contract_dict()) == Instance.from_dict(d)


# --- endpoints ----------------------------------------------------------------------------------


def test_healthz_and_methods(http):
    h = http.get("/healthz").json()
    assert h["status"] == "ok" and h["workers"] == 2 and h["queue"] == 6 and h["max_time_limit"] == 1.5
    listed = http.get("/v1/methods").json()
    assert [m["name"] for m in listed] == [m.name for m in methods()]
    assert {"cpsat", "lns", "maifs"} <= {m["name"] for m in listed}


@pytest.mark.parametrize("method", ["exact", "heuristic"])
def test_solve_returns_a_checked_schedule(http, method):
    d = _tiny(0)
    r = http.post("/v1/solve", json={"instance": d, "method": method, "time_limit": 1})
    assert r.status_code == 200, r.text
    body = r.json()
    inst = Instance.from_dict(d)
    report = check_schedule(inst, body)
    assert report.feasible
    assert body["objective"] == pytest.approx(report.objective, rel=1e-9)
    assert body["time_limit"] == 1.0 and body["instance"] == inst.name
    if method == "exact":
        local = solve_round(inst, "exact", time_limit=2.0)
        assert body["status"] == "optimal" and body["objective"] == pytest.approx(local.objective, rel=1e-6)


def test_partitioned_solves_in_a_worker(http):
    """The service's workers are daemonic processes: ``partitioned`` runs its parts serially there."""
    d = _tiny(0)
    r = http.post("/v1/solve", json={"instance": d, "solver": "partitioned", "time_limit": 1.5})
    assert r.status_code == 200, r.text
    assert check_schedule(Instance.from_dict(d), r.json()).feasible


def test_options_reach_the_solver_and_auto_checks_them_in_its_worker(http):
    """``options`` give the schedule the Python API gives with them; under ``auto`` (whose
    method depends on the round) the worker refuses a bad one with solve_round's message."""
    d = _tiny(0)
    opts = {"deterministic_time": 0.2, "bound": False}
    r = http.post("/v1/solve", json={"instance": d, "solver": "lns", "time_limit": 1.5, "seed": 2, "options": opts})
    assert r.status_code == 200, r.text
    local = solve_round(Instance.from_dict(d), solver="lns", time_limit=1.5, seed=2, options=opts)
    assert r.json()["jobs"] == local.to_dict()["jobs"]
    r = http.post("/v1/solve", json={"instance": d, "time_limit": 1, "options": {"bogus": 1}})
    assert r.status_code == 422, r.text
    with pytest.raises(InputError) as e:
        solve_round(Instance.from_dict(d), time_limit=1.0, bogus=1)
    assert r.json()["field"] == "options.bogus" and r.json()["message"] == str(e.value)


def test_time_limit_is_capped_and_defaulted(http):
    d = _tiny(1)
    assert http.post("/v1/solve", json={"instance": d, "time_limit": 1e6}).json()["time_limit"] == 1.5
    assert http.post("/v1/solve", json={"instance": d, "solver": "fungible-greedy"}).json()["time_limit"] == 0.5


def test_hint_is_used_and_checked(http):
    d = _tiny(2)
    first = http.post("/v1/solve", json={"instance": d, "solver": "fungible-greedy"}).json()
    r = http.post("/v1/solve", json={"instance": d, "solver": "cpsat", "time_limit": 1, "hint": first})
    assert r.status_code == 200 and r.json()["objective"] >= first["objective"] - 1e-9
    bad = {"jobs": {d["jobs"][0]["id"]: {"nodes": {d["nodes"][0]["id"]: 99}, "cpus_per_gpu": 1, "mem_per_gpu_gb": 1}}}
    r = http.post("/v1/solve", json={"instance": d, "solver": "cpsat", "hint": bad})
    assert r.status_code == 422 and r.json()["field"] == "hint"


@pytest.mark.parametrize(
    ("mutate", "field", "value"),
    [
        (lambda b: b["instance"]["jobs"][1]["demand"].__setitem__("cpus_per_gpu", 5), "instance.jobs[1].demand.cpus_per_gpu", 5),
        (lambda b: b["instance"]["jobs"][1].__setitem__("gpus", "4"), "instance.jobs[1].gpus", "4"),
        (lambda b: b["instance"]["nodes"][1].__setitem__("id", "n0"), "instance.nodes[1].id", "n0"),
        (lambda b: b["instance"]["jobs"][0]["profile"].__setitem__("cpus_per_gpu", [3, 1, 6]), "instance.jobs[0].profile.cpus_per_gpu[1]", 1),
        (lambda b: b["instance"].__setitem__("version", 2), "instance.version", 2),
        (lambda b: b["instance"].pop("nodes"), "instance.nodes", None),
        (lambda b: b.__setitem__("solver", "nope"), "solver", "nope"),
        (lambda b: b.__setitem__("solver", "lns"), "solver", "lns"),  # a heuristic asked for as exact
        (lambda b: b.__setitem__("time_limit", -1), "time_limit", -1),
        (lambda b: b.__setitem__("seed", 2**40), "seed", 2**40),
        (lambda b: b.__setitem__("tim_limit", 1), "tim_limit", 1),  # a misspelt request field is refused, not ignored
        (lambda b: b["instance"]["jobs"][1].__setitem__("weigth", 2.0), "instance.jobs[1].weigth", 2.0),
    ],
)
def test_bad_input_is_422_naming_the_field(http, mutate, field, value):
    body = {"instance": _tiny(0), "method": "exact"}
    mutate(body)
    r = http.post("/v1/solve", json=body)
    assert r.status_code == 422, r.text
    err = r.json()
    assert err["error"] == "bad_input" and err["field"] == field and err.get("value") == value, err
    assert field in err["message"]


def test_malformed_json_is_422(http):
    r = http.post("/v1/solve", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["field"] == "body"


def test_check_reports_violations_and_objective(http):
    d = _tiny(0)
    inst = Instance.from_dict(d)
    good = solve_round(inst, "heuristic", time_limit=1.0).schedule.to_dict()
    r = http.post("/v1/check", json={"instance": d, "schedule": good}).json()
    assert r == check_schedule(inst, good).to_dict() and r["feasible"]
    j, n = inst.jobs[0], inst.nodes[0]
    bad = {"jobs": {j.id: {"nodes": {n.id: n.gpus + 1}, "cpus_per_gpu": j.demand[0], "mem_per_gpu_gb": j.demand[1]}}}
    r = http.post("/v1/check", json={"instance": d, "schedule": bad}).json()
    assert not r["feasible"] and {v["rule"] for v in r["violations"]} >= {4}
    assert r == check_schedule(inst, bad).to_dict()
    for schedule, named in [({"instance": d["name"]}, "jobs"), ({"jobz": {}}, "did you mean 'jobs'"),
                            ({"jobs": {j.id: {"nodes": {n.id: 1}, "cpus_per_gpu": 1, "mem_per_gb": 1}}}, "did you mean 'mem_per_gpu_gb'")]:
        r = http.post("/v1/check", json={"instance": d, "schedule": schedule})
        assert r.status_code == 422 and named in r.json()["message"], r.text


def test_validate_is_optsched_validate(http):
    d = _tiny(3)
    inst = Instance.from_dict(d)
    decision = solve_round(inst, solver="fixed-demand", time_limit=1.0).schedule.to_dict()
    r = http.post("/v1/validate", json={"instance": d, "decision": decision, "time_limit": 1.5})
    assert r.status_code == 200, r.text
    got = r.json()
    want = validate_decision(inst, decision, time_limit=1.5)
    for key in ("instance", "feasible", "violations", "objective", "diff_counts"):
        assert got[key] == want[key], key
    assert got["reference"]["objective"] == pytest.approx(want["reference"]["objective"], rel=1e-6)
    assert got["time_limit"] == 1.5


# --- failures stay inside their request ---------------------------------------------------------


def test_solver_crash_is_a_500_and_the_service_lives_on(http):
    d = _tiny(0)
    r = http.post("/v1/solve", json={"instance": d, "solver": "test-boom"})
    assert r.status_code == 500 and r.json()["error"] == "solver_error" and "boom" in r.json()["message"]
    r = http.post("/v1/solve", json={"instance": d, "solver": "test-die"})
    assert r.status_code == 500 and "died" in r.json()["message"] and "exit code 7" in r.json()["message"]
    r = http.post("/v1/solve", json={"instance": d, "method": "heuristic", "time_limit": 1})
    assert r.status_code == 200 and check_schedule(Instance.from_dict(d), r.json()).feasible
    deadline = time.monotonic() + 30
    while http.get("/healthz").json()["workers_alive"] < 2:
        assert time.monotonic() < deadline, "the dead worker was not replaced"
        time.sleep(0.1)


def test_over_capacity_is_429_never_a_pile_up(small_url):
    """6 requests that each hold a worker 1.5 s against capacity 1 + 1: the excess gets 429 at once."""
    body = {"instance": _tiny(0), "solver": "test-sleepy", "time_limit": 1.5}

    def post(_):
        t0 = time.perf_counter()
        r = httpx.post(f"{small_url}/v1/solve", json=body, timeout=60)
        return r.status_code, time.perf_counter() - t0, r.headers.get("retry-after")

    with ThreadPoolExecutor(6) as ex:
        out = list(ex.map(post, range(6)))
    codes = sorted(c for c, _, _ in out)
    assert set(codes) <= {200, 429} and codes.count(200) >= 2 and codes.count(429) >= 1, codes
    refused, served = [dt for c, dt, _ in out if c == 429], [dt for c, dt, _ in out if c == 200]
    assert max(refused) < min(served) and all(ra == "1" for c, _, ra in out if c == 429)  # at once, with Retry-After
    assert httpx.get(f"{small_url}/healthz").json()["in_flight"] == 0


def test_hung_solver_is_stopped_with_504(small_url):
    t0 = time.perf_counter()
    r = httpx.post(f"{small_url}/v1/solve", json={"instance": _tiny(0), "solver": "test-hang", "time_limit": 0.2}, timeout=60)
    assert r.status_code == 504 and r.json()["error"] == "solver_timeout"
    assert time.perf_counter() - t0 < 10  # time limit 0.2 s + grace 0.5 s, plus the queue
    assert httpx.get(f"{small_url}/healthz").json()["workers_alive"] == 1  # replaced


def test_concurrent_load_has_no_errors(base_url):
    """8 concurrent clients, 24 small solves: every one answered 200 (bounded, loopback only)."""
    bodies = [{"instance": load_json(f), "solver": "fungible-greedy"} for f in TINY] * 3
    rep = run_load(base_url, bodies[:24], clients=8)
    print(rep.summary())
    assert rep.statuses == {200: 24} and rep.lost == 0 and rep.server_errors == 0, rep.errors
    assert rep.solves_per_s > 0 and rep.latency(99) is not None


def test_percentile_nearest_rank():
    assert percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.0
    assert percentile(list(map(float, range(1, 101))), 99) == 99.0
    assert percentile([], 50) is None


# --- fuzzing from the OpenAPI schema ------------------------------------------------------------

import schemathesis  # noqa: E402
from schemathesis.config import SchemathesisConfig  # noqa: E402

ST_CONFIG = SchemathesisConfig.from_dict({
    "checks": {
        # valid per the schema yet refused by the model (e.g. a demand off its grid) is a 422
        "positive_data_acceptance": {"expected-statuses": ["2XX", "422", "429"]},
    },
})


# the schema as the app generates it (building the app starts nothing: the pool starts with the server)
schema = schemathesis.openapi.from_dict(create_app(CONFIG).openapi(), config=ST_CONFIG)


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_fuzz(case, base_url):
    """Schema-generated requests: no 5xx, every answer documented and matching its schema."""
    case.call_and_validate(base_url=base_url)


# --- the CLI verb -------------------------------------------------------------------------------


def test_optsched_serve_verb():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "optsched", "serve", "--port", str(port), "--workers", "1", "--queue", "0",
                             "--max-time-limit", "1", "--log-level", "warning"], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                h = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json()
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, "optsched serve did not come up"
                time.sleep(0.2)
        assert (h["workers"], h["queue"], h["max_time_limit"], h["default_time_limit"]) == (1, 0, 1.0, 1.0)
        r = httpx.post(f"http://127.0.0.1:{port}/v1/check", json={"instance": _tiny(0), "schedule": {"jobs": {}}}, timeout=30)
        assert r.status_code == 200 and json.loads(r.text)["feasible"]
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn shuts down, then re-raises the signal


def test_optsched_serve_refuses_bad_options(capsys):
    from optsched.cli import main

    assert main(["serve", "--workers", "0"]) == 2 and "--workers" in capsys.readouterr().err
    assert main(["serve", "--port", "70000"]) == 2 and "--port" in capsys.readouterr().err


def test_optsched_serve_refuses_a_busy_port_as_bad_input(capsys):
    from optsched.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert "--port" in err and f"127.0.0.1:{port}" in err and "in use" in err
