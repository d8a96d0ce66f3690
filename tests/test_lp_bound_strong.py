"""The strengthened pooled LP bounds (staying and whole-node variants): valid and never looser.

``pooled`` / ``type`` are the strengthened relaxations, ``pooled-plain`` / ``type-plain`` the
models before (formulations/mip.md, "LP bounds"). On random tiny rounds each strengthened bound
is at least the brute-force optimum and at most its plain counterpart; on hand-built rounds the
staying rows and the whole-node variants each cut, so dropping either fails a test.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.mip.bound import lp_bound
from optsched.model import Instance
from tests.bruteforce import brute_force
from tests.strategies import tiny_instance_dicts

REL = 1e-6


@st.composite
def gang_rounds(draw) -> Instance:
    """Tiny rounds where gangs can fill nodes: one GPU count per type, jobs of 1, G or 2G GPUs,
    running jobs placed node by node (so some stay on nodes they fill)."""
    d = draw(tiny_instance_dicts(max_nodes=3, max_jobs=4))
    per_type = {t: draw(st.integers(1, 2)) for t in ("A", "B")}
    for n in d["nodes"]:
        n["gpus"] = per_type[n["gpu_type"]]
        n["cpus"] = max(n["cpus"], draw(st.integers(0, 8)))
    for job in d["jobs"]:
        had = job.pop("placement", None)
        g = draw(st.sampled_from([1, 2, 4]))
        job["gpus"] = g
        if had is None:
            continue
        t = next(n["gpu_type"] for n in d["nodes"] if n["id"] in had)
        place, left = {}, g
        for n in d["nodes"]:
            if n["gpu_type"] == t and left:
                place[n["id"]] = take = min(left, n["gpus"])
                left -= take
        if left == 0:
            job["placement"] = place
    return Instance.from_dict(d)


def _check(inst: Instance) -> None:
    best, _ = brute_force(inst)
    for strong, plain in (("pooled", "pooled-plain"), ("type", "type-plain")):
        s, p = lp_bound(inst, relaxation=strong), lp_bound(inst, relaxation=plain)
        assert s >= best - REL * max(1.0, best), (strong, s, best)
        assert s <= p + REL * max(1.0, p), (strong, s, p)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.builds(Instance.from_dict, tiny_instance_dicts(max_nodes=3, max_jobs=4)))
def test_strengthened_bounds_are_valid_and_tighter_on_random_rounds(inst: Instance) -> None:
    _check(inst)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gang_rounds())
def test_strengthened_bounds_are_valid_and_tighter_on_gang_rounds(inst: Instance) -> None:
    _check(inst)


def _round(nodes: list[tuple[str, int, int, int]], jobs: list[dict]) -> Instance:
    return Instance.from_dict({
        "version": 1, "name": "hand", "round": {"duration_s": 300, "fair": False},
        "nodes": [{"id": i, "gpu_type": "A", "gpus": g, "cpus": c, "mem_gb": m} for i, g, c, m in nodes],
        "jobs": jobs,
    })


def _job(jid: str, gpus: int, mem: list[int], thr: list[float], **kw) -> dict:
    return {"id": jid, "gpus": gpus, "profile": {"cpus_per_gpu": [1], "mem_per_gpu_gb": mem, "throughput": [thr]},
            "demand": {"cpus_per_gpu": 1, "mem_per_gpu_gb": mem[0]}, **kw}


def test_staying_jobs_share_only_their_node() -> None:
    """Two running jobs on a 100 GB node, each worth 2 at 90 GB and 1 at 10 GB, moving costs 90 %:
    the plain pool lets both stay at 90 GB on the other node's memory (4); staying, they fit 90 + 10 (3)."""
    restart = {"restart_s": 270, "placement": {"n0": 1}}
    inst = _round([("n0", 2, 8, 100), ("n1", 2, 8, 100)], [_job("r0", 1, [10, 90], [1.0, 2.0], **restart), _job("r1", 1, [10, 90], [1.0, 2.0], **restart)])
    best, _ = brute_force(inst)
    assert abs(best - 3.0) < 1e-9
    for strong, plain in (("pooled", "pooled-plain"), ("type", "type-plain")):
        assert abs(lp_bound(inst, relaxation=plain) - 4.0) < 1e-6
        assert abs(lp_bound(inst, relaxation=strong) - 3.0) < 1e-6


def test_a_gang_on_whole_nodes_takes_their_memory() -> None:
    """A 2-GPU gang on 2-GPU nodes of 60 GB takes a whole node's 60 GB, not its 20: the plain pool
    gives the two small jobs 50 GB each (4.0), the whole-node variant leaves them 60 GB (3.5, the optimum)."""
    inst = _round(
        [("n0", 2, 4, 60), ("n1", 2, 4, 60)],
        [_job("g", 2, [10], [1.0], spread_factor=0.1), _job("s1", 1, [10, 50], [1.0, 1.5]), _job("s2", 1, [10, 50], [1.0, 1.5])],
    )
    best, _ = brute_force(inst)
    assert abs(best - 3.5) < 1e-9
    for strong, plain in (("pooled", "pooled-plain"), ("type", "type-plain")):
        assert abs(lp_bound(inst, relaxation=plain) - 4.0) < 1e-6
        assert abs(lp_bound(inst, relaxation=strong) - 3.5) < 1e-6


def test_the_lp_s_time_limit_counts_its_building():
    """A time limit spent before the LP is built does not start the solve (lp_bound_within's
    callers then take the knapsack bound), and a sufficient one gives the bound."""
    import pytest

    from optsched.gen import generate

    inst = generate(nodes=8, jobs=24, seed=3)
    with pytest.raises(RuntimeError, match="no time left"):
        lp_bound(inst, relaxation="type", time_limit=1e-9)
    assert lp_bound(inst, relaxation="type", time_limit=60) >= lp_bound(inst, relaxation="full") - 1e-6
