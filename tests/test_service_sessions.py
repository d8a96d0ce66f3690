"""Round chains over HTTP (optsched.service.sessions): a real server, a real client."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from test_service import serving

from optsched import Instance, check_schedule
from optsched.errors import InputError
from optsched.service import ServiceConfig
from optsched.service.sessions import SessionStore

ROOT = Path(__file__).resolve().parents[1]
TINY = json.loads((ROOT / "instances" / "tiny" / "t-2n-6j-01.json").read_text())


def test_a_session_round_trip_reuses_an_identical_round_and_forgets_on_delete():
    with serving(ServiceConfig(workers=1, queue=2, max_time_limit=1.5, default_time_limit=0.5)) as url, \
            httpx.Client(base_url=url, timeout=60) as client:
        first = client.post("/v1/sessions/cluster-a/solve", json={"instance": TINY, "time_limit": 1.0})
        assert first.status_code == 200, first.text
        body = first.json()
        assert body["session_id"] == "cluster-a" and body["incremental"] in ("cold", "carried", "searched")
        inst = Instance.from_dict(TINY)
        assert not check_schedule(inst, {"instance": inst.name, "jobs": body["jobs"]})
        again = client.post("/v1/sessions/cluster-a/solve", json={"instance": TINY, "time_limit": 1.0}).json()
        assert again["incremental"] == "reused" and again["jobs"] == body["jobs"]
        other = client.post("/v1/sessions/cluster-b/solve", json={"instance": TINY, "time_limit": 1.0}).json()
        assert other["incremental"] != "reused"  # sessions do not share state
        assert client.delete("/v1/sessions/cluster-a").json() == {"session_id": "cluster-a", "deleted": True}
        assert client.delete("/v1/sessions/cluster-a").json()["deleted"] is False
        after = client.post("/v1/sessions/cluster-a/solve", json={"instance": TINY, "time_limit": 1.0}).json()
        assert after["incremental"] != "reused"
        bad = client.post("/v1/sessions/no%20spaces/solve", json={"instance": TINY})
        assert bad.status_code == 422
        greedy = client.post("/v1/sessions/x/solve", json={"instance": TINY, "solver": "fungible-greedy"})
        assert greedy.status_code == 422 and greedy.json()["field"] == "solver"
        typo = client.post("/v1/sessions/x/solve", json={"instance": TINY, "gap_targt": 0.01})
        assert typo.status_code == 422 and typo.json()["field"] == "gap_targt"


def test_a_session_reports_the_solver_family_and_never_reuses_another_solvers_round():
    with serving(ServiceConfig(workers=1, queue=2, max_time_limit=1.5, default_time_limit=0.5)) as url, \
            httpx.Client(base_url=url, timeout=60) as client:
        def solve(**extra):
            r = client.post("/v1/sessions/s/solve", json={"instance": TINY, "time_limit": 1.0, **extra})
            assert r.status_code == 200, r.text
            return r.json()

        lns = solve(solver="lns")
        assert (lns["solver"], lns["method"]) == ("lns", "heuristic")  # as /v1/solve reports it, however answered
        again = solve(solver="lns")
        assert again["incremental"] == "reused" and again["method"] == "heuristic"
        # another solver starts afresh (a first round: cold, or carried when the greedy start is proven good enough)
        maifs = solve(solver="maifs")
        assert maifs["incremental"] != "reused" and (maifs["solver"], maifs["method"]) == ("maifs", "learned")
        cpsat = solve(solver="cpsat")
        assert cpsat["incremental"] != "reused" and (cpsat["solver"], cpsat["method"]) == ("cpsat", "exact")
        assert solve(solver="cpsat")["incremental"] == "reused"
        assert solve(solver="lns")["incremental"] != "reused"  # the session held cpsat's round, not lns's
        assert solve(solver="lns", gap_target=0.0)["incremental"] != "reused"  # another gap target: another chain
        assert solve(solver="lns", gap_target=0.0)["incremental"] == "reused"


def test_the_store_is_bounded_least_recently_used_first_and_forgets_after_its_ttl():
    now = [0.0]
    store = SessionStore(max_sessions=2, ttl_s=10.0, clock=lambda: now[0])
    store.put("a", {"k": 1})
    store.put("b", {"k": 2})
    assert store.get("a") == {"k": 1}  # a is now the most recently used
    store.put("c", {"k": 3})
    assert store.get("b") is None and len(store) == 2  # b was evicted
    now[0] = 5.0
    assert store.get("c") == {"k": 3}
    now[0] = 12.0  # a last used at 0, c at 5
    assert store.get("a") is None and store.get("c") == {"k": 3}
    now[0] = 30.0
    assert len(store) == 0
    with pytest.raises(InputError, match="max_sessions"):
        SessionStore(max_sessions=0)
