"""The variables of the CP-SAT round model (:class:`optsched.exact.model.RoundModel`).

One method per variable family, each named in ``formulations/integrated.md``: whole modes with
pooled per-node counts, split modes with per-node GPU counts, and the link between them.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

__all__ = ["ModelVariables"]


class ModelVariables:
    """The variable families of :class:`~optsched.exact.model.RoundModel` (a mixin: the fields
    these methods fill are the model's)."""


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
