"""``lns``: large-neighbourhood search over the exact CP-SAT round model.

Start from the best of the caller's hint and the greedy schedules, then repeat until the time
limit: free a neighbourhood — a few nodes (of one GPU type in half the steps, of any type in the
others; half the time aimed at lost worth (three quarters once prices are known, below), the
rest half linked by split jobs, half at random:
:mod:`optsched.heuristics.neighbourhoods`), the jobs that sit only on them, and some waiting jobs
that may use them (the best by value per GPU and a random sample) — and
re-optimise it exactly with the CP-SAT model
(:mod:`optsched.exact.core`, what ``cpsat`` solves with) on a *sub-instance*: those nodes with the room the fixed jobs
leave, those jobs, the incumbent's restriction as hint. An improvement replaces the incumbent.
The neighbourhood grows by a node while sub-problems are proven optimal in under half their
time and shrinks when they are not.

Aimed steps use the prices of the configuration-LP bound once the bound worker sends them
(:meth:`optsched.mip.bound_worker.BoundWorker.prices`, from its first pricing on, updated as the
bound improves): the bound minus the incumbent's worth splits into the prices of the jobs it
leaves out and a loss per node (:func:`~optsched.heuristics.neighbourhoods.node_losses`), so
these steps free the nodes that lose most and offer the jobs the bound credits most. Before any
prices arrive (and on rounds without a worker), they aim at worth lost to grid points and at
idle capacity. Measured on the eight medium bench rounds from the policy's schedules, 9 s, two
runs each: 0.446 % mean gap to the bound against 0.599 % unaimed with half the steps aimed, and
aiming three quarters of them did better still (option ``priced``; ``benchmarks/README.md``).

The sub-instance is exact for the freed part: a job that runs elsewhere now and would have to
move to enter the neighbourhood gets its restart factor folded into its weight.

In a DRF round the starts (fungible-greedy's progressive filling among them) rank by (smallest
dominant share, worth), and a neighbourhood's result replaces the incumbent only when it earns
more worth without lowering the smallest dominant share; in a HUG round likewise with the
smallest progress (:func:`optsched.round_policies.hug_level`).
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from typing import Any

from optsched.exact.core import CpSatCore
from optsched.exact.hint import greedy_schedule
from optsched.exact.prep import JobData, job_data
from optsched.heuristics.drf import fair_round, fair_stats, keep_level
from optsched.heuristics.fungible_greedy import FungibleGreedy
from optsched.heuristics.neighbourhoods import (
    linked_nodes,
    node_losses,
    node_state,
    priced_nodes,
    random_nodes,
    targeted_nodes,
)
from optsched.heuristics.options import LnsOptions
from optsched.learned.repair import price_schedule
from optsched.mip.bound import lp_bound_within
from optsched.mip.bound_worker import MIN_SECONDS, BoundWorker
from optsched.mip.pricing import supported
from optsched.model import Instance, Job, Node, Round
from optsched.policy_repair import repair
from optsched.result import Result, Status
from optsched.round_policies import (
    DRF_NO_TENANT,
    deadline_misses,
    fair_level,
    hug_coefficients,
    hug_usage,
    packing_choice,
    policy_families,
    policy_feasible,
    whole_free_gpus,
)
from optsched.schedule import Schedule
from optsched.trajectory import current, recorded
from optsched.values import schedule_value

__all__ = ["LargeNeighbourhoodSearch", "sub_instance"]

#: seconds kept back from the time limit for building the Result, at most half the limit
_RESERVE_S = 0.1


def _check(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` validated (:class:`~optsched.heuristics.options.LnsOptions`), every default filled in."""
    return LnsOptions.from_mapping(options).to_dict()


def _starts(instance: Instance, hint: Schedule | None, until: float | None, data: list[JobData],
            given: list[tuple[str, Schedule]] | None = None) -> list[tuple[str, Schedule]]:
    """Candidate starting schedules: the caller's hint, fungible-greedy (the better of it and
    fixed-demand), on contract-v1 rounds the price-guided repack of
    :func:`optsched.learned.repair.price_schedule`, and the exact model's greedy hint when there is time for it before ``until``
    (perf_counter; ``None``: always, for a reproducible search): on a 2,048 x 8,000 round it
    alone takes seconds. ``given`` (named schedules
    the caller has built already, e.g. cpsat's greedy hints) replace the exact model's greedy.

    In a DRF round the exact greedy starts fill progressively up to the level of the best start
    so far (``greedy-drf``, ``greedy-dense-drf``: :func:`greedy_schedule`'s ``drf_target``), so
    the search may start from the exact greedy's worth without losing fungible-greedy's level;
    with ``given`` they join the caller's schedules. On the 1,024 x 4,000 het round (8 tenants)
    greedy-dense-drf kept the level with 4,935 worth against fungible-greedy's 3,534."""
    out = []
    if hint is not None:
        out.append(("hint", hint))
    t0 = time.perf_counter()
    built = dict(given or ()).get("fungible-greedy")  # cpsat's greedy starts hold the same schedule
    out.append(("fungible-greedy", built if built is not None else FungibleGreedy().solve(instance, time_limit=5.0, seed=0).schedule))
    if fair_round(instance):
        # fungible-greedy's DRF (HUG) candidates are three fills; one exact greedy costs about one of them
        level = max(fair_level(instance, sched.jobs) for _n, sched in out)
        each = (time.perf_counter() - t0) / 3.0
        drf_starts = []
        for name, dense in (("greedy-drf", False), ("greedy-dense-drf", True)):
            if dense and not any(j.placement for j in instance.jobs):
                break
            if until is not None and time.perf_counter() + each >= until:
                break
            drf_starts.append((name, greedy_schedule(instance, data, running_first=not dense, drf_target=level)))
        return out + list(given or []) + drf_starts
    # with the job data given, one exact greedy costs at most about what fungible-greedy took
    # (measured on the large and huge library rounds: 0.36-0.66x), so each is built when that
    # much time is left before ``until``
    each = time.perf_counter() - t0

    def fits() -> bool:
        return until is None or time.perf_counter() + each < until

    if supported(instance) and fits():
        # the price-guided repack (optsched.learned.repair, no torch): on the medium bench rounds
        # 1.1-1.8 % from the bound, where the greedy starts are 15-20 % away, in 0.02-0.07 s; it
        # starts no repack past ``until``
        priced = price_schedule(instance, deadline=until)
        if priced is not None:
            out.append(("price-repack", priced))
    if given is not None:
        return out + list(given)

    if fits():
        out.append(("greedy", greedy_schedule(instance, data)))
        # running jobs taking their turn by value per GPU: measured on the mixed medium bench
        # rounds (30 % running), 6-12 % better starts than keeping every running job first
        if any(j.placement for j in instance.jobs) and fits():
            out.append(("greedy-dense", greedy_schedule(instance, data, running_first=False)))
    return out


def sub_instance(instance: Instance, schedule: Schedule, node_ids: list[str], extra: list[str]) -> tuple[Instance, list[str]]:
    """The neighbourhood as an instance: freed nodes with the room fixed jobs leave, and its jobs.

    Returns the sub-instance and the ids of the jobs it frees (those placed only on the freed
    nodes, then ``extra`` waiting jobs).
    """
    freed = set(node_ids)
    room = {n: [instance.node(n).gpus, instance.node(n).cpus, instance.node(n).mem_gb] for n in node_ids}
    inside = []
    for j, a in schedule.jobs.items():
        touched = freed.intersection(a.nodes)
        if not touched:
            continue
        if set(a.nodes) <= freed and _placeable(instance, instance.job(j), freed):
            inside.append(j)
            continue
        # a job that also runs elsewhere stays fixed, and so does one the sub-instance could not
        # hold (moved here, with a restart of a whole round or more): its share is not free
        for n in touched:
            g = a.nodes[n]
            room[n][0] -= g
            room[n][1] -= g * a.cpus_per_gpu
            room[n][2] -= g * a.mem_per_gpu_gb
    nodes = tuple(Node(n, instance.node(n).gpu_type, *room[n], rack=instance.node(n).rack) for n in node_ids)
    jobs: list[Job] = []
    ids = []
    for j in [*inside, *extra]:
        job = instance.job(j)
        if not _placeable(instance, job, freed):
            continue
        if job.placement is not None and not set(job.placement) <= freed:
            # any placement inside the neighbourhood is a move: fold the restart factor into the weight
            factor = 1.0 - job.restart_s / instance.round.duration_s
            job = replace(job, weight=job.weight * factor, placement=None, restart_s=0.0)
        jobs.append(job)
        ids.append(j)
    # policy rules (contract v2) are about the whole round: the caller checks candidates against
    # them, so the neighbourhood is solved without them
    rnd = instance.round
    if rnd.uses_v2:
        rnd = Round(duration_s=rnd.duration_s, fair=rnd.fair, spread_from=rnd.spread_from)
        jobs = [replace(j, tenant=None, deadline_s=None, remaining_s=None) if j.uses_v2 else j for j in jobs]
    # a subround: its gangs pay spread from the whole round's kmin, as their worth there does
    return instance.subround(f"{instance.name}/lns", nodes, tuple(jobs), rnd), ids


def _placeable(instance: Instance, job: Job, freed: set[str]) -> bool:
    """Whether the sub-instance on ``freed`` can hold ``job``: not a running job from elsewhere
    whose restart costs the whole round or more (its weight would fold to <= 0)."""
    return job.placement is None or set(job.placement) <= freed or job.restart_s < instance.round.duration_s


def hug_floor(instance: Instance, schedule: Schedule, ids: list[str], level: int) -> list[tuple[tuple[str, ...], int, int]]:
    """The usage floors (CP-SAT option ``usage_floor``) under which any schedule of the
    neighbourhood ``ids`` keeps every tenant's HUG level at least ``level`` (the rest of
    ``schedule`` unchanged): per tenant t and resource r of :func:`hug_coefficients`, its jobs in
    ``ids`` hold at least ``ceil(level den / num)`` less what t holds outside them."""
    _s, coef = hug_coefficients(instance)
    tenant_of = {j.id: (j.tenant if j.tenant is not None else DRF_NO_TENANT) for j in instance.jobs}
    inside = set(ids)
    outside: dict[str, list[int]] = {t: [0, 0, 0] for t in coef}
    for j, a in schedule.jobs.items():
        row = outside.get(tenant_of[j])
        if row is not None and j not in inside:
            for r, x in enumerate(hug_usage(a)):
                row[r] += x
    rows = []
    for t, cs in coef.items():
        mine = tuple(j for j in ids if tenant_of[j] == t)
        for r, num, den in cs:
            need = -(-level * den // num) - outside[t][r] if num > 0 else 0
            if need > 0 and mine:
                rows.append((mine, r, need))
    return rows


class LargeNeighbourhoodSearch:
    """``lns``: CP-SAT re-optimisation of node neighbourhoods, seeded by greedy (or the hint).

    Options: ``num_workers`` (per sub-problem, default 1), ``nodes`` (freed per step, 4),
    ``extra_jobs`` (waiting jobs offered, 16), ``sub_time`` (seconds per sub-problem, 0.25),
    ``deterministic_time`` (a budget of CP-SAT deterministic seconds over the sub-problems instead
    of wall-clock slices: same seed and budget give the same schedule, as long as the wall-clock
    ``time_limit`` does not cut in first; the starts are then always all built), ``targeted``,
    ``linked`` and ``priced`` (shares of the steps by how they choose nodes, above), ``prices``
    (a bound's prices to aim with from the start).
    """

    name = "lns"

    @recorded
    def solve(self, instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None,
              starts: list[tuple[str, Schedule]] | None = None, data: list[JobData] | None = None,
              bound_worker: BoundWorker | None = None, **options: Any) -> Result:
        """Search for ``time_limit`` seconds. ``starts`` (named feasible schedules) and ``data``
        (``job_data(instance)``) let a caller that has computed them already (cpsat's lns stage)
        spare lns computing its greedy starts and the job data again. ``bound_worker``: the
        caller's worker (cpsat's), whose prices aim the search as they come; the caller collects
        it. Without one, lns starts its own where it reports a bound (option ``bound``)."""
        start = time.perf_counter()
        deadline = start + max(0.0, time_limit - min(_RESERVE_S, time_limit / 2))
        opts = _check(options)
        rng = random.Random(seed)
        data = job_data(instance) if data is None else data
        # under DRF the exact greedy starts get more of the time: they keep the level with far more
        # worth than fungible-greedy's DRF start, which the search alone does not make up (issue 7)
        dt_total = opts["deterministic_time"]
        until = None if dt_total is not None else start + (0.7 if fair_round(instance) else 0.3) * time_limit
        starts = _starts(instance, hint, until, data, starts)
        policies = policy_families(instance)
        if policies:  # start from schedules that keep the round's policy rules
            starts = [(name, repair(instance, s)) for name, s in starts]
        values = [schedule_value(instance, s) for _, s in starts]
        misses = [len(deadline_misses(instance, s)) if policies else 0 for _, s in starts]
        drf = fair_round(instance)  # DRF/HUG: candidates rank by (smallest dominant share or progress, worth)
        hug = instance.round.fairness == "hug"
        levels = [fair_level(instance, s.jobs) if drf else 0 for _, s in starts]
        best = max(range(len(starts)), key=lambda i: (-misses[i], levels[i], values[i]))  # fewer deadline misses first
        incumbent, value, level = starts[best][1], values[best], levels[best]
        stats: dict[str, Any] = {"start": starts[best][0], "start_objective": value, "steps": 0, "improvements": 0,
                                 "deterministic_s": 0.0, "starts": {name: v for (name, _s), v in zip(starts, values, strict=True)}}
        # the trajectory (optsched.trajectory): the start, each improvement, each bound as it comes;
        # in a packing round the final choice may give up worth for free GPUs: only the result
        rec = current()
        if instance.round.packing is not None:
            rec.mute()
        rec.record(value)

        # the bound: where the configuration LP applies, computed by a child process on the core
        # the search leaves free (optsched.mip.bound_worker); else the LP bound first, with at
        # most a fifth of the time, and the search gets the rest
        worker, bound = None, None
        if opts["bound"] is True and deadline - time.perf_counter() > MIN_SECONDS and BoundWorker.applies(instance):
            worker = BoundWorker(instance, deadline - time.perf_counter() - 0.1, [s for _n, s in starts])
        elif opts["bound"]:  # a fifth of the time from now (the starts may have taken a while on huge rounds)
            bound = lp_bound_within(instance, time.perf_counter() + 0.2 * time_limit, stats)
            if bound is not None:
                rec.record(bound=max(bound, value))
        by_type: dict[str, list[str]] = {}
        for n in instance.nodes:
            if n.gpus > 0:
                by_type.setdefault(n.gpu_type, []).append(n.id)
        density = {d.job.id: d.best / d.job.gpus for d in data}
        top_throughput = {d.job.id: max((p.throughput for p in d.points), default=0.0) for d in data}
        state, state_of = None, None  # the node state of the incumbent, recomputed when it changes
        allowed = {d.job.id: set(d.types) for d in data}
        all_nodes = [n for t in by_type for n in by_type[t]]
        size = opts["nodes"]
        status = Status.FEASIBLE
        # each neighbourhood: the CP-SAT solve cpsat runs, with lns as its warm-start stage where a
        # neighbourhood is large enough for one (optsched.exact.core)
        sub = CpSatCore(warm_start=self.solve)
        # the prices of the bound worker's best bound so far aim the targeted steps: nodes where the
        # incumbent loses most against the bound, jobs the bound credits most (not in a
        # reproducible search: they arrive when they arrive)
        source = (bound_worker or worker) if dt_total is None else None
        prices, loss = opts["prices"], {}
        bounds_of = bound_worker or worker  # its bounds join the trajectory as they arrive (not the result's bound)
        # deterministic: the budget is what ends the loop (the wall-clock deadline only as a safety)
        while all_nodes and time.perf_counter() + 0.05 < deadline and (
                dt_total is None or stats["deterministic_s"] < dt_total - 0.01):
            stats["steps"] += 1
            arrived = dict(getattr(bounds_of, "bounds", None) or {})  # a caller's stand-in may hold none
            if arrived:
                rec.record(bound=max(min(arrived.values()), value))
            if source is not None and source.prices() not in (None, prices):
                prices, state_of = source.prices(), None  # the losses are recomputed at the next targeted step
                stats["price_updates"] = stats.get("price_updates", 0) + 1
            # half the steps free nodes of one type, half nodes of any type (jobs may change type)
            pool = by_type[rng.choice(list(by_type))] if rng.random() < 0.5 else all_nodes
            pick = rng.random()
            aim = opts["targeted"] if prices is None else opts["priced"]
            if pick < aim + (1.0 - aim) * opts["linked"]:
                if state_of is not incumbent:
                    state, state_of = node_state(instance, incumbent, top_throughput), incumbent
                    loss = node_losses(instance, incumbent, prices) if prices is not None else {}
                if pick < aim and prices is not None:
                    node_ids = priced_nodes(state, loss, pool, size, rng)
                else:
                    choose = targeted_nodes if pick < aim else linked_nodes
                    node_ids = choose(state, pool, size, rng)
            else:
                node_ids = random_nodes(pool, size, rng)
            types = {instance.node(n).gpu_type for n in node_ids}
            waiting = [j for j in allowed if j not in incumbent.jobs and allowed[j] & types]
            # the jobs the bound credits most first (most jobs left out have no price: then by density)
            waiting.sort(key=lambda j: -density[j] if prices is None else (-prices.job.get(j, 0.0), -density[j]))
            n_extra = max(1, opts["extra_jobs"] * size // opts["nodes"])  # offered jobs grow with the nodes
            extra = waiting[: n_extra // 2]
            rest = waiting[n_extra // 2:]
            extra += rng.sample(rest, min(len(rest), n_extra - len(extra)))
            sub_inst, ids = sub_instance(instance, incumbent, node_ids, extra)
            if not ids:
                continue
            sub_hint = Schedule(sub_inst.name, {j: incumbent.jobs[j] for j in ids if j in incumbent.jobs})
            budget = min(opts["sub_time"], deadline - time.perf_counter())
            if budget <= 0.02:
                break
            timing: dict[str, Any] = {}
            if dt_total is not None:  # the sub-problem's wall limit is a safety only
                budget = min(opts["sub_time"], dt_total - stats["deterministic_s"])
                timing = {"deterministic_time": budget}
            # no LP bound per sub-problem: it is not used, and CP-SAT would keep 0.3 s of each sub-problem for it
            # under HUG the neighbourhood keeps what each tenant needs there to hold the level
            floor = {"usage_floor": hug_floor(instance, incumbent, ids, level)} if hug else {}
            res = sub.solve(sub_inst, time_limit=budget if dt_total is None else deadline - time.perf_counter(),
                            seed=rng.randrange(2**31), hint=sub_hint, num_workers=opts["num_workers"], greedy_hint=False,
                            lp_fallback=False, **floor, **timing)
            spent = res.stats.get("deterministic_s", 0.0) or 0.0
            stats["deterministic_s"] += spent
            # adapt: grow the neighbourhood while sub-problems are proven quickly, shrink when not
            if res.status is Status.OPTIMAL and (res.time_s if dt_total is None else spent) < budget / 2:
                size = min(size + 1, len(all_nodes))
            elif res.status is not Status.OPTIMAL:
                size = max(2, size - 1)
            jobs = {j: a for j, a in incumbent.jobs.items() if j not in ids}
            jobs.update(res.schedule.jobs)
            candidate = Schedule(instance.name, jobs)
            cand_value = schedule_value(instance, candidate)
            # the neighbourhood is solved for worth alone: under DRF a candidate may not lower the level
            cand_level = fair_level(instance, candidate.jobs) if drf else 0
            if cand_value > value + 1e-9 and cand_level >= level and (not policies or (
                    policy_feasible(instance, candidate)
                    and len(deadline_misses(instance, candidate)) <= len(deadline_misses(instance, incumbent)))):
                incumbent, value, level = candidate, cand_value, cand_level
                stats["improvements"] += 1
                rec.record(value)
            # a neighbourhood that freed every node and offered every waiting job is the whole
            # round: its proven optimum is the round's, and nothing is left to search
            if res.status is Status.OPTIMAL and len(node_ids) == len(all_nodes) and len(extra) == len(waiting) and not policies:
                status, bound = Status.OPTIMAL, max(value, res.bound if res.bound is not None else value)
                break
            if bound is not None and value >= bound - 1e-9 * max(1.0, abs(bound)) and not drf:
                status = Status.OPTIMAL  # the incumbent meets the LP bound (under DRF a higher level may still exist)
                break
        stats["final_nodes"] = size
        if instance.round.packing is not None:
            # the search maximises worth; the consolidation pass (worth kept) and the start schedules
            # within the packing tolerance then compete on whole free GPUs. The lexicographic optimum
            # is not proven: a packing round is never reported optimal by lns.
            stats["plain_whole_free_gpus"] = whole_free_gpus(instance, incumbent.jobs)
            incumbent = packing_choice(instance, incumbent, keep_level(instance, incumbent, [s for _name, s in starts]))
            value = schedule_value(instance, incumbent)
            status = Status.FEASIBLE
            stats["whole_free_gpus"] = whole_free_gpus(instance, incumbent.jobs)
        stats.update(fair_stats(instance, incumbent))
        if worker is not None:
            # with a deterministic budget the wall-clock limit is only a safety: no waiting for it
            proven = worker.collect(wait_until=deadline if dt_total is None else None)
            stats.update(worker.stats)
            if proven is not None:
                bound = proven if bound is None else min(bound, proven)
        if bound is not None:
            bound = max(bound, value)
        stats["time_s"] = time.perf_counter() - start
        return Result(incumbent, status, value, bound, self.name, "heuristic", time.perf_counter() - start, stats)

