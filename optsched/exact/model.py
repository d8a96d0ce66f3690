"""The integrated round formulation as a CP-SAT model: :class:`RoundModel` and :func:`build_model`.

The math is in ``formulations/integrated.md``; each constraint family there names the method of
:class:`RoundModel` that builds it. In short: a job runs *whole* on one node at one (type,
Pareto point) mode — a boolean ``z[j,t,p]``, with per-node counts ``N[n,r]`` of each footprint
``r`` deciding which node (whole jobs of one footprint are interchangeable for capacity), or
``h[j,p]`` for a running job staying home — or *split* over several nodes of one type at one
point (``sp[j,t,p]`` with integer GPU counts ``y[j,n,p]``, node-use booleans ``u`` and a
penalty for spreading and moving). Capacities are then linear. The variables are built by
:mod:`optsched.exact.variables`, the constraints by :mod:`optsched.exact.constraints`, the policy
families by :mod:`optsched.exact.policies`; this module holds the objective, hints and the
reading of a solution.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from optsched.elastic import Expansion
from optsched.exact import variants
from optsched.exact.constraints import ModelConstraints
from optsched.exact.fixing import ConfigFixing
from optsched.exact.placeable import can_run, node_arrays
from optsched.exact.policies import add_policy_constraints
from optsched.exact.prep import JobData, dominating_point, node_classes
from optsched.exact.scaling import ValueScale
from optsched.exact.variables import ModelVariables
from optsched.model import Instance
from optsched.round_policies import DRF_NO_TENANT, hug_level, hug_usage
from optsched.schedule import Assignment, Schedule

__all__ = ["OutOfTime", "RoundModel", "build_model", "make_scale"]

class OutOfTime(Exception):
    """Model building ran past its deadline."""


@dataclass
class RoundModel(ModelVariables, ModelConstraints):
    """The CP-SAT model of one round, built family by family (see formulations/integrated.md)."""

    instance: Instance
    data: list[JobData]
    scale: ValueScale
    deadline: float = float("inf")
    node_symmetry: bool = False
    job_symmetry: bool = False
    lifted_rows: bool = False
    split_cuts: bool = False
    model: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    #: (j, t, p) -> pooled whole-mode boolean and its scaled objective coefficient
    z: dict[tuple[int, str, int], cp_model.IntVar] = field(default_factory=dict)
    z_coef: dict[tuple[int, str, int], int] = field(default_factory=dict)
    #: (j, p) -> a running job stays on its (single) home node at point p
    h: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    h_coef: dict[tuple[int, int], int] = field(default_factory=dict)
    home: dict[int, int] = field(default_factory=dict)
    #: (n, (gpus, cores/GPU, GB/GPU)) -> number of whole jobs of that footprint on node n
    cnt: dict[tuple[int, tuple[int, int, int]], cp_model.IntVar] = field(default_factory=dict)
    #: (j, t, p) -> split-mode boolean; (j, n, p) -> GPUs there; (j, n) -> node used
    sp: dict[tuple[int, str, int], cp_model.IntVar] = field(default_factory=dict)
    y: dict[tuple[int, int, int], cp_model.IntVar] = field(default_factory=dict)
    u: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    ge: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)  # (j, k): uses >= k nodes
    stay: dict[int, cp_model.IntVar] = field(default_factory=dict)
    pen: dict[int, cp_model.IntVar] = field(default_factory=dict)  # spread/restart loss of a split job
    k_max: dict[int, int] = field(default_factory=dict)
    by_job_sp: dict[int, list[tuple[int, str, int]]] = field(default_factory=dict)
    ub: dict[tuple[int, int, int], int] = field(default_factory=dict)  #: upper bound of each y
    #: per node: GPUs used and cores used (linear expressions), for symmetry breaking
    usage_g: dict[int, Any] = field(default_factory=dict)
    usage_c: dict[int, Any] = field(default_factory=dict)
    #: elastic jobs (contract v2): the model's ``instance`` is this expansion's rigid variant round
    #: (optsched.elastic); ``add_hint`` and ``read_schedule`` speak the original round's job ids
    elastic: Expansion | None = None
    #: the scaled smallest dominant share (round.fairness = "drf"; set by exact.policies.add_drf) or
    #: progress ("hug"; exact.policies.add_hug)
    drf_min: cp_model.IntVar | None = None
    #: how many urgent jobs run, in a deadline round that cannot hold them all (their forcing
    #: relaxed; set by exact.policies.add_policy_constraints): maximised before anything else
    urgent_met: Any = None
    #: HUG's level variable and its usage variables ``(U, tenant, r, upper bound)``, for complete hints
    hug_aux: Any = None
    #: the whole free GPUs (round.packing; set by exact.policies.add_packing) and, after a staged
    #: solve (exact.policies.solve_lexicographic), the worth stage's bound and the final schedule
    free_gpus: Any = None
    worth_bound: float | None = None
    staged_schedule: Schedule | None = None

    @property
    def staged(self) -> bool:
        """Whether :func:`~optsched.exact.policies.solve_lexicographic` solves this model in stages
        (urgent jobs to run, a fair level or a packing metric): then only ``worth_bound`` bounds
        the worth, and the solver's last objective bound may be another stage's."""
        return self.urgent_met is not None or self.drf_min is not None or self.free_gpus is not None

    def _tick(self) -> None:
        if time.perf_counter() > self.deadline:
            raise OutOfTime

    def set_objective(self) -> None:
        """Maximise the scaled worth (:meth:`worth_expr`)."""
        self.model.maximize(self.worth_expr())

    def worth_expr(self) -> Any:
        """The scaled worth: whole-mode coefficients plus split-job values, less split penalties."""
        zk, hk, sk = list(self.z), list(self.h), list(self.sp)
        sp_coef = [self.scale.to_int(self.data[j].value(self.instance, t, p, 2, False)) for (j, t, p) in sk]
        expr = cp_model.LinearExpr.weighted_sum(
            [self.z[k] for k in zk] + [self.h[k] for k in hk] + [self.sp[k] for k in sk],
            [self.z_coef[k] for k in zk] + [self.h_coef[k] for k in hk] + sp_coef)
        if self.pen:
            expr = expr - sum(self.pen.values())
        return expr

    # --- hint and solution -------------------------------------------------------------------

    def all_variables(self) -> list[cp_model.IntVar]:
        return [*self.z.values(), *self.h.values(), *self.cnt.values(), *self.sp.values(), *self.y.values(), *self.u.values(), *self.ge.values(),
                *self.stay.values(), *self.pen.values()]

    def schedule_to_values(self, schedule: Schedule) -> list[tuple[cp_model.IntVar, int]]:
        """Every model variable's value for ``schedule`` (jobs without a matching mode are dropped)."""
        inst = self.instance
        allv = self.all_variables()
        vals: dict[int, int] = {var.index: 0 for var in allv}
        for job_id, a in schedule.jobs.items():
            j = inst.job_idx(job_id)
            d = self.data[j]
            job = d.job
            try:
                thr = job.profile.at(*a.point)
            except KeyError:
                continue
            p = dominating_point(d.points, a.cpus_per_gpu, a.mem_per_gpu_gb, thr)
            if p is None:
                continue
            alloc = {inst.node_idx(n): g for n, g in a.nodes.items()}
            t = inst.nodes[next(iter(alloc))].gpu_type
            if len(alloc) == 1:
                n = next(iter(alloc))
                pt = d.points[p]
                r = (job.gpus, pt.cpus, pt.mem)
                if self.home.get(j) == n and (j, p) in self.h:
                    vals[self.h[(j, p)].index] = 1
                elif (j, t, p) in self.z and (n, r) in self.cnt:
                    vals[self.z[(j, t, p)].index] = 1
                    vals[self.cnt[(n, r)].index] += 1
                continue
            if (j, t, p) not in self.sp or any((j, n, p) not in self.y or self.ub[(j, n, p)] < g
                                               for n, g in alloc.items()):
                continue
            vals[self.sp[(j, t, p)].index] = 1
            for n, g in alloc.items():
                vals[self.y[(j, n, p)].index] = g
                vals[self.u[(j, n)].index] = 1
            k = len(alloc)
            for kk in range(3, k + 1):
                vals[self.ge[(j, kk)].index] = 1
            stays = j in self.stay and dict(job.placement) == dict(a.nodes)
            if j in self.stay:
                vals[self.stay[j].index] = int(stays)
            moved = job.placement is not None and not stays
            vals[self.pen[j].index] = (self.scale.to_int(d.value(inst, t, p, 2, False))
                                       - self.scale.to_int(d.value(inst, t, p, k, moved)))
        return [(var, vals[var.index]) for var in allv]

    def canonical(self, schedule: Schedule) -> Schedule:
        """An equally good schedule that satisfies the symmetry-breaking orders.

        Interchangeable nodes are relabelled in non-increasing order of (GPUs, cores) used and
        interchangeable jobs take the assignments in class order (what the two families ask).
        """
        inst = self.instance
        jobs = dict(schedule.jobs)
        if self.node_symmetry:
            used: dict[str, tuple[int, int]] = {}
            for a in jobs.values():
                for n, g in a.nodes.items():
                    ug, uc = used.get(n, (0, 0))
                    used[n] = (ug + g, uc + g * a.cpus_per_gpu)
            rename: dict[str, str] = {}
            for cls in node_classes(inst):
                ids = [inst.nodes[n].id for n in cls]
                ranked = sorted(ids, key=lambda n: used.get(n, (0, 0)), reverse=True)
                rename.update(zip(ranked, ids, strict=True))
            jobs = {j: Assignment({rename.get(n, n): g for n, g in a.nodes.items()}, a.cpus_per_gpu, a.mem_per_gpu_gb)
                    for j, a in jobs.items()}
        if self.job_symmetry:
            for cls in variants.variant_classes(self, self.data):
                ids = [inst.jobs[j].id for j in cls]
                given = [jobs.pop(j) for j in ids if j in jobs]
                jobs.update(zip(ids, given, strict=False))
            if self.elastic is not None:
                jobs = variants.canonical_jobs(self.elastic, jobs)
        return Schedule(schedule.instance, jobs)

    def add_hint(self, schedule: Schedule) -> None:
        """Hint every variable (a complete hint) from a feasible schedule."""
        self.model.clear_hints()
        if self.hug_aux is not None:  # HUG's level and usage variables (exact.policies.add_hug)
            zmin, us = self.hug_aux
            original = self.elastic.original if self.elastic is not None else self.instance
            used: dict[tuple[str, int], int] = {}
            for jid, a in schedule.jobs.items():
                job = original.job(jid)
                t = job.tenant if job.tenant is not None else DRF_NO_TENANT
                for r, x in enumerate(hug_usage(a)):
                    used[(t, r)] = used.get((t, r), 0) + x
            for u, t, r, top in us:
                self.model.add_hint(u, min(top, used.get((t, r), 0)))
            self.model.add_hint(zmin, hug_level(original, schedule.jobs))
        if self.elastic is not None:  # original job ids -> the variants of the sizes they got
            schedule = self.elastic.to_model(schedule)
        schedule = self.canonical(schedule)
        for var, v in self.schedule_to_values(schedule):
            self.model.add_hint(var, v)

    def read_schedule(self, solver: cp_model.CpSolver) -> Schedule:
        """The schedule of CP-SAT's incumbent (call only when a solution exists)."""
        inst = self.instance
        jobs = {}
        for (j, p), var in self.h.items():
            if solver.boolean_value(var):
                d = self.data[j]
                jobs[d.job.id] = Assignment({inst.nodes[self.home[j]].id: d.job.gpus}, d.points[p].cpus, d.points[p].mem)
        # pooled whole jobs fill the slots their footprint opened on nodes of their type
        chosen: dict[tuple[str, tuple[int, int, int]], list[tuple[int, int]]] = {}
        for (j, t, p), var in self.z.items():
            if solver.boolean_value(var):
                pt = self.data[j].points[p]
                chosen.setdefault((t, (self.data[j].job.gpus, pt.cpus, pt.mem)), []).append((j, p))
        slots: dict[tuple[str, tuple[int, int, int]], list[int]] = {}
        for (n, r), var in self.cnt.items():
            slots.setdefault((inst.nodes[n].gpu_type, r), []).extend([n] * solver.value(var))
        for key, js in chosen.items():
            free = slots.get(key, [])
            if len(free) != len(js):
                raise RuntimeError(f"cpsat: {len(js)} jobs but {len(free)} slots for footprint {key} (a bug)")
            # a pinned job that landed in a slot on its home node keeps it (worth no less)
            for (j, p), n in zip(js, self._match(js, free), strict=True):
                d = self.data[j]
                jobs[d.job.id] = Assignment({inst.nodes[n].id: d.job.gpus}, d.points[p].cpus, d.points[p].mem)
        for (j, _t, p), var in self.sp.items():
            if solver.boolean_value(var):
                d = self.data[j]
                alloc = {inst.nodes[n].id: solver.value(v) for n, v in self.y_jp.get((j, p), [])}
                alloc = {n: g for n, g in alloc.items() if g > 0}
                jobs[d.job.id] = Assignment(alloc, d.points[p].cpus, d.points[p].mem)
        if self.elastic is not None:  # variants -> the original elastic jobs
            return self.elastic.to_original(Schedule(inst.name, jobs))
        return Schedule(inst.name, jobs)

    def _match(self, js: list[tuple[int, int]], free: list[int]) -> list[int]:
        """Slots for jobs: running jobs take a slot on their current node when there is one."""
        pool = list(free)
        out: list[int | None] = [None] * len(js)
        for i, (j, _p) in enumerate(js):
            place = self.data[j].job.placement
            if place and len(place) == 1:
                n = self.instance.node_idx(next(iter(place)))
                if n in pool:
                    pool.remove(n)
                    out[i] = n
        for i in range(len(js)):
            if out[i] is None:
                out[i] = pool.pop()
        return [n for n in out if n is not None]

    def stats(self) -> dict[str, int]:
        proto = self.model.proto
        return {"variables": len(proto.variables), "constraints": len(proto.constraints), "whole_vars": len(self.z) + len(self.h), "count_vars": len(self.cnt),
                "split_vars": len(self.y)}


def build_model(instance: Instance, data: list[JobData], scale: ValueScale, opts: dict[str, Any], deadline: float,
                forced: list[int] | None = None, elastic: Expansion | None = None,
                fixing: ConfigFixing | None = None, relaxed: list[int] | None = None) -> RoundModel:
    """Build every constraint family (raises :class:`OutOfTime` past ``deadline``); with
    ``forced`` (job indices; ``[]`` for none) also the round's policy families
    (:mod:`optsched.exact.policies`), and ``relaxed`` (job indices) the urgent jobs no longer
    forced in, whose count running is maximised first (``RoundModel.urgent_met``). With ``elastic`` (whose rigid round is ``instance``; ``forced``
    then holds original job indices) at most one variant of each elastic job runs. With
    ``fixing`` only schedules at least as good as its incumbent remain (:meth:`RoundModel.add_config_fixing`)."""
    m = RoundModel(instance, data, scale, deadline, lifted_rows=opts["lifted_rows"], split_cuts=opts["split_cuts"],
                   elastic=elastic)
    m.add_whole_variables()
    m.add_split_variables()
    m.add_pool_link()
    m.add_job_selection()
    variants.add_variant_selection(m)
    m.add_split_gang()
    m.add_spread_value()
    m.add_node_capacity()
    if forced is not None:
        add_policy_constraints(m, forced, relaxed or [])
    if fixing is not None:
        m.add_config_fixing(fixing)
    if opts["usage_floor"]:
        m.add_usage_floor(opts["usage_floor"])
    if opts["type_cuts"]:
        m.add_type_capacity()
    if opts["node_symmetry"]:
        m.add_node_symmetry()
        m.node_symmetry = True
    if opts["job_symmetry"]:
        m.add_job_symmetry()
        m.job_symmetry = True
    m.set_objective()
    m._tick()
    return m


def make_scale(instance: Instance, data: list[JobData]) -> ValueScale:
    """The integer scale for this instance's job values (see :mod:`optsched.exact.scaling`)."""
    vals = [v for d in data for v in d.base.values()]
    total = sum(d.best for d in data)
    # only jobs that fit somewhere, with a positive value, can enter a schedule: with none, the
    # bound is 0 exactly (no rounding slack), as the empty schedule is optimal
    nodes = node_arrays(instance)
    max_terms = min(sum(1 for d in data if d.best > 0 and can_run(instance, d.job, nodes)), sum(n.gpus for n in instance.nodes))
    return ValueScale.for_values(vals, total, max_terms)
