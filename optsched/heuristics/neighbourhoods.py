"""Which nodes an ``lns`` step frees: at random, linked by split jobs, or aimed at lost worth.

* :func:`random_nodes`: a uniform sample of the pool.
* :func:`linked_nodes`: a random node, then the nodes its split jobs also run on (and theirs) and
  the home nodes of running jobs that moved onto it (or the nodes they moved to), then random
  nodes. A job split across a freed and a kept node stays fixed in the sub-problem, and a moved
  job can return home only when its home nodes are freed too, so a uniform sample of 2-4 nodes
  out of 64 rarely allows either: linked neighbourhoods do.
* :func:`targeted_nodes`: the first node drawn with weight the worth its jobs lose to their grid
  points (:attr:`NodeState.deficit`: how far each job's throughput is below the best its points
  offer), then its split jobs' other nodes, then nodes drawn with weight their idle GPUs, cores
  and memory (:attr:`NodeState.slack`): the sub-problem can move CPU- or memory-hungry jobs to
  where the resources lie idle.
* :func:`priced_nodes`: with the prices of a bound (:class:`optsched.mip.colgen.Prices`), nodes
  drawn with weight their loss (:func:`node_losses`: the node's price less the reduced worth its
  jobs earn there), after the first one its split partners. The losses and the prices of the
  jobs left out add up to the bound minus the schedule's worth, so these steps go where the gap is.

Measured (``benchmarks/README.md``, "lns neighbourhoods"; paired runs, 10 s): half the steps
targeted and a quarter linked, against uniform samples, lns's schedules on the eight medium bench
rounds are worth 1.4 % more on average (0.998-1.053), cpsat's 0.9 % (0.992-1.020).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from optsched.model import Instance
from optsched.schedule import Schedule
from optsched.values import assignment_value, is_move

if TYPE_CHECKING:
    from optsched.mip.colgen import Prices

__all__ = ["NodeState", "linked_nodes", "node_losses", "node_state", "priced_nodes", "random_nodes", "targeted_nodes"]

#: weights never vanish: every node of the pool can still be drawn
_FLOOR = 1e-3


@dataclass(frozen=True)
class NodeState:
    """What the neighbourhood choice reads from the incumbent, per node id."""

    deficit: dict[str, float]  #: sum over its jobs of (best throughput / throughput - 1) x share of the job here
    slack: dict[str, float]  #: idle share of its GPUs + of its cores + of its memory (0 to 3)
    partners: dict[str, frozenset[str]]  #: the other nodes its split jobs run on, and its moved jobs' home nodes (both ways)


def node_state(instance: Instance, schedule: Schedule, top_throughput: dict[str, float]) -> NodeState:
    """Per-node deficit, slack and split partners of ``schedule`` (``top_throughput``: per job
    id, the best throughput among its admissible points)."""
    deficit = {n.id: 0.0 for n in instance.nodes}
    used = {n.id: [0, 0, 0] for n in instance.nodes}
    partners: dict[str, set[str]] = {}
    for j, a in schedule.jobs.items():
        job = instance.job(j)
        tp = job.profile.at(a.cpus_per_gpu, a.mem_per_gpu_gb)
        loss = top_throughput.get(j, tp) / tp - 1.0 if tp > 0 else 0.0
        for n, k in a.nodes.items():
            deficit[n] += loss * k / a.gpus
            u = used[n]
            u[0] += k
            u[1] += k * a.cpus_per_gpu
            u[2] += k * a.mem_per_gpu_gb
        linked = set(a.nodes)
        if job.placement is not None and is_move(job, a.nodes):
            linked.update(job.placement)  # a moved running job can go home only if both are freed
        if len(linked) > 1:
            for n in linked:
                partners.setdefault(n, set()).update(m for m in linked if m != n)
    slack = {}
    for n in instance.nodes:
        u = used[n.id]
        slack[n.id] = sum(1.0 - x / cap for x, cap in zip(u, (n.gpus, n.cpus, n.mem_gb), strict=True) if cap > 0)
    return NodeState(deficit, slack, {n: frozenset(p) for n, p in partners.items()})


def random_nodes(pool: list[str], size: int, rng: random.Random) -> list[str]:
    """``size`` nodes of ``pool`` drawn uniformly (all of them if fewer)."""
    return rng.sample(pool, min(size, len(pool)))


def _grow(state: NodeState, chosen: list[str], pool_set: set[str], size: int, rng: random.Random) -> None:
    """Add to ``chosen`` (in place) the split partners of its nodes, breadth first, up to ``size``."""
    frontier = list(chosen)
    seen = set(chosen)
    while frontier and len(chosen) < size:
        n = frontier.pop(0)
        nb = sorted((state.partners.get(n, frozenset()) & pool_set) - seen)
        rng.shuffle(nb)
        for m in nb[: size - len(chosen)]:
            chosen.append(m)
            seen.add(m)
            frontier.append(m)


def linked_nodes(state: NodeState, pool: list[str], size: int, rng: random.Random) -> list[str]:
    """A random node of ``pool``, its split partners (breadth first), then random nodes: ``size``
    distinct nodes of ``pool`` (all of them if fewer)."""
    size = min(size, len(pool))
    if size <= 0:
        return []
    chosen = [rng.choice(pool)]
    _grow(state, chosen, set(pool), size, rng)
    taken = set(chosen)
    rest = [n for n in pool if n not in taken]
    return chosen + rng.sample(rest, size - len(chosen))


def _aimed(state: NodeState, pool: list[str], size: int, rng: random.Random, first: dict[str, float],
           then: dict[str, float]) -> list[str]:
    """A node of ``pool`` drawn with weight ``first``, its split partners, then nodes drawn with
    weight ``then``: ``size`` distinct nodes of ``pool`` (all of them if fewer)."""
    size = min(size, len(pool))
    if size <= 0:
        return []
    chosen = rng.choices(pool, weights=[_FLOOR + first.get(n, 0.0) for n in pool])
    _grow(state, chosen, set(pool), size, rng)
    taken = set(chosen)
    rest = [n for n in pool if n not in taken]
    weights = [_FLOOR + then.get(n, 0.0) for n in rest]
    while len(chosen) < size:
        i = rng.choices(range(len(rest)), weights=weights)[0]
        chosen.append(rest.pop(i))
        weights.pop(i)
    return chosen


def targeted_nodes(state: NodeState, pool: list[str], size: int, rng: random.Random) -> list[str]:
    """A node drawn by deficit, its split partners, then nodes drawn by slack: ``size`` distinct
    nodes of ``pool`` (all of them if fewer)."""
    return _aimed(state, pool, size, rng, state.deficit, state.slack)


def node_losses(instance: Instance, schedule: Schedule, prices: Prices) -> dict[str, float]:
    """Per node id, how much ``schedule`` loses there against the bound ``prices`` come from: the
    node's price less the reduced value of what it holds (each job's share of its worth there
    less that share of the job's price), at least 0."""
    loss = dict(prices.node)
    for j, a in schedule.jobs.items():
        job = instance.job(j)
        net = assignment_value(instance, job, a) - prices.job.get(j, 0.0)
        g = a.gpus
        for n, k in a.nodes.items():
            loss[n] = loss.get(n, 0.0) - net * k / g
    return {n: max(0.0, v) for n, v in loss.items()}


def priced_nodes(state: NodeState, loss: dict[str, float], pool: list[str], size: int, rng: random.Random) -> list[str]:
    """A node drawn by loss (:func:`node_losses`), its split partners, then more nodes drawn by
    loss: ``size`` distinct nodes of ``pool`` (all of them if fewer)."""
    return _aimed(state, pool, size, rng, loss, loss)
