"""What travels between the coordinator and the workers: compact sub-rounds and their answers.

A worker gets one :class:`PartTask` per part and pass: the part's nodes as plain tuples, its
jobs as their contract JSON objects, the round settings and the whole round's spread sums (so
that a gang is worth in the part what it is worth in the round: :meth:`Instance.subround`), a
hint as plain tuples, and its budget. Nothing of the whole round travels, and nothing that is
expensive to pickle (no :class:`~optsched.model.Instance`, whose read-only maps do not pickle):
each pass sends every job and node once in all. :func:`solve_part` rebuilds the sub-round
(validated, as any round), runs ``lns`` on it with a deterministic budget and answers with a
:class:`PartAnswer` of plain tuples.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from optsched.heuristics.fungible_greedy import fungible_greedy_schedule
from optsched.heuristics.lns import LargeNeighbourhoodSearch
from optsched.learned.features import featurise
from optsched.learned.repair import option_table, price_schedule, resource_prices
from optsched.model import Instance, Job, Node, Round
from optsched.schedule import Assignment, Schedule
from optsched.values import schedule_value

__all__ = ["PRICED_S_PER_JOB", "SETUP_S_PER_JOB", "PartAnswer", "PartTask", "encode_part", "part_instance", "solve_part"]

#: wall seconds per job of a part for lns's set-up (its fungible-greedy and price-guided starts)
#: and the part's prices (measured 1.5-2 ms on 250- to 1,900-job parts, 2 loaded cores): a part
#: with less time than this answers without searching (below)
SETUP_S_PER_JOB = 2.0e-3
#: wall seconds per job of a part for the price-guided repack alone
#: (:func:`optsched.learned.repair.price_schedule`; measured 0.44 ms on a 999-job part, against
#: 0.10 ms for the fungible greedy, and worth 22 % more there): a part with less time than
#: this answers with its fungible-greedy schedule
PRICED_S_PER_JOB = 0.8e-3

#: a job's assignment as plain data: ((node id, GPUs), ...), cores per GPU, GB per GPU
Plain = tuple[tuple[tuple[str, int], ...], int, int]


@dataclass(frozen=True)
class PartTask:
    """One part's sub-round and budget (plain, picklable data only)."""

    index: int
    name: str
    round: dict[str, Any]
    nodes: tuple[tuple[str, str, int, int, int, str | None], ...]
    jobs: tuple[dict[str, Any], ...]
    spread: tuple[tuple[str, tuple[int, ...]], ...]
    hint: tuple[tuple[str, Plain], ...]
    seed: int
    work: float  #: CP-SAT deterministic seconds for the part's search
    deadline: float  #: ``time.time()`` by which the worker answers, whatever its budget
    share: float  #: wall seconds planned for this part (its pass's time over the waves): picks how it is solved
    sub_time: float
    prices: bool  #: also price the part's resources (:func:`part_prices`)


@dataclass(frozen=True)
class PartAnswer:
    """A worker's schedule for its part, what it cost, and (if asked) the part's resource prices."""

    index: int
    jobs: tuple[tuple[str, Plain], ...]
    objective: float
    seconds: float
    deterministic_s: float
    steps: int
    cut: bool  #: the wall clock stopped the search before its deterministic budget was spent
    greedy: bool  #: too little time for lns's set-up: the part's price-guided or fungible-greedy schedule
    #: per GPU type of the part: prices of a GPU, a core and a GB ((type, (g, c, m)), ...)
    prices: tuple[tuple[str, tuple[float, float, float]], ...] | None


def plain(a: Assignment) -> Plain:
    return tuple(a.nodes.items()), a.cpus_per_gpu, a.mem_per_gpu_gb


def assignment(p: Plain) -> Assignment:
    return Assignment(dict(p[0]), p[1], p[2])


def encode_part(parent: Instance, index: int, nodes: list[Node], jobs: list[Job], hint: Schedule | None, *,
                seed: int, work: float, deadline: float, sub_time: float, prices: bool, share: float = math.inf) -> PartTask:
    """The :class:`PartTask` of a part of ``parent``: ``nodes`` with their full room, ``jobs`` as
    given (a job moved in from another part comes with its placement removed and its restart
    folded into its weight: :func:`optsched.partition.prices.moved_in`)."""
    rnd = parent.round.to_dict()
    rnd["spread_from"] = parent.round.spread_from
    spread = tuple((t, tuple(parent._fewest_gpus[t])) for t in parent.gpu_types)
    return PartTask(
        index=index, name=f"{parent.name}/part{index}", round=rnd,
        nodes=tuple((n.id, n.gpu_type, n.gpus, n.cpus, n.mem_gb, n.rack) for n in nodes),
        jobs=tuple(j.to_dict() for j in jobs), spread=spread,
        hint=tuple((j, plain(a)) for j, a in (hint.jobs.items() if hint is not None else ())),
        seed=seed, work=work, deadline=deadline, share=share, sub_time=sub_time, prices=prices,
    )


def part_instance(task: PartTask) -> Instance:
    """The sub-round of a task, as :meth:`Instance.subround` would build it from the whole round."""
    round_ = Round.from_dict(task.round)  # spread_from is in the dict: the file version does not matter
    nodes = tuple(Node(*n) for n in task.nodes)
    jobs = tuple(Job.from_dict(d) for d in task.jobs)
    return Instance(task.name, nodes, jobs, round_, _spread_over=dict(task.spread))


def part_prices(sub: Instance) -> tuple[tuple[str, tuple[float, float, float]], ...]:
    """Per GPU type of the part: the price of a GPU, a core and a GB in the part's aggregate
    relaxation (the price-guided repack's Lagrange multipliers:
    :func:`optsched.learned.repair.resource_prices`), zero where the part has room to spare."""
    if not sub.jobs or not sub.nodes:
        return tuple((t, (0.0, 0.0, 0.0)) for t in sub.gpu_types)
    lam, _dual = resource_prices(option_table(sub, featurise(sub)))
    return tuple((t, (float(lam[0, i]), float(lam[1, i]), float(lam[2, i]))) for i, t in enumerate(sub.gpu_types))


def _quick(sub: Instance, hint: Schedule | None, seed: int, wall: float) -> Schedule:
    """A part's schedule without search: the price-guided repack when ``wall`` seconds allow it
    (:data:`PRICED_S_PER_JOB`), or the fungible greedy completion of the hint if worth more."""
    best = fungible_greedy_schedule(sub, seed=seed, fixed=hint)
    if wall >= PRICED_S_PER_JOB * len(sub.jobs):
        priced = price_schedule(sub, deadline=time.perf_counter() + wall)
        if priced is not None and schedule_value(sub, priced) > schedule_value(sub, best):
            best = priced
    return best


def solve_part(task: PartTask) -> PartAnswer:
    """Solve one part with ``lns`` (no bound, no child process, one CP-SAT worker) on its
    deterministic budget; the wall clock (``task.deadline``) only as a safety. A part whose time
    (its planned ``share``, or the time left to its deadline if less) is below lns's set-up cost
    (:data:`SETUP_S_PER_JOB` per job) answers at once with its price-guided or fungible-greedy
    schedule (:func:`_quick`; ``greedy`` set, no prices; ``cut`` set if the clock decided it)."""
    t0 = time.perf_counter()
    sub = part_instance(task)
    hint = Schedule(sub.name, {j: assignment(p) for j, p in task.hint}) if task.hint else None
    left = task.deadline - time.time()
    wall = min(task.share, left)
    if wall < SETUP_S_PER_JOB * len(task.jobs):
        sched = _quick(sub, hint, task.seed, wall)
        cut = left < task.share
        return PartAnswer(task.index, tuple((j, plain(a)) for j, a in sched.jobs.items()), schedule_value(sub, sched),
                          time.perf_counter() - t0, 0.0, 0, cut, True, None)
    # starts=[]: lns's fungible-greedy and price-guided starts (and the hint), not the exact model's
    # greedy ones, which take seconds on big parts and start 15-20 % below the price-guided one
    res = LargeNeighbourhoodSearch().solve(sub, time_limit=max(0.05, left), seed=task.seed, hint=hint, starts=[], bound=False,
                                           deterministic_time=task.work, sub_time=task.sub_time)
    spent = float(res.stats.get("deterministic_s", 0.0))
    cut = spent < task.work - 0.01 and time.time() >= task.deadline - 0.15
    prices = part_prices(sub) if task.prices else None
    return PartAnswer(task.index, tuple((j, plain(a)) for j, a in res.schedule.jobs.items()), res.objective,
                      time.perf_counter() - t0, spent, int(res.stats.get("steps", 0)), cut, False, prices)
