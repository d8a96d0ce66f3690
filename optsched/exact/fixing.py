"""Reduced-cost fixing from the configuration LP: which pieces a schedule at least as good as a
known one may use (formulations/integrated.md, "Configuration fixing").

The configuration LP of :mod:`optsched.mip.colgen` gives duals ``(pi, rho)`` and, per node
group ``q``, the most reduced value ``mu_q`` of a configuration. Every feasible schedule of worth
``W`` maps each node ``n`` to a configuration ``c_n`` (its pieces) and satisfies

    W  <=  L  -  sum_n (mu_q(n) - rv(c_n))  -  sum_{j not scheduled} pi_j,
    L   =  sum_j pi_j + sum_q |q| mu_q                    (the Lagrangian bound),

every bracket non-negative (``rv``: the pieces' reduced values; a scheduled job's pieces sum to at
least its worth less ``pi_j``, config-bound.md). So with a schedule of worth ``z`` at hand and
``delta = L - z``, a schedule worth at least ``z`` has

* every job with ``pi_j > delta`` scheduled (**forced** jobs);
* on a node of a plain group (no running job with a restart cost), no piece ``P`` of job ``j``
  with ``mu_q - rv_P - T_q^{-j}(capacity - P) > delta``, where ``T_q^{-j}(r)`` bounds the reduced
  value of any configuration of the other jobs within capacity ``r`` (the pricing table of
  :func:`optsched.mip.pricing.price_class` without job ``j``'s pieces; it rounds sizes down and so
  bounds every state).

Dropping pieces lowers ``mu_q`` of the remaining configurations, hence ``L`` and ``delta``: the
rule is applied again until nothing changes (``L`` of the last round bounds every schedule that
uses only kept pieces, i.e. every schedule worth at least ``z``). Nodes of home groups (where a
running job could stay) are left alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from optsched.exact.prep import JobData
from optsched.mip import colgen, pricing
from optsched.model import Instance
from optsched.schedule import Schedule

__all__ = ["ConfigFixing", "config_fixing"]

#: relative tolerance added to ``delta`` (floating-point sums over a few hundred terms): a piece is
#: dropped only when it costs clearly more than the margin
TOLERANCE = 1e-7
#: at most this many rounds of dropping pieces and re-pricing
MAX_ROUNDS = 20


@dataclass(frozen=True)
class ConfigFixing:
    """What a schedule worth at least ``incumbent`` may use (see the module text)."""

    incumbent: float  #: the worth ``z`` the fixing is relative to
    bound: float  #: ``L`` of the last round: bounds every schedule worth at least ``incumbent``
    delta: float  #: ``L - z`` plus the tolerance
    forced: frozenset[int]  #: jobs every such schedule runs
    restricted: frozenset[int]  #: nodes whose pieces are restricted (plain groups)
    whole: frozenset[tuple[int, int, int]]  #: (job, node, point) whole pieces kept on restricted nodes
    split: dict[tuple[int, int, int], tuple[int, ...]]  #: (job, node, point) -> GPU counts of split pieces kept
    stats: dict[str, float] = field(default_factory=dict)
    #: for the Lagrangian rows (RoundModel.add_config_fixing): the job duals, the most reduced value
    #: of a configuration per restricted node and in sum over the other nodes, and the reduced
    #: value of each kept piece (split pieces: the most over the declared node counts)
    pi: tuple[float, ...] = ()
    node_mu: dict[int, float] = field(default_factory=dict)
    other_mu: float = 0.0
    whole_rv: dict[tuple[int, int, int], float] = field(default_factory=dict)
    split_rv: dict[tuple[int, int, int, int], float] = field(default_factory=dict)

    def allows_whole(self, j: int, n: int, p: int) -> bool:
        return n not in self.restricted or (j, n, p) in self.whole

    def split_sizes(self, j: int, n: int, p: int) -> tuple[int, ...] | None:
        """The GPU counts job ``j`` may have on node ``n`` at point ``p`` when split (None: any)."""
        if n not in self.restricted:
            return None
        return self.split.get((j, n, p), ())


def config_fixing(instance: Instance, data: list[JobData], incumbent: float, *, time_limit: float,
                  schedules: list[Schedule] | None = None) -> ConfigFixing | None:
    """Reduced-cost fixing relative to a schedule worth ``incumbent`` (None when the configuration
    LP does not apply or finishes no pricing in ``time_limit`` seconds)."""
    start = time.perf_counter()
    if not colgen.supported(instance):
        return None
    cb = colgen.config_bound(instance, time_limit=time_limit, schedules=schedules)
    if cb.bound is None or cb.duals is None:
        return None
    duals = cb.duals
    pi = np.maximum(duals[0], 0.0)
    groups = pricing.node_groups(instance, data)
    classes = sorted({g.cls for g in groups})
    sets = {cls: pricing.PieceSet([pc for pcs in pricing.class_pieces(instance, data, cls).values() for pc in pcs],
                                 *pricing.units_of(cls)) for cls in classes}
    rvs = {cls: sets[cls].reduced(duals) for cls in classes}
    # home groups keep every piece: their best configuration is priced once, with all pieces
    home_total = 0.0
    full: dict[tuple[str, int, int, int], pricing.ClassTable] = {}
    for grp in groups:
        if grp.home is None:
            continue
        if grp.cls not in full:
            full[grp.cls] = pricing.price_class(grp.cls, sets[grp.cls], rvs[grp.cls], np.float64)
        st = pricing.PieceSet(grp.stays, *pricing.units_of(grp.cls)) if grp.stays else None
        v, _ = pricing.group_best(full[grp.cls], st, st.reduced(duals) if st is not None else None)
        home_total += max(0.0, v)
    plain = {cls: sum(len(g.nodes) for g in groups if g.cls == cls and g.home is None) for cls in classes}
    keep = {cls: np.ones(len(sets[cls]), dtype=bool) for cls in classes}
    bound = delta = float("inf")
    rounds = 0
    while rounds < MAX_ROUNDS:
        rounds += 1
        tables = {}
        total = float(pi.sum()) + home_total
        for cls in classes:
            if not plain[cls]:
                continue
            rv = np.where(keep[cls], rvs[cls], -1.0)  # dropped pieces never enter the table
            tables[cls] = table = pricing.price_class(cls, sets[cls], rv, np.float64)
            G, C, M = table.top()
            total += plain[cls] * max(0.0, float(table.best[G, C, M]))
        bound = total * (1 + pricing.SLACK) + pricing.SLACK
        delta = bound - incumbent + TOLERANCE * max(1.0, abs(bound))
        changed = False
        for cls, table in tables.items():
            ps = sets[cls]
            G, C, M = table.top()
            mu = max(0.0, float(table.best[G, C, M]))
            # the rest of a node holding piece P holds no other piece of P's job: per job, the
            # table of the other jobs' kept pieces bounds it
            rest = np.empty(len(ps))
            for j in np.unique(ps.job[keep[cls]]):
                own = ps.job == j
                other = pricing.price_class(cls, ps, np.where(keep[cls] & ~own, rvs[cls], -1.0), np.float64)
                rest[own] = other.best[G - ps.gpus[own], C - ps.uc[own], M - ps.um[own]]
            slack = np.where(keep[cls], mu - rvs[cls] - rest, np.inf)
            new = keep[cls] & (slack <= delta)
            changed |= bool((new != keep[cls]).any())
            keep[cls] = new
        if not changed:
            break
    forced = frozenset(int(j) for j in np.flatnonzero(pi > delta))
    restricted: set[int] = set()
    whole: set[tuple[int, int, int]] = set()
    split: dict[tuple[int, int, int], set[int]] = {}
    node_mu: dict[int, float] = {}
    whole_rv: dict[tuple[int, int, int], float] = {}
    split_rv: dict[tuple[int, int, int, int], float] = {}
    for grp in groups:
        if grp.home is not None:
            continue
        restricted.update(grp.nodes)
        ps = sets[grp.cls]
        table = tables[grp.cls]
        mu = max(0.0, float(table.best[table.top()]))
        rv = rvs[grp.cls]
        for i in np.flatnonzero(keep[grp.cls]):
            pc = ps.pieces[int(i)]
            for n in grp.nodes:
                node_mu[n] = mu
                if pc.nodes == 1:
                    whole.add((pc.job, n, pc.point))
                    whole_rv[(pc.job, n, pc.point)] = max(whole_rv.get((pc.job, n, pc.point), -np.inf), float(rv[i]))
                else:
                    split.setdefault((pc.job, n, pc.point), set()).add(pc.gpus)
                    key = (pc.job, n, pc.point, pc.gpus)
                    split_rv[key] = max(split_rv.get(key, -np.inf), float(rv[i]))
        for n in grp.nodes:
            node_mu.setdefault(n, mu)
    kept = sum(int(k.sum()) for k in keep.values())
    stats = {"config_bound": float(cb.bound), "fixing_bound": bound, "fixing_rounds": rounds, "pieces": sum(len(s) for s in sets.values()),
             "pieces_kept": kept, "forced_jobs": len(forced), "fixing_s": time.perf_counter() - start}
    return ConfigFixing(incumbent, bound, delta, forced, frozenset(restricted), frozenset(whole),
                        {k: tuple(sorted(v)) for k, v in split.items()}, stats, tuple(float(x) for x in pi), node_mu,
                        home_total, whole_rv, split_rv)
