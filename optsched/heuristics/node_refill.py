"""Node refill: re-solve one node at a time exactly, given everything else.

On one node, the jobs a schedule places there alone are re-chosen together with the waiting jobs
that could fill the node's GPUs: each pinned job keeps its GPUs and may change its grid point;
each other job there alone may change its point or leave; waiting jobs (not running, not
scheduled elsewhere, not elastic) may enter whole at any point. Jobs that span this node and
others, and elastic ones, keep what they hold. A dynamic programme over the node's (GPUs,
cores, memory) left, one layer per job, finds the best such choice, and it replaces the node's
part of the schedule when it is worth strictly more. Nodes are visited in order; each sees the schedule the previous ones left.

This is the move a congested round needs when most running jobs are pinned (strict FIFO): the
few free GPUs go to the waiting jobs whose speed-up is worth most once the pinned jobs on that
node give up some cores or memory, a trade no single-job move finds. Of the waiting jobs alike in
all but weight (profile, GPUs, speeds, spread factor, demand), only the heaviest ones that fit the
node's free GPUs are offered (no lighter one can be worth more at any point). A node whose part
two relaxed programmes (GPUs and cores alone, GPUs and memory alone) prove already best is left
as it is without building the full one, and where a relaxed programme's best choice (theirs, or
one's with coarser units of cores and memory) fits the node as it is, that choice is taken
without it: it is then a best choice of the full programme. Used by
:class:`optsched.incremental.RoundSolver` on rounds the carried-over schedule leaves open.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import numpy as np

from optsched.heuristics.fungible_greedy import fungible_greedy_schedule
from optsched.incremental_bound import alike_but_weight, node_ways
from optsched.job import Profile, fair_floor
from optsched.model import Instance, Job
from optsched.schedule import Assignment, Schedule
from optsched.values import assignment_value, job_value

__all__ = ["NODE_WORK", "gang_ascent", "gang_release", "node_refill", "squeezed_greedy"]

#: most cell updates of one node's programme, its (GPUs, cores, memory) table's cells times the
#: options of its jobs (a node above it is left as it is: about 60 ms)
NODE_WORK = 60_000_000

#: a node's programme items: (mandatory, options (cores, GB, worth), GPUs), one option each
Items = list[tuple[bool, list[tuple[int, int, float]], int]]


def _options(instance: Instance, job: Job, nodes: Mapping[str, int], room: Mapping[str, tuple[int, int]]) -> list[tuple[int, int, float]]:
    """``job``'s undominated grid points with ``nodes`` (id -> its GPUs there, all of one GPU
    type) as (cores per GPU, GB per GPU, worth), those whose cores and GB fit ``room`` (id ->
    cores, GB) on every one of them (in a fair round, at least as fast as the demand); ``[]``
    when none does or the nodes are of several types."""
    pts = _points(job)
    types = {instance.node(n).gpu_type for n in nodes}
    if pts is None or len(types) != 1:
        return []
    c, m, thr = pts
    keep = np.ones(len(c), dtype=bool)
    for n, k in nodes.items():
        keep &= (k * c <= room[n][0]) & (k * m <= room[n][1])
    keep &= thr >= fair_floor(job, instance.round.fair)
    if not keep.any():
        return []
    moved = job.placement is not None and dict(job.placement) != dict(nodes)
    one = float(thr[keep][0])  # worth is throughput times a factor fixed for the job on these nodes
    factor = job_value(instance, job, types.pop(), int(c[keep][0]), int(m[keep][0]), len(nodes), moved) / one
    return list(zip(c[keep].tolist(), m[keep].tolist(), (factor * thr[keep]).tolist(), strict=True))


def _points(job: Job) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The job's undominated grid points (:meth:`~optsched.job.Profile.frontier`), None when none."""
    out = job.profile.frontier()
    return out if out[0].size else None


def _units(room: tuple[int, int, int], items: Items, sizes: tuple[list[int], list[int]] = ([], [])) -> tuple[int, int]:
    """The exact units of a node's programme: the greatest common divisors of its cores and of its
    GB, and of every size involved (``sizes``: more amounts the caller will look up)."""
    uc = math.gcd(room[1], *sizes[0], *(o[0] for _, opts, _ in items for o in opts)) or 1
    um = math.gcd(room[2], *sizes[1], *(o[1] for _, opts, _ in items for o in opts)) or 1
    return uc, um


def _tables(room: tuple[int, int, int], items: list[tuple[bool, list[tuple[int, int, float]], int]],
            sizes: tuple[list[int], list[int]] = ([], []), units: tuple[int, int] | None = None
            ) -> tuple[list[np.ndarray], tuple[int, int]] | None:
    """The programme of one node: ``tables[i][g, c, m]`` is the most the first ``i`` items (each
    ``(mandatory, options (cores, GB, worth), gpus)``; one option each, or none unless mandatory)
    are worth within ``g`` GPUs, ``c`` and ``m`` units of cores and memory, ``room`` bounding
    them. The units are exact (:func:`_units`) unless ``units`` are given: sizes and room are
    then rounded down to them, a relaxation (a choice that fits the room fits the rounded one).
    ``None`` when it would take more than :data:`NODE_WORK` cell updates."""
    G, C, M = room
    uc, um = _units(room, items, sizes) if units is None else units
    cc, mm = C // uc, M // um
    if (G + 1) * (cc + 1) * (mm + 1) * max(1, sum(len(opts) for _, opts, _ in items)) > NODE_WORK:
        return None
    tables = [np.zeros((G + 1, cc + 1, mm + 1))]
    for mandatory, opts, g in items:
        dp = tables[-1]
        new = np.full_like(dp, -np.inf) if mandatory else dp.copy()
        for c, m, v in opts:
            a, b = c // uc, m // um
            if g <= G and a <= cc and b <= mm:
                np.maximum(new[g:, a:, b:], dp[: G + 1 - g, : cc + 1 - a, : mm + 1 - b] + v, out=new[g:, a:, b:])
        tables.append(new)
    return tables, (uc, um)


def _read(tables: list[np.ndarray], units: tuple[int, ...], items: list[tuple[bool, list[tuple[int, int, float]], int]],
          state: tuple[int, ...], axes: tuple[int, ...] = (0, 1)) -> list[int | None] | None:
    """A choice (an option index or ``None`` per item) attaining ``tables[-1][state]``; ``None``
    when no choice fits. The tables' axes after the GPUs are the options' ``axes`` (0 cores, 1
    GB) in ``units``."""
    if not np.isfinite(tables[-1][state]):
        return None
    choice: list[int | None] = [None] * len(items)
    for i in range(len(items) - 1, -1, -1):  # last item first
        target, before = tables[i + 1][state], tables[i]
        tol = 1e-9 * max(1.0, abs(target))
        mandatory, opts, g = items[i]
        if not mandatory and before[state] >= target - tol:
            continue
        for k, o in enumerate(opts):
            rest = (state[0] - g, *(s - o[a] // u for s, a, u in zip(state[1:], axes, units, strict=True)))
            if min(rest) >= 0 and before[rest] + o[2] >= target - tol:
                choice[i], state = k, rest
                break
        else:
            return None
    return choice


def _fits(room: tuple[int, int, int], items: Items, choice: list[int | None]) -> bool:
    """Whether ``choice`` fits the node's cores and memory (its GPUs fit by construction)."""
    picked = [items[i][1][k] for i, k in enumerate(choice) if k is not None]
    return sum(o[0] for o in picked) <= room[1] and sum(o[1] for o in picked) <= room[2]


#: most ways of a node's pinned jobs formed by the programme for nodes with at most one free GPU
WAYS = 100_000


def _solve_few(room: tuple[int, int, int], items: Items) -> tuple[bool, list[int | None] | None]:
    """:func:`_solve_node` where at most one GPU is free for the optional items: the useful ways of
    the mandatory ones (:func:`~optsched.incremental_bound.node_ways`), each alone or with the
    best optional item that fits beside it. Exact, like the tables, at a fraction of their cells.
    Returns (done, choice): not done when there would be more than :data:`WAYS` ways (the caller
    builds the tables)."""
    free, cpus, mem = room
    must = [i for i, it in enumerate(items) if it[0]]
    if any(not items[i][1] for i in must):
        return True, None
    arrays = [tuple(np.array(col, dtype=np.int64 if k < 2 else np.float64) for k, col in enumerate(zip(*items[i][1], strict=True)))
              for i in must]
    ways = node_ways(arrays, cpus, WAYS, picks=True)
    if ways is None:
        return False, None
    wc, wm, wv, chosen = ways
    fit = wm <= mem
    if chosen is None or not fit.any():
        return True, None
    wc, wm, wv, chosen = wc[fit], wm[fit], wv[fit], chosen[fit]
    way = int(np.argmax(wv))
    best, extra = float(wv[way]), None
    for i, (mandatory, opts, g) in enumerate(items):
        if mandatory or g > free or not opts:
            continue
        oc, om, ov = (np.array(col) for col in zip(*opts, strict=True))
        total = np.where((wc[:, None] + oc[None, :] <= cpus) & (wm[:, None] + om[None, :] <= mem), wv[:, None] + ov[None, :], -np.inf)
        k = int(np.argmax(total))
        if total.flat[k] > best + 1e-12 * max(1.0, abs(best)):
            best, way, extra = float(total.flat[k]), k // len(opts), (i, k % len(opts))
    choice: list[int | None] = [None] * len(items)
    for pos, i in enumerate(must):
        choice[i] = int(chosen[way, pos])
    if extra is not None:
        choice[extra[0]] = extra[1]
    return True, choice


#: cells per resource axis of the coarse programmes :func:`_solve_node` tries, in turn, before
#: the exact one
COARSE_CELLS = (128, 256)


def _solve_node(room: tuple[int, int, int], items: list[tuple[bool, list[tuple[int, int, float]], int]]) -> list[int | None] | None:
    """The best choice of one option per item within ``room`` (:func:`_tables`, or
    :func:`_solve_few` where at most one GPU is free); ``None`` when that would take more than
    :data:`NODE_WORK` cell updates or no choice fits.

    Where the exact table has more cells on a resource axis than :data:`COARSE_CELLS` allow, the
    programme is first solved with coarser units (sizes rounded down: a relaxation, at a
    fraction of the cells); when its best choice fits the room as it is, that choice is a best
    one of the exact programme too (no choice is worth more than the relaxation's best)."""
    if room[0] <= 1:
        done, choice = _solve_few(room, items)
        if done:
            return choice
    exact = _units(room, items)
    tried = {exact}
    for cells in COARSE_CELLS:
        coarse = (max(exact[0], -(-room[1] // cells)), max(exact[1], -(-room[2] // cells)))
        if coarse in tried:
            continue
        tried.add(coarse)
        built = _tables(room, items, units=coarse)
        if built is not None:
            tables, units = built
            choice = _read(tables, units, items, (room[0], room[1] // units[0], room[2] // units[1]))
            if choice is None or _fits(room, items, choice):
                return choice  # no choice fits the relaxation, or its best fits the node
    built = _tables(room, items, units=exact)
    if built is None:
        return None
    tables, units = built
    return _read(tables, units, items, (room[0], room[1] // units[0], room[2] // units[1]))


def _relaxed(room: tuple[int, int, int], items: Items) -> tuple[float, list[int | None] | None]:
    """An upper bound on the best choice of one option per item within ``room`` (what
    :func:`_tables` would find): the lesser of two programmes over (GPUs, cores) and (GPUs,
    memory), each dropping the other resource. A few thousand cells against the full table's
    hundreds of thousands; ``-inf`` when no choice fits. With it, a best choice of either
    programme that fits the node's cores and memory both, where there is one: that choice is a
    best one of the full programme (no choice is worth more than the programme's best)."""
    best, found = math.inf, None
    for axis, cap in ((0, room[1]), (1, room[2])):
        unit = math.gcd(cap, *(int(o[axis]) for _, opts, _ in items for o in opts)) or 1
        free, k = room[0], cap // unit
        tables = [np.zeros((free + 1, k + 1))]
        for mandatory, opts, g in items:
            table = tables[-1]
            new = np.full_like(table, -np.inf) if mandatory else table.copy()
            for o in opts:
                s = int(o[axis]) // unit
                if g <= free and s <= k:
                    np.maximum(new[g:, s:], table[: free + 1 - g, : k + 1 - s] + o[2], out=new[g:, s:])
            tables.append(new)
        value = float(tables[-1][free, k])
        best = min(best, value)
        if found is None and math.isfinite(value):
            choice = _read(tables, (unit,), items, (free, k), axes=(axis,))
            if choice is not None and _fits(room, items, choice):
                found = choice
    return best, found


def _movable(job: Job, a: Assignment) -> bool:
    """Whether the refill may re-choose ``job``'s assignment ``a``: on one node, at the job's
    nominal size (an elastic job keeps the size it has)."""
    return len(a.nodes) == 1 and job.elastic is None and a.gpus == job.gpus


def _ranked(instance: Instance) -> list[list[Job]]:
    """The waiting jobs (not running, not elastic) by class (:func:`alike_but_weight`)."""
    return alike_but_weight(j for j in instance.jobs if j.placement is None and j.elastic is None)


def _node_part(instance: Instance, jobs: dict[str, Assignment], nid: str, ranked: list[list[Job]],
               keep: set[str] = frozenset()) -> tuple[list[str], list[Job], Items, tuple[int, int, int]] | None:
    """What a node's programme re-chooses: the ids of the jobs the schedule places there alone,
    the jobs offered (those, then the heaviest waiting ones of each class that fit the GPUs the
    pinned ones leave), their items, and the room (free GPUs for the unpinned ones, cores, GB)
    left by the jobs held as they are (spanning several nodes or elastic; not those in ``keep``,
    whose use the caller counts). ``None`` for an empty node (the schedule's completion already
    offered it every waiting job) or one far beyond :data:`NODE_WORK`."""
    node = instance.node(nid)
    here = [(jid, a) for jid, a in jobs.items() if nid in a.nodes]
    if not here:
        return None
    alone = [jid for jid, a in here if _movable(instance.job(jid), a)]
    held = [a for jid, a in here if not _movable(instance.job(jid), a) and jid not in keep]
    room_g = node.gpus - sum(a.nodes[nid] for jid, a in here if not _movable(instance.job(jid), a))
    cpus = node.cpus - sum(a.nodes[nid] * a.cpus_per_gpu for a in held)
    mem = node.mem_gb - sum(a.nodes[nid] * a.mem_per_gpu_gb for a in held)
    free = room_g - sum(instance.job(jid).gpus for jid in alone if instance.job(jid).pinned)
    if min(room_g, cpus, mem, free) < 0:
        return None
    offered = [instance.job(jid) for jid in alone]
    for js in ranked:
        fits = [j for j in js if j.gpus <= free and j.id not in jobs and (j.gpu_speed is None or node.gpu_type in j.gpu_speed)]
        offered += fits[: free // fits[0].gpus] if fits else []
    cells = (free + 1) * (cpus + 1) * (mem + 1)  # before the units: an upper bound
    if cells * sum(len(p[0]) for j in offered if (p := _points(j)) is not None) > NODE_WORK * 64:
        return None  # far beyond the work limit whatever the units: spare building the options
    # pinned jobs keep their GPUs: the table's GPU axis counts only the others'
    items = [(j.pinned, [(j.gpus * c, j.gpus * m, v) for c, m, v in _options(instance, j, {nid: j.gpus}, {nid: (cpus, mem)})],
              0 if j.pinned else j.gpus) for j in offered]
    needed = _needed(items, (free, cpus, mem))
    return alone, [offered[i] for i in needed], [items[i] for i in needed], (free, cpus, mem)


def _needed(items: Items, room: tuple[int, int, int]) -> list[int]:
    """The items a best choice within ``room`` (or any smaller room) may need, by index: every
    mandatory one, and each optional one that could be chosen together with all the optional
    items that *dominate* it. Item ``A`` dominates ``B`` when it takes no more GPUs and each of
    ``B``'s options is matched by one of ``A``'s with no more cores, no more memory and no less
    worth (of two identical items, the first dominates). A best choice that takes ``B`` but
    leaves out some ``A`` dominating it stays as good with ``A`` in ``B``'s place, so some best
    choice takes ``B`` only with all of them; where they and ``B`` cannot fit together (their
    GPUs, or their fewest cores or memory with the mandatory items', exceed the room), ``B`` is
    never needed."""
    optional = [i for i, (mandatory, opts, _g) in enumerate(items) if not mandatory and opts]
    if len(optional) < 2:
        return [i for i, it in enumerate(items) if it[0] or it[1]]
    sizes = [len(items[i][1]) for i in optional]
    first = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    c, m, v = (np.array(col, dtype=np.float64) for col in zip(*(o for i in optional for o in items[i][1]), strict=True))
    beats = (c[:, None] <= c[None, :]) & (m[:, None] <= m[None, :]) & (v[:, None] >= v[None, :])  # option x option
    # dominates[a, b]: every option of item b is matched by some option of item a
    dominates = np.logical_and.reduceat(np.logical_or.reduceat(beats, first, axis=0), first, axis=1)
    g = np.array([items[i][2] for i in optional], dtype=np.int64)
    n = len(optional)
    order = np.arange(n)
    dominates &= (g[:, None] <= g[None, :]) & ~(dominates.T & (order[:, None] > order[None, :]))
    np.fill_diagonal(dominates, False)
    by = dominates.T.astype(np.float64)  # by[b, a]: a dominates b
    least_c, least_m = np.minimum.reduceat(c, first), np.minimum.reduceat(m, first)
    free, cpus, mem = room
    # the mandatory items take at least their fewest cores and memory too
    cpus -= sum(min(o[0] for o in opts) for mandatory, opts, _g in items if mandatory and opts)
    mem -= sum(min(o[1] for o in opts) for mandatory, opts, _g in items if mandatory and opts)
    never = (by @ g + g > free) | (by @ least_c + least_c > cpus) | (by @ least_m + least_m > mem)
    dropped = {optional[k] for k in np.flatnonzero(never)}
    return [i for i, it in enumerate(items) if (it[0] or it[1]) and i not in dropped]


def _apply(jobs: dict[str, Assignment], nid: str, alone: list[str], offered: list[Job], items: Items, choice: list[int | None]) -> None:
    for jid in alone:
        del jobs[jid]
    for j, k, (_, opts, _g) in zip(offered, choice, items, strict=True):
        if k is not None:
            c, m, _v = opts[k]
            jobs[j.id] = Assignment({nid: j.gpus}, c // j.gpus, m // j.gpus)


def node_refill(instance: Instance, schedule: Schedule, nodes: list[str] | None = None, force: bool = False) -> Schedule:
    """``schedule`` with each node in turn (``nodes``, default: those with a GPU not held by a
    pinned job, a job spanning several nodes or an elastic job) re-solved as the module text
    says. The result is worth at least as much; check it with :func:`optsched.check_schedule`
    before use. With ``force`` each node's part is replaced by its best choice even when that is
    worth no more (for a schedule whose gangs were just given other grid points, where the
    node's old part may no longer fit)."""
    jobs = dict(schedule.jobs)
    if nodes is None:
        fixed = dict.fromkeys((n.id for n in instance.nodes), 0)
        for jid, a in jobs.items():
            j = instance.job(jid)
            if j.pinned or not _movable(j, a):
                for nid, k in a.nodes.items():
                    fixed[nid] += k
        nodes = [n.id for n in instance.nodes if n.gpus > fixed[n.id]]
    ranked = _ranked(instance)
    for nid in nodes:
        part = _node_part(instance, jobs, nid, ranked)
        if part is None:
            continue
        alone, offered, items, room = part
        now = sum(assignment_value(instance, instance.job(jid), jobs[jid]) for jid in alone)
        choice = None
        if not force and room[0] > 1:
            bound, choice = _relaxed(room, items)
            if bound * (1 + 1e-12) <= now * (1 + 1e-9) + 1e-12:
                continue  # no choice is worth more than the node's part already is: spare the full table
        if choice is None:
            choice = _solve_node(room, items)
        if choice is None:
            continue
        new_value = sum(items[i][1][k][2] for i, k in enumerate(choice) if k is not None)
        if force or new_value > now * (1 + 1e-9) + 1e-12:
            _apply(jobs, nid, alone, offered, items, choice)
    return Schedule(schedule.instance, jobs)


def gang_release(instance: Instance, schedule: Schedule) -> Schedule:
    """``schedule`` with each job it starts on several nodes (a waiting job, not elastic; least
    worth per GPU first) taken out where refilling its nodes without it (:func:`node_refill`) is
    worth more. A gang spread thin over the free GPUs of many nodes pays the spread factor once
    per extra node, and the refill cannot take it out: it holds GPUs on other nodes too. The result
    is worth at least as much; check it with :func:`optsched.check_schedule` before use."""
    jobs = dict(schedule.jobs)
    spread = [jid for jid, a in jobs.items()
              if len(a.nodes) > 1 and instance.job(jid).placement is None and instance.job(jid).elastic is None]
    spread.sort(key=lambda jid: assignment_value(instance, instance.job(jid), jobs[jid]) / instance.job(jid).gpus)
    for jid in spread:
        if jid not in jobs or len(jobs[jid].nodes) < 2:  # an earlier release's refill changed it
            continue
        trial = {k: a for k, a in jobs.items() if k != jid}
        after = node_refill(instance, Schedule(schedule.instance, trial), nodes=list(jobs[jid].nodes)).jobs
        # only the jobs the refill changed or added, and the one taken out, differ
        moved = {k for k, a in after.items() if jobs.get(k) is not a}
        gain = sum(assignment_value(instance, instance.job(k), after[k]) for k in moved)
        loss = sum(assignment_value(instance, instance.job(k), jobs[k]) for k in moved | {jid} if k in jobs)
        gone = {k for k in jobs if k not in after and k != jid}
        loss += sum(assignment_value(instance, instance.job(k), jobs[k]) for k in gone)
        if gain > loss * (1 + 1e-9) + 1e-12:
            jobs = dict(after)
    return Schedule(schedule.instance, jobs)


def gang_ascent(instance: Instance, schedule: Schedule, passes: int = 2) -> Schedule:
    """``schedule`` with its pinned gangs' grid points improved one gang at a time: each node
    they span gets its programme's table (what the jobs there alone and the waiting jobs that
    may fill it are worth within any cores and memory the gangs leave), and a gang moves to the
    point where its own worth plus its nodes' tables is highest, given the other gangs; up to
    ``passes`` rounds over the gangs. The nodes of the gangs that moved are then refilled
    (``force``). Check the result with :func:`optsched.check_schedule` before use."""
    jobs = dict(schedule.jobs)
    gangs = [jid for jid, a in jobs.items() if instance.job(jid).pinned and len(a.nodes) > 1 and instance.job(jid).elastic is None]
    if not gangs:
        return schedule
    options: dict[str, list[tuple[int, int, float]]] = {}
    for g in gangs:
        a = jobs[g]
        opts = _options(instance, instance.job(g), a.nodes, {n: (instance.node(n).cpus, instance.node(n).mem_gb) for n in a.nodes})
        if opts:
            options[g] = opts
    movable = set(options)
    ranked = _ranked(instance)
    tables: dict[str, tuple[np.ndarray, tuple[int, int], int, int]] = {}
    for nid in sorted({n for g in movable for n in jobs[g].nodes}):
        part = _node_part(instance, jobs, nid, ranked, keep=movable)
        on = [g for g in movable if nid in jobs[g].nodes]
        if part is None:
            movable -= set(on)
            continue
        _alone, _offered, items, (free, cpus, mem) = part
        sizes = ([jobs[g].nodes[nid] * o[0] for g in on for o in options[g]], [jobs[g].nodes[nid] * o[1] for g in on for o in options[g]])
        built = _tables((free, cpus, mem), items, sizes)
        if built is None:
            movable -= set(on)
            continue
        tabs, units = built
        tables[nid] = (tabs[-1][free], units, cpus, mem)
    use = {nid: [0, 0] for nid in tables}
    for g in movable:
        for nid, k in jobs[g].nodes.items():
            if nid in use:
                use[nid][0] += k * jobs[g].cpus_per_gpu
                use[nid][1] += k * jobs[g].mem_per_gpu_gb

    def worth(nid: str, dc: int, dm: int) -> float:
        table, (uc, um), cpus, mem = tables[nid]
        left_c, left_m = cpus - use[nid][0] - dc, mem - use[nid][1] - dm
        return -math.inf if left_c < 0 or left_m < 0 else float(table[left_c // uc, left_m // um])

    moved: set[str] = set()
    for _ in range(passes):
        better = False
        for g in sorted(movable):
            a = jobs[g]
            if any(nid not in tables for nid in a.nodes):
                continue
            now = sum(worth(nid, 0, 0) for nid in a.nodes) + assignment_value(instance, instance.job(g), a)
            best, pick = now, None
            for c, m, v in options[g]:
                total = v + sum(worth(nid, k * (c - a.cpus_per_gpu), k * (m - a.mem_per_gpu_gb)) for nid, k in a.nodes.items())
                if total > best * (1 + 1e-9) + 1e-12:
                    best, pick = total, (c, m)
            if pick is not None:
                for nid, k in a.nodes.items():
                    use[nid][0] += k * (pick[0] - a.cpus_per_gpu)
                    use[nid][1] += k * (pick[1] - a.mem_per_gpu_gb)
                jobs[g] = Assignment(a.nodes, pick[0], pick[1])
                moved.add(g)
                better = True
        if not better:
            break
    if not moved:
        return schedule
    return node_refill(instance, Schedule(schedule.instance, jobs), nodes=sorted({n for g in moved for n in jobs[g].nodes}), force=True)


def squeezed_greedy(instance: Instance) -> Schedule:
    """Fungible-greedy with every pinned job first at its leanest grid point (the least cores and
    memory relative to the round's per-GPU averages; in a fair round, among the points at least as
    fast as its demand): the waiting jobs, heaviest first, are placed in the room that leaves, and
    the leftover pass then raises every job's point where room is left. It starts a job that the
    pinned jobs' current cores and memory keep out, such as a heavy gang over the scattered GPUs
    they leave free, which no one-node refill can start."""
    gpus = max(1, sum(n.gpus for n in instance.nodes))
    cpg = max(1.0, sum(n.cpus for n in instance.nodes) / gpus)
    mpg = max(1.0, sum(n.mem_gb for n in instance.nodes) / gpus)
    fixed = {}
    for j in instance.jobs:
        if not j.pinned or not j.placement:
            continue
        lean = _leanest(j.profile, fair_floor(j, instance.round.fair), cpg, mpg)
        if lean is not None:
            fixed[j.id] = Assignment(nodes=dict(j.placement), cpus_per_gpu=lean[0], mem_per_gpu_gb=lean[1])
    return fungible_greedy_schedule(instance, fixed=Schedule(instance.name, fixed))


@functools.lru_cache(maxsize=4096)
def _leanest(profile: Profile, floor: float, cpg: float, mpg: float) -> tuple[int, int] | None:
    """The grid point of positive throughput (at least ``floor``, :func:`~optsched.job.fair_floor`)
    with the least cores and memory relative to the per-GPU averages ``cpg`` and ``mpg`` (of equal
    ones, the fastest); ``None`` when there is none. Kept between rounds: pinned jobs' profiles repeat."""
    points = [p for p in profile.allowed(floor) if p[2] > 0]
    if not points:
        return None
    c, m, _ = min(points, key=lambda p: (p[0] / cpg + p[1] / mpg, -p[2]))
    return c, m
