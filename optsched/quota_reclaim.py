"""Making room for quota owners: the targeted reclaim of :func:`optsched.policy_repair.repair`.

:class:`Reclaim` places an owner's waiting job where evicting borrowers' jobs costs least (a
branch and bound over at most :data:`EVICT_NODES` nodes per owner job, GPU type and size, those
where making room can cost least first), keeps each tenant's GPUs (:class:`Tenancy`) and the move
budget, and adds evicted jobs back where they fit (``formulations/policies.md``, "The heuristics'
repair").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from optsched.heuristics.common import Cluster
from optsched.model import Instance, Job, fair_floor
from optsched.round_policies import (
    tenant_gpus,
    urgent,
)
from optsched.schedule import Assignment
from optsched.values import assignment_value, is_move, job_value

__all__ = ["EVICT_NODES", "Reclaim", "Tenancy", "cluster_of", "fit_at_demand"]

#: the targeted quota repair tries at most this many nodes per owner job, GPU type and size (those
#: where making room can cost least first)
EVICT_NODES = 16

def fit_at_demand(instance: Instance, cl: Cluster, job: Job, limit: int | None = None) -> Assignment | None:
    """Where ``job`` fits in the free room at its demand point without a move (its current
    placement if it runs, else best fit on its fastest allowed type) with at most ``limit`` GPUs;
    ``None`` when nowhere. An elastic job tries its nominal size, then the others largest first."""
    c, m = job.demand
    if job.placement is not None:
        ok = (limit is None or sum(job.placement.values()) <= limit) and cl.fits_at(job.placement, c, m)
        return Assignment(dict(job.placement), c, m) if ok else None
    sizes = [job.gpus, *sorted((k for k in job.sizes if k != job.gpus), reverse=True)]
    for k in sizes:
        if limit is not None and k > limit:
            continue
        for t in cl.allowed_types(job):  # types_by_speed, memoised by the cluster
            nodes = cl.best_fit(t, k, c, m)
            if nodes is not None:
                return Assignment(nodes, c, m)
    return None

def cluster_of(instance: Instance, jobs: Mapping[str, Assignment]) -> Cluster:
    cl = Cluster(instance)
    for a in jobs.values():
        cl.take(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb)
    return cl

class Tenancy:
    """Rule 6, kept incrementally: GPUs held per tenant (``None``: jobs without one) and, per
    listed tenant, how many unscheduled jobs it has of each smallest size."""

    def __init__(self, instance: Instance, jobs: Mapping[str, Assignment]) -> None:
        self.quota = dict(instance.round.tenants or {})
        self.used = tenant_gpus(instance, jobs)
        self.wait: dict[str, dict[int, int]] = {t: {} for t in self.quota}
        for job in instance.jobs:
            if job.tenant in self.quota and job.id not in jobs:
                w = self.wait[job.tenant]
                k = min(job.sizes)
                w[k] = w.get(k, 0) + 1

    def q(self, t: str | None) -> int:
        return self.quota.get(t, 0) if t is not None else 0

    def add(self, job: Job, gpus: int) -> None:
        self.used[job.tenant] = self.used.get(job.tenant, 0) + gpus
        w = self.wait.get(job.tenant) if job.tenant is not None else None
        if w is not None:
            k = min(job.sizes)
            w[k] -= 1
            if not w[k]:
                del w[k]

    def remove(self, job: Job, gpus: int) -> None:
        self.used[job.tenant] -= gpus
        w = self.wait.get(job.tenant) if job.tenant is not None else None
        if w is not None:
            k = min(job.sizes)
            w[k] = w.get(k, 0) + 1

    def rest(self, t: str | None) -> int:
        """GPUs left in ``t``'s quota."""
        return self.q(t) - self.used.get(t, 0)

    def borrows(self, t: str | None) -> bool:
        return self.used.get(t, 0) > self.q(t)

    def owner_waiting(self) -> bool:
        return any(w and min(w) <= self.rest(t) for t, w in self.wait.items())

    def ok(self) -> bool:
        return not (any(g > self.q(t) for t, g in self.used.items()) and self.owner_waiting())


class Reclaim:
    """The targeted quota repair (:func:`repair`): owners' jobs placed at any allowed point, on
    room freed by evicting the cheapest borrowers' jobs where the owner's job would fit."""

    def __init__(self, instance: Instance, jobs: dict[str, Assignment], lean: bool) -> None:
        self.inst = instance
        self.jobs = jobs
        self.lean = lean
        self.cl = cluster_of(instance, jobs)
        self.st = Tenancy(instance, jobs)
        self.moves_ok = instance.round.max_moves is None  # with a move budget, additions are never moves
        self.on_node: dict[int, set[str]] = {}
        for jid, a in jobs.items():
            for nid in a.nodes:
                self.on_node.setdefault(instance.node_idx(nid), set()).add(jid)
        self.evicted: list[tuple[str, Assignment]] = []
        self._costs: dict[str, tuple[Assignment, float]] = {}
        # _cheapest's memo per node index: cost, cost per GPU, GPUs / cores / GB free once the
        # borrowers' jobs are out; has: some borrower's job there; stale: to recompute when next read
        n = len(instance.nodes)
        self._lb_cost = np.zeros((n, 2), dtype=np.float64)
        self._lb_free = np.zeros((n, 3), dtype=np.int64)
        self._lb_has = np.zeros(n, dtype=bool)
        self._lb_stale = np.ones(n, dtype=bool)
        self._node_gpus = np.array([x.gpus for x in instance.nodes], dtype=np.int64)
        self._pts: dict[tuple[int, tuple[int, int]], tuple[list[tuple[int, int, float]], list[tuple[int, int]]]] = {}

    # --- bookkeeping ---

    def _put(self, jid: str, a: Assignment) -> None:
        job = self.inst.job(jid)
        self.jobs[jid] = a
        self.cl.take(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb)
        self.st.add(job, a.gpus)
        for nid in a.nodes:
            i = self.inst.node_idx(nid)
            self.on_node.setdefault(i, set()).add(jid)
            self._lb_stale[i] = True

    def _drop(self, jid: str) -> None:
        job = self.inst.job(jid)
        a = self.jobs.pop(jid)
        self.cl.take(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb, sign=-1)
        self.st.remove(job, a.gpus)
        for nid in a.nodes:
            i = self.inst.node_idx(nid)
            self.on_node[i].discard(jid)
            self._lb_stale[i] = True
        self.evicted.append((jid, a))

    def points(self, job: Job) -> tuple[list[tuple[int, int, float]], list[tuple[int, int]]]:
        """The job's allowed grid points, its demand point first, then by throughput (only the
        demand point unless ``lean``), and the Pareto-least of them (any fits iff one of these does)."""
        key = (id(job.profile), job.demand)
        hit = self._pts.get(key)
        if hit is None:
            c0, m0 = job.demand
            base = job.demand_throughput
            pts = [(c0, m0, base)]
            if self.lean:
                rest = [p for p in job.profile.allowed(fair_floor(job, self.inst.round.fair)) if (p[0], p[1]) != (c0, m0)]
                pts += sorted(rest, key=lambda p: (-p[2], p[0], p[1]))
            least: list[tuple[int, int]] = []
            for c, m in sorted((c, m) for c, m, _ in pts):  # by cores: keep each that needs less memory than all before
                if not least or m < least[-1][1]:
                    least.append((c, m))
            hit = self._pts[key] = (pts, least)
        return hit

    def _sizes(self, job: Job, limit: int | None) -> list[int]:
        sizes = [job.gpus, *sorted((k for k in job.sizes if k != job.gpus), reverse=True)]
        return [k for k in sizes if limit is None or k <= limit]

    def _may_move(self) -> bool:
        """Whether an added running job may land away from home (only without ``max_moves``)."""
        return self.moves_ok

    def _home(self, job: Job) -> dict[str, int] | None:
        """A running job's nodes when they are of one allowed type."""
        if job.placement is None:
            return None
        home = dict(job.placement)
        types = {self.inst.node(n).gpu_type for n in home}
        return home if len(types) == 1 and next(iter(types)) in self.cl.allowed_types(job) else None

    def _cost(self, jid: str) -> float:
        """What evicting a scheduled job loses: its worth, a running job's at home raised by its
        restart share (it pays the restart when it comes back)."""
        job = self.inst.job(jid)
        a = self.jobs[jid]
        hit = self._costs.get(jid)
        if hit is not None and hit[0] is a:
            return hit[1]
        v = assignment_value(self.inst, job, a)
        if job.placement is not None and not is_move(job, a.nodes):
            v *= 1.0 + job.restart_s / self.inst.round.duration_s
        self._costs[jid] = (a, v)
        return v

    # --- placing without eviction ---

    def try_place(self, job: Job, limit: int | None, fail: set[tuple[str, int, tuple[tuple[int, int], ...]]] | None = None) -> Assignment | None:
        """Where ``job`` fits in the free room (at most ``limit`` GPUs): a running job at home at
        the first allowed point that fits, else (when the move budget allows, or it is not
        running) best fit on its fastest type at the first point that fits; ``None``: nowhere.
        ``fail`` memoises shapes that did not fit (valid while the free room only shrinks)."""
        pts, least = self.points(job)
        home = self._home(job)
        if home is not None and (limit is None or sum(home.values()) <= limit):
            for c, m, _ in pts:
                if self.cl.fits_at(home, c, m):
                    return Assignment(home, c, m)
        if job.placement is not None and not self._may_move():
            return None
        for k in self._sizes(job, limit):
            for t in self.cl.allowed_types(job):
                key = (t, k, tuple(least))
                if fail is not None and key in fail:
                    continue
                if all(self.cl.best_fit(t, k, c, m) is None for c, m in least):
                    if fail is not None:
                        fail.add(key)
                    continue
                for c, m, _ in pts:
                    nodes = self.cl.best_fit(t, k, c, m)
                    if nodes is not None:
                        return Assignment(nodes, c, m)
        return None

    # --- targeted eviction ---

    def _cheapest(self, i: int) -> tuple[float, float, int, int, int] | None:
        """For node ``i``: the least eviction cost and the least cost per GPU held there among
        the borrowers' jobs on it, and the GPUs, cores and GB free once all of them are out
        (``None``: none there); memoised until a job lands on or leaves the node (nobody starts
        borrowing while owners' jobs are placed, so a memo only errs low). Freeing ``n`` GPUs on
        the node costs at least ``max(cost, n x per GPU)``."""
        if self._lb_stale[i]:
            nid = self.cl.ids[i]
            g, c, m = int(self.cl.free_g[i]), int(self.cl.free_c[i]), int(self.cl.free_m[i])
            vs = []
            for j in self.on_node.get(i, ()):
                if self.st.borrows(self.inst.job(j).tenant):
                    a = self.jobs[j]
                    k = a.nodes[nid]
                    vs.append((self._cost(j), k))
                    g, c, m = g + k, c + k * a.cpus_per_gpu, m + k * a.mem_per_gpu_gb
            self._lb_stale[i] = False
            self._lb_has[i] = bool(vs)
            if vs:
                self._lb_cost[i] = (min(x for x, _ in vs), min(x / k for x, k in vs))
                self._lb_free[i] = (g, c, m)
        if not self._lb_has[i]:
            return None
        (lo, per), (g, c, m) = self._lb_cost[i].tolist(), self._lb_free[i].tolist()
        return lo, per, g, c, m

    def _candidates(self, t: str, k: int, least: list[tuple[int, int]]) -> list[tuple[float, int]]:
        """The ``EVICT_NODES`` nodes of type ``t`` (with ``k`` GPUs or more) where evicting
        borrowers' jobs might make room for ``k`` GPUs at one of the ``least`` points, as
        ``(lower bound on the cost, node index)``, least first (ties by index). Vectorised over
        the memo of :meth:`_cheapest`; only the stale entries are recomputed."""
        idx = self.cl.by_type[t]
        idx = idx[self._node_gpus[idx] >= k]
        for i in idx[self._lb_stale[idx]].tolist():
            self._cheapest(i)
        free = self._lb_free[idx]
        ok = self._lb_has[idx] & (free[:, 0] >= k)
        room = np.zeros(idx.size, dtype=bool)
        for c, m in least:
            room |= (free[:, 1] >= c * k) & (free[:, 2] >= m * k)
        idx = idx[ok & room]
        if not idx.size:
            return []
        cost = self._lb_cost[idx]
        lb = np.maximum(cost[:, 0], cost[:, 1] * (k - self.cl.free_g[idx]))
        if idx.size > EVICT_NODES:  # the EVICT_NODES least bounds and any ties with the last of them
            cut = np.partition(lb, EVICT_NODES - 1)[EVICT_NODES - 1]
            keep = lb <= cut
            idx, lb = idx[keep], lb[keep]
        order = np.lexsort((idx, lb))[:EVICT_NODES]
        return list(zip(lb[order].tolist(), idx[order].tolist(), strict=True))

    def _victims(self, idx: Iterable[int]) -> list[str]:
        """Borrowers' jobs on these nodes, cheapest per GPU first."""
        seen = {j for i in idx for j in self.on_node.get(i, ()) if self.st.borrows(self.inst.job(j).tenant)}
        return sorted(seen, key=lambda j: (self._cost(j) / self.jobs[j].gpus, j))

    def _evict_on(self, job: Job, t: str, want: dict[int, int], k: int) -> tuple[float, int, int, list[str]] | None:
        """Evict the cheapest borrowers' jobs on the nodes of ``want`` (node index -> GPUs) until
        the job fits there at some allowed point: (worth gained net of the evicted worth, the
        best point that then fits, the evicted jobs); ``None`` when even all of them do not make room."""
        pts, least = self.points(job)
        cl = self.cl
        free = {i: [int(cl.free_g[i]), int(cl.free_c[i]), int(cl.free_m[i])] for i in want}

        def fits(c: int, m: int) -> bool:
            return all(f[0] >= g and f[1] >= c * g and f[2] >= m * g for i, g in want.items() for f in (free[i],))

        used: dict[str | None, int] = {}
        out: list[str] = []
        cost = 0.0
        victims = self._victims(want)
        pos = 0
        while not any(fits(c, m) for c, m in least):
            while pos < len(victims):
                v = victims[pos]
                pos += 1
                u = self.inst.job(v).tenant
                if used.setdefault(u, self.st.used.get(u, 0)) > self.st.q(u):
                    break
            else:
                return None
            a = self.jobs[v]
            used[u] -= a.gpus
            for nid, g in a.nodes.items():
                i = self.inst.node_idx(nid)
                if i in free:
                    free[i][0] += g
                    free[i][1] += a.cpus_per_gpu * g
                    free[i][2] += a.mem_per_gpu_gb * g
            out.append(v)
            cost += self._cost(v)
        c, m, _ = next(p for p in sorted(pts, key=lambda p: -p[2]) if fits(p[0], p[1]))
        nodes = {self.cl.ids[i]: g for i, g in want.items()}
        moved = is_move(job, nodes)
        if moved and not self._may_move():
            return None
        worth = job_value(self.inst, job, t, c, m, len(nodes), moved, k)
        return worth - cost, c, m, out

    def _evict_gang(self, job: Job, t: str, k: int) -> tuple[float, int, int, list[str]] | None:
        """A gang larger than any node of ``t``: at its demand point (or the least points), evict
        borrowers' jobs on ``t``'s nodes by value per GPU freed until ``k`` GPUs fit in all."""
        pts, least = self.points(job)
        cl = self.cl
        idx = [int(i) for i in cl.by_type.get(t, ())]
        best = None
        victims = self._victims(idx)
        for c, m in dict.fromkeys([job.demand, *least]):
            free = {i: [int(cl.free_g[i]), int(cl.free_c[i]), int(cl.free_m[i])] for i in idx}

            def cap(i: int, c: int = c, m: int = m, free: dict[int, list[int]] = free) -> int:
                f = free[i]
                return min(f[0], f[1] // c if c else f[0], f[2] // m if m else f[0])

            total = sum(cap(i) for i in idx)
            used: dict[str | None, int] = {}
            out: list[str] = []
            cost = 0.0
            for v in victims:
                if total >= k:
                    break
                u = self.inst.job(v).tenant
                if used.setdefault(u, self.st.used.get(u, 0)) <= self.st.q(u):
                    continue
                a = self.jobs[v]
                used[u] -= a.gpus
                for nid, g in a.nodes.items():
                    i = self.inst.node_idx(nid)
                    if i in free:
                        before = cap(i)
                        free[i][0] += g
                        free[i][1] += a.cpus_per_gpu * g
                        free[i][2] += a.mem_per_gpu_gb * g
                        total += cap(i) - before
                out.append(v)
                cost += self._cost(v)
            if total < k:
                continue
            n = max(1, -(-k // max(self.inst.nodes[i].gpus for i in idx)))
            net = job_value(self.inst, job, t, c, m, n, job.placement is not None, k) - cost
            if best is None or net > best[0]:
                best = (net, c, m, out)
        return best

    def evict_place(self, job: Job, limit: int) -> bool:
        """Place ``job`` (at most ``limit`` GPUs) where evicting borrowers' jobs costs least net of
        its worth: its home, one node, or for a gang larger than a node the nodes of one type."""
        best: tuple[float, str, int, dict[int, int] | None, int, int, list[str]] | None = None
        home = self._home(job)
        if home is not None and sum(home.values()) <= limit:
            t = self.inst.node(next(iter(home))).gpu_type
            want = {self.inst.node_idx(n): g for n, g in home.items()}
            r = self._evict_on(job, t, want, sum(home.values()))
            if r is not None:
                best = (r[0], t, sum(home.values()), want, r[1], r[2], r[3])
        if job.placement is None or self._may_move():
            pts, least = self.points(job)
            top = max(pts, key=lambda p: p[2])
            for k in self._sizes(job, limit):
                for t in self.cl.allowed_types(job):
                    # branch and bound: nodes by their cheapest borrower's job (a lower bound on
                    # what making room there costs), until even that exceeds the job's best worth
                    ub = job_value(self.inst, job, t, top[0], top[1], 1, False, k)
                    found = False
                    for lb, i in self._candidates(t, k, least):
                        if best is not None and ub - lb <= best[0]:
                            found = True
                            break
                        r = self._evict_on(job, t, {i: k}, k)
                        if r is not None:
                            found = True
                            if best is None or r[0] > best[0]:
                                best = (r[0], t, k, {i: k}, r[1], r[2], r[3])
                    if not found:
                        r = self._evict_gang(job, t, k)
                        if r is not None and (best is None or r[0] > best[0]):
                            best = (r[0], t, k, None, r[1], r[2], r[3])
        if best is None:
            return False
        _, t, k, want, c, m, victims = best
        for v in victims:
            self._drop(v)
        nodes = {self.cl.ids[i]: g for i, g in want.items()} if want is not None else self.cl.best_fit(t, k, c, m)
        if nodes is None or not self.cl.fits_at(nodes, c, m) or (is_move(job, nodes) and not self._may_move()):
            return False  # not expected: the evictions above made the room; what they freed is added back later
        self._put(job.id, Assignment(nodes, c, m))
        return True

    # --- the passes ---

    def owners(self, evict: bool, until_ok: bool = True) -> None:
        """Place waiting quota-fitting owners' jobs (urgent first, then by weight) until the rule
        holds (all that fit unless ``until_ok``); with ``evict`` by targeted eviction where they do
        not fit, repeated while that frees room."""
        fail: set[tuple[str, int, tuple[tuple[int, int], ...]]] | None = None if evict else set()
        progress = True
        while progress and not (until_ok and self.st.ok()):
            progress = False
            order = sorted((j for j in self.inst.jobs if j.tenant in self.st.quota and j.id not in self.jobs),
                           key=lambda j: (not urgent(self.inst, j), -j.weight, j.id))
            for job in order:
                if until_ok and self.st.ok():
                    return
                rest = self.st.rest(job.tenant)
                if job.id in self.jobs or min(job.sizes) > rest:
                    continue
                a = self.try_place(job, rest, fail)
                if a is not None:
                    self._put(job.id, a)
                    progress = True
                elif evict and self.evict_place(job, rest):
                    progress = True
            progress = progress and evict

    def reclaim_rest(self) -> None:
        """Borrowers' jobs out (lowest value per GPU first) until nobody borrows."""
        for t in [t for t in self.st.used if self.st.borrows(t)]:
            mine = sorted((j for j in self.jobs if self.inst.job(j).tenant == t),
                          key=lambda j: (assignment_value(self.inst, self.inst.job(j), self.jobs[j]) / self.jobs[j].gpus, j))
            for jid in mine:
                if not self.st.borrows(t):
                    break
                self._drop(jid)

    def add_back(self) -> None:
        """Once no owner waits (borrowing allowed again): the evicted jobs, most worth first, where
        they were or else where they fit, then the other jobs left out, in weight order."""
        if not self.evicted or self.st.owner_waiting():
            return
        fail: set[tuple[str, int, tuple[tuple[int, int], ...]]] = set()
        back = sorted(dict(self.evicted).items(), key=lambda p: (-assignment_value(self.inst, self.inst.job(p[0]), p[1]), p[0]))
        for jid, a in back:
            if jid in self.jobs:
                continue
            job = self.inst.job(jid)
            if self.cl.fits_at(a.nodes, a.cpus_per_gpu, a.mem_per_gpu_gb) and (not is_move(job, a.nodes) or self._may_move()):
                self._put(jid, a)
            else:
                b = self.try_place(job, None, fail)
                if b is not None:
                    self._put(jid, b)
        for job in sorted(self.inst.jobs, key=lambda j: (-j.weight, not j.running, j.id)):
            if job.id not in self.jobs:
                b = self.try_place(job, None, fail)
                if b is not None:
                    self._put(job.id, b)

    def run(self) -> dict[str, Assignment]:
        self.owners(evict=False)
        if not self.st.ok():
            self.owners(evict=True)
        if not self.st.ok():
            self.reclaim_rest()
        if self.st.owner_waiting():  # the rule holds as nobody borrows: place the owners' jobs that fit
            self.owners(evict=False, until_ok=False)
        self.add_back()
        return self.jobs
