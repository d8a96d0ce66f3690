"""Hypothesis strategies for valid tiny rounds, built from the contract (not via optsched.gen)."""

from __future__ import annotations

from hypothesis import strategies as st

from optsched.model import Instance


def _grid(draw, lo: int, hi: int) -> list[int]:
    return sorted(draw(st.sets(st.integers(lo, hi), min_size=1, max_size=3)))


@st.composite
def tiny_instance_dicts(draw, max_nodes: int = 3, max_jobs: int = 4) -> dict:
    """A valid round instance dict: tight capacities, small grids, optional running jobs, and now and
    then a grid point a rounding error slower than the demand's (which a fair round must refuse)."""
    types = ["A", "B"][: draw(st.integers(1, 2))]
    nodes = []
    for i in range(draw(st.integers(1, max_nodes))):
        nodes.append({"id": f"n{i}", "gpu_type": draw(st.sampled_from(types)),
                      "gpus": draw(st.integers(1, 4)), "cpus": draw(st.integers(0, 12)),
                      "mem_gb": draw(st.integers(0, 64))})
    jobs = []
    for i in range(draw(st.integers(1, max_jobs))):
        cg, mg = _grid(draw, 1, 4), _grid(draw, 4, 16)
        tp = [[draw(st.floats(0.5, 10.0)) for _ in mg] for _ in cg]
        dc, dm = draw(st.sampled_from(range(len(cg)))), draw(st.sampled_from(range(len(mg))))
        if draw(st.integers(0, 3)) == 0:  # a point a rounding error slower than the demand's
            a, b = draw(st.sampled_from(range(len(cg)))), draw(st.sampled_from(range(len(mg))))
            if (a, b) != (dc, dm):
                tp[a][b] = tp[dc][dm] * (1 - 1e-13)
        job = {"id": f"j{i}", "gpus": draw(st.integers(1, 4)),
               "weight": draw(st.floats(0.1, 3.0)),
               "profile": {"cpus_per_gpu": cg, "mem_per_gpu_gb": mg, "throughput": tp},
               "demand": {"cpus_per_gpu": cg[dc], "mem_per_gpu_gb": mg[dm]},
               "spread_factor": draw(st.floats(0.05, 1.0)),
               "restart_s": draw(st.integers(0, 200))}
        if draw(st.booleans()):
            allowed = draw(st.sets(st.sampled_from(types), min_size=1))
            job["gpu_speed"] = {t: draw(st.floats(0.3, 1.5)) for t in sorted(allowed)}
        allowed_types = set(job.get("gpu_speed", {t: 1 for t in types}))
        same = [n for n in nodes if n["gpu_type"] in allowed_types]
        if same and draw(st.booleans()):
            t = draw(st.sampled_from(sorted({n["gpu_type"] for n in same})))
            pool = [n for n in same if n["gpu_type"] == t]
            place: dict[str, int] = {}
            left = job["gpus"]
            for n in pool:
                take = min(left, n["gpus"], draw(st.integers(0, left)))
                if take:
                    place[n["id"]] = take
                    left -= take
            if left == 0:
                job["placement"] = place
        jobs.append(job)
    # version 1 counts a gang's spread from one node, version 3 from the fewest nodes that hold it
    return {"version": draw(st.sampled_from([1, 3])), "name": "hyp", "round": {"duration_s": 300, "fair": draw(st.booleans())},
            "nodes": nodes, "jobs": jobs}


def tiny_instances(**kw) -> st.SearchStrategy[Instance]:
    """Tiny valid Instances (brute-force sized)."""
    return tiny_instance_dicts(**kw).map(Instance.from_dict)


def draw_two_tenants(draw, d: dict) -> None:
    """Give the round dict ``d`` tenants ``a`` and ``b`` with quotas summing to at most its GPUs,
    and each job tenant a, b or none."""
    total = sum(n["gpus"] for n in d["nodes"])
    qa = draw(st.integers(0, total))
    d["round"]["tenants"] = {"a": {"quota_gpus": qa}, "b": {"quota_gpus": draw(st.integers(0, total - qa))}}
    for j in d["jobs"]:
        t = draw(st.sampled_from(["a", "b", None]))
        if t is not None:
            j["tenant"] = t


@st.composite
def elastic_rounds(draw, policies: bool = False):
    """Tiny contract-v2 rounds with elastic jobs (each listing its current size when running);
    with ``policies``, tenant quotas and/or a move budget too."""
    d = draw(tiny_instance_dicts(max_nodes=2, max_jobs=3))
    d["version"] = 2 if d["version"] == 1 else 3  # the policy fields of version 2, spread from one node or (3) the fewest
    for j in d["jobs"]:
        if not draw(st.booleans()):
            continue
        held = sum(j["placement"].values()) if "placement" in j else j["gpus"]
        sizes = sorted(draw(st.sets(st.integers(1, 4), min_size=0, max_size=2)) | {held})
        factors = sorted(draw(st.lists(st.floats(0.2, 3.0), min_size=len(sizes), max_size=len(sizes))))
        nominal = draw(st.sampled_from(range(len(sizes))))
        j["gpus"] = sizes[nominal]
        j["elastic"] = {"gpus": sizes, "scaling": [f / factors[nominal] for f in factors]}
    if not any("elastic" in j for j in d["jobs"]):
        d["jobs"][0]["elastic"] = {"gpus": [d["jobs"][0]["gpus"]], "scaling": [1.0]}
    if policies:
        if draw(st.booleans()):
            draw_two_tenants(draw, d)
        if draw(st.booleans()) or "tenants" not in d["round"]:
            d["round"]["max_moves"] = draw(st.integers(0, 1))
    return Instance.from_dict(d)


def wide_gang_round() -> Instance:
    """Six 2-GPU nodes and a 10-GPU gang that needs five of them: more than ``TAIL`` nodes."""
    return Instance.from_dict({
        "version": 3, "name": "wide", "round": {"duration_s": 300, "fair": False, "spread_from": "fewest"},
        "nodes": [{"id": f"n{i}", "gpu_type": "A", "gpus": 2, "cpus": 8, "mem_gb": 64} for i in range(6)],
        "jobs": [{"id": "gang", "gpus": 10, "weight": 1.0, "spread_factor": 0.9,
                  "profile": {"cpus_per_gpu": [1, 4], "mem_per_gpu_gb": [16], "throughput": [[1.0], [1.5]]},
                  "demand": {"cpus_per_gpu": 1, "mem_per_gpu_gb": 16}},
                 {"id": "one", "gpus": 1, "weight": 0.2,
                  "profile": {"cpus_per_gpu": [1, 4], "mem_per_gpu_gb": [16], "throughput": [[1.0], [1.2]]},
                  "demand": {"cpus_per_gpu": 1, "mem_per_gpu_gb": 16}}]})
