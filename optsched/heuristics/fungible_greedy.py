"""``fungible-greedy``: place with a lean grid point, then hand leftover CPU/memory to the jobs
with the largest marginal gain (in the spirit of Synergy-TUNE). See ``formulations/heuristics.md``.

The result is the better of this schedule and :func:`fixed_demand_schedule`'s, so
fungible-greedy >= fixed-demand holds by construction. In a DRF round (``round.fairness = "drf"``)
two progressive-filling schedules join the candidates, and the best by (smallest dominant share,
worth) is kept (:mod:`optsched.heuristics.drf`); in a HUG round (``"hug"``) the same, by
progress, each admitted job counting the cores and GB of its lean point (the leftover pass only
adds resources, so it never lowers a tenant's progress).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from optsched.elastic import has_elastic
from optsched.heuristics.common import Cluster, job_order, place
from optsched.heuristics.drf import best_by_drf, fair_round, fair_stats, keep_level, progressive_fill
from optsched.heuristics.fixed_demand import fixed_demand_schedule
from optsched.heuristics.sizing import admission_sizes, grow, knapsack_place
from optsched.job import fair_floor
from optsched.model import Instance, Job
from optsched.options import NoOptions
from optsched.policy_repair import repair
from optsched.result import Result, Status
from optsched.round_policies import (
    consolidate,
    gpu_room,
    packing_choice,
    policy_families,
    whole_free_gpus,
)
from optsched.schedule import Assignment, Schedule
from optsched.trajectory import recorded
from optsched.values import schedule_value

__all__ = ["FungibleGreedy", "fungible_greedy_schedule"]


def _eligible(instance: Instance, job: Job) -> list[tuple[int, int, float]]:
    return job.profile.allowed(fair_floor(job, instance.round.fair))


def _lean_point(job: Job, pts: list[tuple[int, int, float]], cpg: float, mpg: float) -> tuple[int, int]:
    """The eligible point with best throughput per unit of normalised per-GPU resource
    (1 for the GPU itself + CPUs and memory relative to the cluster's per-GPU averages)."""
    best = max(pts, key=lambda p: (p[2] / (1.0 + p[0] / cpg + p[1] / mpg), -p[0], -p[1]))
    return best[0], best[1]


#: most (profile, demand, fairness, cluster shape) entries of eligible and lean points kept
#: between calls (cleared when full); the lists are shared, never changed
POINTS_CACHE = 4096
_POINTS: dict[tuple[Any, ...], tuple[list[tuple[int, int, float]], tuple[int, int]]] = {}


def fungible_greedy_schedule(instance: Instance, *, seed: int = 0, fixed: Schedule | None = None, pack: bool = True) -> Schedule:
    """Fungible greedy schedule, deterministic (``seed`` is accepted for the common interface).

    ``fixed``: a feasible partial schedule to complete (e.g. a learned decode cut short by its
    deadline): its jobs keep their nodes, the others are placed around them, and the leftover pass
    may still raise any job's grid point. In a packing round (unless ``pack`` is false or
    ``fixed`` is given) the lean placement is also consolidated *before* the leftover pass, and
    :func:`~optsched.round_policies.packing_choice` picks between that and the plain schedule."""
    want = pack and fixed is None and instance.round.packing is not None
    cands = {"fungible": _fungible_pair(instance, fixed, want)}
    if fair_round(instance):
        cands.update(_drf_pairs(instance, fixed, want))
    name, plain = best_by_drf(instance, ((k, v[0]) for k, v in cands.items()))
    packed = cands[name][1]
    return plain if packed is None else packing_choice(instance, plain, keep_level(instance, plain, [packed]))


def _drf_pairs(instance: Instance, fixed: Schedule | None, want_packed: bool) -> dict[str, tuple[Schedule, Schedule | None]]:
    """The DRF candidates (:mod:`optsched.heuristics.drf`): ``drf-fill``, progressive filling of
    every job, and ``drf-then-worth``, progressive filling up to the level that fill reached and
    the rest in worth order."""
    info: dict[str, Any] = {}
    out = {"drf-fill": _fungible_pair(instance, fixed, want_packed, drf=True, info=info)}
    out["drf-then-worth"] = _fungible_pair(instance, fixed, want_packed, drf=True, drf_target=info["drf_level"])
    return out


def _fungible_pair(instance: Instance, fixed: Schedule | None, want_packed: bool,
                   knapsack: bool = False, drf: bool = False, drf_target: int | None = None,
                   info: dict[str, Any] | None = None) -> tuple[Schedule, Schedule | None]:
    """The plain fungible-greedy schedule and, with ``want_packed``, the one whose lean placement
    was consolidated before the leftover CPU/memory pass; jobs are placed in
    :func:`~optsched.heuristics.common.job_order`, or with ``knapsack`` by value per GPU with
    elastic growth in the same queue (:func:`~optsched.heuristics.sizing.knapsack_place`).
    With ``drf``, DRF progressive filling admits jobs first (up to ``drf_target`` when given), then
    the rest go in job order (:func:`~optsched.heuristics.drf.progressive_fill`); the level the
    fill reached goes to ``info["drf_level"]``. In a HUG round ``admit`` reports the cores and GB of
    the job's point."""
    cl = Cluster(instance)
    hug = instance.round.fairness == "hug"
    tg = max(1, sum(n.gpus for n in instance.nodes))
    cpg = max(1.0, sum(n.cpus for n in instance.nodes) / tg)
    mpg = max(1.0, sum(n.mem_gb for n in instance.nodes) / tg)
    chosen: dict[str, tuple[dict[str, int], int, int]] = {}
    # jobs sharing a profile (and, in a fair round, a demand) share their eligible and lean points
    pts_of: dict[str, list[tuple[int, int, float]]] = {}
    fair = instance.round.fair

    def points(job: Job) -> tuple[list[tuple[int, int, float]], tuple[int, int]]:
        key = (job.profile, job.demand if fair else None, fair, cpg, mpg)
        hit = _POINTS.get(key)
        if hit is None:
            if len(_POINTS) >= POINTS_CACHE:
                _POINTS.clear()
            pts = _eligible(instance, job)
            hit = _POINTS[key] = (pts, _lean_point(job, pts, cpg, mpg))
        return hit

    for jid, a in (fixed.jobs.items() if fixed is not None else ()):
        cl.take(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb)
        chosen[jid] = (dict(a.nodes), a.cpus_per_gpu, a.mem_per_gpu_gb)
        pts_of[jid] = points(instance.job(jid))[0]
    cl.claim_running(lambda job: points(job)[1], skip=chosen)
    lean: dict[str, tuple[int, int]] = {}
    room: dict[tuple[str, int, int], int] = {}

    def ever_fits(job: Job, c: int, m: int) -> bool:
        """Whether the empty cluster holds ``job`` at ``(c, m)`` per GPU on some allowed type."""
        return any(gpu_room(instance, t, c, m, room) >= job.gpus for t in instance.gpu_types if job.speed(t) is not None)

    def admit(job: Job) -> int | tuple[int, int, int] | None:
        pts, (c, m) = points(job)
        pts_of[job.id] = pts
        if not job.placement and not ever_fits(job, c, m) and not ever_fits(job, *job.demand):
            # neither its lean point nor its demand fits anywhere, even on an empty cluster (so the
            # fixed-demand candidate cannot place it either): the leanest point that could
            able = [p for p in pts if ever_fits(job, p[0], p[1])]
            if able:
                c, m = _lean_point(job, able, cpg, mpg)
        if knapsack:
            lean[job.id] = (c, m)
            return None
        if job.pinned and job.placement and not cl.fits_at(job.placement, c, m):
            # a pinned job never moves: its leanest point that its own nodes still hold
            held = [p for p in pts if cl.fits_at(job.placement, p[0], p[1])]
            if held:
                c, m = _lean_point(job, held, cpg, mpg)
        nodes = place(instance, cl, job, c, m, admission_sizes(job))
        if nodes is None:
            return None
        chosen[job.id] = (nodes, c, m)
        g = sum(nodes.values())
        return (g, g * c, g * m) if hug else g

    order = [job for job in job_order(instance) if job.id not in chosen]
    if drf and not knapsack:  # DRF: progressive filling first
        held = {j: (sum(n.values()), sum(n.values()) * c, sum(n.values()) * m) if hug else sum(n.values())
                for j, (n, c, m) in chosen.items()}
        order, level = progressive_fill(instance, order, admit, target=drf_target, held=held)
        if info is not None:
            info["drf_level"] = level
    for job in order:
        if not knapsack and not cl.free_g.any():  # every GPU is taken: no later job can be placed
            break
        admit(job)
    if knapsack:
        knapsack_place(instance, cl, chosen, lean)
    pts_of = {j: pts_of[j] for j in chosen}
    packed = None
    if want_packed:
        lean = consolidate(instance, Schedule(instance.name, {j: Assignment(n, c, m) for j, (n, c, m) in chosen.items()}))
        cl2 = Cluster(instance)
        for a in lean.jobs.values():
            cl2.take(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb)
        chosen2 = {j: (dict(a.nodes), a.cpus_per_gpu, a.mem_per_gpu_gb) for j, a in lean.jobs.items()}
        packed = _finish(instance, cl2, chosen2, cpg, mpg, pts_of)
    return _finish(instance, cl, chosen, cpg, mpg, pts_of, fixed.jobs if fixed is not None else {}), packed


def _finish(instance: Instance, cl: Cluster, chosen: dict[str, tuple[dict[str, int], int, int]], cpg: float, mpg: float,
            pts_of: dict[str, list[tuple[int, int, float]]], frozen: Mapping[str, Assignment] | None = None) -> Schedule:
    """Elastic jobs grow into free GPUs (not those in ``frozen``, whose nodes stay and whose
    assignments are reused where their grid point stays too), the leftover CPU/memory pass on
    the placement, then the policy repair."""
    frozen = frozen or {}
    if has_elastic(instance):  # elastic gangs: spend free GPUs by marginal value
        grow(instance, cl, chosen, frozen)
    _redistribute(instance, cl, chosen, cpg, mpg, pts_of, up_only=instance.round.fairness == "hug")
    jobs = {j: a if (a := frozen.get(j)) is not None and (a.cpus_per_gpu, a.mem_per_gpu_gb) == (c, m)
            else Assignment(nodes=n, cpus_per_gpu=c, mem_per_gpu_gb=m) for j, (n, c, m) in chosen.items()}
    s = Schedule(instance=instance.name, jobs=jobs)
    return repair(instance, s) if policy_families(instance) else s


def _redistribute(instance: Instance, cl: Cluster, chosen: dict[str, tuple[dict[str, int], int, int]],
                  cpg: float, mpg: float, pts_of: dict[str, list[tuple[int, int, float]]] | None = None,
                  up_only: bool = False) -> None:
    """Per job (heaviest marginal gain first, repeatedly): move to the eligible grid point with the
    largest value gain per unit of extra normalised resource that still fits, until none improves.

    A point ``(pc, pm)`` fits job ``j`` (holding ``k`` GPUs on node ``i`` at ``(c, m)``) when
    ``free_cpu[i] + c k >= pc k`` and likewise for memory on each of its nodes, i.e. when ``pc``
    and ``pm`` are at most the job's per-GPU headroom (integer division), computed once per job
    and scan. With ``up_only`` (a HUG round) a job moves only to points with no fewer cores and
    no less memory, so no tenant's progress falls."""
    by_node: dict[str, list[str]] = {}
    for j, (nodes, _, _) in chosen.items():
        for n in nodes:
            by_node.setdefault(n, []).append(j)
    if pts_of is None:
        pts_of = {j: _eligible(instance, instance.job(j)) for j in chosen}
    cpu, mem = cl.free_c.tolist(), cl.free_m.tolist()  # plain ints: the scan below is scalar work
    info = {}
    for j, (nodes, _, _) in chosen.items():
        job = instance.job(j)
        g = sum(nodes.values())
        info[j] = (job, [(instance.node_idx(n), k) for n, k in nodes.items()],
                   job.weight * (job.scaling(g) or 1.0) * g, job.demand_throughput)
    done: set[str] = set()
    for nid in sorted(by_node):
        group = [j for j in by_node[nid] if j not in done]
        while True:
            best: tuple[float, str, int, int] | None = None
            for j in group:
                job, where, w, dtp = info[j]
                _, c, m = chosen[j]
                tp = job.profile.at(c, m)
                cmax = min((cpu[i] + c * k) // k for i, k in where)
                mmax = min((mem[i] + m * k) // k for i, k in where)
                for pc, pm, ptp in pts_of[j]:
                    if ptp <= tp * (1 + 1e-12) or pc > cmax or pm > mmax or up_only and (pc < c or pm < m):
                        continue
                    extra = max(1e-9, (pc - c) / cpg + (pm - m) / mpg)
                    ratio = w * (ptp - tp) / dtp / extra
                    if best is None or ratio > best[0]:
                        best = (ratio, j, pc, pm)
            if best is None:
                break
            _, j, pc, pm = best
            nodes, c, m = chosen[j]
            for i, k in info[j][1]:
                cpu[i] -= (pc - c) * k
                mem[i] -= (pm - m) * k
            chosen[j] = (nodes, pc, pm)
        done.update(group)
    cl.free_c[:] = cpu
    cl.free_m[:] = mem


class FungibleGreedy:
    """Registered as ``fungible-greedy``."""

    @recorded
    def solve(self, instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None,
              **options: Any) -> Result:
        NoOptions.from_mapping(options, method="fungible-greedy")  # it takes none: refuse any by name
        t0 = time.perf_counter()
        packing = instance.round.packing is not None
        pairs = {"fungible": _fungible_pair(instance, None, packing)}
        f = fixed_demand_schedule(instance, pack=False)
        pairs["fixed-demand"] = (f, None)
        if instance.round.fairness == "hug":
            # fixed-demand's pick (its progressive fill at demand points) completed: more jobs
            # around it and the leftover pass, which only add GPUs, cores and GB (progress kept)
            pairs["fixed-demand-leftover"] = _fungible_pair(instance, f, False)
        if has_elastic(instance):  # elastic gangs: also the value-per-GPU knapsack
            pairs["density"] = _fungible_pair(instance, None, False, knapsack=True)
        if fair_round(instance):  # DRF/HUG: progressive filling, ranked by (smallest share or progress, worth)
            pairs.update(_drf_pairs(instance, None, packing))
        picked, s = best_by_drf(instance, ((k, v[0]) for k, v in pairs.items()))
        v = schedule_value(instance, s)
        stats: dict[str, Any] = {"jobs_placed": len(s.jobs), "picked": picked, "fixed_demand_objective": schedule_value(instance, f)}
        stats.update(fair_stats(instance, s))
        if packing:  # never fewer whole free GPUs than the plain pick, never below (1 - tolerance) of its worth
            stats.update(plain_objective=v, plain_whole_free_gpus=whole_free_gpus(instance, s.jobs))
            others = [pairs["fungible"][1], pairs.get("drf-fill", (None, None))[1], pairs.get("drf-then-worth", (None, None))[1],
                      consolidate(instance, f)]
            s = packing_choice(instance, s, keep_level(instance, s, [x for x in others if x is not None]))
            v = schedule_value(instance, s)
            stats.update(jobs_placed=len(s.jobs), whole_free_gpus=whole_free_gpus(instance, s.jobs))
        return Result(schedule=s, status=Status.FEASIBLE, objective=v, bound=None, solver="fungible-greedy",
                      method="heuristic", time_s=time.perf_counter() - t0, stats=stats)
