"""The constraints of the CP-SAT round model (:class:`optsched.exact.model.RoundModel`).

One method per constraint family, each named in ``formulations/integrated.md``: job selection,
split gangs and their spread, node and type capacities, configuration fixing, usage floors and
symmetry breaking.
"""

from __future__ import annotations

from typing import Any

from ortools.sat.python import cp_model

from optsched.exact import variants
from optsched.exact.fixing import ConfigFixing
from optsched.exact.prep import node_classes

__all__ = ["ModelConstraints", "lifted_coefficients"]


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


class ModelConstraints:
    """The constraint families of :class:`~optsched.exact.model.RoundModel` (a mixin: the fields
    they read are the model's)."""

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
        jobs: an earlier one runs with at least the size of a later one, exact.variants)."""
        sel = {j: (sum(lits) if lits else 0) for j, lits in self.job_literals().items()}
        variants.add_elastic_symmetry(self)
        for cls in variants.variant_classes(self, self.data):
            for a, b in zip(cls, cls[1:], strict=False):
                if isinstance(sel[b], int):
                    continue
                self.model.add(sel[a] >= sel[b])
