"""Price-guided repair of a decoded schedule: the ``+ repair`` of "learned + repair" on large rounds.

The prices are in :mod:`optsched.learned.prices`, the repack in :mod:`optsched.learned.repack`,
the local moves in :mod:`optsched.learned.moves`; this module runs them (:func:`improve`,
:func:`polish`, :func:`price_schedule`).

The policy decides well *which* small jobs run and at which grid point (on the 1,024 x 4,000
library rounds it gives every 1-, 2- and 4-GPU job its best point, as the LP relaxation does),
but, trained on rounds of at most 6 nodes, it packs them over too many nodes: their cores and
memory run out with GPUs still free, and the 8- and 16-GPU gangs find no whole node (24-30 % of
the GPUs idle). The repair rebuilds the round around prices:

1. **Prices** (:func:`resource_prices`): Lagrange multipliers of each GPU type's GPUs, cores and
   memory in the aggregate relaxation (every job picks its best (type, grid point) or waits, at
   ``value - price x resources``), found by a cutting-plane method on the dual. A gang
   that fills whole nodes is charged those nodes' *whole* cores and memory (nobody else can use
   what it leaves there), so the prices see that a node given to a gang is a node taken from
   the small jobs, which the plain LP relaxation does not.
2. **Selection**: jobs whose best reduced profit is positive, cut to each type's capacity.
3. **Packing** (:func:`price_repack`): running jobs stay where they are (no restart), except that
   on a node they fill, some may leave when the node's best mix with leavers (their reduced
   profit elsewhere, restart paid, plus the priced room they free) beats its best mix with all
   staying (:func:`node_knapsack`); leavers join the selection. Gangs that
   fill whole nodes take whole free nodes at the best point one node holds, and the other jobs
   fill the remaining nodes one node at a time, each time the job whose target cores and memory
   best match what the node has left relative to the pool's average need per GPU (so nodes end
   with a mix that uses GPUs, cores and memory together). Targets are the policy's grid points
   where given (else the priced best), lowered by a common price until the pool fits in
   ``fill_to`` of the free cores and memory; a job that fits nowhere at its target takes the
   best point that fits.
4. **Point upgrades** (:func:`upgrade_points`): per node, repeatedly, the upgrade of one of its
   jobs with the largest value gain per unit of the node's cores and memory; then the decoder's
   leftover pass.
5. Anything still waiting is placed where it fits at its leanest point.

:func:`improve` runs this from a decoded state and keeps whichever of the two schedules is worth
more, so it never lowers the objective; then every node's single-node jobs get the node's best
mix of grid points (:func:`repoint_nodes`, an exact small knapsack per node), waiting gangs are
split over nodes they share with small jobs where that pays for the co-located jobs' lower points
(:func:`squeeze_gangs`), jobs move to nodes where they are worth more (:func:`relocate`) and to
faster GPU types whose nodes' jobs make room for them (:func:`move_to_faster`); the nodes these
touched get their best mix again. Every placement checks capacities: the result is
feasible by construction (tests check it with the independent checker). All steps are numpy
over jobs, nodes and grid points, with O(jobs) Python steps: 0.39 s on the homogeneous and
0.78 s on the three-type 1,024-node x 4,000-job library round (measured 25 Nov 2026, quiet
machine; docs/results.md).
"""
from __future__ import annotations

import time

import numpy as np

from optsched.learned.decode import (
    PlacementState,
    Scores,
    decode_state,
    move_multiplier,
    state_schedule,
)
from optsched.learned.exchange import SWAP_CELLS, swap_nodes
from optsched.learned.features import RoundFeatures, featurise
from optsched.learned.moves import (
    RELOCATE_CELLS,
    _top_worth,
    move_to_faster,
    polish,
    relocate,
    repoint_nodes,
    squeeze_gangs,
)
from optsched.learned.prices import OptionTable, option_table, resource_prices
from optsched.learned.repack import price_repack
from optsched.model import Instance
from optsched.schedule import Schedule

__all__ = ["CONFIGS", "improve", "price_schedule", "state_value"]


def state_value(instance: Instance, feats: RoundFeatures, st: PlacementState) -> float:
    """The objective of a state (as :func:`optsched.values.schedule_value` of its schedule)."""
    return float(sum(feats.point_value[j, st.point[j]] * move_multiplier(instance, feats, j, w) for j, w in st.where.items()))


#: (pack_eff, fill_to) of the repacks :func:`improve` tries, in order, while time is left. The
#: first charges shared cores and memory 1/0.95 times (so fewer gangs take whole nodes) and fills
#: the pool to 93 %; the second prices packing as lossless and fills to 95 %. On the two
#: 1,024 x 4,000 library rounds (before the per-node mixes and leavers): 1.9 / 4.5 % and 2.3 / 4.6 %
#: from the plain pooled LP bound; with them the better of the two is 1.9 / 2.85 % from it, and
#: 1.6 / 2.0 % from the strengthened pooled LP (staying and whole-node variants; docs/results.md).
CONFIGS: tuple[tuple[float, float], ...] = ((0.95, 0.93), (1.0, 0.95))


def improve(
    instance: Instance,
    feats: RoundFeatures,
    base: PlacementState | None,
    *,
    configs: tuple[tuple[float, float], ...] = CONFIGS,
    use_targets: bool = True,
    polish_base: bool | None = None,
    deadline: float | None = None,
    first_estimate: float = 0.0,
    stats: dict | None = None,
) -> tuple[PlacementState | None, float]:
    """The best of ``base`` (a decoded state; ``None``: none) and the price-guided repacks of
    ``configs``: ``(state, value)``; the state is ``base`` itself when no repack beats it, so the
    objective never goes down. ``polish_base``: first improve ``base`` in place by :func:`polish`
    (moves that only raise its worth; default: up to :data:`RELOCATE_CELLS` nodes x jobs). ``use_targets``: the base's grid points are the repacks'
    preferred points. No repack starts that would end past ``deadline`` (a :func:`time.perf_counter` value),
    the first expected to take ``first_estimate`` seconds, the others as long as the one before.
    The state kept then gets :func:`squeeze_gangs`, :func:`move_to_faster` and, above
    :data:`RELOCATE_CELLS` (where :func:`polish` leaves them to here), the per-node mixes
    (:func:`repoint_nodes`) first and :func:`relocate`, then the mixes again on the nodes these
    moves touched; all only raise its worth.
    ``stats`` receives ``repair_base_objective``, ``repair_s``, ``repair_tried`` (per repack:
    parameters, objective, dual value, seconds), ``repair_used``, ``repair_repointed`` (the
    final pass's gain), ``repair_gangs_squeezed``, ``repair_relocated`` and ``repair_moved_faster``."""
    t0 = time.perf_counter()
    base_v = state_value(instance, feats, base) if base is not None else 0.0
    best, best_v = base, base_v
    tried: list[dict] = []
    if polish_base is None:
        polish_base = feats.n_nodes * feats.n_jobs <= RELOCATE_CELLS
    if base is not None and polish_base and feats.n_jobs and feats.n_nodes:
        polish(instance, feats, base, deadline=deadline)  # in place: only raises its worth
        best_v = state_value(instance, feats, base)
    polished_v = best_v
    if feats.n_jobs and feats.n_nodes:
        targets = dict(base.point) if (use_targets and base is not None) else None
        tables: dict[float, OptionTable] = {}
        last = first_estimate
        for pack_eff, fill_to in configs:
            t = time.perf_counter()
            if deadline is not None and t + last > deadline:
                break
            table = tables.get(pack_eff)
            if table is None:
                table = tables[pack_eff] = option_table(instance, feats, pack_eff=pack_eff)
            lam, dual = resource_prices(table)
            st = price_repack(instance, feats, table, lam, targets=targets, fill_to=fill_to)
            v = state_value(instance, feats, st)
            last = time.perf_counter() - t
            tried.append({"pack_eff": pack_eff, "fill_to": fill_to, "objective": v, "dual": dual, "s": last})
            if v > best_v + 1e-9:
                best, best_v = st, v
    repointed = 0.0
    gangs = moved = faster = 0
    if best is not None and feats.n_jobs and feats.n_nodes:  # on the state kept: moves that only raise its worth
        large = feats.n_nodes * feats.n_jobs > RELOCATE_CELLS
        before_v = best_v

        def live() -> bool:  # each step's set-up is O(jobs) (tens of ms at 1,024 x 4,000): none past the deadline
            return deadline is None or time.perf_counter() < deadline

        if large and live():  # polish() left the per-node mixes to here
            repointed = repoint_nodes(instance, feats, best, deadline=deadline)
        free = np.stack([best.free_g, best.free_c, best.free_m])
        if live():
            gangs = squeeze_gangs(instance, feats, best, deadline=deadline)
        if large and live():
            moved = relocate(instance, feats, best)
        if live():
            faster = move_to_faster(instance, feats, best, deadline=deadline)
        if best is not base and feats.n_nodes * feats.n_jobs <= SWAP_CELLS and live():  # polish() swapped the base's jobs
            faster += swap_nodes(instance, feats, best, deadline=deadline)
        if gangs or moved or faster:  # the nodes these moves touched get their best mix again
            touched = np.flatnonzero((free != np.stack([best.free_g, best.free_c, best.free_m])).any(axis=0))
            repoint_nodes(instance, feats, best, nodes=touched, deadline=deadline)
            best_v = state_value(instance, feats, best)
        else:
            best_v += repointed
        repointed = best_v - before_v
        if best is base:  # the final pass changed the policy's own schedule in place
            polished_v = best_v
    if stats is not None:
        stats.update(repair_repointed=repointed, repair_gangs_squeezed=gangs, repair_relocated=moved, repair_moved_faster=faster)
        stats.update(repair_base_objective=base_v, repair_polished_objective=polished_v, repair_s=time.perf_counter() - t0, repair_tried=tried, repair_used=best is not base)
    return best, best_v


def price_schedule(instance: Instance, *, deadline: float | None = None) -> Schedule | None:
    """The best price-guided repack of ``instance`` built from scratch (:func:`improve` without a
    decoded base), as a schedule; ``None`` if none was built before ``deadline`` (a
    :func:`time.perf_counter` value). Needs no torch: ``lns`` starts from it (on the medium bench
    rounds 1.1-1.8 % from the configuration-LP bound in 0.02-0.07 s, about where the policy's
    decoded and repaired schedules are)."""
    feats = featurise(instance)
    state, _value = improve(instance, feats, None, deadline=deadline)
    return state_schedule(instance, feats, state) if state is not None else None


#: :func:`first_decodes` runs (by default in ``maifs``) on rounds of at most this many nodes x jobs
FORCED_CELLS = 1_024
#: the most waiting jobs :func:`first_decodes` tries
FORCED_JOBS = 3
#: a gang-first decode is polished only where it is worth at least this share of the best schedule
FORCED_REACH = 0.9


def first_decodes(instance: Instance, feats: RoundFeatures, scores: Scores, waiting: list[int], value: float, *,
                  deadline: float | None = None, count: int = FORCED_JOBS) -> PlacementState | None:
    """The policy's greedy decode with one job that the schedule worth ``value`` leaves waiting
    decoded first (its admit score raised above every other), then polished (:func:`polish`),
    for the ``count`` waiting jobs of most worth; the best such state where it is worth more
    than ``value``, else ``None``. A job the decoder reaches late (a gang after the small jobs
    that fill its nodes) may be worth more than the jobs that took its place: the decoder
    cannot see that, and local moves that add one job at a time rarely undo it."""
    if not waiting:
        return None
    top = _top_worth(feats, np.array(waiting, dtype=np.int64))
    best: PlacementState | None = None
    lead = float(scores.admit.max()) + 1.0
    for i in np.argsort(-top, kind="stable")[:count]:
        if deadline is not None and time.perf_counter() > deadline:
            break
        admit = scores.admit.copy()
        admit[waiting[int(i)]] = lead
        st = decode_state(instance, feats, Scores(admit=admit, node=scores.node, point=scores.point, fit=scores.fit), deadline=deadline)
        if st.timed_out:
            break
        if state_value(instance, feats, st) < FORCED_REACH * value:
            continue  # the polish (a few ms) rarely adds this much
        polish(instance, feats, st, deadline=deadline)
        v = state_value(instance, feats, st)
        if v > value + 1e-9 * max(1.0, abs(value)):
            best, value = st, v
    return best
