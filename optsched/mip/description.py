"""The round as one solver-neutral linear MIP: one builder function per constraint family.

:func:`build` turns an :class:`~optsched.model.Instance` into a :class:`RoundMip`: a
:class:`~optsched.mip.linear.LinearModel` plus the maps from decisions to its columns, so that a
solution vector decodes into a :class:`~optsched.schedule.Schedule` (:meth:`RoundMip.decode`) and
a schedule encodes into a solution vector (:meth:`RoundMip.encode`, used for solver hints and to
test the formulation against the independent checker). Every backend (SCIP, CBC, PuLP, GLOP, the
MPS/LP export) solves this very model. The math, family by family, is in ``formulations/mip.md``.

Contract-v2 rounds: elastic jobs are modelled on their rigid size variants
(:func:`optsched.elastic.expand`) with "at most one variant" rows (:func:`add_variant_choice`),
and the move budget and tenant quotas are linear rows (:func:`add_move_budget`,
:func:`add_quota_reclaim`): :data:`MIP_FAMILIES` are the families this MIP holds exactly. The
lexicographic families (deadlines, DRF, HUG, packing) are not in it.

Index conventions: ``j`` job index (a variant's index in an elastic round), ``n`` node index, ``t`` index into ``instance.gpu_types``,
``p`` index into the job's Pareto points (``RoundData.jobs[j].points``), ``k`` a number of nodes.
Column names use these indices only, so exported files are valid whatever the ids contain.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from optsched.elastic import Expansion, expand, has_elastic
from optsched.mip.data import JobData, RoundData
from optsched.mip.linear import LinearModel
from optsched.model import Instance
from optsched.schedule import Assignment, Schedule
from optsched.values import is_move

__all__ = ["MIP_FAMILIES", "RoundMip", "build", "point_for"]

#: the contract-v2 policy families (optsched.round_policies.FAMILIES) the MIP models exactly
MIP_FAMILIES = ("elastic", "max_moves", "quotas")


@dataclass
class RoundMip:
    """The MIP of one round and where each decision lives in it.

    ``instance`` is the round the columns index: the round itself, or for an elastic round the
    rigid round of its size variants (``expansion`` maps between the two; :meth:`decode` and
    :meth:`encode` speak the original round's job ids either way).
    """

    instance: Instance
    data: RoundData
    model: LinearModel
    expansion: Expansion | None = None
    u: dict[int, dict[tuple[int, int], int]] = field(default_factory=dict)  #: j -> (t, p) -> job j runs on type t at point p
    x: dict[tuple[int, int], int] = field(default_factory=dict)  #: (j, n) -> GPUs of job j on node n (integer)
    w: dict[tuple[int, int, int], int] = field(default_factory=dict)  #: (j, n, p) -> GPUs of j on n at point p
    b: dict[tuple[int, int], int] = field(default_factory=dict)  #: (j, n) -> job j uses node n (spreading jobs)
    e: dict[int, dict[int, int]] = field(default_factory=dict)  #: j -> k -> job j uses exactly k nodes
    stay: dict[int, int] = field(default_factory=dict)  #: j -> running job j keeps its node -> GPU map
    v: dict[int, int] = field(default_factory=dict)  #: j -> worth of job j
    borrow: int | None = None  #: quota rounds: some tenant holds more than its quota
    used: dict[int, list[tuple[int, float]]] = field(default_factory=dict)  #: quota rounds: column of used_t -> its terms
    # derived lookups, filled by the builders
    nodes_of: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))  #: j -> nodes with an x column
    points_on: dict[tuple[int, int], list[int]] = field(default_factory=dict)  #: (j, n) -> points with a w column

    @property
    def original(self) -> Instance:
        """The round as given (with its elastic jobs)."""
        return self.instance if self.expansion is None else self.expansion.original

    @cached_property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        """Per original job index, its job indices in the model (its size variants); built once
        (the quota rows index it per job)."""
        if self.expansion is None:
            return tuple((j,) for j in range(len(self.instance.jobs)))
        return self.expansion.groups

    # --- solution <-> schedule ---

    def decode(self, values: Sequence[float]) -> Schedule:
        """The schedule a solution vector describes (integer columns read with ``round``), in the
        original round's job ids."""
        schedule = self._decode_model(values)
        return schedule if self.expansion is None else self.expansion.to_original(schedule)

    def _decode_model(self, values: Sequence[float]) -> Schedule:
        jobs: dict[str, Assignment] = {}
        chosen: dict[int, tuple[int, int]] = {}
        for j, cols in self.u.items():
            for (t, p), col in cols.items():
                if round(values[col]) == 1:
                    if j in chosen:
                        raise ValueError(f"job index {j} has two (type, point) choices in the solution")
                    chosen[j] = (t, p)
        for j, (_, p) in chosen.items():
            nodes = {}
            for n in self.nodes_of.get(j, ()):
                k = round(values[self.x[(j, n)]])
                if k >= 1:
                    nodes[self.instance.nodes[n].id] = k
            c, m, _ = self.data.jobs[j].points[p]
            jobs[self.instance.jobs[j].id] = Assignment(nodes, c, m)
        return Schedule(self.instance.name, jobs)

    def encode(self, schedule: Schedule, *, skip_unencodable: bool = False) -> list[float]:
        """A solution vector for a feasible ``schedule``, worth at least as much in the model.

        A job at a grid point that the Pareto reduction dropped is moved to the point that
        dominates it (never more CPUs or memory, never less throughput). A job the description
        cannot hold (moving it is worth <= 0, or its point is not fair) raises ``ValueError``,
        or is left out when ``skip_unencodable`` (hints). Columns of the policy rows (the quota
        rule's ``borrow``) are set from the encoded jobs.
        """
        inst, data, model = self.instance, self.data, self.model
        if self.expansion is not None:
            schedule = self.expansion.to_model(schedule)
        x = [0.0] * model.num_vars
        for jid, a in schedule.jobs.items():
            j = inst.job_idx(jid)
            try:
                cols = self._encode_job(data.jobs[j], a)
            except ValueError:
                if skip_unencodable:
                    continue
                raise
            for col, val in cols:
                x[col] = val
        for col, terms in self.used.items():
            x[col] = sum(x[c] * a for c, a in terms)
        if self.borrow is not None:
            x[self.borrow] = float(self._borrows(schedule))
        return x

    def _borrows(self, schedule: Schedule) -> bool:
        """The quota rule's ``borrow``: a tenant holds more GPUs than its quota, or a job without
        a quota'd tenant runs."""
        quotas = self.instance.round.tenants or {}
        held: dict[str | None, int] = defaultdict(int)
        for jid, a in schedule.jobs.items():
            t = self.instance.job(jid).tenant
            held[t if t in quotas else None] += a.gpus
        return any(g > (quotas[t] if t is not None else 0) for t, g in held.items())

    def _encode_job(self, jd: JobData, a: Assignment) -> list[tuple[int, float]]:
        inst, j = self.instance, jd.index
        t = self.data.types.index(inst.node(next(iter(a.nodes))).gpu_type)
        p = point_for(jd, a.cpus_per_gpu, a.mem_per_gpu_gb)
        if p is None or (t, p) not in self.u.get(j, {}):
            raise ValueError(f"job {jd.job.id}: (type {self.data.types[t]}, point {a.point}) is not in the description")
        cols: list[tuple[int, float]] = [(self.u[j][(t, p)], 1.0)]
        for nid, k in a.nodes.items():
            n = inst.node_idx(nid)
            if (j, n, p) not in self.w:
                raise ValueError(f"job {jd.job.id}: node {nid} cannot hold it at point {a.point}")
            cols += [(self.x[(j, n)], k), (self.w[(j, n, p)], k)]
            if (j, n) in self.b:
                cols.append((self.b[(j, n)], 1.0))
        if j in self.e:
            if len(a.nodes) not in self.e[j]:
                raise ValueError(f"job {jd.job.id}: {len(a.nodes)} nodes is outside the description's range")
            cols.append((self.e[j][len(a.nodes)], 1.0))
        moved = is_move(jd.job, a.nodes)
        if jd.job.running and moved and not jd.can_move:
            raise ValueError(f"job {jd.job.id}: moving it is worth <= 0")
        if j in self.stay and not moved:
            cols.append((self.stay[j], 1.0))
        base = jd.options[(t, p)][0]
        worth = base * self.data.spread(jd, t, len(a.nodes)) * ((1.0 - jd.restart_share) if moved else 1.0)
        cols.append((self.v[j], worth))
        return cols


def point_for(jd: JobData, cpus_per_gpu: int, mem_per_gpu_gb: int) -> int | None:
    """Index of the kept point that replaces grid point ``(cpus, mem)``: the fastest within its resources."""
    thr = jd.job.profile.at(cpus_per_gpu, mem_per_gpu_gb)
    best = None
    for p, (c, m, t) in enumerate(jd.points):
        if c <= cpus_per_gpu and m <= mem_per_gpu_gb and t >= thr and (best is None or t > jd.points[best][2]):
            best = p
    return best


# --- the constraint families (formulations/mip.md has one section per function) -------------------


def add_choice(mip: RoundMip) -> None:
    """Selection, GPU type and grid point: binaries ``u[j,t,p]`` with ``sum_{t,p} u[j,t,p] <= 1``."""
    m = mip.model
    for jd in mip.data.jobs:
        if not jd.options:
            continue
        cols = mip.u[jd.index] = {(t, p): m.add_binary(f"u_{jd.index}_{t}_{p}") for t, p in sorted(jd.options)}
        m.le(f"one_{jd.index}", ((c, 1.0) for c in cols.values()), 1.0)


def add_gang(mip: RoundMip) -> None:
    """Integer GPUs per (job, node), split by grid point; gangs get exactly ``gpus`` GPUs of one type at one point.

    ``x[j,n] = sum_p w[j,n,p]``; ``sum_{n of type t} w[j,n,p] = gpus_j * u[j,t,p]``;
    ``w[j,n,p] <= cap[j,n,p] * u[j,t(n),p]`` where the GPUs that fit alone on ``n`` at ``p`` are fewer than ``gpus_j``.
    """
    m, data, inst = mip.model, mip.data, mip.instance
    for jd in data.jobs:
        if not jd.options:
            continue
        j, g = jd.index, jd.gpus
        members: dict[tuple[int, int], list[int]] = defaultdict(list)  # (t, p) -> w columns
        for n in range(len(inst.nodes)):
            caps = data.node_caps(jd, n)
            if not caps:
                continue
            t = data.node_type(n)
            xc = m.add_var(f"x_{j}_{n}", 0, max(caps.values()), integer=True)
            mip.x[(j, n)] = xc
            mip.nodes_of[j].append(n)
            mip.points_on[(j, n)] = sorted(caps)
            link = [(xc, -1.0)]
            for p, cap in sorted(caps.items()):
                wc = m.add_var(f"w_{j}_{n}_{p}", 0, cap)
                mip.w[(j, n, p)] = wc
                link.append((wc, 1.0))
                members[(t, p)].append(wc)
                if cap < g:
                    m.le(f"wcap_{j}_{n}_{p}", [(wc, 1.0), (mip.u[j][(t, p)], -cap)], 0.0)
            m.eq(f"link_{j}_{n}", link, 0.0)
        for (t, p), ucol in mip.u[j].items():
            m.eq(f"gang_{j}_{t}_{p}", [*((wc, 1.0) for wc in members[(t, p)]), (ucol, -float(g))], 0.0)


def add_node_capacity(mip: RoundMip) -> None:
    """Per node: GPUs, ``sum cpus_per_gpu * GPUs`` and ``sum mem_per_gpu * GPUs`` within capacity."""
    m, inst, data = mip.model, mip.instance, mip.data
    gpus: dict[int, list[tuple[int, float]]] = defaultdict(list)
    cpus: dict[int, list[tuple[int, float]]] = defaultdict(list)
    mem: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for (j, n), xc in mip.x.items():
        gpus[n].append((xc, 1.0))
        for p in mip.points_on[(j, n)]:
            c, mm, _ = data.jobs[j].points[p]
            wc = mip.w[(j, n, p)]
            cpus[n].append((wc, c))
            mem[n].append((wc, mm))
    for n, node in enumerate(inst.nodes):
        if n in gpus:
            m.le(f"gpus_{n}", gpus[n], node.gpus)
            m.le(f"cpus_{n}", cpus[n], node.cpus)
            m.le(f"mem_{n}", mem[n], node.mem_gb)


def add_type_capacity_cuts(mip: RoundMip) -> None:
    """Valid inequalities: per GPU type, total GPUs, cores and memory of the chosen points fit the type's totals.

    Implied by the gang and node-capacity rows (sum them over the type's nodes), so they change no
    solution, but they are knapsack rows over the binaries ``u`` alone, from which MIP solvers
    derive cover cuts, and they are exactly what the pooled LP bound keeps on huge rounds.
    """
    m, inst, data = mip.model, mip.instance, mip.data
    for t, tname in enumerate(data.types):
        nodes = [n for n in inst.nodes if n.gpu_type == tname]
        g_row, c_row, m_row = [], [], []
        for j, cols in mip.u.items():
            jd = data.jobs[j]
            for (tt, p), uc in cols.items():
                if tt != t:
                    continue
                c, mm, _ = jd.points[p]
                g_row.append((uc, jd.gpus))
                c_row.append((uc, c * jd.gpus))
                m_row.append((uc, mm * jd.gpus))
        if g_row:
            m.le(f"tgpus_{t}", g_row, sum(n.gpus for n in nodes))
            m.le(f"tcpus_{t}", c_row, sum(n.cpus for n in nodes))
            m.le(f"tmem_{t}", m_row, sum(n.mem_gb for n in nodes))


def add_spread(mip: RoundMip) -> None:
    """Jobs with ``spread_factor < 1`` that can span nodes: ``b[j,n]`` uses node n, ``e[j,k]`` uses exactly k nodes.

    ``b <= x <= cap * b``; ``sum_k e[j,k] = sum u[j]``; ``sum_n b[j,n] = sum_k k * e[j,k]``.
    """
    m, data = mip.model, mip.data
    for jd in data.jobs:
        j = jd.index
        nodes = mip.nodes_of.get(j, [])
        kmax = _kmax(mip, jd)
        if jd.job.spread_factor >= 1.0 or kmax <= 1:
            continue
        count = []
        for n in nodes:
            xc = mip.x[(j, n)]
            bc = m.add_binary(f"b_{j}_{n}")
            mip.b[(j, n)] = bc
            m.le(f"buse_{j}_{n}", [(xc, 1.0), (bc, -m.col_ub[xc])], 0.0)
            m.le(f"bpos_{j}_{n}", [(bc, 1.0), (xc, -1.0)], 0.0)
            count.append((bc, 1.0))
        e = mip.e[j] = {k: m.add_binary(f"e_{j}_{k}") for k in range(jd.kmin, kmax + 1)}
        m.eq(f"mode_{j}", [*((c, 1.0) for c in e.values()), *((c, -1.0) for c in mip.u[j].values())], 0.0)
        m.eq(f"count_{j}", [*count, *((c, -float(k)) for k, c in e.items())], 0.0)


def add_stay(mip: RoundMip, jd: JobData) -> int | None:
    """Running job ``jd``'s ``stay[j]`` column (made once): it forces ``x[j,n] >= placement[n]``
    (so x equals the placement) and a GPU type of the placement; ``None`` when the placement
    cannot be kept (a node has no column for the job, or it fits nowhere as placed)."""
    j, job = jd.index, jd.job
    if j in mip.stay:
        return mip.stay[j]
    placed = [(mip.instance.node_idx(nid), k) for nid, k in job.placement.items()]
    if jd.stay_type is None or not jd.options or not all((j, n) in mip.x for n, _ in placed):
        return None
    m = mip.model
    sc = m.add_binary(f"stay_{j}")
    mip.stay[j] = sc
    m.le(f"stayu_{j}", [(sc, 1.0), *((uc, -1.0) for (t, _), uc in mip.u[j].items() if t == jd.stay_type)], 0.0)
    for n, k in placed:
        m.ge(f"stayx_{j}_{n}", [(mip.x[(j, n)], 1.0), (sc, -float(k))], 0.0)
    return sc


def add_restart(mip: RoundMip) -> None:
    """Running jobs with a restart cost get their ``stay[j]`` (:func:`add_stay`).

    When moving is worth <= 0 (``restart_s >= duration_s``) the job may only stay: ``sum u[j] <= stay[j]``.
    """
    m = mip.model
    for jd in mip.data.jobs:
        j, job = jd.index, jd.job
        if not job.running or jd.restart_share <= 0.0 or not jd.options:
            continue
        sc = add_stay(mip, jd)
        if not jd.can_move:
            m.le(f"nomove_{j}", [*((c, 1.0) for c in mip.u[j].values()), *([(sc, -1.0)] if sc is not None else [])], 0.0)


def add_variant_choice(mip: RoundMip) -> None:
    """Elastic jobs: at most one mode over all size variants of a job, ``sum_v sum_{t,p} u[v,t,p] <= 1``."""
    for i, group in enumerate(mip.groups):
        cols = [c for v in group for c in mip.u.get(v, {}).values()]
        if len(group) > 1 and len(cols) > 1:
            mip.model.le(f"variant_{i}", ((c, 1.0) for c in cols), 1.0)


def add_move_budget(mip: RoundMip) -> None:
    """``round.max_moves``: ``sum over running jobs of (sum_v sum u[v] - stay[v current]) <= max_moves``.

    A running job that runs counts one move unless it keeps its placement (its ``stay``, made for
    every running job here by :func:`add_stay`); an elastic job's other sizes are always moves. The
    count can only overstate the moves (``stay = 0`` on a job that stays), never understate them.
    """
    cap = mip.original.round.max_moves
    if cap is None:
        return
    row: list[tuple[int, float]] = []
    for i, group in enumerate(mip.groups):
        if mip.original.jobs[i].placement is None:
            continue
        for v in group:
            row += [(c, 1.0) for c in mip.u.get(v, {}).values()]
            jd = mip.data.jobs[v]
            if jd.job.running:
                sc = add_stay(mip, jd)
                if sc is not None:
                    row.append((sc, -1.0))
    if row:
        mip.model.le("moves", row, float(cap))


def add_quota_reclaim(mip: RoundMip) -> None:
    """``round.tenants`` (the checker's rule 6), as in :func:`optsched.exact.policies.add_quota_reclaim`.

    ``used_t = sum gpus_v u[v]`` over tenant t's jobs (jobs without a quota'd tenant form one group
    with quota 0); ``used_t <= quota_t + G borrow`` (G: the cluster's GPUs); a job i of tenant t with
    ``g_i <= quota_t`` (``g_i``: its smallest size) keeps ``used_t >= (quota_t + 1 - g_i)(borrow - run_i)``,
    i.e. while anyone borrows, a left-out job must not fit in the rest of its tenant's quota.
    """
    quotas = mip.original.round.tenants
    if quotas is None:
        return
    m = mip.model
    total = sum(n.gpus for n in mip.instance.nodes)
    used: dict[str | None, list[tuple[int, float]]] = defaultdict(list)
    for v, cols in mip.u.items():
        job = mip.instance.jobs[v]
        used[job.tenant if job.tenant in quotas else None] += [(c, float(job.gpus)) for c in cols.values()]
    bc = mip.borrow = m.add_binary("borrow")
    # one column per group, used_t = its sum, so each reclaim row has O(1 + sizes) terms, not the
    # tenant's whole sum (O(jobs^2) non-zeros on large rounds)
    used_col: dict[str | None, int] = {}
    for k, (t, row) in enumerate(used.items()):  # by number: tenant names need not be valid names
        col = used_col[t] = m.add_var(f"used_{k}", 0.0, sum(a for _, a in row))
        mip.used[col] = row
        m.eq(f"usedsum_{k}", [*row, (col, -1.0)], 0.0)
        limit = quotas[t] if t is not None else 0
        if sum(a for _, a in row) > limit:
            m.le(f"quota_{k}", [(col, 1.0), (bc, -float(total))], float(limit))
    for i, job in enumerate(mip.original.jobs):
        t = job.tenant
        if t not in quotas or min(job.sizes) > quotas[t]:
            continue
        g = min(job.sizes)
        k = float(quotas[t] + 1 - g)
        run = [(c, k) for v in mip.groups[i] for c in mip.u.get(v, {}).values()]
        m.ge(f"reclaim_{i}", [*([(used_col[t], 1.0)] if t in used_col else []), (bc, -k), *run], 0.0)


def add_value(mip: RoundMip) -> None:
    """Worth ``v[j]``: ``v <= sum best * u``, then one big-M row per (nodes used, moved) mode; maximise ``sum v``.

    With mode factors ``f_t = sf^(k-kbase_t) (1 - r if moved)`` (``kbase_t``: the job's spread
    base on type t, :meth:`optsched.model.Instance.spread_base`):
    ``v <= sum_{t,p} f_t base[t,p] u[j,t,p] + (1 - min_t f_t) * B * (1 - e[j,k] + stay[j] if moved)``
    where ``B = max base``; the row binds exactly in its mode and is implied by ``v <= base`` otherwise.
    """
    m, data = mip.model, mip.data
    for jd in data.jobs:
        if not jd.options:
            continue
        j, big = jd.index, jd.base_max
        vc = m.add_var(f"v_{j}", 0.0, max(o[1] for o in jd.options.values()), obj=1.0)
        mip.v[j] = vc
        u = mip.u[j]
        m.le(f"vbest_{j}", [(vc, 1.0), *((u[tp], -o[1]) for tp, o in jd.options.items())], 0.0)
        r = jd.restart_share
        ks = sorted(mip.e.get(j, {})) or [None]
        moves = [False, True] if (jd.job.running and 0.0 < r < 1.0) else [False]
        types = sorted({t for t, _ in jd.options})
        for k in ks:
            for moved in moves:
                f = {t: (data.spread(jd, t, k) if k is not None else 1.0) * ((1.0 - r) if moved else 1.0) for t in types}
                if min(f.values()) >= 1.0:
                    continue  # v <= base is implied by v <= sum best * u
                slack = (1.0 - min(f.values())) * big
                row = [(vc, 1.0), *((u[tp], -f[tp[0]] * o[0]) for tp, o in jd.options.items())]
                rhs = 0.0
                if k is not None:
                    row.append((mip.e[j][k], slack))
                    rhs += slack
                if moved and j in mip.stay:
                    row.append((mip.stay[j], -slack))
                name = f"val_{j}_{k or 1}_{'m' if moved else 's'}"
                m.le(name, row, rhs)


def build(instance: Instance, data: RoundData | None = None) -> RoundMip:
    """The exact MIP of ``instance`` (maximise total worth), built family by family.

    An elastic round is built on its rigid size variants (``data``, when given, must describe
    that rigid round: ``RoundData(expand(instance).instance)``)."""
    exp = expand(instance) if has_elastic(instance) else None
    model_inst = instance if exp is None else exp.instance
    if data is None:
        data = RoundData(model_inst)
    elif exp is not None:
        raise ValueError("build: pass no data for an elastic round (it is built on its size variants)")
    mip = RoundMip(model_inst, data, LinearModel(_safe_name(instance.name)), exp)
    add_choice(mip)
    add_gang(mip)
    add_node_capacity(mip)
    add_type_capacity_cuts(mip)
    add_spread(mip)
    add_restart(mip)
    add_value(mip)
    add_variant_choice(mip)
    add_move_budget(mip)
    add_quota_reclaim(mip)
    return mip


# --- helpers -------------------------------------------------------------------------------------


def _kmax(mip: RoundMip, jd: JobData) -> int:
    """Most nodes the job can use: ``gpus`` or, if fewer, the most nodes of one usable type it fits on."""
    per_type: dict[int, int] = defaultdict(int)
    for n in mip.nodes_of.get(jd.index, []):
        per_type[mip.data.node_type(n)] += 1
    return min(jd.gpus, max(per_type.values(), default=0))


def _safe_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in name) or "round"
