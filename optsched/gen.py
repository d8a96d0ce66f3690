"""Random, valid round instances: clusters, job mixes and running jobs, deterministic by seed.

``generate(8, 32, seed=1)`` is a small, tight round: 8 servers of 8 V100s, 48 cores and 500 GB,
32 jobs with Philly's job-size mix and catalogue models (:mod:`optsched.catalogue`). Fair shares
(3 cores, 62 GB per GPU) fill a server's memory, and the CPU-hungry image models want 9-12 cores
per GPU where a server has 6: CPU and memory are what the jobs fight over. ``tightness`` makes
GPUs scarce too (the size classes use 1.25: a quarter more GPUs demanded than exist). ``generate_suite`` builds the size
classes the benchmark library uses (tiny ... huge).

Every instance is valid by construction (the model's own validation runs on it), and the
same arguments always give the same instance: all randomness comes from one
``numpy.random.Generator`` seeded with ``seed``, drawn in a fixed order.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from optsched import catalogue
from optsched.elastic import elastic_spec
from optsched.errors import InputError
from optsched.limits import (
    MAX_FACTOR,
    MAX_GEN_COUNT,
    MAX_NODES,
    MAX_ROUND_JOBS,
    MAX_SECONDS,
    check_at_most,
    check_count,
    share_total,
)
from optsched.model import Instance, Job, Node, Round

__all__ = [
    "PHILLY_JOB_SIZES",
    "SIZE_CLASSES",
    "SizeClass",
    "generate",
    "generate_suite",
    "iter_suite",
    "place_at_demand",
]

#: GPUs per job in Microsoft's Philly trace (Jeon et al., ATC'19): share of jobs by gang size
PHILLY_JOB_SIZES: Mapping[int, float] = MappingProxyType({1: 0.932, 2: 0.022, 4: 0.023, 8: 0.020, 16: 0.003})


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _range(name: str, v: Any, lo: float, hi: float, *, lo_open: bool = False) -> tuple[float, float]:
    """A ``(low, high)`` pair (or one number, meaning both) inside ``[lo, hi]``."""
    pair = (v, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise InputError(name, v, "must be a number or a (low, high) pair")
    a, b = pair
    for x in (a, b):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise InputError(name, v, "must hold finite numbers")
        if x > hi or x < lo or (lo_open and x == lo):
            raise InputError(name, v, f"must lie in {'(' if lo_open else '['}{lo}, {hi}]")
    if a > b:
        raise InputError(name, v, "low must not exceed high")
    return float(a), float(b)


def _type_counts(nodes: int, gpu_types: Sequence[str] | Mapping[str, float]) -> list[tuple[str, int]]:
    """Nodes per GPU type: a sequence is split evenly, a mapping by its weights (largest remainder)."""
    if isinstance(gpu_types, str):
        gpu_types = (gpu_types,)
    if isinstance(gpu_types, Mapping):
        items = list(gpu_types.items())
    elif isinstance(gpu_types, (list, tuple)):
        items = [(t, 1.0) for t in gpu_types]
    else:
        raise InputError("gpu_types", gpu_types, "must be a list of GPU types or a mapping type -> share")
    if not items:
        raise InputError("gpu_types", gpu_types, "must name at least one GPU type")
    known = catalogue.GPU_SPEEDS["image"]
    for t, w in items:
        if t not in known:
            raise InputError("gpu_types", t, f"unknown GPU type; known: {sorted(known)}")
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise InputError(f"gpu_types.{t}", w, "must be a finite share >= 0")
    total = share_total("gpu_types", dict(items), (w for _, w in items))
    if total <= 0:
        raise InputError("gpu_types", gpu_types, "must give some type a positive share")
    exact = [nodes * w / total for _, w in items]
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(items)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: nodes - sum(counts)]:
        counts[i] += 1
    return [(items[i][0], counts[i]) for i in range(len(items)) if counts[i] > 0]


def _size_mix(job_sizes: Mapping[int, float], max_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(job_sizes, Mapping) or not job_sizes:
        raise InputError("job_sizes", job_sizes, "must map gang sizes to shares")
    sizes, shares = [], []
    for g, w in sorted(job_sizes.items()):
        if not _is_int(g) or g < 1:
            raise InputError("job_sizes", g, "gang sizes must be integers >= 1")
        check_count(f"job_sizes.{g}", g)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise InputError(f"job_sizes.{g}", w, "must be a finite share >= 0")
        if g <= max_gpus and w > 0:  # sizes that no GPU type can hold are dropped, the rest renormalised
            sizes.append(int(g))
            shares.append(float(w))
    if not sizes:
        raise InputError("job_sizes", dict(job_sizes), f"no gang size with a positive share fits the cluster's {max_gpus} GPUs of one type")
    share_total("job_sizes", dict(job_sizes), shares)
    p = np.array(shares)
    return np.array(sizes), p / p.sum()


def _tilt(sizes: np.ndarray, p: np.ndarray, mean: float) -> np.ndarray:
    """The mix closest to ``p`` (in KL divergence) whose mean gang size is ``mean``: the
    exponential tilt ``p(s) exp(theta s)``, with ``theta`` found by bisection."""
    x = sizes.astype(float)

    def tilted(theta: float) -> np.ndarray:
        w = np.log(np.maximum(p, 1e-300)) + theta * x
        w = np.exp(w - w.max()) * (p > 0)
        return w / w.sum()

    lo, hi = -50.0, 50.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if float(tilted(mid) @ x) < mean:
            lo = mid
        else:
            hi = mid
    return tilted((lo + hi) / 2)


def _draw_sizes(rng: np.random.Generator, jobs: int | None, tightness: float | None, capacity: int,
                sizes: np.ndarray, p: np.ndarray) -> list[int]:
    """Gang sizes: ``jobs`` draws from the mix; with ``tightness``, sizes whose total is
    ``round(tightness x capacity)``: drawn until reached, or, with ``jobs`` fixed too, drawn from
    the mix tilted to the mean that the target needs, then moved one rung at a time up or down
    the size ladder until the total is hit exactly (or as close as the ladder allows)."""
    if tightness is None:
        return [int(s) for s in rng.choice(sizes, size=jobs, p=p)]
    target = max(1, round(tightness * capacity))
    if jobs is None:
        out: list[int] = []
        total = 0
        while total < target:
            out.append(int(rng.choice(sizes, p=p)))
            total += out[-1]
        if len(out) > 1 and abs(sum(out) - out[-1] - target) < abs(sum(out) - target):
            out.pop()
        return out
    if not jobs * sizes[0] <= target <= jobs * sizes[-1]:
        raise InputError("tightness", tightness, f"{jobs} jobs of {sizes.tolist()} GPUs cannot demand {target} GPUs")
    out = [int(s) for s in rng.choice(sizes, size=jobs, p=_tilt(sizes, p, target / jobs))]
    ladder = sizes.tolist()
    total = sum(out)
    best = (abs(total - target), list(out))
    for _ in range(8 * jobs + 16):
        if total == target:
            break
        # move one job one rung up (or down) the ladder toward the target, never past it; when no
        # such move exists, take the smallest move past it and come back with smaller rungs
        up = total < target
        moves = [(i, ladder[ladder.index(s) + (1 if up else -1)]) for i, s in enumerate(out)
                 if (s < ladder[-1] if up else s > ladder[0])]
        inside = [(i, new) for i, new in moves if abs(new - out[i]) <= abs(target - total)]
        if inside:
            i, new = inside[int(rng.integers(len(inside)))]
        elif moves:
            i, new = min(moves, key=lambda mv: (abs(mv[1] - out[mv[0]]), mv[0]))
        else:
            break
        total += new - out[i]
        out[i] = new
        if abs(total - target) < best[0]:
            best = (abs(total - target), list(out))
    if best[0] and jobs * (target + 1) <= 200_000:
        return _fewest_changes(best[1], ladder, target)
    return best[1]


def _fewest_changes(out: list[int], ladder: list[int], target: int) -> list[int]:
    """The sizes with total closest to ``target`` that change the fewest jobs of ``out``
    (dynamic programming over jobs x totals; only for the rare cases single-rung moves miss)."""
    cap = len(out) * ladder[-1]
    inf = len(out) + 1
    cost = [0] + [inf] * cap  # cost[s]: fewest changes so far to reach total s
    choice: list[list[int]] = []
    for s_old in out:
        new_cost = [inf] * (cap + 1)
        pick = [0] * (cap + 1)
        for total, c in enumerate(cost):
            if c >= inf:
                continue
            for size in ladder:
                t = total + size
                if t <= cap:
                    cc = c + (size != s_old)
                    if cc < new_cost[t]:
                        new_cost[t], pick[t] = cc, size
        cost = new_cost
        choice.append(pick)
    reachable = [t for t in range(cap + 1) if cost[t] < inf]
    total = min(reachable, key=lambda t: (abs(t - target), cost[t], t))
    sizes = []
    for k in range(len(out) - 1, -1, -1):
        size = choice[k][total]
        sizes.append(size)
        total -= size
    return sizes[::-1]


def place_at_demand(nodes: Sequence[Node], free: dict[str, list[int]], gpus: int, c: int, m: int,
                    allowed: Mapping[str, float] | None) -> dict[str, int] | None:
    """A placement of a ``gpus``-GPU gang at ``(c, m)`` per GPU into ``free`` capacity
    (node id -> [gpus, cpus, mem]) on one allowed GPU type, fewest nodes first (best fit on one
    node, else the emptiest nodes); ``free`` is updated. ``None`` when it does not fit."""
    by_type: dict[str, list[Node]] = {}
    for nd in nodes:
        if allowed is None or nd.gpu_type in allowed:
            by_type.setdefault(nd.gpu_type, []).append(nd)

    def room(nd: Node) -> int:
        g, cp, me = free[nd.id]
        return min(g, cp // c if c else g, me // m if m else g)

    best: dict[str, int] | None = None
    for _t, group in by_type.items():
        single = [nd for nd in group if room(nd) >= gpus]
        if single:
            nd = min(single, key=lambda x: (room(x), x.id))
            cand = {nd.id: gpus}
        else:
            left, cand = gpus, {}
            for nd in sorted(group, key=lambda x: (-room(x), x.id)):
                r = min(room(nd), left)
                if r > 0:
                    cand[nd.id] = r
                    left -= r
                if left == 0:
                    break
            if left:
                continue
        if best is None or len(cand) < len(best):
            best = cand
    if best is not None:
        for nid, k in best.items():
            free[nid][0] -= k
            free[nid][1] -= k * c
            free[nid][2] -= k * m
    return best


def generate(
    nodes: int,
    jobs: int | None,
    *,
    seed: int = 0,
    gpu_types: Sequence[str] | Mapping[str, float] = ("V100",),
    gpus_per_node: int = 8,
    cpus_per_node: int = 48,
    mem_per_node_gb: int = 500,
    rack_size: int = 8,
    job_sizes: Mapping[int, float] = PHILLY_JOB_SIZES,
    tightness: float | None = None,
    mix: Mapping[str, float] | None = None,
    fair: bool = False,
    running_fraction: float = 0.0,
    restart_s: float | tuple[float, float] = (30.0, 180.0),
    spread_factor: float | tuple[float, float] = (0.8, 0.95),
    weights: float | tuple[float, float] = (0.5, 2.0),
    restrict_fraction: float = 0.0,
    grid: str = "full",
    duration_s: float = 300.0,
    name: str | None = None,
    elastic_share: float = 0.0,
    spread_from: str = "fewest",
) -> Instance:
    """A random, valid round of ``nodes`` servers and ``jobs`` jobs, the same for the same arguments.

    - ``gpu_types``: types present, split evenly (a list) or by share (a mapping type -> share);
      every server has ``gpus_per_node`` GPUs, ``cpus_per_node`` cores and ``mem_per_node_gb`` GB.
    - ``job_sizes``: gang-size mix (default Philly's); sizes larger than the largest GPU type's
      total are dropped. ``tightness``: target ratio of demanded GPUs to cluster GPUs, hit
      exactly (``round(tightness x GPUs)``) whenever the job count and sizes allow: with
      ``jobs=None`` jobs are drawn until it is reached, with ``jobs`` given the gang sizes are
      drawn from the mix tilted to the needed mean, then adjusted.
    - ``mix``: catalogue model mix (model or family names -> weights); ``grid``: profile grid.
    - ``running_fraction``: share of jobs that run now; each gets a feasible placement at its
      demand (packed first-fit, fewest nodes) and a ``restart_s`` drawn from the range; jobs that
      no longer fit stay waiting.
    - ``spread_factor`` (multi-GPU jobs), ``weights`` (log-uniform) and ``restart_s``: a number
      or a ``(low, high)`` range drawn per job, rounded to 2 decimals (restart to whole seconds).
    - ``restrict_fraction``: share of jobs (on clusters with several types) allowed only one
      GPU type, one that can hold them.
    - ``elastic_share``: share of jobs that are elastic (contract v2, so the instance is version 2):
      sizes from a quarter to four times their gang in powers of two (at most the largest GPU
      type's total) with an Amdahl scaling curve per model (:func:`optsched.elastic.elastic_spec`).
      Drawn after everything else, so the rest of the instance is the same as with 0.
    - ``spread_from``: the round's spread rule, ``"fewest"`` (contract version 3: the spread
      factor is paid per node beyond the fewest a gang needs) or ``"one"`` (the meaning of
      versions 1 and 2, which the bundled library's rounds have).
    """
    Round(spread_from=spread_from)  # the contract's check, field name and all
    if not _is_int(nodes) or nodes < 1:
        raise InputError("nodes", nodes, "must be an integer >= 1")
    check_at_most("nodes", nodes, MAX_NODES, "nodes per round")
    if jobs is not None and (not _is_int(jobs) or jobs < 0):
        raise InputError("jobs", jobs, "must be an integer >= 0")
    if jobs is not None:
        check_at_most("jobs", jobs, MAX_ROUND_JOBS, "jobs per round")
    if jobs is None and tightness is None:
        raise InputError("jobs", jobs, "give a job count, a tightness, or both")
    if not _is_int(seed) or seed < 0:
        raise InputError("seed", seed, "must be an integer >= 0")
    for field_name, v, lo in (("gpus_per_node", gpus_per_node, 1), ("cpus_per_node", cpus_per_node, 0),
                              ("mem_per_node_gb", mem_per_node_gb, 0), ("rack_size", rack_size, 1)):
        if not _is_int(v) or v < lo:
            raise InputError(field_name, v, f"must be an integer >= {lo}")
        if field_name != "rack_size":  # a solver refuses a round with more (optsched.limits)
            check_count(field_name, v)
    if tightness is not None and (isinstance(tightness, bool) or not isinstance(tightness, (int, float))
                                  or not math.isfinite(tightness) or tightness <= 0):
        raise InputError("tightness", tightness, "must be a positive number (demanded / available GPUs)")
    for field_name, v in (("running_fraction", running_fraction), ("restrict_fraction", restrict_fraction),
                          ("elastic_share", elastic_share)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise InputError(field_name, v, "must be a share in [0, 1]")
    if not isinstance(fair, bool):
        raise InputError("fair", fair, "must be true or false")
    if isinstance(duration_s, bool) or not isinstance(duration_s, (int, float)) or not 0 < duration_s <= MAX_SECONDS:
        raise InputError("duration_s", duration_s, f"must be a positive number of seconds, at most {MAX_SECONDS:g}")
    restart = _range("restart_s", restart_s, 0.0, duration_s)
    spread = _range("spread_factor", spread_factor, 0.0, 1.0, lo_open=True)
    wts = _range("weights", weights, 0.0, MAX_FACTOR, lo_open=True)
    if grid not in catalogue.GRIDS:
        raise InputError("grid", grid, f"unknown profile grid; known: {list(catalogue.GRIDS)}")
    c_d, m_d = catalogue.FAIR_SHARE
    rng = np.random.default_rng(seed)

    # cluster
    node_list: list[Node] = []
    for t, count in _type_counts(nodes, gpu_types):
        for _ in range(count):
            i = len(node_list)
            node_list.append(Node(id=f"n{i}", gpu_type=t, gpus=gpus_per_node, cpus=cpus_per_node,
                                  mem_gb=mem_per_node_gb, rack=f"r{i // rack_size}"))
    per_type: dict[str, int] = {}
    for nd in node_list:
        per_type[nd.gpu_type] = per_type.get(nd.gpu_type, 0) + nd.gpus
    capacity = sum(per_type.values())

    # jobs: sizes, models, attributes -- always drawn in this order (determinism)
    sizes_arr, p = _size_mix(job_sizes, max(per_type.values()))
    if jobs is None and tightness is not None:  # jobs are drawn until the demand is met: about this many
        wanted = tightness * capacity / float(p @ sizes_arr)
        if wanted > MAX_ROUND_JOBS:
            raise InputError("tightness", tightness, f"asks for {tightness:g} x the cluster's {capacity:,} GPUs, about "
                                                     f"{wanted:,.0f} jobs; a round has at most {MAX_ROUND_JOBS:,} jobs")
    sizes = _draw_sizes(rng, jobs, tightness, capacity, sizes_arr, p)
    n = len(sizes)
    models = catalogue.sample_models(rng, n, mix)
    weight_draw = np.exp(rng.uniform(math.log(wts[0]), math.log(wts[1]), size=n))
    spread_draw = rng.uniform(spread[0], spread[1], size=n)
    restart_draw = rng.uniform(restart[0], restart[1], size=n)
    restrict_draw = rng.random(n)
    pick_draw = rng.random(n)
    running_order = rng.permutation(n)
    elastic_draw = rng.random(n) if elastic_share > 0 else np.ones(n)
    types = list(per_type)

    job_list: list[Job] = []
    for i, (g, model) in enumerate(zip(sizes, models, strict=True)):
        speeds = catalogue.gpu_speeds(model, types)
        if len(types) > 1 and restrict_draw[i] < restrict_fraction:
            fitting = [t for t in types if per_type[t] >= g]  # never empty: sizes fit the largest type
            t = fitting[min(int(pick_draw[i] * len(fitting)), len(fitting) - 1)]
            speeds = {t: speeds[t]}
        job_list.append(Job(
            id=f"j{i}", gpus=g, profile=catalogue.profile(model, g, grid=grid), demand=(c_d, m_d),
            weight=round(float(weight_draw[i]), 2) or 0.01, model=model,
            gpu_speed=speeds if len(types) > 1 or speeds.get(types[0], 1.0) != 1.0 else None,
            spread_factor=round(float(spread_draw[i]), 2) if g > 1 else 1.0,
            elastic=elastic_spec(model, g, max(per_type.values())) if elastic_draw[i] < elastic_share else None,
        ))

    # running jobs: a feasible placement at demand, packed into the cluster in random order
    n_running = round(running_fraction * n)
    if n_running:
        free = {nd.id: [nd.gpus, nd.cpus, nd.mem_gb] for nd in node_list}
        placed = 0
        for i in running_order:
            if placed == n_running:
                break
            j = job_list[i]
            where = place_at_demand(node_list, free, j.gpus, c_d, m_d, j.gpu_speed)
            if where is None:
                continue
            job_list[i] = Job(**{**_fields(j), "placement": where, "restart_s": float(round(restart_draw[i]))})
            placed += 1

    inst_name = name or f"gen-{nodes}n-{n}j-s{seed}"
    return Instance(name=inst_name, nodes=tuple(node_list), jobs=tuple(job_list),
                    round=Round(duration_s=duration_s, fair=fair, spread_from=spread_from))


def _fields(job: Job) -> dict[str, Any]:
    return {f: getattr(job, f) for f in ("id", "gpus", "profile", "demand", "weight", "model", "gpu_speed",
                                          "spread_factor", "placement", "restart_s", "elastic")}


# --- size classes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeClass:
    """A benchmark size class: name prefix, ``(nodes, jobs)`` shapes and generator options."""

    name: str
    prefix: str
    shapes: tuple[tuple[int, int], ...]
    options: Mapping[str, Any]


#: the library's size classes ("small", "medium" and "large" rounds, plus tiny and huge); their
#: rounds are contract version 1 (spread paid per node beyond one), as the bundled files are
SIZE_CLASSES: Mapping[str, SizeClass] = MappingProxyType({
    "tiny": SizeClass("tiny", "t", ((2, 4), (2, 6), (3, 6)), MappingProxyType({
        "grid": "minimal", "gpus_per_node": 4, "cpus_per_node": 24, "mem_per_node_gb": 250, "tightness": 1.25, "spread_from": "one"})),
    "small": SizeClass("small", "s", ((4, 12), (8, 24), (8, 32)), MappingProxyType({"tightness": 1.25, "spread_from": "one"})),
    "medium": SizeClass("medium", "m", ((32, 120), (64, 256)), MappingProxyType({"tightness": 1.25, "spread_from": "one"})),
    "large": SizeClass("large", "l", ((256, 1000), (1024, 4000)), MappingProxyType({"grid": "coarse", "spread_from": "one"})),
    "huge": SizeClass("huge", "h", ((2048, 8000),), MappingProxyType({"grid": "coarse", "spread_from": "one"})),
})


def generate_suite(size_class: str, count: int = 1, *, seed: int = 0, **options: Any) -> list[Instance]:
    """``count`` instances per shape of ``size_class``, named ``<prefix>-<nodes>n-<jobs>j-<k>``
    (e.g. ``s-4n-12j-01``), instance ``k`` of a shape drawn with seed ``seed + k``. ``options``
    override the class's generator options."""
    return list(iter_suite(size_class, count, seed=seed, **options))


def iter_suite(size_class: str, count: int = 1, *, seed: int = 0, **options: Any) -> Iterator[Instance]:
    """:func:`generate_suite`'s instances one at a time (the arguments are checked at the call)."""
    if size_class not in SIZE_CLASSES:
        raise InputError("size_class", size_class, f"unknown size class; known: {list(SIZE_CLASSES)}")
    if not _is_int(count) or count < 1:
        raise InputError("count", count, "must be an integer >= 1")
    check_at_most("count", count, MAX_GEN_COUNT, "instances per shape")
    sc = SIZE_CLASSES[size_class]
    opts = {**sc.options, **options}
    return (generate(nodes, jobs, seed=seed + k, name=f"{sc.prefix}-{nodes}n-{jobs}j-{k:02d}", **opts)
            for nodes, jobs in sc.shapes for k in range(1, count + 1))
