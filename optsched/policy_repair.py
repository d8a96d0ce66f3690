"""Repairing a schedule so that it keeps the round's hard policy rules (contract version 2).

:func:`repair` turns any contract-feasible schedule into one that keeps the quota rule (rule 6)
and the move budget (rule 7) and adds urgent (deadline) jobs where they fit. The heuristics end
with it, CP-SAT repairs its candidate hints with it, the MIP backends their hints, and
``solve_round`` a caller's hint. The rules themselves, and what a schedule must keep, are in
:mod:`optsched.round_policies` (``formulations/policies.md``, "The heuristics' repair").
"""

from __future__ import annotations

from optsched.heuristics.common import Cluster
from optsched.model import Instance, cheapest_point, fair_floor
from optsched.quota_reclaim import Reclaim, Tenancy, cluster_of, fit_at_demand
from optsched.round_policies import (
    borrowers,
    moved_jobs,
    owner_waiting,
    pinned_misses,
    quota_of,
    tenant_gpus,
    urgent,
    urgent_jobs,
)
from optsched.schedule import Assignment, Schedule
from optsched.values import assignment_value

__all__ = ["repair"]


def repair(instance: Instance, schedule: Schedule, *, lean: bool = True) -> Schedule:
    """A schedule close to ``schedule`` that keeps the quota and max_moves rules.

    1. Moves beyond ``max_moves``: the lowest-valued moved jobs are left out (preempted), urgent
       (deadline) jobs last.
    2. Quotas: waiting jobs of tenants below quota that fit in their quota are added where they
       fit now. If the rule still fails, two repairs are built and the one of more worth is kept:

       * *targeted* (:class:`optsched.quota_reclaim.Reclaim`): each waiting quota-fitting owner job (urgent first, then
         by weight) is placed where it fits, at any allowed grid point (demand point first, then
         by throughput; only the demand point with ``lean=False``), a running job at home or,
         without ``max_moves``, elsewhere; else on the node (or, for a gang larger than a node,
         the nodes) where evicting the fewest / cheapest borrowers' jobs makes room (cost: the
         evicted jobs' worth, a running job's raised by its restart share). The rule is
         re-checked after each step and the pass stops once it holds. If it still fails, borrowers'
         jobs are left out (lowest value per GPU first) until nobody borrows. Owners' jobs still
         waiting are then placed where they fit (without eviction). Once no owner waits, evicted
         jobs, then the other jobs left out, are added back where they fit (borrowing is allowed
         again);
       * *reclaim-all*: the previous repair (borrowers' jobs left out until nobody borrows,
         waiting quota jobs re-added at their demand point), then the same adding back once no
         owner waits. It only adds to that repair's schedule, so the result is never worth less.
    3. Urgent (deadline) jobs still out are added where they fit, when the rules still hold.

    Before all of these, pinned jobs (``preemptible=False``, running; rule 8) are put back where
    they run (:func:`_keep_pinned`).

    Where ``max_moves`` is set, additions never count as moves: a running job is added only where
    it runs (without a budget it may also be added elsewhere, paying its restart).
    """
    jobs = dict(schedule.jobs)
    if any(j.pinned for j in instance.jobs):
        _keep_pinned(instance, jobs, lean)
    if instance.round.max_moves is not None:
        moved = sorted(moved_jobs(instance, jobs),
                       key=lambda j: (urgent(instance, instance.job(j)), assignment_value(instance, instance.job(j), jobs[j]), j))
        for jid in moved[: max(0, len(moved) - instance.round.max_moves)]:
            del jobs[jid]
    tenants = instance.round.tenants
    if tenants is not None:
        cl = cluster_of(instance, jobs)
        _add_quota_jobs(instance, jobs, cl)
        used = tenant_gpus(instance, jobs)
        if borrowers(instance, used) and owner_waiting(instance, jobs, used):
            start = dict(jobs)
            old = _reclaim_all(instance, dict(start), cl, used, lean)
            new = Reclaim(instance, start, lean).run()
            gain = sum(assignment_value(instance, instance.job(j), a) for j, a in new.items() if old.get(j) != a) \
                - sum(assignment_value(instance, instance.job(j), a) for j, a in old.items() if new.get(j) != a)
            jobs = new if gain >= -1e-9 else old
    out = [jid for jid in urgent_jobs(instance) if jid not in jobs]
    if not out:
        return Schedule(schedule.instance, jobs)
    cl = Cluster(instance)
    for a in jobs.values():
        cl.take(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb)
    st = Tenancy(instance, jobs)  # rule 6 kept incrementally; fit_at_demand never moves, so rule 7 holds
    for jid in out:
        job = instance.job(jid)
        a = fit_at_demand(instance, cl, job)
        if a is None:
            continue
        st.add(job, a.gpus)
        if st.ok():
            jobs[jid] = a
            cl.take(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb)
        else:
            st.remove(job, a.gpus)
    return Schedule(schedule.instance, jobs)


def _add_quota_jobs(instance: Instance, jobs: dict[str, Assignment], cl: Cluster) -> None:
    tenants = instance.round.tenants or {}
    used = tenant_gpus(instance, jobs)
    for job in sorted(instance.jobs, key=lambda j: (not urgent(instance, j), -j.weight, j.id)):
        if job.id in jobs or job.tenant not in tenants or used.get(job.tenant, 0) + min(job.sizes) > tenants[job.tenant]:
            continue
        a = fit_at_demand(instance, cl, job, tenants[job.tenant] - used.get(job.tenant, 0))
        if a is not None:
            jobs[job.id] = a
            cl.take(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb)
            used[job.tenant] = used.get(job.tenant, 0) + a.gpus

def _keep_pinned(instance: Instance, jobs: dict[str, Assignment], lean: bool = True) -> None:
    """Rule 8 in place: every pinned job runs where it runs now. A pinned job left out or moved
    is put back at the fastest grid point that fits there (with ``lean=False`` its demand point
    first, as fixed-demand keeps every job); when none fits, the other jobs on its
    nodes are left out, lowest value per GPU first, until its cheapest point fits (it always does
    once they are gone: the contract checks that the pinned jobs fit together)."""
    pinned = [j for j in instance.jobs if j.pinned]
    misses = pinned_misses(instance, jobs)
    if not misses:
        return
    for jid in misses:  # moved ones come out; every miss is put back below
        jobs.pop(jid, None)
    cl = cluster_of(instance, jobs)
    fair = instance.round.fair
    for j in pinned:
        if j.id in jobs:
            continue
        home = dict(j.placement or {})
        pts = j.profile.allowed(fair_floor(j, fair))
        pts.sort(key=lambda p: (not lean and (p[0], p[1]) != j.demand, -p[2], p[0], p[1]))
        c0, m0 = cheapest_point(j, fair)
        if not cl.fits_at(home, c0, m0):
            others = [(assignment_value(instance, instance.job(o), a) / a.gpus, o) for o, a in jobs.items()
                      if not instance.job(o).pinned and set(a.nodes) & set(home)]
            for _v, o in sorted(others):
                a = jobs.pop(o)
                cl.take(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb, sign=-1)
                if cl.fits_at(home, c0, m0):
                    break
        if not cl.fits_at(home, c0, m0):  # the pinned jobs placed before it give up their extra cores and memory
            for o in [p.id for p in pinned if p.id in jobs and set(jobs[p.id].nodes) & set(home)]:
                a, (c1, m1) = jobs[o], cheapest_point(instance.job(o), fair)
                cl.take(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb, sign=-1)
                jobs[o] = Assignment(a.nodes, c1, m1)
                cl.take(a.nodes, c1, m1)
        c, m = next(((c, m) for c, m, _t in pts if cl.fits_at(home, c, m)), (c0, m0))
        jobs[j.id] = Assignment(home, c, m)
        cl.take(home, c, m)

def _reclaim_all(instance: Instance, jobs: dict[str, Assignment], cl: Cluster, used: dict[str | None, int], lean: bool) -> dict[str, Assignment]:
    """The previous repair's reclaim (borrowers' jobs out, lowest value per GPU first, until nobody
    borrows; waiting quota jobs re-added at their demand point), then :meth:`Reclaim.add_back`."""
    start = dict(jobs)
    for t in borrowers(instance, used):
        mine = sorted((j for j in jobs if instance.job(j).tenant == t),
                      key=lambda j: (assignment_value(instance, instance.job(j), jobs[j]) / jobs[j].gpus, j))
        for jid in mine:
            if used[t] <= quota_of(instance, t):
                break
            a = jobs.pop(jid)
            cl.take(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb, sign=-1)
            used[t] -= a.gpus
    _add_quota_jobs(instance, jobs, cl)
    r = Reclaim(instance, jobs, lean)
    r.evicted = [(j, a) for j, a in start.items() if j not in jobs]
    r.add_back()
    return r.jobs
