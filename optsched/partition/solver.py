"""``partitioned``: price-coordinated decomposition of a large round, parts solved in parallel.

1. **Partition** (:func:`~optsched.partition.split.draw_partition`, from the seed): the nodes
   into ``parts`` parts (POP-style random, by rack or by GPU type), running jobs with the part of
   their nodes, waiting jobs dealt to the least-loaded part that can hold them; gangs no part can
   hold wait for step 4.
2. **Pass 1**: every part is a sub-round (:meth:`Instance.subround`: the part's nodes, its jobs,
   gangs valued as in the whole round) solved by ``lns`` on a worker of the backend (a local
   process pool by default, or Ray), each with a budget of CP-SAT *deterministic* seconds. A part
   whose time left (to the pass's deadline) is below its set-up cost (lns's starts and prices,
   :data:`~optsched.partition.exchange.SETUP_S_PER_JOB` per job) answers at once with its
   fungible-greedy schedule (``stats["greedy_parts"]``). A part's task is encoded when a worker
   is free for it, and as the parts answer, the union of their schedules is recorded as the
   incumbent (with its schedule, for ``solve_round``'s ``incumbent`` callback), unless a job is
   pinned.
3. **Price re-balancing** and **pass 2** (``passes >= 2``): each part also reports the prices of
   its resources; jobs its schedule left out are offered to the parts where their reduced profit
   at those prices is highest (:func:`~optsched.partition.prices.rebalance`), and every part is
   solved again from its pass-1 schedule as hint (so no part gets worse). Pass 2 is skipped
   (``stats["skipped_passes"]``) when a part of pass 1 answered greedily or no time is left.
4. **Final repair across parts**: the union of the parts' schedules (disjoint nodes, disjoint
   jobs: feasible) is completed by the fungible greedy on the residual round
   (:func:`~optsched.partition.repair.fill_residual`): the jobs left out everywhere, including
   gangs larger than any part, take the room left on any node; its cost grows with what is left.

Determinism: the partition comes from the seed, each part's search from the seed and its
deterministic budget, and answers are taken in part order, never in completion order. The same
round, seed and options therefore give the same schedule on any backend (serial, process pool,
Ray), unless the wall clock cuts a part's search short (``stats["cut_parts"]`` counts them; the
budget is sized so that it does not on the machine it was measured on). The default budget
depends on the number of workers (parts run in waves of ``workers``); pass ``work`` to fix it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from optsched.errors import InputError
from optsched.knapsack_bound import worth_bound
from optsched.model import Instance
from optsched.parallel import get_backend
from optsched.partition.exchange import SETUP_S_PER_JOB, PartAnswer, PartTask, assignment, encode_part, solve_part
from optsched.partition.options import PartitionedOptions
from optsched.partition.prices import moved_in, rebalance
from optsched.partition.repair import repair_across
from optsched.partition.split import Partition, draw_partition
from optsched.result import Result, Status, reaches
from optsched.round_policies import policy_families
from optsched.schedule import Schedule
from optsched.trajectory import Trajectory, current, recorded
from optsched.values import schedule_value

__all__ = ["PartitionedSolver"]


#: nodes per part that the default ``parts`` aims at
NODES_PER_PART = 512
#: wall seconds per CP-SAT deterministic second of a part's lns (measured on 128 x 500 and
#: 256 x 1,000 parts of the large library rounds, 2 cores: 3.7 alone, 6.5 with the load average at
#: 2.5-3; the larger keeps parts within their wall-clock share, so schedules stay reproducible). The
#: default ``sub_time`` of 0.03 deterministic seconds (about 0.15 s of wall time here) gave the best
#: part: 1,603.86 against 1,603.51 with 0.06-0.25, 1.0 deterministic second on a 256 x 1,000 part
WALL_PER_WORK = 6.5
#: wall seconds per job for a part's set-up (decoding, lns starts, prices), per job of the part
PART_S_PER_JOB = SETUP_S_PER_JOB
#: wall seconds per job of the round for partitioning and encoding, and for the final repair
#: (measured 3.2 s and 1.0 s on 12,500 x 50,000, the repair on the residual round only)
PREP_S_PER_JOB = 0.7e-4
REPAIR_S_PER_JOB = 0.4e-4
#: wall seconds per job kept at the end for the knapsack bound (0.7 s on 12,500 x 50,000); it
#: moves the passes' deadlines, not their budgets
BOUND_S_PER_JOB = 0.2e-4
#: the share of the passes' time that pass 1 gets when there are two or more passes
FIRST_PASS_SHARE = 0.6


def _check(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` validated (:class:`~optsched.partition.options.PartitionedOptions`), every default filled in."""
    return PartitionedOptions.from_mapping(options).to_dict()


def _sizes(instance: Instance, opts: dict[str, Any]) -> tuple[int | None, int]:
    """``(parts, workers)``: ``parts`` is ``None`` with ``by="type"`` (one per GPU type)."""
    cpus = os.cpu_count() or 1
    if opts["by"] == "type":
        parts = None
        n = len(instance.gpu_types)
        workers = opts["workers"] or min(cpus, max(n, 1))
        return parts, workers
    workers = opts["workers"] or (min(cpus, opts["parts"]) if opts["parts"] else cpus)
    parts = opts["parts"] and min(opts["parts"], max(1, len(instance.nodes)))  # a part holds at least one node
    if parts is None:
        waves = max(1, math.ceil(len(instance.nodes) / (NODES_PER_PART * workers)))
        parts = max(1, min(workers * waves, len(instance.nodes)))
    return parts, workers


def _budgets(instance: Instance, partition: Partition, time_limit: float, workers: int, passes: int, work: float | None) -> list[float]:
    """Deterministic seconds per part for each pass: from the time limit, the round's size and the
    waves of ``workers`` (so the schedule depends on no clock), or ``work`` (pass 1; later
    passes get ``(1 - FIRST_PASS_SHARE) / FIRST_PASS_SHARE`` of it, split among them)."""
    later = (1.0 - FIRST_PASS_SHARE) / FIRST_PASS_SHARE / max(1, passes - 1)
    if work is not None:
        return [work] + [work * later] * (passes - 1)
    n_jobs = len(instance.jobs)
    avail = max(0.0, time_limit - (PREP_S_PER_JOB + REPAIR_S_PER_JOB) * n_jobs - 0.4)
    waves = math.ceil(partition.parts / max(1, workers))
    biggest = max((len(j) for j in partition.jobs), default=0)
    shares = [avail] if passes == 1 else [avail * FIRST_PASS_SHARE] + [avail * (1 - FIRST_PASS_SHARE) / (passes - 1)] * (passes - 1)
    return [max(0.05, (s / waves - PART_S_PER_JOB * biggest) / WALL_PER_WORK) for s in shares]


def _too_big(instance: Instance, job_id: str) -> bool:
    """Whether a gang needs more than one node of every type it may use (the parts place those
    worst, and the final repair may place them across parts)."""
    job = instance.job(job_id)
    return job.placement is None and all(job.gpus > n.gpus for n in instance.nodes if job.speed(n.gpu_type) is not None)


def _warm(instance: Instance, partition: Partition, hint: Schedule | None) -> tuple[list[list[str]], list[Schedule]]:
    """The jobs offered to each part in pass 1 and its hint: a hinted job whose nodes all lie in
    one part is offered to that part, with its hinted assignment as the part's warm start."""
    offered = [list(js) for js in partition.jobs]
    hints: list[dict] = [{} for _ in range(partition.parts)]
    if hint is not None:
        part_of = {n: q for q, ns in enumerate(partition.nodes) for n in ns}
        home = {j: q for q, js in enumerate(offered) for j in js}
        for j, a in hint.jobs.items():
            parts = {part_of[n] for n in a.nodes}
            if len(parts) != 1:
                continue
            q = parts.pop()
            if home.get(j) != q:
                if j in home:
                    offered[home[j]].remove(j)
                offered[q].append(j)
                home[j] = q
            hints[q][j] = a
    return offered, [Schedule(instance.name, h) for h in hints]


class PartitionedSolver:
    """``partitioned``: parts solved in parallel by ``lns``, re-balanced by prices, repaired across parts.

    Options (all keyword): ``parts`` (default: the workers, times what keeps parts near
    :data:`NODES_PER_PART` nodes), ``by`` (``"random"``, ``"rack"``, ``"type"``), ``backend``
    (``"local"`` process pool, ``"serial"``, ``"ray"``), ``workers``, ``address`` (Ray),
    ``passes`` (2), ``rebalance`` (``"prices"`` or ``"leftover"``), ``work`` (deterministic
    seconds per part in pass 1), ``sub_time``. See the module text.
    """

    name = "partitioned"

    @recorded
    def solve(self, instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None, **options: Any) -> Result:
        start, wall_start = time.perf_counter(), time.time()
        opts = _check(options)
        other = sorted(policy_families(instance) - {"preemption"})
        if other:
            raise InputError("solver", self.name, f"does not support the round's {', '.join(other)} (whole-round rules)")
        parts, workers = _sizes(instance, opts)
        partition = draw_partition(instance, parts, by=opts["by"], seed=seed)
        workers = min(workers, partition.parts)
        passes = opts["passes"]
        budgets = _budgets(instance, partition, time_limit, workers, passes, opts["work"])
        backend = get_backend(opts["backend"], workers=workers, address=opts["address"])
        reserve = (REPAIR_S_PER_JOB + BOUND_S_PER_JOB) * len(instance.jobs) + 0.2
        end_passes = wall_start + max(0.1, time_limit - reserve)
        shares = [FIRST_PASS_SHARE] + [(1 - FIRST_PASS_SHARE) / (passes - 1)] * (passes - 1) if passes > 1 else [1.0]
        waves = math.ceil(partition.parts / workers)
        planned = max(0.0, end_passes - wall_start - PREP_S_PER_JOB * len(instance.jobs)) / waves
        biggest = max((len(js) for js in partition.jobs), default=0)
        if passes > 1 and planned * shares[0] < PART_S_PER_JOB * biggest:
            # the parts will not search in pass 1, so pass 2 is skipped: pass 1 gets all the time
            shares = [1.0] + [0.0] * (passes - 1)
        rec = current()
        stats: dict[str, Any] = {"parts": partition.parts, "workers": workers, "backend": opts["backend"], "by": opts["by"],
                                 "passes": passes, "work": budgets, "rest": len(partition.rest), "cut_parts": 0, "greedy_parts": 0, "skipped_passes": 0,
                                 "pass_objectives": [], "pass_s": [], "moved": []}
        stats["prep_s"] = time.perf_counter() - start
        offered, schedules = _warm(instance, partition, hint)
        progressive = _Union(instance, rec) if not any(j.pinned for j in instance.jobs) else None
        prices: list[dict[str, tuple[float, float, float]]] | None = None
        elapsed_share = 0.0
        for p in range(passes):
            elapsed_share += shares[p]
            deadline = wall_start + (end_passes - wall_start) * elapsed_share
            if p > 0:
                if stats["greedy_parts"] or time.time() >= deadline:
                    stats["skipped_passes"] = passes - p  # no time for the parts' searches: no use re-balancing
                    break
                t0 = time.perf_counter()
                offered, moves = rebalance(instance, partition.nodes, schedules, offered, prices, mode=opts["rebalance"])
                stats["moved"].append(len(moves))
                stats["rebalance_s"] = stats.get("rebalance_s", 0.0) + time.perf_counter() - t0
            t0 = time.perf_counter()
            # planned seconds per part, from the limit and the round's size only (no clock), so that
            # how a part is solved does not depend on the load unless its deadline cuts in
            share = planned * shares[p]
            answers, encode_s = self._pass(instance, partition, offered, schedules, backend, seed=seed + 7919 * p, work=budgets[p],
                                           deadline=deadline, share=share, sub_time=opts["sub_time"], want_prices=p + 1 < passes,
                                           on_answer=progressive if p == 0 else None)
            stats["encode_s"] = stats.get("encode_s", 0.0) + encode_s
            schedules = [Schedule(instance.name, {j: assignment(a) for j, a in ans.jobs}) for ans in answers]
            prices = [dict(a.prices) if a.prices is not None else {} for a in answers]
            stats["cut_parts"] += sum(a.cut for a in answers)
            stats["greedy_parts"] += sum(a.greedy for a in answers)
            stats["pass_s"].append(time.perf_counter() - t0)
            stats.setdefault("part_steps", []).append([a.steps for a in answers])
            value = sum(a.objective for a in answers)
            stats["pass_objectives"].append(value)
            rec.record(value)
        merged = Schedule(instance.name, {j: a for s in schedules for j, a in s.jobs.items()})
        merged_value = schedule_value(instance, merged)
        t0 = time.perf_counter()
        gangs = [*(j for j in partition.rest if j not in merged.jobs),
                 *(j for js in offered for j in js if j not in merged.jobs and _too_big(instance, j))]
        repaired, repair_stats = repair_across(instance, merged, gangs, seed=seed)
        repaired_value = schedule_value(instance, repaired)
        if repaired_value < merged_value:  # the fill only adds jobs and raises points: never expected
            repaired, repaired_value = merged, merged_value
        stats.update(repair_stats)
        stats.update(repair_s=time.perf_counter() - t0, merged_objective=merged_value, repair_gain=repaired_value - merged_value,
                     jobs_placed=len(repaired.jobs))
        rec.record(repaired_value)
        if hint is not None:
            hint_value = schedule_value(instance, hint)
            if hint_value > repaired_value:
                repaired, repaired_value = Schedule(instance.name, dict(hint.jobs)), hint_value
                stats["kept_hint"] = True
        # a proven bound without an LP (the knapsack bound: under a second at 100,000 GPUs)
        t0 = time.perf_counter()
        bound = worth_bound(instance)
        stats["bound_s"] = time.perf_counter() - t0
        status = Status.FEASIBLE
        if bound is not None:
            bound = max(bound, repaired_value)
            rec.record(bound=bound)
            if reaches(repaired_value, bound):
                status = Status.OPTIMAL
        stats["time_s"] = time.perf_counter() - start
        return Result(repaired, status, repaired_value, bound, self.name, "heuristic", time.perf_counter() - start, stats)

    @staticmethod
    def _pass(instance: Instance, partition: Partition, offered: list[list[str]], schedules: list[Schedule], backend: Any, *,
              seed: int, work: float, deadline: float, share: float, sub_time: float,
              want_prices: bool, on_answer: Callable[[PartAnswer], None] | None = None) -> tuple[list[PartAnswer], float]:
        """One pass: every part's task, answered by the backend, taken in part order; and the
        seconds spent encoding the tasks. A task is encoded when the backend takes it (the first
        parts start while the others are encoded); ``on_answer`` sees each answer as it comes."""
        encode_s = 0.0

        def tasks() -> Iterator[PartTask]:
            nonlocal encode_s
            for q in range(partition.parts):
                t0 = time.perf_counter()
                nodes = [instance.node(n) for n in partition.nodes[q]]
                held = set(partition.nodes[q])
                jobs = []
                for j in sorted(offered[q], key=instance.job_idx):
                    job = instance.job(j)
                    if job.placement is not None and not set(job.placement) <= held:
                        job = moved_in(instance, job)
                    jobs.append(job)
                hint = schedules[q] if schedules[q].jobs else None
                task = encode_part(instance, q, nodes, jobs, hint, seed=seed + q, work=work, deadline=deadline,
                                   share=share, sub_time=sub_time, prices=want_prices)
                encode_s += time.perf_counter() - t0
                yield task

        answers = []
        for answer in backend.imap_unordered(solve_part, tasks()):
            answers.append(answer)
            if on_answer is not None:
                on_answer(answer)
        answers.sort(key=lambda a: a.index)
        if [a.index for a in answers] != list(range(partition.parts)):
            raise RuntimeError(f"partitioned: the backend answered parts {[a.index for a in answers]} of {partition.parts}")
        return answers, encode_s


class _Union:
    """Pass 1's schedule so far: the union of the parts answered (disjoint nodes, disjoint jobs:
    feasible, and worth the sum of the parts' worths), recorded as the incumbent with each answer,
    its schedule built only when a listener asks. Not used when a job is pinned (a part not yet
    answered would lack its pinned jobs)."""

    def __init__(self, instance: Instance, rec: Trajectory) -> None:
        self.instance, self.rec = instance, rec
        self.answers: list[PartAnswer] = []
        self.value = 0.0

    def __call__(self, answer: PartAnswer) -> None:
        self.answers.append(answer)
        self.value += answer.objective
        if answer.jobs:
            got = tuple(self.answers)
            self.rec.record(self.value, schedule=lambda: Schedule(self.instance.name, {j: assignment(a) for ans in got for j, a in ans.jobs}))
