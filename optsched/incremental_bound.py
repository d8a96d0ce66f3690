"""The most the pinned jobs of a round can be worth together: an exact bound over their grid points.

A pinned job (``preemptible`` false and running) keeps its nodes and GPU counts, so all that is
left to choose is its grid point ``(c, m)``, one point for all its GPUs on every node it spans,
and its worth there is known exactly (no restart, the spread of the nodes it holds). The pinned
jobs share each node's cores and memory. Nodes linked by a pinned gang that spans them form a
*component*; components share nothing, so the pinned jobs' best total is the sum over components
of each one's optimum:

    P(K) = max  sum_{j in K} f_j(p_j)
           s.t. sum_{j on n} g_jn c(p_j) <= C_n,  sum_{j on n} g_jn m(p_j) <= M_n   (each node n of K)

solved here exactly: for each node a dynamic programme over its (cores, memory) left gives the
best worth of the jobs pinned on it alone as a table ``V_n[c, m]``, and the points of the gangs
that link the nodes are enumerated together (``max_p sum_j f_j(p_j) + sum_n V_n[room left]``).
Two relaxations keep it cheap and keep it a bound: a node's cores or memory beyond
:data:`TABLE_CELLS` cells per axis are counted in units of ``u`` GB (each job's use rounded down,
the capacity too: ``sum floor(a_i / u) <= floor(sum a_i / u) <= floor(C / u)``, so every feasible
choice stays feasible), and where the gangs' joint points would exceed :data:`ENUM_LIMIT` (or
their number :data:`ENUM_AXES`) the least valuable gangs are cut into one independent copy per node, each worth its share
``g_jn / g_j`` of the gang's worth at the point it picks (a feasible choice gives every copy the
gang's point, so the cut problem's optimum is at least the real one).

Used by :func:`optsched.knapsack_bound.gpu_knapsack_bound`; ``formulations/incremental.md`` states
why the sum with the unpinned jobs' knapsack stays an upper bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from optsched.model import Instance, Job, fair_floor
from optsched.room import residual_nodes, spread_caps
from optsched.values import spread_multiplier

__all__ = ["ENUM_AXES", "ENUM_LIMIT", "FILL_CELLS", "FILL_WORK", "TABLE_CELLS", "alike_but_weight", "fill_bound", "node_ways",
           "pinned_worth_bound"]

#: most joint grid points of the gangs of one component that are enumerated (beyond: gangs are cut)
ENUM_LIMIT = 200_000
#: most gangs enumerated together (one array axis each)
ENUM_AXES = 24
#: most cells per axis of a node's (cores, memory) table (beyond: counted in coarser units)
TABLE_CELLS = 600


def _points(instance: Instance, job: Job, nodes: dict[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A pinned job's useful grid points as (cores per GPU, GB per GPU, throughput): those of its
    profile's frontier (:meth:`~optsched.job.Profile.frontier`) that fit each of its ``nodes``
    (index -> GPUs) alone (in a fair round, at least as fast as the demand). Filtering the
    frontier loses nothing: a point that dominates a fitting one fits too, and is as fast."""
    c, m, thr = job.profile.frontier()
    keep = thr >= fair_floor(job, instance.round.fair)
    for i, k in nodes.items():
        keep &= (c * k <= instance.nodes[i].cpus) & (m * k <= instance.nodes[i].mem_gb)
    out = c[keep], m[keep], thr[keep]
    for a in out:  # shared between rounds through the cache
        a.setflags(write=False)
    return out


def alike_but_weight(jobs: Iterable[Job]) -> list[list[Job]]:
    """``jobs`` grouped by everything but their weight that their worth at a grid point depends
    on (profile, GPUs, GPU speeds, spread factor, demand), each group heaviest first: of two jobs
    in one group, the heavier is worth no less at every point."""
    classes: dict[tuple[Any, ...], list[Job]] = {}
    for j in jobs:
        speeds = tuple(sorted(j.gpu_speed.items())) if j.gpu_speed is not None else None
        classes.setdefault((j.profile, j.gpus, speeds, j.spread_factor, j.demand_throughput), []).append(j)
    return [sorted(js, key=lambda j: -j.weight) for js in classes.values()]


class _Pinned:
    """One pinned job's choices: its nodes (index -> GPUs) and, per useful grid point
    (:func:`_points`), its cores and GB per GPU and its worth there."""

    __slots__ = ("c", "f", "gpus", "m", "nodes")

    def __init__(self, nodes: dict[int, int], points: tuple[np.ndarray, np.ndarray, np.ndarray], factor: float) -> None:
        self.nodes = nodes
        self.gpus = sum(nodes.values())
        self.c, self.m, thr = points
        self.f = factor * thr


def _factor(instance: Instance, job: Job) -> float:
    """A pinned job's worth per unit of throughput where it runs (weight, speed, spread, demand)."""
    t = instance.node(next(iter(job.placement or {}))).gpu_type
    return job.weight * (job.speed(t) or 0.0) * spread_multiplier(instance, job, t, len(job.placement or {})) / job.demand_throughput


def _components(placements: Sequence[Sequence[int]]) -> list[list[int]]:
    """The pinned jobs (each by its nodes) grouped by the components of nodes they link (union-find)."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for nodes in placements:
        first, *rest = nodes
        for n in rest:
            parent[root(n)] = root(first)
    groups: dict[int, list[int]] = {}
    for i, nodes in enumerate(placements):
        groups.setdefault(root(nodes[0]), []).append(i)
    return list(groups.values())


def _node_table(cpus: int, mem: int, units: tuple[int, int], items: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
                start: np.ndarray | None = None) -> np.ndarray:
    """``V[c, m]``: the most ``items`` (per item its options' cores, GB and worth; one option each)
    are worth within ``c`` units of cores and ``m`` of memory (``-inf`` where they do not fit),
    plus ``start[c', m']`` for what they leave (``start``: a table of the same shape, non-decreasing
    in both axes; zeros by default)."""
    uc, um = units
    cc, mm = cpus // uc, mem // um
    dp = np.zeros((cc + 1, mm + 1)) if start is None else start
    for wc, wm, f in items:
        new = np.full_like(dp, -np.inf)
        for a, b, v in zip((wc // uc).tolist(), (wm // um).tolist(), f.tolist(), strict=True):
            if a <= cc and b <= mm:
                np.maximum(new[a:, b:], dp[: cc + 1 - a, : mm + 1 - b] + v, out=new[a:, b:])
        dp = new
    return dp


#: most cells of the one-resource programmes of :func:`_node_best` (beyond: the node's table)
LINE_CELLS = 20_000
#: most ways :func:`_node_best` forms at a step before it builds the node's table instead
NODE_WAYS = 50_000


def _node_best(cpus: int, mem: int, items: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> float:
    """The most ``items`` (one option each) are worth on a node of ``cpus`` cores and ``mem`` GB
    (``-inf`` where they do not fit): exact, and cheaper than the node's table. It solves the
    programme with memory left out, then with cores left out (one axis each); where the choice of
    either fits the other resource too, that choice is optimal (an optimum of a relaxation that is
    feasible). Otherwise the node's useful ways (:func:`node_ways`, where they are few) or, failing
    that, the two-resource table (:func:`_node_table`) decide."""
    for axis, cap, other_cap in ((0, cpus, mem), (1, mem, cpus)):
        if cap >= LINE_CELLS:
            continue
        x = np.arange(cap + 1)
        dp = np.zeros(cap + 1)
        picks: list[np.ndarray] = []
        for item in items:
            w, f = item[axis], item[2]
            at = x[None, :] - w[:, None]
            cand = np.where(at >= 0, dp[np.maximum(at, 0)] + f[:, None], -np.inf)
            pick = cand.argmax(axis=0)
            dp = cand[pick, x]
            picks.append(pick)
        if not np.isfinite(dp[cap]):
            return -math.inf
        left, other = cap, 0
        for item, pick in zip(reversed(items), reversed(picks), strict=True):
            o = int(pick[left])
            left -= int(item[axis][o])
            other += int(item[1 - axis][o])
        if other <= other_cap:
            return float(dp[cap])
    ways = node_ways(items, cpus, NODE_WAYS, mem=mem)
    if ways is not None:
        v = ways[2]
        return float(v.max()) if v.size else -math.inf
    return float(_node_table(cpus, mem, _units(cpus, mem, TABLE_CELLS), items)[-1, -1])


#: most (ways of a node's own jobs) x (points of the gangs on it) compared directly, without
#: the node's table (:func:`_component_bound`)
COMBO_WORK = 1_000_000
#: the same where a start table is read for each (a gather, dearer than a comparison)
START_WORK = 50_000
#: most (ways) x (core counts) cells of :func:`node_ways`'s test for useless ways
WAY_CELLS = 4_000_000


#: most answers of :func:`node_ways` kept (cleared when full), and the most ways an answer may
#: hold to be kept: a round's bounds ask for the ways of the same node's jobs several times (with
#: pinned jobs, without starts, priced), often listed in another order
WAYS_KEPT = 1024
WAYS_KEPT_SIZE = 4096
_WAYS: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray, np.ndarray, None] | None] = {}


def node_ways(items: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], cpus: int, limit: int, picks: bool = False,
              mem: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None] | None:
    """Every useful way ``items`` (per item its options' cores, GB and worth; one option each)
    can be on a node of ``cpus`` cores: the summed cores, GB and worth of each way and, with
    ``picks``, the option each item takes (ways x items). Ways over ``cpus`` cores (or, given
    ``mem``, over ``mem`` GB) are left out,
    and, once there are more than a few, every way that another needs no more of either resource
    and is worth no less (of equal ones, the first is kept). ``None`` when more than ``limit``
    ways would be formed at some step, or the test for useless ways would take more than
    :data:`WAY_CELLS` cells."""
    if picks:
        return _node_ways(items, cpus, limit, True, mem)
    # without picks, the items are taken in one order whatever order they come in (their worth
    # at each way does not depend on it), so that the same node's jobs are found again
    keys = [(c.tobytes(), m.tobytes(), f.tobytes()) for c, m, f in items]
    order = sorted(range(len(items)), key=keys.__getitem__)
    key = (cpus, mem, limit, tuple(keys[i] for i in order))
    kept = _WAYS.get(key, _WAYS)  # the dict itself: not kept (None is an answer)
    if kept is not _WAYS:
        return kept  # type: ignore[return-value]
    out = _node_ways([items[i] for i in order], cpus, limit, False, mem)
    if out is None or out[0].size <= WAYS_KEPT_SIZE:
        if out is not None:
            for a in out[:3]:
                a.setflags(write=False)  # shared by every caller that asks again
        if len(_WAYS) >= WAYS_KEPT:
            _WAYS.clear()
        _WAYS[key] = out
    return out


def _node_ways(items: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], cpus: int, limit: int, picks: bool,
               mem: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None] | None:
    """:func:`node_ways`, computed."""
    c, m, v = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(1)
    chosen = np.zeros((1, 0), dtype=np.int64) if picks else None
    for wc, wm, f in items:
        if c.size * wc.size > limit:
            return None
        way, opt = np.divmod(np.arange(c.size * wc.size), wc.size)
        c, m, v = c[way] + wc[opt], m[way] + wm[opt], v[way] + f[opt]
        keep = c <= cpus if mem is None else (c <= cpus) & (m <= mem)
        if chosen is not None:
            chosen = np.column_stack([chosen[way], opt])[keep]
        c, m, v = c[keep], m[keep], v[keep]
        if c.size <= 32:
            continue
        if c.size * (cpus + 1) > WAY_CELLS:
            return None
        # useless ways: by worth, best first; one is useless when an earlier one needs no more
        # cores and no more memory (a running minimum of memory per core count)
        order = np.argsort(-v, kind="stable")
        c, m, v = c[order], m[order], v[order]
        least = np.where(c[:, None] <= np.arange(cpus + 1)[None, :], m[:, None], np.iinfo(np.int64).max)
        least = np.minimum.accumulate(least, axis=0)
        useful = np.ones(c.size, dtype=bool)
        useful[1:] = least[:-1][np.arange(c.size - 1), c[1:]] > m[1:]
        c, m, v = c[useful], m[useful], v[useful]
        if chosen is not None:
            chosen = chosen[order][useful]
    return c, m, v, chosen


def _units(cpus: int, mem: int, cells: int) -> tuple[int, int]:
    """Cores and GB per cell of a node's table of at most ``cells`` cells per axis."""
    return max(1, -(-cpus // cells)), max(1, -(-mem // cells))


#: a tighter bound for a component whose gangs were cut (:class:`optsched.gang_prices.GangPrices`):
#: called with the instance, the component's jobs, its start tables, their cells per axis and the
#: component's value without it; returns a value no larger
Refine = Callable[[Instance, Sequence["_Pinned"], Mapping[int, np.ndarray] | None, int, float], float]


def _enumerated(jobs: Sequence[_Pinned]) -> tuple[list[_Pinned], list[_Pinned]]:
    """A component's gangs with a choice (on several nodes, several useful points), most valuable
    first, and those of them enumerated together (within :data:`ENUM_LIMIT` joint points and
    :data:`ENUM_AXES` gangs); the others are cut into per-node copies."""
    gangs = sorted((p for p in jobs if len(p.nodes) > 1 and p.f.size > 1), key=lambda p: -float(p.f.max()))
    joint = 1
    kept: list[_Pinned] = []
    for g in gangs:
        if joint * g.f.size <= ENUM_LIMIT and len(kept) < ENUM_AXES:
            kept.append(g)
            joint *= g.f.size
    return gangs, kept


def _component_bound(instance: Instance, jobs: Sequence[_Pinned], starts: Mapping[int, np.ndarray] | None = None,
                     cells: int = TABLE_CELLS, refine: Refine | None = None) -> float:
    """``P(K)`` of the module text for one component's pinned jobs (an upper bound on it where a
    node's table is coarsened or gangs are cut). ``starts`` (node index -> a table in the units of
    ``_units(cpus, mem, cells)``) adds to each such
    node the most that its table gives for the cores and memory the pinned jobs leave there.
    Whether every job's fastest point fits (then no choice is left) is :func:`_best_fits`'s to
    find, before this. Where some gang is cut, ``refine`` (if given) may lower the value: the
    smaller of the two is returned."""
    nodes = sorted({n for p in jobs for n in p.nodes})
    if any(not p.f.size for p in jobs):
        return math.inf  # a job with no point that fits: the caller falls back to a looser bound
    starts = starts or {}
    # the most valuable gangs are enumerated, the rest are cut into per-node copies (exactly so
    # for a gang with one useful point: its copies cannot disagree)
    gangs, kept = _enumerated(jobs)
    singles: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {n: [] for n in nodes}
    for p in jobs:
        if any(p is g for g in kept):
            continue
        for n, k in p.nodes.items():
            singles[n].append((k * p.c, k * p.m, p.f * (k / p.gpus)))
    if not kept and not starts:  # nodes that share no gang: each on its own
        out = sum(_node_best(instance.nodes[n].cpus, instance.nodes[n].mem_gb, singles[n]) for n in nodes)
        out = out if math.isfinite(out) else math.inf
        if refine is not None and gangs:
            out = min(out, refine(instance, jobs, starts, cells, out))
        return out
    axes = len(kept)

    def along(i: int, values: np.ndarray) -> np.ndarray:
        shape = [1] * axes
        shape[i] = values.size
        return values.reshape(shape)

    # a node's worth depends only on the enumerated gangs on it: the nodes' worths are summed per
    # set of such gangs (small arrays; most nodes hold one gang or none) and the joint table is
    # formed once per set, not once per node
    parts: dict[tuple[int, ...], np.ndarray] = {}

    def add(on: tuple[int, ...], worth: np.ndarray) -> None:
        parts[on] = worth if on not in parts else parts[on] + worth

    for i, g in enumerate(kept):
        add((i,), along(i, g.f))
    for n in nodes:
        node = instance.nodes[n]
        on = tuple(i for i, g in enumerate(kept) if n in g.nodes)
        left_c = np.full([1] * max(axes, 1), node.cpus, dtype=np.int64)
        left_m = np.full([1] * max(axes, 1), node.mem_gb, dtype=np.int64)
        for i in on:
            left_c = left_c - along(i, kept[i].nodes[n] * kept[i].c)
            left_m = left_m - along(i, kept[i].nodes[n] * kept[i].m)
        left_c, left_m = np.broadcast_arrays(left_c, left_m)
        units = _units(node.cpus, node.mem_gb, cells)
        ways = node_ways(singles[n], node.cpus, (START_WORK if n in starts else COMBO_WORK) // max(1, left_c.size))
        if ways is not None:  # the few ways the node's own jobs can be, against each point of its gangs
            cc, cm, cv, _ = ways
            rest_c, rest_m = left_c[..., None] - cc, left_m[..., None] - cm
            fits = (rest_c >= 0) & (rest_m >= 0)
            if n in starts:  # and what the start table gives for the rest (sizes rounded down: a bound)
                cv = cv + starts[n][np.maximum(rest_c, 0) // units[0], np.maximum(rest_m, 0) // units[1]]
            add(on, np.where(fits, cv, -np.inf).max(axis=-1))
        else:
            table = _node_table(node.cpus, node.mem_gb, units, singles[n], starts.get(n))
            ok = (left_c >= 0) & (left_m >= 0)
            add(on, np.where(ok, table[np.maximum(left_c, 0) // units[0], np.maximum(left_m, 0) // units[1]], -np.inf))
    total = np.zeros([g.f.size for g in kept] or [1])
    for part in parts.values():
        total = total + part
    out = float(total.max())
    out = out if math.isfinite(out) else math.inf
    if refine is not None and len(kept) < len(gangs):
        out = min(out, refine(instance, jobs, starts, cells, out))
    return out


def _pinned(instance: Instance, job: Job, factor: float, cache: dict[tuple[Any, ...], Any] | None) -> _Pinned:
    """``job``'s choices, its useful points taken from ``cache`` where the same profile was
    pinned on nodes of the same size before (they do not depend on its weight)."""
    nodes = {instance.node_idx(n): k for n, k in (job.placement or {}).items()}
    fair = instance.round.fair
    key = ("pinned-points", job.profile, tuple((k, instance.nodes[i].cpus, instance.nodes[i].mem_gb) for i, k in nodes.items()), fair,
           job.demand_throughput if fair else None)
    points = None if cache is None else cache.get(key)
    if points is None:
        points = _points(instance, job, nodes)
        if cache is not None:
            cache[key] = points
    return _Pinned(nodes, points, factor)


def _best_fits(instance: Instance, jobs: Sequence[_Pinned]) -> np.ndarray | float | None:
    """Per job, its fastest useful point's throughput, when those points fit every node of the
    component together (then ``P(K)`` is the sum of the jobs' worth factors times them, whatever
    the weights); ``inf`` when some job has no point that fits; else ``None`` (a programme)."""
    if any(not p.f.size for p in jobs):
        return math.inf
    use: dict[int, list[int]] = {}
    best = [int(np.argmax(p.f)) for p in jobs]
    for p, b in zip(jobs, best, strict=True):
        for n, k in p.nodes.items():
            u = use.setdefault(n, [0, 0])
            u[0] += k * int(p.c[b])
            u[1] += k * int(p.m[b])
    if all(c <= instance.nodes[n].cpus and m <= instance.nodes[n].mem_gb for n, (c, m) in use.items()):
        return np.array([p.f[b] for p, b in zip(jobs, best, strict=True)])
    return None


def _cached_component(instance: Instance, jobs: Sequence[Job], cache: dict[tuple[Any, ...], Any] | None,
                      refine: Refine | None = None) -> float:
    """``P(K)`` of one component's pinned ``jobs``, from ``cache`` where it was found before. Two
    levels: whether every job's fastest point fits depends on no weight, so it is kept by the
    component's shape (its nodes' cores and memory, each job's profile and placement), and such a
    component's value is a sum of worth factors times known throughputs; any other is kept by its
    shape and the jobs' worth factors (weights change between rounds of a chain). ``refine``
    (:func:`_component_bound`) is applied to the value each time, not cached."""
    fair = instance.round.fair
    places = [tuple(sorted((j.placement or {}).items())) for j in jobs]
    order = sorted(range(len(jobs)), key=lambda i: (places[i], jobs[i].id))
    jobs = [jobs[i] for i in order]
    nodes = sorted({instance.node_idx(n) for j in jobs for n in j.placement or {}})
    shape = ("pinned-shape", fair, tuple((instance.nodes[n].id, instance.nodes[n].cpus, instance.nodes[n].mem_gb) for n in nodes),
             tuple((j.profile, places[i], j.demand_throughput if fair else None) for i, j in zip(order, jobs, strict=True)))
    cache = {} if cache is None else cache
    if shape not in cache:
        cache[shape] = _best_fits(instance, [_pinned(instance, j, 1.0, cache) for j in jobs])
    fits = cache[shape]
    factors = [_factor(instance, j) for j in jobs]
    if fits is not None:
        return fits if isinstance(fits, float) else float(np.dot(factors, fits))
    key = (shape, tuple(factors))
    value = cache.get(key)
    pinned = None
    if value is None:
        pinned = [_pinned(instance, j, f, cache) for j, f in zip(jobs, factors, strict=True)]
        value = cache[key] = _component_bound(instance, pinned)
    if refine is not None and any(len(j.placement or {}) > 1 for j in jobs):
        pinned = pinned or [_pinned(instance, j, f, cache) for j, f in zip(jobs, factors, strict=True)]
        gangs, kept = _enumerated(pinned)
        if len(kept) < len(gangs):  # some gang is cut: the value may be above the component's optimum
            value = refine(instance, pinned, None, TABLE_CELLS, value)
    return value


def pinned_worth_bound(instance: Instance, cache: dict[tuple[Any, ...], Any] | None = None) -> tuple[float, int]:
    """An upper bound on the total worth of the round's pinned jobs in any feasible schedule (the
    module text; ``inf`` where some pinned job has no grid point that fits its nodes), and the
    GPUs they hold. ``cache`` keeps each component's value between rounds, keyed by everything it
    depends on (its nodes' cores and memory, and each job's profile, placement and worth factor),
    and each pinned job's useful points (:func:`_points`)."""
    pinned = [j for j in instance.jobs if j.pinned]
    total = 0.0
    for comp in _components([[instance.node_idx(n) for n in j.placement or {}] for j in pinned]):
        total += _cached_component(instance, [pinned[i] for i in comp], cache)
    return total, sum(j.gpus for j in pinned)


#: most cell updates one fill bound spends on its tables (beyond: coarser tables, then ``inf``)
FILL_WORK = 10_000_000
#: cells per axis of the fill bound's tables, finest first: the next is tried where the work
#: would exceed :data:`FILL_WORK`
FILL_CELLS = (TABLE_CELLS, 120, 40)


def _fill_pieces(instance: Instance, gpu_type: str, free: int, cpus: int, mem: int, units: tuple[int, int],
                 candidates: Sequence[Job], caps: Callable[[Job, np.ndarray, np.ndarray], np.ndarray]
                 ) -> tuple[list[list[tuple[int, int, int, float]]], int]:
    """The pieces :func:`_fill_table` builds its table from, per candidate: ``k <= min(g_j,
    free)`` of its GPUs at one grid point, as (GPUs, cores and GB in units, worth) (``k / g_j`` of
    the job's unmoved worth there, with the least spread multiplier ``caps`` gives it at that
    point); and the table's cell updates."""
    uc, um = units
    cc, mm = cpus // uc, mem // um
    pieces: list[list[tuple[int, int, int, float]]] = []
    for j in candidates:
        speed = j.speed(gpu_type)
        if not speed:
            continue
        c, m, thr = j.profile.frontier()
        if instance.round.fair:
            keep = thr >= fair_floor(j, True)
            c, m, thr = c[keep], m[keep], thr[keep]
        worth = j.weight * speed * thr * caps(j, c, m) / j.demand_throughput
        own = [(k, a, b, v) for k in range(1, min(j.gpus, free) + 1)
               for a, b, v in zip(((k * c) // uc).tolist(), ((k * m) // um).tolist(), (worth * (k / j.gpus)).tolist(), strict=True)
               if a <= cc and b <= mm and v > 0]
        if own:
            pieces.append(own)
    cells = (cc + 1) * (mm + 1)
    return pieces, cells if free == 1 else sum(len(own) for own in pieces) * (free + 1) * cells


def _fill_table(free: int, shape: tuple[int, int], pieces: list[list[tuple[int, int, int, float]]]) -> np.ndarray:
    """``S[c, m]``: the most the pieces (:func:`_fill_pieces`; each job at most once) are worth
    on one node within ``free`` GPUs, ``c`` units of cores and ``m`` of memory (``shape``: the
    table's). With one free GPU a node holds one piece, so the table is a running maximum of the
    pieces' worth, with no programme."""
    if free == 1:
        table = np.zeros(shape)
        for own in pieces:
            for _k, a, b, v in own:
                table[a, b] = max(table[a, b], v)
        return np.maximum.accumulate(np.maximum.accumulate(table, axis=0), axis=1)
    cc, mm = shape[0] - 1, shape[1] - 1
    dp = np.zeros((free + 1, *shape))
    for own in pieces:
        new = dp.copy()
        for k, a, b, v in own:
            np.maximum(new[k:, a:, b:], dp[: free + 1 - k, : cc + 1 - a, : mm + 1 - b] + v, out=new[k:, a:, b:])
        dp = new
    return dp.max(axis=0)


def fill_bound(instance: Instance, cache: dict[tuple[Any, ...], Any] | None = None, refine: Refine | None = None) -> float:
    """An upper bound on the round's optimum where running jobs are pinned that shares each node's
    cores and memory between its pinned jobs and the unpinned jobs that may fill its free GPUs
    (``inf`` where its tables would take more than :data:`FILL_WORK` cell updates, found before
    they are built, or some pinned job has no point that fits).

    Each node with free GPUs is credited with the best set of *pieces* of unpinned jobs that fits
    them and the cores and memory its pinned jobs leave, a piece being ``k`` of a job's ``g`` GPUs
    at one grid point worth ``k / g`` of the job's worth there unspread and unmoved; a job may
    be counted on several nodes (the relaxation), once on each. Pinned components are solved as
    in :func:`pinned_worth_bound` with these tables added per node; nodes with no pinned job add
    their table's best. Of the unpinned jobs alike in all but weight (profile, GPUs, speeds,
    spread factor, demand), only the ``free`` heaviest can matter on a node with ``free`` GPUs:
    any other in a node's best set can be swapped for a heavier one it leaves out, worth no less
    at every point. ``formulations/incremental.md`` has the proof.

    Where the tables would take more than :data:`FILL_WORK` cell updates at :data:`TABLE_CELLS`
    cells per axis, they are built coarser (:data:`FILL_CELLS`; sizes rounded down, so still a
    bound) before giving up. ``refine`` may tighten each component whose gangs are cut
    (:class:`optsched.gang_prices.GangPrices`)."""
    for cells in FILL_CELLS:
        value = _fill_bound(instance, cache, cells, refine)
        if math.isfinite(value):
            return value
    return math.inf


def _fill_bound(instance: Instance, cache: dict[tuple[Any, ...], Any] | None, cells: int, refine: Refine | None = None) -> float:
    """:func:`fill_bound` with tables of at most ``cells`` cells per axis (``inf`` beyond :data:`FILL_WORK`)."""
    pinned = [j for j in instance.jobs if j.pinned]
    held = [0] * len(instance.nodes)
    for j in pinned:
        for nid, k in (j.placement or {}).items():
            held[instance.node_idx(nid)] += k
    free = [max(0, n.gpus - h) for n, h in zip(instance.nodes, held, strict=True)]
    most = max(free, default=0)
    ranked = [js[:most] for js in alike_but_weight(j for j in instance.jobs if not j.pinned)]
    components = []
    for comp in _components([[instance.node_idx(n) for n in j.placement or {}] for j in pinned]):
        components.append((comp, {instance.node_idx(nid) for i in comp for nid in pinned[i].placement or {}}))
    covered = {n for _, nodes in components for n in nodes}
    alone = [n for n in range(len(instance.nodes)) if n not in covered and free[n]]
    # every table's pieces and work first, in the order the tables are read, so that a bound
    # over the work limit is given up before any table is built
    pieces: dict[tuple[Any, ...], list[list[tuple[int, int, int, float]]]] = {}
    work = 0
    room = residual_nodes(instance)
    capped: dict[tuple[Any, ...], np.ndarray] = {}

    def caps(gpu_type: str) -> Callable[[Job, np.ndarray, np.ndarray], np.ndarray]:
        # a job's least spread multiplier per point on the room the pinned jobs leave
        # (residual_nodes): its pieces together are worth no more than the job
        def of(j: Job, c: np.ndarray, m: np.ndarray) -> np.ndarray:
            key = (gpu_type, j.profile, j.gpus, j.spread_factor, j.demand_throughput if instance.round.fair else None)
            if key not in capped:
                capped[key] = spread_caps(instance, j, gpu_type, room[gpu_type], c, m)
            return capped[key]
        return of

    for n in [n for _, nodes in components for n in nodes if free[n]] + alone:
        node = instance.nodes[n]
        key = (node.gpu_type, free[n], node.cpus, node.mem_gb)
        if key not in pieces:
            candidates = [j for js in ranked for j in js[: free[n]]]
            pieces[key], need = _fill_pieces(instance, node.gpu_type, free[n], node.cpus, node.mem_gb,
                                             _units(node.cpus, node.mem_gb, cells), candidates, caps(node.gpu_type))
            if free[n] > 1 and need > FILL_WORK - work:
                return math.inf
            work += need
    tables: dict[tuple[Any, ...], np.ndarray] = {}

    def table(n: int) -> np.ndarray:
        node = instance.nodes[n]
        key = (node.gpu_type, free[n], node.cpus, node.mem_gb)
        if key not in tables:
            units = _units(node.cpus, node.mem_gb, cells)
            tables[key] = _fill_table(free[n], (node.cpus // units[0] + 1, node.mem_gb // units[1] + 1), pieces[key])
        return tables[key]

    total = 0.0
    for comp, nodes in components:
        starts = {n: table(n) for n in nodes if free[n]}
        if starts:
            value = _component_bound(instance, [_pinned(instance, pinned[i], _factor(instance, pinned[i]), cache) for i in comp],
                                     starts, cells, refine)
        else:
            value = _cached_component(instance, [pinned[i] for i in comp], cache, refine)
        total += value
    for n in alone:
        total += float(table(n)[-1, -1])
    return total
