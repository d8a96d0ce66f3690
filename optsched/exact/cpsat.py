"""The integrated round formulation solved exactly by OR-Tools CP-SAT.

The math is in ``formulations/integrated.md``; each constraint family there names the method of
:class:`RoundModel` that builds it. In short: a job runs *whole* on one node at one (type,
Pareto point) mode — a boolean ``z[j,t,p]``, with per-node counts ``N[n,r]`` of each footprint
``r`` deciding which node (whole jobs of one footprint are interchangeable for capacity), or
``h[j,p]`` for a running job staying home — or *split* over several nodes of one type at one
point (``sp[j,t,p]`` with integer GPU counts ``y[j,n,p]``, node-use booleans ``u`` and a
penalty for spreading and moving). Capacities are then linear. Identical jobs are ordered by
selection; a complete hint (greedy, the caller's, and on larger rounds an lns warm start)
seeds the search; an LP-relaxation bound backs CP-SAT's when it proves nothing.

The solver never exceeds its time limit: building checks the clock and, if the budget runs out,
returns the best hint schedule with status ``TIME_LIMIT``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from optsched.elastic import Expansion, expand, has_elastic
from optsched.exact import elastic as elastic_rows
from optsched.exact.fixing import ConfigFixing, config_fixing
from optsched.exact.hint import greedy_schedule
from optsched.exact.options import PORTFOLIOS, CpsatOptions
from optsched.exact.placeable import can_run, node_arrays
from optsched.exact.policies import solve_lexicographic
from optsched.exact.prep import JobData, dominating_point, hug_keep, hug_points_of, job_data, node_classes
from optsched.exact.scaling import ValueScale
from optsched.model import Instance
from optsched.policy_repair import repair
from optsched.result import Result, Status
from optsched.round_policies import (
    DRF_NO_TENANT,
    deadline_misses,
    fair_level,
    fair_scale,
    hug_level,
    hug_usage,
    packing_tolerance,
    policy_families,
    urgent_jobs,
    whole_free_gpus,
)
from optsched.schedule import Assignment, Schedule
from optsched.trajectory import Trajectory, current, recorded
from optsched.values import schedule_value

__all__ = ["CpSatSolver", "RoundModel", "OutOfTime", "start_bound_worker"]

#: rounds with more job x node cells than this get an lns warm start by default (measured: at
#: 32 x 120 and beyond, lns finds 10-20 % better schedules than CP-SAT in 10 s, and CP-SAT did
#: not improve on a 4 s lns start in the next 6 s)
LNS_FROM_CELLS = 1024
#: ... and above this many cells 97 % of the time: the CP-SAT stage after it is only a chance to
#: polish (measured at 64 x 256, 4 rounds, load 7.5: CP-SAT got 0-0.6 deterministic seconds after
#: a 70 % lns stage and never improved it, a 90 % share found better schedules on all 4, +4 % in
#: sum; with 90 % it got 0.0 deterministic seconds at 64 x 256 and 0.04-0.34 at 32 x 120, where
#: it never improved the lns schedule either: core-quiet.csv, core-session3.csv)
LNS_MOSTLY_FROM_CELLS = 2048

#: seconds kept back from the time limit for reading the solution and building the Result, plus
#: this much per job (measured: at 4,000 jobs reading back and checking take about 0.4 s)
_RESERVE_S = 0.1
_RESERVE_PER_JOB_S = 1e-4
#: time kept for the LP-relaxation bound when CP-SAT ends without a proof (measured: 0.07 s at
#: 64 x 256 once loaded, 0.3 s on first use)
_LP_BOUND_S = 0.3


#: rounds without an lns stage (option ``config_fixing``): when CP-SAT has not proven the round
#: after this many seconds, the configuration LP's reduced costs rule out what no schedule at
#: least as good as the incumbent uses (optsched.exact.fixing) and CP-SAT re-solves the restricted
#: model with the time left. Not with ``deterministic_time``: when the stage starts and what the
#: LP (limited by wall time) fixes would depend on the machine's load, and such runs promise the
#: same schedule for the same seed and limit. Measured (formulations/integrated.md, "Configuration
#: fixing"): 8 of the 12 small bench rounds are proven within 2 s anyway; `small/base 8x24 seed 0`
#: is proven in ~30 s with the fixing, not in 60 s without.
FIXING_AFTER_S = 2.0
#: the configuration LP gets at most this many seconds (and a quarter of what is left)
FIXING_BOUND_S = 2.0


class OutOfTime(Exception):
    """Model building ran past its deadline."""


def lifted_coefficients(gpus: int, cap: int, items: list[tuple[int, int]]) -> list[int]:
    """Lifted coefficients of a node's core (or memory) row; see ``add_node_capacity`` in
    formulations/integrated.md.

    ``items`` are ``(GPUs, cores)`` per unit of each term. Other units use at most ``cmax`` cores
    per GPU, so beside an item of ``g`` GPUs they use at most ``(gpus - g) * cmax`` cores: its
    coefficient can be raised to ``cap - (gpus - g) * cmax`` (the cores it strands). Valid when
    ``gpus * cmax >= cap`` (otherwise the row cannot bind and is returned unchanged).
    """
    cmax = max((k / g for g, k in items if g > 0), default=0.0)
    if gpus * cmax < cap:
        return [k for _g, k in items]
    out = []
    for g, k in items:
        # floor keeps the coefficient an integer and the row valid (a smaller lift is still valid)
        out.append(max(k, int(cap - (gpus - g) * cmax)) if g > 0 else k)
    return out


def _check_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` validated (:class:`~optsched.exact.options.CpsatOptions`), as a dict with every
    default and ``num_workers`` resolved."""
    opts = CpsatOptions.from_mapping(options).to_dict()
    if opts["num_workers"] is None:
        opts["num_workers"] = min(8, os.cpu_count() or 1)
    return opts


@dataclass
class RoundModel:
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
    #: HUG's level variable and its usage variables ``(U, tenant, r, upper bound)``, for complete hints
    hug_aux: Any = None
    #: the whole free GPUs (round.packing; set by exact.policies.add_packing) and, after a staged
    #: solve (exact.policies.solve_lexicographic), the worth stage's bound and the final schedule
    free_gpus: Any = None
    worth_bound: float | None = None
    staged_schedule: Schedule | None = None

    def _tick(self) -> None:
        if time.perf_counter() > self.deadline:
            raise OutOfTime

    # --- variables -------------------------------------------------------------------------------

    def add_whole_variables(self) -> None:
        """Whole modes: ``z[j,t,p]`` (job j entirely on one node of type t at point p, which node
        decided by the pooled counts ``N[n,r]``) and ``h[j,p]`` (a running job stays on its node).

        Whole jobs with the same footprint ``r = (gpus, cores/GPU, GB/GPU)`` are interchangeable
        for capacity, so per node only the count of each footprint is a variable.
        """
        inst = self.instance
        by_type: dict[str, list[int]] = {}
        for n, node in enumerate(inst.nodes):
            by_type.setdefault(node.gpu_type, []).append(n)
        demand: dict[tuple[str, tuple[int, int, int]], int] = {}
        for d in self.data:
            self._tick()
            job, g = d.job, d.job.gpus
            home = None
            # with a move budget, staying put is tracked even when it costs nothing
            if job.placement and len(job.placement) == 1 and (job.restart_s > 0 or inst.round.max_moves is not None or job.pinned):
                home = inst.node_idx(next(iter(job.placement)))
                self.home[d.index] = home
            moved = job.placement is not None  # a pooled mode of a pinned job counts as a move
            for t in d.types:
                for p, pt in enumerate(d.points):
                    r = (g, pt.cpus, pt.mem)
                    fits = [n for n in by_type[t] if self._fit(n, r) > 0]
                    if home is not None and t == inst.nodes[home].gpu_type and self._fit(home, r) > 0:
                        coef = self.scale.to_int(d.value(inst, t, p, 1, False))
                        if coef > 0:
                            self.h[(d.index, p)] = self.model.new_bool_var(f"h[{d.index},{p}]")
                            self.h_coef[(d.index, p)] = coef
                    coef = self.scale.to_int(d.value(inst, t, p, 1, moved))
                    if not fits or coef <= 0:
                        continue
                    key = (d.index, t, p)
                    self.z[key] = self.model.new_bool_var(f"z[{d.index},{t},{p}]")
                    self.z_coef[key] = coef
                    demand[(t, r)] = demand.get((t, r), 0) + 1
        for (t, r), count in demand.items():
            for n in by_type[t]:
                ub = min(count, self._fit(n, r))
                if ub > 0:
                    self.cnt[(n, r)] = self.model.new_int_var(0, ub, f"N[{n},{r}]")

    def _fit(self, n: int, r: tuple[int, int, int]) -> int:
        """How many whole jobs of footprint ``r`` node ``n`` holds alone."""
        node = self.instance.nodes[n]
        g, c, m = r
        k = node.gpus // g
        if c:
            k = min(k, node.cpus // (g * c))
        if m:
            k = min(k, node.mem_gb // (g * m))
        return k

    def add_pool_link(self) -> None:
        """Per type and footprint: jobs choosing it = slots of it opened on that type's nodes."""
        inst = self.instance
        jobs_at: dict[tuple[str, tuple[int, int, int]], list[cp_model.IntVar]] = {}
        for (j, t, p), var in self.z.items():
            pt = self.data[j].points[p]
            jobs_at.setdefault((t, (self.data[j].job.gpus, pt.cpus, pt.mem)), []).append(var)
        slots: dict[tuple[str, tuple[int, int, int]], list[cp_model.IntVar]] = {}
        for (n, r), var in self.cnt.items():
            slots.setdefault((inst.nodes[n].gpu_type, r), []).append(var)
        for key, zs in jobs_at.items():
            self.model.add(sum(zs) == sum(slots.get(key, [])))

    def add_split_variables(self) -> None:
        """``sp[j,t,p]``, ``y[j,n,p]`` and ``u[j,n]`` for multi-GPU jobs (at least two nodes, one type)."""
        inst = self.instance
        for d in self.data:
            g = d.job.gpus
            if g < 2:
                continue
            self._tick()
            keys = self.by_job_sp.setdefault(d.index, [])
            kmax = 0
            new_y: list[tuple[int, int, int]] = []
            for t in d.types:
                nodes_t = [n for n, node in enumerate(inst.nodes) if node.gpu_type == t and node.gpus > 0]
                for p, pt in enumerate(d.points):
                    ubs = {}
                    for n in nodes_t:
                        node = inst.nodes[n]
                        ub = min(g - 1, node.gpus)
                        if pt.cpus:
                            ub = min(ub, node.cpus // pt.cpus)
                        if pt.mem:
                            ub = min(ub, node.mem_gb // pt.mem)
                        if ub > 0:
                            ubs[n] = ub
                    if sum(ubs.values()) < g or self.scale.to_int(d.value(inst, t, p, len(ubs), True)) <= 0 and \
                            self.scale.to_int(d.value(inst, t, p, 2, False)) <= 0:
                        continue
                    key = (d.index, t, p)
                    self.sp[key] = self.model.new_bool_var(f"sp[{d.index},{t},{p}]")
                    keys.append(key)
                    for n, ub in ubs.items():
                        self.y[(d.index, n, p)] = self.model.new_int_var(0, ub, f"y[{d.index},{n},{p}]")
                        self.ub[(d.index, n, p)] = ub
                        new_y.append((d.index, n, p))
                    kmax = max(kmax, min(g, len(ubs)))
            if not keys:
                continue
            self.k_max[d.index] = kmax
            used_nodes = sorted({n for (j, n, _p) in new_y})
            for n in used_nodes:
                self.u[(d.index, n)] = self.model.new_bool_var(f"u[{d.index},{n}]")
            for k in range(3, kmax + 1):
                self.ge[(d.index, k)] = self.model.new_bool_var(f"ge[{d.index},{k}]")
            best = max(self.scale.to_int(d.value(inst, t, p, 2, False)) for (_j, t, p) in keys)
            self.pen[d.index] = self.model.new_int_var(0, best, f"pen[{d.index}]")

    # --- constraints -------------------------------------------------------------------------------

    def job_literals(self) -> dict[int, list[cp_model.IntVar]]:
        """Per job, the booleans of all its modes (pooled whole, stay at home, split)."""
        lits: dict[int, list[cp_model.IntVar]] = {d.index: [] for d in self.data}
        for (j, _t, _p), var in self.z.items():
            lits[j].append(var)
        for (j, _p), var in self.h.items():
            lits[j].append(var)
        for (j, _t, _p), var in self.sp.items():
            lits[j].append(var)
        return lits

    def add_job_selection(self) -> None:
        """Each job runs in at most one mode (one node, or one split), all its GPUs or none."""
        for lits in self.job_literals().values():
            if len(lits) > 1:
                self.model.add_at_most_one(lits)

    def _y_index(self) -> None:
        """Per (job, point) and per (job, node), the split GPU-count variables."""
        self.y_jp: dict[tuple[int, int], list[tuple[int, cp_model.IntVar]]] = {}
        self.y_jn: dict[tuple[int, int], list[tuple[int, cp_model.IntVar]]] = {}
        for (j, n, p), var in self.y.items():
            self.y_jp.setdefault((j, p), []).append((n, var))
            self.y_jn.setdefault((j, n), []).append((p, var))

    def add_split_gang(self) -> None:
        """A split job at (t, p) gets exactly ``gpus`` GPUs over nodes of type t at point p;
        ``u[j,n]`` is true exactly when it has GPUs on node n."""
        self._y_index()
        nodes = self.instance.nodes
        for (j, t, p), s in self.sp.items():
            g = self.data[j].job.gpus
            terms = [var for n, var in self.y_jp.get((j, p), []) if nodes[n].gpu_type == t]
            self.model.add(sum(terms) == g * s)
        for (j, n), lit in self.u.items():
            ys = self.y_jn[(j, n)]
            total = sum(var for _p, var in ys)
            # one point at most is in use, so the largest per-point bound caps the total (tighter
            # in the LP than their sum); with split_cuts each point's bound is linked to u too
            if self.split_cuts:
                ub = max(self.ub[(j, n, p)] for p, _var in ys)
                if len(ys) > 1:
                    for p, var in ys:
                        self.model.add(var <= self.ub[(j, n, p)] * lit)
            else:
                ub = sum(self.ub[(j, n, p)] for p, _var in ys)
            self.model.add(total <= ub * lit)
            self.model.add(total >= 1).only_enforce_if(lit)

    def add_spread_value(self) -> None:
        """A split job's value is capped by ``spread_factor^(k-kbase)`` of its mode, k = nodes used
        and ``kbase`` its spread base on the mode's type (:meth:`optsched.model.Instance.spread_base`:
        the fewest nodes of the type that hold it, or 1 under ``round.spread_from = "one"``; no
        factor below it), and by the restart factor unless it stays exactly where it runs now."""
        inst = self.instance
        self._u_of: dict[int, list[cp_model.IntVar]] = {}
        for (j, _n), lit in self.u.items():
            self._u_of.setdefault(j, []).append(lit)
        for j, pen in self.pen.items():
            d = self.data[j]
            job = d.job
            keys = self.by_job_sp[j]
            us = self._u_of.get(j, [])
            kmax = self.k_max[j]
            for k in range(3, kmax + 1):
                self.model.add(sum(us) <= k - 1).only_enforce_if(self.ge[(j, k)].Not())
                if k > 3:
                    self.model.add_implication(self.ge[(j, k)], self.ge[(j, k - 1)])
            if self.split_cuts:
                self.add_split_cuts(j, keys, us)
            can_stay = job.placement is not None and len(job.placement) >= 2 and (job.restart_s > 0 or inst.round.max_moves is not None
                                                                                   or job.pinned)
            always_moved = job.placement is not None and not can_stay
            if can_stay:
                stay = self.model.new_bool_var(f"stay[{j}]")
                self.stay[j] = stay
                t0 = inst.node(next(iter(job.placement))).gpu_type
                home = {inst.node_idx(n): g for n, g in job.placement.items()}
                for n, g in home.items():
                    ys = [v for _p, v in self.y_jn.get((j, n), [])]
                    if not ys:
                        self.model.add(stay == 0)
                        break
                    self.model.add(sum(ys) == g).only_enforce_if(stay)
                sps = [self.sp[key] for key in keys if key[1] == t0]
                self.model.add(sum(sps) == 1).only_enforce_if(stay)
            # the objective pays the best case (two nodes, not moved); pen takes back the difference
            top = {key: self.scale.to_int(d.value(inst, key[1], key[2], 2, False)) for key in keys}
            if can_stay:
                cases = [(False, [self.stay[j]]), (True, [self.stay[j].Not()])]
            else:
                cases = [(always_moved, [])]
            for moved, cond in cases:
                for k in range(2, kmax + 1):
                    if k == 2 and not moved:
                        continue
                    coefs = [top[key] - self.scale.to_int(d.value(inst, key[1], key[2], k, moved)) for key in keys]
                    if not any(coefs):
                        continue
                    ct = self.model.add(pen >= cp_model.LinearExpr.weighted_sum([self.sp[key] for key in keys], coefs))
                    lits = list(cond) + ([self.ge[(j, k)]] if k >= 3 else [])
                    if lits:
                        ct.only_enforce_if(lits)

    def add_split_cuts(self, j: int, keys: list[tuple[int, str, int]], us: list[cp_model.IntVar]) -> None:
        """Valid linear rows tying a split job's node count to its modes and penalty (option
        ``split_cuts``), for the LP relaxation; each holds for every schedule the model allows.

        * at least ``ceil(g / U)`` nodes at a mode whose nodes hold at most ``U`` GPUs each:
          ``sum_n u[j,n] >= sum_{t,p} ceil(g / U_tp) sp[j,t,p]``;
        * ``ge`` counts the nodes beyond two: ``sum_n u[j,n] <= 2 sum sp + sum_{k>=3} ge[j,k]``;
        * each node beyond the second costs at least the smallest step of the value curve:
          ``pen_j >= sum_{k>=3} delta_k ge[j,k]``, ``delta_k = min_modes V(k-1) - V(k)`` (unmoved).
        """
        inst = self.instance
        d = self.data[j]
        g = d.job.gpus
        sps = [self.sp[key] for key in keys]
        need = []
        for (_j, t, p) in keys:
            caps = [self.ub[(j, n, p)] for n, _var in self.y_jp.get((j, p), []) if inst.nodes[n].gpu_type == t]
            need.append(max(2, -(-g // max(caps))) if caps else 2)
        self.model.add(sum(us) >= cp_model.LinearExpr.weighted_sum(sps, need))
        ges = [self.ge[(j, k)] for k in range(3, self.k_max[j] + 1)]
        self.model.add(sum(us) <= 2 * sum(sps) + sum(ges))
        if ges:
            deltas = []
            for k in range(3, self.k_max[j] + 1):
                deltas.append(min(self.scale.to_int(d.value(inst, t, p, k - 1, False))
                                  - self.scale.to_int(d.value(inst, t, p, k, False)) for (_j, t, p) in keys))
            if any(x > 0 for x in deltas):
                self.model.add(self.pen[j] >= cp_model.LinearExpr.weighted_sum(ges, [max(0, x) for x in deltas]))

    def add_node_capacity(self) -> None:
        """Per node: GPUs, cores and memory used by whole and split jobs within capacity."""
        inst = self.instance
        # per node: (variable, its upper bound, GPUs, cores, GB per unit)
        terms: dict[int, list[tuple[cp_model.IntVar, int, int, int, int]]] = {}
        for (n, (g, c, m)), var in self.cnt.items():
            terms.setdefault(n, []).append((var, self._fit(n, (g, c, m)), g, g * c, g * m))
        for (j, p), var in self.h.items():
            g = self.data[j].job.gpus
            pt = self.data[j].points[p]
            terms.setdefault(self.home[j], []).append((var, 1, g, g * pt.cpus, g * pt.mem))
        for (j, n, p), var in self.y.items():
            pt = self.data[j].points[p]
            terms.setdefault(n, []).append((var, self.ub[(j, n, p)], 1, pt.cpus, pt.mem))
        for n, ts in terms.items():
            self._tick()
            node = inst.nodes[n]
            vs = [c[0] for c in ts]
            for r, cap in ((2, node.gpus), (3, node.cpus), (4, node.mem_gb)):
                if sum(c[r] * c[1] for c in ts) > cap:
                    coefs = [c[r] for c in ts]
                    if r > 2 and self.lifted_rows:
                        coefs = lifted_coefficients(node.gpus, cap, [(c[2], c[r]) for c in ts])
                    self.model.add(cp_model.LinearExpr.weighted_sum(vs, coefs) <= cap)
            self.usage_g[n] = cp_model.LinearExpr.weighted_sum(vs, [c[2] for c in ts])
            self.usage_c[n] = cp_model.LinearExpr.weighted_sum(vs, [c[3] for c in ts])

    def add_type_capacity(self) -> None:
        """Valid inequalities: per GPU type, the GPUs / cores / memory of all its jobs fit the type's total."""
        inst = self.instance
        for t in inst.gpu_types:
            nodes_t = [n for n, node in enumerate(inst.nodes) if node.gpu_type == t]
            caps = (sum(inst.nodes[n].gpus for n in nodes_t), sum(inst.nodes[n].cpus for n in nodes_t),
                    sum(inst.nodes[n].mem_gb for n in nodes_t))
            vs: list[cp_model.IntVar] = []
            cs: tuple[list[int], list[int], list[int]] = ([], [], [])
            modes = [(j, p, var) for (j, tt, p), var in self.z.items() if tt == t]
            modes += [(j, p, var) for (j, p), var in self.h.items() if inst.nodes[self.home[j]].gpu_type == t]
            modes += [(j, p, var) for (j, tt, p), var in self.sp.items() if tt == t]
            for j, p, var in modes:
                g = self.data[j].job.gpus
                pt = self.data[j].points[p]
                vs.append(var)
                for r, c in enumerate((g, g * pt.cpus, g * pt.mem)):
                    cs[r].append(c)
            if vs:
                for r in range(3):
                    self.model.add(cp_model.LinearExpr.weighted_sum(vs, cs[r]) <= caps[r])

    def add_config_fixing(self, fix: ConfigFixing) -> None:
        """Reduced-cost fixing from the configuration LP (optsched.exact.fixing): forced jobs run;
        on nodes of plain groups, whole modes and split GPU counts whose pieces would cost more
        than the margin to a known schedule are ruled out (only schedules worse than it are lost)."""
        inst = self.instance
        for j, lits in self.job_literals().items():
            if j in fix.forced and lits:
                self.model.add(sum(lits) == 1)
        by_type: dict[str, list[int]] = {}
        for n, node in enumerate(inst.nodes):
            by_type.setdefault(node.gpu_type, []).append(n)
        open_slots: set[tuple[int, tuple[int, int, int]]] = set()
        for (j, t, p), var in self.z.items():
            pt = self.data[j].points[p]
            r = (self.data[j].job.gpus, pt.cpus, pt.mem)
            ok = [n for n in by_type[t] if fix.allows_whole(j, n, p)]
            open_slots.update((n, r) for n in ok)
            if not ok:
                self.model.add(var == 0)
        for key, var in self.cnt.items():
            if key not in open_slots:
                self.model.add(var == 0)
        for (j, n, p), var in self.y.items():
            sizes = fix.split_sizes(j, n, p)
            if sizes is not None:
                self.model.add_linear_expression_in_domain(var, cp_model.Domain.from_values([0, *sizes]))

    def add_usage_floor(self, rows: list[tuple[Any, int, int]]) -> None:
        """Option ``usage_floor``: per ``(job ids, r, amount)``, the GPUs (r = 0), cores (1) or GB (2)
        those jobs hold at their modes' points sum to at least ``amount`` (lns under HUG: what keeps
        every tenant's progress level, given what it holds outside the neighbourhood)."""
        if self.elastic is not None:
            owner = [self.elastic.original.jobs[self.elastic.origin[d.index]].id for d in self.data]
        else:
            owner = [d.job.id for d in self.data]
        modes = [(j, p, v) for (j, _t, p), v in self.z.items()] + [(j, p, v) for (j, p), v in self.h.items()] \
            + [(j, p, v) for (j, _t, p), v in self.sp.items()]
        for ids, r, amount in rows:
            want = set(ids)
            terms = []
            for j, p, v in modes:
                if owner[j] in want:
                    g, pt = self.data[j].job.gpus, self.data[j].points[p]
                    a = (g, g * pt.cpus, g * pt.mem)[r]
                    if a:
                        terms.append((a, v))
            self.model.add(cp_model.LinearExpr.weighted_sum([v for _a, v in terms], [a for a, _v in terms]) >= amount)

    def add_node_symmetry(self) -> None:
        """Interchangeable nodes are used in non-increasing order of (GPUs, cores) used."""
        for cls in node_classes(self.instance):
            node = self.instance.nodes[cls[0]]
            for a, b in zip(cls, cls[1:], strict=False):
                ua, ub = self.usage_g.get(a), self.usage_g.get(b)
                if ua is None or ub is None:
                    continue
                key_a = ua * (node.cpus + 1) + self.usage_c[a]
                key_b = ub * (node.cpus + 1) + self.usage_c[b]
                self.model.add(key_a >= key_b)

    def add_job_symmetry(self) -> None:
        """Of interchangeable jobs, an earlier one is selected whenever a later one is (elastic
        jobs: an earlier one runs with at least the size of a later one, exact.elastic)."""
        sel = {j: (sum(lits) if lits else 0) for j, lits in self.job_literals().items()}
        elastic_rows.add_elastic_symmetry(self)
        for cls in elastic_rows.variant_classes(self, self.data):
            for a, b in zip(cls, cls[1:], strict=False):
                if isinstance(sel[b], int):
                    continue
                self.model.add(sel[a] >= sel[b])

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
            for cls in elastic_rows.variant_classes(self, self.data):
                ids = [inst.jobs[j].id for j in cls]
                given = [jobs.pop(j) for j in ids if j in jobs]
                jobs.update(zip(ids, given, strict=False))
            if self.elastic is not None:
                jobs = elastic_rows.canonical_jobs(self.elastic, jobs)
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
                fixing: ConfigFixing | None = None) -> RoundModel:
    """Build every constraint family (raises :class:`OutOfTime` past ``deadline``); with
    ``forced`` (job indices; ``[]`` for none) also the round's policy families
    (:mod:`optsched.exact.policies`). With ``elastic`` (whose rigid round is ``instance``; ``forced``
    then holds original job indices) at most one variant of each elastic job runs. With
    ``fixing`` only schedules at least as good as its incumbent remain (:meth:`RoundModel.add_config_fixing`)."""
    m = RoundModel(instance, data, scale, deadline, lifted_rows=opts["lifted_rows"], split_cuts=opts["split_cuts"],
                   elastic=elastic)
    m.add_whole_variables()
    m.add_split_variables()
    m.add_pool_link()
    m.add_job_selection()
    elastic_rows.add_variant_selection(m)
    m.add_split_gang()
    m.add_spread_value()
    m.add_node_capacity()
    if forced is not None:
        from optsched.exact.policies import add_policy_constraints

        add_policy_constraints(m, forced)
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


def _not_worse(a: tuple, b: tuple) -> bool:
    """``a >= b`` for schedule keys whose last entry is a worth: worths that differ only by float
    summation order (relative 1e-9) tie, so a proven optimum is not beaten by an equal hint."""
    if a[:-1] != b[:-1]:
        return a[:-1] > b[:-1]
    return a[-1] >= b[-1] - 1e-9 * max(1.0, abs(b[-1]))


_STATUS = {cp_model.OPTIMAL: Status.OPTIMAL, cp_model.FEASIBLE: Status.TIME_LIMIT, cp_model.UNKNOWN: Status.TIME_LIMIT}


def _deadline(instance: Instance, start: float, time_limit: float) -> float:
    """When a call started at ``start`` must stop working: the limit less the read-back reserve."""
    return start + max(0.0, time_limit - _RESERVE_S - _RESERVE_PER_JOB_S * len(instance.jobs))


def _lns_share(instance: Instance, share: float | None) -> float:
    """The share of the time for the lns warm start (option ``lns_share``; None: by size)."""
    if share is not None:
        return share
    cells = len(instance.jobs) * len(instance.nodes)
    return 0.97 if cells > LNS_MOSTLY_FROM_CELLS else 0.7 if cells > LNS_FROM_CELLS else 0.0


def _bound_worker(instance: Instance, deadline: float, schedules: list[Schedule]) -> Any:
    """A started bound worker ending at ``deadline`` (less the LP fallback's time), or None where
    cpsat starts none: too little time left, or a round the configuration LP does not handle."""
    from optsched.mip.bound_worker import MIN_SECONDS, BoundWorker

    if deadline - time.perf_counter() > MIN_SECONDS and BoundWorker.applies(instance):
        return BoundWorker(instance, max(0.0, deadline - time.perf_counter() - _LP_BOUND_S), schedules)
    return None


def start_bound_worker(instance: Instance, time_limit: float, schedules: list[Schedule] | None = None) -> Any:
    """Start now the bound worker a ``cpsat`` call of ``time_limit`` seconds on ``instance`` would
    start after its greedy hints (None where it would start none: no lns stage, too little time,
    a round the configuration LP does not handle). Pass it as ``bound_worker=`` to that call: a
    caller that spends the first part of the time limit on its own hint (``cpsat+maifs``) gives
    the configuration LP that time too. The call collects (stops) it."""
    if _lns_share(instance, None) == 0:
        return None
    deadline = _deadline(instance, time.perf_counter(), time_limit)
    return _bound_worker(instance, deadline, list(schedules or []))


class _Incumbents(cp_model.CpSolverSolutionCallback):
    """Records each CP-SAT incumbent into a trajectory: its scaled worth less the scale's
    rounding error (:attr:`ValueScale.max_error`, so never above the schedule's true worth) and
    the best bound at that moment."""

    def __init__(self, rec: Trajectory, scale: ValueScale) -> None:
        super().__init__()
        self._rec, self._scale = rec, scale

    def on_solution_callback(self) -> None:
        sc = self._scale
        obj = max(0.0, sc.to_float(self.objective_value) - sc.max_error)
        self._rec.record(obj, max(sc.bound(self.best_objective_bound), obj))


def _ranks_by_worth(instance: Instance) -> bool:
    """Whether cpsat ranks this round's schedules by worth alone (no deadline misses, fairness
    level or packing first): only then is every better incumbent worth more."""
    families = policy_families(instance)
    return not ({"drf", "hug", "packing"} & families) and not (families and urgent_jobs(instance))


class CpSatSolver:
    """``cpsat``: the integrated formulation, solved exactly by CP-SAT with a complete greedy hint.

    Options: ``num_workers`` (default ``min(8, cpu_count)``), ``deterministic_time`` (a budget
    of CP-SAT deterministic seconds: same seed and budget give the same schedule as long as the
    wall limit does not cut in first; the lns stage gets ``lns_share`` of it, summed over its
    sub-problems, and the CP-SAT stage the rest; the bound is still computed by wall clock), ``log`` (CP-SAT's search
    log on stdout), and switches for the engineering (``node_symmetry``, ``job_symmetry``, ``type_cuts``, ``greedy_hint``).
    """

    name = "cpsat"

    @recorded
    def solve(self, instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None, **options: Any) -> Result:
        start = time.perf_counter()
        deadline = _deadline(instance, start, time_limit)
        opts = _check_options(options)
        # the trajectory (optsched.trajectory): the hints, the lns stage, CP-SAT's incumbents and
        # bounds as they come, the LP bounds; in rounds ranked by more than worth only the result
        rec = current()
        if not _ranks_by_worth(instance):
            rec.mute()
        # elastic jobs (contract v2): the model is built on the rigid round of their size variants
        exp = expand(instance) if has_elastic(instance) else None
        model_inst = instance if exp is None else exp.instance
        # HUG (or a usage floor): cores and GB count, so dominated points may matter; every point on
        # small rounds, else the Pareto ones, demand points and the candidates' points (prep.hug_keep)
        hugish = instance.round.fairness == "hug" or bool(opts["usage_floor"])
        reduced = hugish and hug_keep(model_inst, ()) is not None
        data = job_data(model_inst, prune=reduced if hugish else None,
                        keep={j.id: {j.demand} for j in model_inst.jobs} if reduced else None)
        scale = make_scale(model_inst, data)
        candidates = []
        if hint is not None:
            candidates.append(hint)
        greedy: list[tuple[str, Schedule]] | None = None  # named, for the lns stage to reuse
        if opts["greedy_hint"] or hint is None:
            greedy = [("greedy", greedy_schedule(instance, data if exp is None else None))]
            if any(j.placement for j in instance.jobs):  # running jobs by value per GPU, not first
                greedy.append(("greedy-dense", greedy_schedule(instance, data if exp is None else None, running_first=False)))
            # elastic: sizes chosen by marginal value, not only the nominal ones; HUG: the greedy
            # hints know nothing of progress, fungible-greedy fills by it (on 1 s Philly rounds
            # under load CP-SAT's level stage often ends before its first solution)
            from optsched.heuristics.fungible_greedy import FungibleGreedy

            with rec.nested():
                greedy.append(("fungible-greedy", FungibleGreedy().solve(instance, time_limit=time_limit, seed=seed).schedule))
            candidates += [s for _name, s in greedy]
        share = _lns_share(instance, opts["lns_share"])
        lp_bound = None
        stats_lns: dict[str, Any] = {}
        # a worker the caller started earlier (start_bound_worker) is used and collected like our own
        worker = None if isinstance(opts["bound_worker"], bool) else opts["bound_worker"]
        if share > 0:
            from optsched.heuristics.lns import LargeNeighbourhoodSearch

            if worker is None and opts["bound_worker"]:
                # the configuration-LP bound on the core lns leaves free (else lns computes the LP bound)
                worker = _bound_worker(instance, deadline, candidates)
            # a share of what is left: preparing a 1,024 x 4,000 round (greedy hint, job data) takes ~1 s
            lns_limit = share * max(0.0, deadline - time.perf_counter())
            dt = opts["deterministic_time"]
            if dt is not None:  # lns spends share x the deterministic budget; wall time is a safety only
                lns_limit = max(0.0, deadline - time.perf_counter() - _LP_BOUND_S)
            # lns reports a bound only without our worker, and starts none of its own if we may not
            bound = False if worker is not None else True if opts["bound_worker"] else "lp"
            # the greedy starts and job data built above, not built again by lns (~1 s at 1,024 x 4,000)
            with rec.nested():
                warm = LargeNeighbourhoodSearch().solve(instance, time_limit=lns_limit, seed=seed, hint=hint, bound=bound,
                                                        starts=greedy, data=data if exp is None else None, bound_worker=worker,
                                                        **({} if dt is None else {"deterministic_time": share * dt}))
            stats_lns = {"lns_deterministic_s": warm.stats.get("deterministic_s"), "lns_price_updates": warm.stats.get("price_updates", 0)}
            candidates.append(warm.schedule)
            lp_bound = warm.bound
        # policy rounds (contract v2): hints keep the rules; fewer deadline misses first, then worth
        policies = policy_families(instance)
        forced: list[int] | None = None
        if policies:
            candidates = [repair(instance, s) for s in candidates]
            forced = [instance.job_idx(j) for j in urgent_jobs(instance)]

        fair = instance.round.fairness if {"drf", "hug"} & policies else None
        packing = "packing" in policies
        #: in a packing round, schedules within the tolerance of this worth that run at least this
        #: many GPUs rank by whole free GPUs first
        worth_ref, gpus_ref = [0.0], [0]

        def key(s: Schedule, v: float) -> tuple[int, int, bool, float, float]:
            close = packing and v >= (1.0 - packing_tolerance(instance)) * worth_ref[0] - 1e-6 * max(1.0, worth_ref[0]) \
                and sum(a.gpus for a in s.jobs.values()) >= gpus_ref[0]
            return (-len(deadline_misses(instance, s)) if forced else 0, fair_level(instance, s.jobs) if fair else 0, close,
                    whole_free_gpus(instance, s.jobs) if close else 0, v)

        if reduced:  # the candidates' points join the model, so each hint keeps its progress
            keep = hug_points_of(instance, candidates)  # not hug_keep: its size test is on the original round
            origin = [exp.original.jobs[exp.origin[v]].id for v in range(len(model_inst.jobs))] if exp is not None \
                else [j.id for j in model_inst.jobs]
            data = job_data(model_inst, prune=True, keep={j.id: keep.get(o, set()) | {j.demand} for j, o in zip(model_inst.jobs, origin, strict=True)})
            scale = make_scale(model_inst, data)
        values = [schedule_value(instance, s) for s in candidates]
        for v in values:  # the hints' worths (the lns stage recorded its own events)
            rec.record(v)
        worth_ref[0] = max(values)
        best_i = max(range(len(candidates)), key=lambda i: key(candidates[i], values[i]))
        incumbent, incumbent_value = candidates[best_i], values[best_i]
        stats: dict[str, Any] = {"hint_objective": incumbent_value, "scale": scale.scale, "lns_share": share,
                                 "lp_bound": lp_bound, **stats_lns}
        if hugish:
            stats["hug_points"] = "reduced" if reduced else "all"

        try:
            model = build_model(model_inst, data, scale, opts, deadline, forced, exp)
        except OutOfTime:
            stats["build_s"] = time.perf_counter() - start
            stats["note"] = "time limit reached while building the model; returning the hint"
            if worker is not None:
                lp_bound = worker.collect()
                stats.update(worker.stats, lp_bound=lp_bound)
            return Result(incumbent, Status.TIME_LIMIT, incumbent_value, lp_bound, self.name, "exact",
                          time.perf_counter() - start, stats)
        model.add_hint(incumbent)
        stats["build_s"] = time.perf_counter() - start
        stats.update(model.stats())

        solver = cp_model.CpSolver()
        prm = solver.parameters
        prm.num_workers = opts["num_workers"]
        prm.random_seed = seed
        # CP-SAT overshoots its wall limit by up to ~0.2 s on a loaded 2-core machine (measured)
        # and the LP bound (asked for only when CP-SAT proves nothing) needs up to _LP_BOUND_S
        keep = _LP_BOUND_S if lp_bound is None and opts["lp_fallback"] else 0.0
        left = deadline - time.perf_counter() - keep
        prm.max_time_in_seconds = max(0.01, left - min(0.2, 0.03 * left))
        if opts["deterministic_time"] is not None:
            # the lns stage spent its share of the budget
            prm.max_deterministic_time = float(opts["deterministic_time"]) * (1.0 - share)
            # reproducible: with several workers only the interleaved search is deterministic
            prm.interleave_search = True
        prm.log_search_progress = bool(opts["log"])
        portfolio = opts["portfolio"]
        if portfolio == "auto":
            # the proof portfolio on rounds CP-SAT is meant to close; with an lns warm start (large
            # rounds) CP-SAT's own LNS workers keep improving the incumbent instead
            portfolio = "proof" if opts["num_workers"] == 2 and share == 0 else "default"
        stats["portfolio"] = portfolio
        for name, value in [*PORTFOLIOS[portfolio].items(), *(opts["cp_params"] or {}).items()]:
            if isinstance(value, (list, tuple)):  # a repeated field: the later setting replaces the earlier
                getattr(prm, name).clear()
                getattr(prm, name).extend(value)
            else:
                setattr(prm, name, value)
        dt_total = opts["deterministic_time"]
        fixing = bool(opts["config_fixing"]) and share == 0 and not policies and exp is None \
            and left > 2 * FIXING_AFTER_S and dt_total is None
        if fixing:
            prm.max_time_in_seconds = FIXING_AFTER_S
        callback = None
        if rec.active:  # every incumbent and every better bound, in the result's unit
            callback = _Incumbents(rec, scale)
            solver.best_bound_callback = lambda b: rec.record(bound=max(scale.bound(b), rec.objective or 0.0))
        code = solve_lexicographic(solver, model, stats, callback)
        if fixing and code in (cp_model.FEASIBLE, cp_model.UNKNOWN):
            if code == cp_model.FEASIBLE:
                found = model.read_schedule(solver)
                found_value = schedule_value(instance, found)
                if found_value > incumbent_value:
                    incumbent, incumbent_value = found, found_value
            stats["stage1_deterministic_s"] = solver.deterministic_time
            stats["stage1_bound"] = scale.bound(solver.best_objective_bound) if code == cp_model.FEASIBLE else None
            fix = config_fixing(model_inst, data, incumbent_value, schedules=[incumbent],
                                time_limit=min(FIXING_BOUND_S, 0.25 * max(0.0, deadline - time.perf_counter())))
            try:
                model = build_model(model_inst, data, scale, opts, deadline, None, None, fix)
            except OutOfTime:
                stats["note"] = "time limit reached while building the fixed model; returning the incumbent"
                bound = fix.bound if fix is not None else stats["stage1_bound"]
                return Result(incumbent, Status.TIME_LIMIT, incumbent_value, None if bound is None else max(bound, incumbent_value),
                              self.name, "exact", time.perf_counter() - start, stats)
            model.add_hint(incumbent)
            if fix is not None:
                stats["fixing"] = fix.stats
                # valid for every schedule at least as good as the incumbent (the final bound is at least that)
                lp_bound = fix.bound
                keep = 0.0
                rec.record(bound=max(fix.bound, incumbent_value))
            prm.max_time_in_seconds = max(0.01, deadline - time.perf_counter() - keep - 0.2)
            code = solve_lexicographic(solver, model, stats, callback)
        if code == cp_model.INFEASIBLE and forced:
            # the round cannot hold every urgent job: solve without forcing them, report the misses
            stats["forcing_infeasible"] = sorted(instance.jobs[j].id for j in forced)
            forced = []
            try:
                model = build_model(model_inst, data, scale, opts, deadline, forced, exp)
            except OutOfTime:
                stats["note"] = "time limit reached while rebuilding without forced jobs; returning the hint"
                return Result(incumbent, Status.TIME_LIMIT, incumbent_value, lp_bound, self.name, "exact",
                              time.perf_counter() - start, {**stats, "deadline_misses": deadline_misses(instance, incumbent)})
            model.add_hint(incumbent)
            prm.max_time_in_seconds = max(0.01, deadline - time.perf_counter() - keep)
            code = solve_lexicographic(solver, model, stats)
        stats.update(cpsat_status=solver.status_name(code), wall_s=solver.wall_time,
                     deterministic_s=solver.deterministic_time + stats.get("stage1_deterministic_s", 0.0),
                     branches=solver.num_branches, conflicts=solver.num_conflicts)
        if code == cp_model.INFEASIBLE and opts["usage_floor"]:  # the floor is the caller's: no schedule keeps it
            stats["usage_floor_infeasible"] = True
            return Result(incumbent, Status.FEASIBLE, incumbent_value, None, self.name, "exact", time.perf_counter() - start, stats)
        if code in (cp_model.INFEASIBLE, cp_model.MODEL_INVALID):
            raise RuntimeError(f"cpsat: the round model is {solver.status_name(code)} for {instance.name} (a bug: the empty schedule is feasible)")
        status = _STATUS[code]
        schedule, objective = incumbent, incumbent_value
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            found = model.staged_schedule if model.staged_schedule is not None else model.read_schedule(solver)
            found_value = schedule_value(instance, found)
            if packing:  # the packing stage's references: the worth stage's worth and GPUs in use
                worth_ref[0] = max(worth_ref[0], stats.get("packing_worth_level", 0) / scale.scale, found_value)
                gpus_ref[0] = stats.get("packing_gpus_level", 0)
            if _not_worse(key(found, found_value), key(incumbent, incumbent_value)) or (code == cp_model.OPTIMAL and not policies):
                schedule, objective = found, found_value
            elif status is Status.OPTIMAL:  # a hint with fewer deadline misses beat the relaxed optimum
                status = Status.FEASIBLE
        if worker is not None:
            # with a deterministic budget the wall-clock limit is only a safety: no waiting for it
            lp_bound = worker.collect(wait_until=deadline if opts["deterministic_time"] is None else None)
            stats.update(worker.stats, lp_bound=lp_bound)
            if lp_bound is not None:
                rec.record(bound=max(lp_bound, objective))
        # a reduced HUG model's worth bound covers only schedules over its points: a schedule at a
        # point it left out may reach the level with more worth, so only the LP bound stands
        hug_reduced = reduced and instance.round.fairness == "hug"
        if (code != cp_model.OPTIMAL or hug_reduced) and lp_bound is None and opts["lp_fallback"]:
            from optsched.mip.bound import lp_bound_within

            lp_bound = lp_bound_within(instance, deadline, stats)
            stats["lp_bound"] = lp_bound
            if lp_bound is not None:
                rec.record(bound=max(lp_bound, objective))
        bound = None
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE) and not hug_reduced:
            # a proven bound on the scaled objective, plus the worst-case rounding error
            bound = scale.bound(model.worth_bound if model.worth_bound is not None else solver.best_objective_bound)
        if lp_bound is not None:
            bound = lp_bound if bound is None else min(bound, lp_bound)
        if bound is not None:
            bound = max(bound, objective)
        if forced is not None:
            stats["deadline_misses"] = deadline_misses(instance, schedule)
        if fair == "hug" and reduced and "hug_level_proven" in stats:  # proven over the model's points only
            stats["hug_level_proven_reduced"] = stats["hug_level_proven"]
            stats["hug_level_proven"] = False
        if fair:  # the smallest dominant share (progress) is proven maximal only when stage 1 proved it
            stats["drf_min_share" if fair == "drf" else "hug_min_progress"] = fair_level(instance, schedule.jobs) / fair_scale(instance)
            status = Status.TIME_LIMIT if status is Status.OPTIMAL and not stats.get(f"{fair}_level_proven", True) else status
        if packing:
            stats["whole_free_gpus"] = whole_free_gpus(instance, schedule.jobs)
        return Result(schedule, status, objective, bound, self.name, "exact", time.perf_counter() - start, stats)
