"""A malformed-input corpus run through every door: the CLI, the Python API and the HTTP service.

:func:`corpus` builds each case from the tiny round, broken once (deep nesting, huge integers,
corrupt gzip, NaN and infinities, lone surrogates, versions that are not the integer 1, values
outside the numeric range of ``optsched.limits``, encodings, ...). Every case must be refused the
same way everywhere: the CLI exits 2 with the field on stderr and no traceback, the Python API
raises ``InputError``, and the service answers 422 (never 500) with a body that is strict JSON.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from optsched.cli import main
from optsched.errors import InputError
from optsched.io import load_instance
from optsched.model import Instance
from optsched.service import ServiceConfig, create_app

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "instances" / "tiny" / "t-2n-4j-01.json"
DOC = json.loads(TINY.read_text())
TEXT = json.dumps(DOC)


@dataclass(frozen=True)
class Case:
    """One malformed file: its bytes, its suffix, and the field the refusal must name."""

    name: str
    data: bytes
    field: str
    suffix: str = ".json"
    #: whether the bytes can be an HTTP body's ``instance`` (not for gzip or encodings)
    embeddable: bool = True


def _edit(path: list, value) -> str:
    d = json.loads(TEXT)
    target = d
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(d)


def _sub(old: str, new: str) -> str:
    assert old in TEXT, old
    return TEXT.replace(old, new, 1)


def corpus() -> list[Case]:
    """The malformed cases; ``field`` is what the refusal names (``path``: the file itself)."""
    deep_in_field = _edit(["name"], None).replace('"name": null', '"name": ' + "[" * 100 + "]" * 100)
    cases = [
        Case("deep-1000", ("[" * 1000 + "]" * 1000).encode(), "path"),
        Case("deep-100-in-field", deep_in_field.encode(), "name"),
        Case("int-5000-digits", _sub('"gpus": 4', '"gpus": ' + "7" * 5000).encode(), "nodes[0].gpus"),
        Case("gpus-10^400", _sub('"gpus": 4', '"gpus": 1' + "0" * 400).encode(), "nodes[0].gpus"),
        Case("gpus-10^50", _sub('"gpus": 4', '"gpus": 1' + "0" * 50).encode(), "nodes[0].gpus"),
        Case("cpus-2^63", _edit(["nodes", 0, "cpus"], 2**63).encode(), "nodes[0].cpus"),
        Case("nan", _sub('"weight": 1.42', '"weight": NaN').encode(), "jobs[0].weight"),
        Case("infinity", _sub('"weight": 1.42', '"weight": Infinity').encode(), "jobs[0].weight"),
        Case("minus-infinity", _sub('"weight": 1.42', '"weight": -Infinity').encode(), "jobs[0].weight"),
        Case("1e400", _sub('"weight": 1.42', '"weight": 1e400').encode(), "jobs[0].weight"),
        Case("nan-in-unknown-field", _sub('"name": ', '"comment": NaN, "name": ').encode(), "comment"),
        Case("weight-1e308", _edit(["jobs", 0, "weight"], 1e308).encode(), "jobs[0].weight"),
        Case("weight-1e-308", _edit(["jobs", 0, "weight"], 1e-308).encode(), "jobs[0].weight"),
        Case("weight-negative-zero", _sub('"weight": 1.42', '"weight": -0.0').encode(), "jobs[0].weight"),
        Case("gpus-negative-zero", _sub('"gpus": 2', '"gpus": -0').encode(), "jobs[0].gpus"),
        Case("restart-1e308", _edit(["jobs", 0, "restart_s"], 1e308).encode(), "jobs[0].restart_s"),
        Case("throughput-1e300", _edit(["jobs", 0, "profile", "throughput", 0, 0], 1e300).encode(), "jobs[0].profile.throughput[0][0]"),
        Case("speed-1e-300", _edit(["jobs", 0, "gpu_speed"], {"V100": 1e-300}).encode(), "jobs[0].gpu_speed.V100"),
        Case("duration-1e308", _edit(["round", "duration_s"], 1e308).encode(), "round.duration_s"),
        Case("version-true", _edit(["version"], True).encode(), "version"),
        Case("version-string", _edit(["version"], "1").encode(), "version"),
        Case("version-float", _edit(["version"], 1.0).encode(), "version"),
        Case("surrogate-value", _sub('"t-2n-4j-01"', '"\\ud800"').encode(), "name"),
        Case("surrogate-key", _sub('"name": ', '"\\udfff": 1, "name": ').encode(), "path"),
        Case("duplicate-key", _sub('"name": ', '"name": "x", "name": ').encode(), "path"),
        Case("empty", b"", "path"),
        Case("whitespace", b"  \n ", "path"),
        Case("top-level-array", b"[]", "instance"),
        Case("top-level-null", b"null", "instance"),
        Case("truncated", TEXT[: len(TEXT) // 2].encode(), "path"),
        Case("bom-then-junk", b"\xef\xbb\xbf{junk", "path"),
        Case("latin-1", _sub('"t-2n-4j-01"', '"caf\u00e9"').encode("latin-1"), "path", embeddable=False),
        Case("utf-16", TEXT.encode("utf-16"), "path", embeddable=False),
        Case("gz-garbage", b"\x1f\x8b\x08\x00not really gzip", "path", ".json.gz", embeddable=False),
        Case("gz-truncated", gzip.compress(TEXT.encode())[:60], "path", ".json.gz", embeddable=False),
        Case("gz-of-junk", gzip.compress(b"{junk"), "path", ".json.gz", embeddable=False),
        Case("not-gz", TEXT.encode(), "path", ".json.gz", embeddable=False),
    ]
    return cases


CASES = corpus()
IDS = [c.name for c in CASES]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("malformed")
    out = {}
    for c in CASES:
        p = d / f"{c.name}{c.suffix}"
        p.write_bytes(c.data)
        out[c.name] = p
    (d / "ok-schedule.json").write_text('{"jobs": {}}')
    return out


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([str(a) for a in argv])
    return code, err.getvalue()


def _strict(text: str):
    """Parse as strict JSON: NaN and infinities are errors, as they are for every JSON client."""
    def refuse(literal):
        raise ValueError(f"{literal} in a response body")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_python_api_refuses(files, case):
    with pytest.raises(InputError) as info:
        load_instance(files[case.name])
    assert info.value.field.startswith(case.field), str(info.value)
    json.dumps(info.value.to_dict(), allow_nan=False).encode("utf-8")  # an error always serialises


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("verb", ["solve", "check", "validate", "export"])
def test_cli_exits_2_naming_the_field(files, case, verb):
    args = {"solve": ["--method", "heuristic", "--time-limit", "0.2"], "check": [files[case.name].parent / "ok-schedule.json"],
            "validate": [files[case.name].parent / "ok-schedule.json", "--time-limit", "0.2"], "export": []}[verb]
    code, err = _cli(verb, files[case.name], *args)
    assert code == 2, err
    assert "Traceback" not in err and err.startswith("optsched: bad input: ")
    assert case.field in err
    err.encode("utf-8")  # printable on any UTF-8 terminal: no lone surrogate reaches stderr


@pytest.fixture(scope="module")
def http() -> TestClient:
    # no lifespan: the pool does not start; every request below is refused before it would be queued
    return TestClient(create_app(ServiceConfig(workers=1, max_body_mb=1.0)))


def _body(case: Case, kind: str) -> bytes:
    inner = {"check": b', "schedule": {"jobs": {}}}', "solve": b', "time_limit": 0.5}',
             "validate": b', "decision": {"jobs": {}}}'}[kind]
    return b'{"instance": ' + case.data + inner


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("route", ["check", "solve", "validate"])
def test_http_answers_422_with_strict_json(http, case, route):
    body = _body(case, route) if case.embeddable else case.data
    r = http.post(f"/v1/{route}", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    doc = _strict(r.text)
    assert doc["error"] == "bad_input"
    if case.embeddable and case.field not in ("path", "body"):
        assert doc["field"].startswith(f"instance.{case.field}"), doc
        # the same refusal as the CLI and the Python API: field and problem
        with pytest.raises(InputError) as info:
            load_instance(io_path(case))
        assert doc["problem"] == info.value.problem


def io_path(case: Case) -> Path:
    """The case written to a temporary file (the Python API's view of it)."""
    import tempfile

    d = Path(tempfile.mkdtemp())
    p = d / f"{case.name}{case.suffix}"
    p.write_bytes(case.data)
    return p


@pytest.mark.parametrize("value", [True, "1", 1.0, 2, 0, None])
def test_version_is_the_integer_everywhere(http, value):
    """``"version": true`` (== 1 in Python) is refused over HTTP as by ``Instance.from_dict``."""
    doc = json.loads(TEXT)
    doc["version"] = value
    with pytest.raises(InputError) as info:
        Instance.from_dict(doc)
    r = http.post("/v1/check", json={"instance": doc, "schedule": {"jobs": {}}})
    assert r.status_code == 422 and r.json()["field"] == "instance.version" and r.json()["problem"] == info.value.problem


def test_http_accepts_what_the_contract_accepts(http):
    for f in sorted((ROOT / "instances" / "tiny").glob("*.json")):
        r = http.post("/v1/check", json={"instance": json.loads(f.read_text()), "schedule": {"jobs": {}}})
        assert r.status_code == 200, (f.name, r.text)


def test_bom_is_skipped():
    """A UTF-8 byte-order mark (Windows editors write one) is not an error."""
    from optsched.io import parse_json

    assert parse_json(b"\xef\xbb\xbf" + TEXT.encode()) == DOC


def test_depth_limit_names_the_depth():
    from optsched.io import parse_json
    from optsched.limits import MAX_DEPTH

    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    parse_json(ok)
    with pytest.raises(InputError) as info:
        parse_json("[" + ok + "]")
    assert str(MAX_DEPTH) in info.value.problem and "[0]" * MAX_DEPTH in info.value.field


def test_paired_surrogates_are_text():
    from optsched.io import parse_json

    assert parse_json('{"a": "\\ud83d\\ude00"}') == {"a": "\U0001f600"}


def test_error_echo_is_json_serialisable():
    for value in (float("nan"), float("inf"), -float("inf"), "\udc80", 10**5000, [float("nan")], "x" * 1000):
        e = InputError("f\udc80", value, "bad \ud800")
        text = json.dumps(e.to_dict(), allow_nan=False)
        text.encode("utf-8")
        str(e).encode("utf-8")


# --- the service's own guards: body cap, token -------------------------------------------------


def test_body_cap_413_names_the_limit(http):
    big = b'{"instance": "' + b"x" * (1 << 20) + b'"}'
    r = http.post("/v1/check", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "1 MB" in r.json()["message"] and r.json()["error"] == "too_large"

    def chunks():  # no Content-Length: counted as it arrives
        yield b'{"instance": "'
        for _ in range(40):
            yield b"x" * 32768
        yield b'"}'

    r = http.post("/v1/check", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_token_required_when_configured():
    app = create_app(ServiceConfig(workers=1, token="s3cret-token"))
    c = TestClient(app)
    body = {"instance": DOC, "schedule": {"jobs": {}}}
    assert c.post("/v1/check", json=body).status_code == 401
    r = c.post("/v1/check", json=body, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer" and r.json()["error"] == "unauthorized"
    assert c.post("/v1/check", json=body, headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
    assert c.get("/v1/methods").status_code == 401
    assert c.get("/v1/methods", headers={"Authorization": "bearer s3cret-token"}).status_code == 200


def _serve_args(*argv: str):
    from optsched.cli import build_parser

    return build_parser().parse_args(["serve", *argv])


def test_serve_refuses_open_bind_without_token(monkeypatch):
    from optsched.commands.serve import service_config

    monkeypatch.delenv("OPTSCHED_TOKEN", raising=False)
    monkeypatch.delenv("OPTSCHED_MAX_BODY_MB", raising=False)
    with pytest.raises(InputError) as info:
        service_config(_serve_args("--host", "0.0.0.0"))
    assert info.value.field == "--host" and "--insecure" in info.value.problem
    assert service_config(_serve_args("--host", "0.0.0.0", "--insecure")).token is None
    assert service_config(_serve_args("--host", "0.0.0.0", "--token", "abc")).token == "abc"
    assert service_config(_serve_args("--host", "::1")).token is None
    assert service_config(_serve_args()).max_body_mb == 16.0
    monkeypatch.setenv("OPTSCHED_TOKEN", "from-env")
    monkeypatch.setenv("OPTSCHED_MAX_BODY_MB", "2.5")
    cfg = service_config(_serve_args("--host", "10.0.0.1"))
    assert cfg.token == "from-env" and cfg.max_body_mb == 2.5 and "from-env" not in repr(cfg)
    assert service_config(_serve_args("--max-body-mb", "3")).max_body_mb == 3.0
    with pytest.raises(InputError, match="--max-body-mb"):
        service_config(_serve_args("--max-body-mb", "-1"))
