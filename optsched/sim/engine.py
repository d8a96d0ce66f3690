"""The round-based, trace-driven simulator.

Time is cut into rounds of ``round_s`` seconds starting at 0. At each round boundary the engine

1. admits the jobs that arrived by then and asks the queue policy for every active job's weight;
2. builds a contract :class:`~optsched.model.Instance`: every running job (with its current
   ``placement`` and ``restart_s``) and the waiting jobs in weight order up to ``queue_window`` x
   the cluster's GPUs;
3. calls the allocator (``solve_round`` with a method/solver and a time limit, or any callable
   ``Instance -> Schedule | Result``) and applies its schedule: a running job left out is
   preempted, one whose node -> GPU map changes is moved;
4. advances every running job through the round at rate
   ``gpu_speed[t] x throughput[c][m] x spread_factor^(k-kmin)`` (samples/s, ``kmin`` the fewest
   nodes of type ``t`` that hold its GPUs, as the contract's worth counts it; a job's work is its trace
   duration times its throughput at the fixed demand), times an elastic job's scaling factor at
   the GPU count it got this round (``SimConfig.elastic_share``; a size change is a move).

Semantics worth knowing:

* A job that (re)starts on a new placement after it has run before (a move, or a resume after a
  preemption) makes no progress for its first ``restart_s`` seconds (checkpoint reload). Its very
  first start is free: the trace's duration includes start-up.
* A job finishing mid-round gets its exact completion time (event-driven within the round), but
  its GPUs, cores and memory are released only at the next round boundary, as in any round-based
  scheduler; utilisation counts them as allocated until then.
* Jobs that arrive mid-round wait for the next boundary. When nothing is active the clock jumps
  to the first boundary at or after the next arrival.
* With ``reuse_unchanged`` the allocator is not called when the round's jobs and weights equal
  the previous round's: the previous schedule is kept (exact for deterministic allocators).
  Rounds with an admitted deadline job are always solved (its urgency changes with time).
* Deadline (SLO) jobs (``SimJob.deadline_s`` or ``SimConfig.slo_share``) go through admission
  control, due jobs are lifted above every other job, unattainable ones are demoted to
  best-effort, and rounds carry their ``deadline_s`` / ``remaining_s``
  (:mod:`optsched.sim.deadlines`).
* ``SimConfig.preemption`` (``"auto"``: the policy's own; FIFO does not preempt): without
  preemption every running job is pinned (job ``preemptible=False``) and the head of the queue,
  when it fits in the GPUs left, weighs more than all other waiting jobs together
  (:func:`pins_running_jobs`, docs/simulator.md "Preemption").
* ``SimConfig.fairness = "drf"`` makes every round a DRF round (``round.fairness``): each job
  carries its trace ``tenant`` (jobs without one form one tenant; with ``tenant_quotas`` too, only
  the tenants the quotas name), and the allocator maximises the smallest dominant share first;
  ``"hug"`` likewise with the smallest HUG-style progress (cores and GB at the chosen points count).

The bookkeeping is numpy arrays over all jobs; the only per-job Python work is building the
round's instance and applying its schedule.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from optsched.checker import check_schedule
from optsched.errors import InputError
from optsched.incremental import RoundSolver
from optsched.model import Instance, Job, Node, Round
from optsched.result import Result
from optsched.schedule import Assignment, Schedule
from optsched.sim import deadlines as slo_mod
from optsched.sim.policies import QueuePolicy, QueueState
from optsched.sim.workload import SimJob, Workload

__all__ = ["PREEMPTION", "Allocator", "SimConfig", "pins_running_jobs", "SimResult", "SimulationError", "SolveRoundAllocator", "simulate", "simulate_steps"]

#: An allocator: a round instance in, its schedule (or a full :class:`Result`) out.
Allocator = Callable[[Instance], "Schedule | Result"]

_EPS = 1e-9

#: the values of ``SimConfig.preemption``
PREEMPTION = ("auto", "none", "allowed")


def pins_running_jobs(config: SimConfig, policy: QueuePolicy, deadlines: bool = False) -> bool:
    """Whether rounds pin the running jobs: ``SimConfig.preemption`` resolved against the policy.
    ``"auto"`` pins them under a non-preemptive policy (FIFO) unless a round policy of the run
    works by preempting: tenant quotas (reclaim), deadline jobs (``deadlines``: a due job
    preempts best-effort work) or DRF/HUG fairness (shares re-balanced every round)."""
    if config.preemption == "auto":
        needs = config.tenant_quotas is not None or deadlines or config.slo_share > 0 or config.fairness is not None
        return not getattr(policy, "preemptive", True) and not needs
    return config.preemption == "none"


class SimulationError(RuntimeError):
    """An allocator returned a schedule the independent checker refuses (a bug, not bad input)."""


class SolveRoundAllocator:
    """Calls :func:`optsched.solve_round` with a registered ``solver`` (or a ``method`` family).

    ``time_limit`` is the per-round budget. For solvers that take hints, the previous round's
    schedule (restricted to jobs still present, which keeps it feasible) is the hint.

    ``validate=False`` calls the registered ``solver`` directly instead of through
    ``solve_round``, skipping its independent check of every result (and of the hint). That is
    for trusted solvers on long replays, where the check is a large share of a fast heuristic's
    time; the tests run every solver validated, and ``SimConfig(check=True)`` checks inside the
    engine whatever the allocator does. Rounds with contract-v2 policy rules are always validated.

    ``incremental=True`` solves the rounds as one chain (:class:`optsched.incremental.RoundSolver`:
    the previous schedule carried over, no search when it is proven within ``gap_target``).
    """

    def __init__(self, solver: str | None = None, *, method: str = "auto", time_limit: float = 10.0, seed: int = 0,
                 hint: bool = True, validate: bool = True, incremental: bool = False, gap_target: float = 0.005,
                 **options: Any) -> None:
        from optsched.registry import get_method

        if not validate and solver is None:
            raise InputError("validate", validate, "can be False only with a named solver")
        self.solver = solver
        self.method = method
        self.time_limit = time_limit
        self.seed = seed
        self.options = options
        self.validate = validate
        self.takes_hint = hint and solver is not None and get_method(solver).takes_hint
        self.name = solver or method
        self._previous: Schedule | None = None
        self._chain = RoundSolver(solver or "cpsat", time_limit=time_limit, seed=seed, gap_target=gap_target, options=options) \
            if incremental else None

    def __call__(self, instance: Instance) -> Result:
        if self._chain is not None:
            return self._chain.solve(instance)
        hint = None
        if self.takes_hint and self._previous is not None:
            present = {j.id for j in instance.jobs}
            hint = Schedule(instance.name, {j: a for j, a in self._previous.jobs.items() if j in present})
        if self.validate or instance.uses_policies:  # policy rounds always go through solve_round's checks
            from optsched.solve import solve_round

            res = solve_round(instance, self.method if self.solver is None else "auto", solver=self.solver,
                              time_limit=self.time_limit, seed=self.seed, hint=hint, **self.options)
        else:
            from optsched.registry import get_method

            t0 = time.perf_counter()
            res = get_method(self.solver).load()().solve(instance, time_limit=float(self.time_limit), seed=self.seed, hint=hint, **self.options)
            res = replace(res, time_s=time.perf_counter() - t0)
        self._previous = res.schedule
        return res


@dataclass(frozen=True)
class SimConfig:
    """Simulation settings (see the module docstring for their meaning)."""

    round_s: float = 300.0
    fair: bool = False  #: the rounds' ``round.fair`` (no job slower than at its demand)
    queue_window: float | None = 2.0  #: waiting jobs offered per round, in multiples of cluster GPUs (None: all)
    queue_min_jobs: int = 32  #: ... but at least this many waiting jobs (when there are)
    horizon_s: float | None = None  #: stop at this simulated time; unfinished jobs are reported
    check: bool = False  #: check every new schedule with the independent checker
    reuse_unchanged: bool = True
    progress: bool = True
    name: str = "sim"
    #: contract-v2 round policies (formulations/policies.md): guaranteed GPUs per tenant (jobs
    #: carry their trace ``tenant``; others have no quota) and the moves allowed per round
    tenant_quotas: Mapping[str, int] | None = None
    max_moves: int | None = None
    #: ``"drf"``: dominant resource fairness across the trace's tenants in every round (contract-v2
    #: ``round.fairness``; every job carries its trace ``tenant``, jobs without one form one tenant);
    #: ``"hug"``: HUG-style progress fairness over the actual allocation, the same way
    fairness: str | None = None
    #: deadline (SLO) jobs (optsched.sim.deadlines): this share of the jobs, drawn with
    #: ``slo_seed``, must finish by ``submit + slo_slack x duration`` (jobs whose SimJob carries a
    #: ``deadline_s`` are SLO jobs whatever the share)
    slo_share: float = 0.0
    slo_slack: float = 2.0
    slo_seed: int = 0
    #: Gandiva-style consolidation in every round (contract-v2 ``round.packing`` and its tolerance)
    packing: str | None = None
    packing_tolerance: float | None = None
    #: elastic gangs (contract-v2 job ``elastic``; optsched.elastic): this share of the jobs, drawn
    #: with ``elastic_seed``, may run with gpus/4 .. 4 x gpus GPUs (Amdahl scaling per model); the
    #: allocator picks the size every round and a size change is a restart (jobs whose SimJob
    #: carries an ``elastic`` spec are elastic whatever the share)
    elastic_share: float = 0.0
    elastic_seed: int = 0
    #: ``"none"``: a running job is never preempted or moved (rounds pin it: job ``preemptible``
    #: false; its cores and memory may still change); ``"allowed"``: the allocator may stop or move
    #: any running job; ``"auto"``: the queue policy's own semantics (``policy.preemptive``: FIFO
    #: does not preempt, LAS, SRTF and the others do), except that round policies which work by
    #: preempting (tenant quotas, deadline jobs, DRF/HUG fairness) make it ``"allowed"``
    #: (:func:`pins_running_jobs`). Elastic jobs are never pinned.
    preemption: str = "auto"

    def __post_init__(self) -> None:
        if not math.isfinite(self.round_s) or self.round_s <= 0:
            raise InputError("round_s", self.round_s, "must be > 0 seconds")
        if self.queue_window is not None and not self.queue_window > 0:
            raise InputError("queue_window", self.queue_window, "must be > 0 (or None for all)")
        if isinstance(self.queue_min_jobs, bool) or not isinstance(self.queue_min_jobs, int) or self.queue_min_jobs < 0:
            raise InputError("queue_min_jobs", self.queue_min_jobs, "must be an integer >= 0")
        if self.horizon_s is not None and not self.horizon_s > 0:
            raise InputError("horizon_s", self.horizon_s, "must be > 0 (or None)")
        if self.preemption not in PREEMPTION:
            raise InputError("preemption", self.preemption, f"must be one of {list(PREEMPTION)}")
        if self.preemption == "none" and self.tenant_quotas is not None:
            raise InputError("preemption", self.preemption, "cannot be combined with tenant_quotas (reclaiming a quota preempts borrowers)")
        if (self.tenant_quotas is not None or self.max_moves is not None or self.packing is not None or self.packing_tolerance is not None
                or self.fairness is not None):
            # the contract's checks, field names and all
            Round(tenants=self.tenant_quotas, max_moves=self.max_moves, packing=self.packing, packing_tolerance=self.packing_tolerance,
                  fairness=self.fairness)
        slo_mod.mark_deadlines((), self.slo_share, self.slo_slack, 0)  # checks the share and the slack
        if isinstance(self.slo_seed, bool) or not isinstance(self.slo_seed, int) or self.slo_seed < 0:
            raise InputError("slo_seed", self.slo_seed, "must be an integer >= 0")
        from optsched.elastic import mark_elastic

        mark_elastic((), self.elastic_share, self.elastic_seed, 1)  # checks the share and the seed


@dataclass
class SimResult:
    """What a run produced: per-job columns, per-round columns, and the run's description."""

    name: str
    jobs: dict[str, np.ndarray]  #: id, model, gpus, submit_s, start_s, finish_s, duration_s, run_s, preemptions, moves, deadline_s, slo
    rounds: dict[str, np.ndarray]  #: t_s, active, running, waiting, gpu/cpu/mem_util, solved, solve_s, objective, gap
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def jct_s(self) -> np.ndarray:
        return self.jobs["finish_s"] - self.jobs["submit_s"]

    @property
    def finished(self) -> np.ndarray:
        return np.isfinite(self.jobs["finish_s"])

    def summary(self) -> dict[str, Any]:
        from optsched.sim.metrics import summarise

        return summarise(self)


def _assignment_rate(job: SimJob, a: Assignment, cluster: Instance) -> float:
    """Samples/s of ``job`` run as ``a``; ``cluster``: the simulated nodes under the rounds' spread
    rule, so the spread factor is paid from the node count the worth pays it from (its spread base)."""
    t = cluster.node(next(iter(a.nodes))).gpu_type
    speed = 1.0 if job.gpu_speed is None else job.gpu_speed[t]
    spread = job.spread_factor ** max(0, len(a.nodes) - cluster.spread_base(t, a.gpus))
    rate = speed * job.profile.at(a.cpus_per_gpu, a.mem_per_gpu_gb) * spread
    if job.elastic is not None:  # an elastic job's throughput at the size it got, relative to its gpus
        factor = job.elastic.factor(a.gpus)
        if factor is None:
            raise SimulationError(f"job {job.id} got {a.gpus} GPUs, not one of {list(job.elastic.gpus)}")
        rate *= factor
    return rate


def simulate(
    workload: Workload | Sequence[SimJob],
    nodes: Sequence[Node],
    policy: QueuePolicy,
    allocator: Allocator,
    config: SimConfig | None = None,
) -> SimResult:
    """Replay ``workload`` on ``nodes``: ``policy`` sets the weights, ``allocator`` the schedules."""
    name = getattr(allocator, "name", getattr(allocator, "__name__", type(allocator).__name__))
    steps = simulate_steps(workload, nodes, policy, config, allocator_name=name)
    try:
        inst = next(steps)
        while True:
            try:
                out = allocator(inst)
            except BaseException:
                steps.close()  # unwind the engine (its progress bar) before the error propagates
                raise
            inst = steps.send(out)
    except StopIteration as stop:
        return stop.value


def simulate_steps(
    workload: Workload | Sequence[SimJob],
    nodes: Sequence[Node],
    policy: QueuePolicy,
    config: SimConfig | None = None,
    *,
    allocator_name: str = "external",
) -> Generator[Instance, Schedule | Result, SimResult]:
    """:func:`simulate` as a coroutine, for callers that decide rounds themselves (e.g. the RL
    environments of :mod:`optsched.envs`): yields each round's instance, takes its schedule (or
    :class:`Result`) by ``send``, and returns the :class:`SimResult` (``StopIteration.value``)."""
    cfg = config or SimConfig()
    jobs: tuple[SimJob, ...] = tuple(workload.jobs if isinstance(workload, Workload) else workload)
    nodes = tuple(nodes)
    jobs = _with_elastic(jobs, nodes, cfg)
    n = len(jobs)
    if n and any(jobs[i].submit_s > jobs[i + 1].submit_s for i in range(n - 1)):
        raise InputError("workload", "unsorted", "jobs must be sorted by submit time")
    node_type = {nd.id: nd.gpu_type for nd in nodes}
    types = sorted(set(node_type.values()))
    type_of = {nid: types.index(t) for nid, t in node_type.items()}
    type_gpus = np.zeros(len(types))
    for nd in nodes:
        type_gpus[type_of[nd.id]] += nd.gpus
    # job x type: the cluster's GPU types each job may use (for the queue window's backfill)
    allowed = np.array([[j.gpu_speed is None or t in j.gpu_speed for t in types] for j in jobs], dtype=bool).reshape(len(jobs), len(types))
    caps = np.array([[nd.gpus, nd.cpus, nd.mem_gb] for nd in nodes], dtype=np.float64).sum(axis=0) if nodes else np.zeros(3)
    total_gpus = float(caps[0])
    R = cfg.round_s
    pin = pins_running_jobs(cfg, policy, any(j.deadline_s is not None for j in jobs))
    rnd = Round(duration_s=R, fair=cfg.fair, tenants=cfg.tenant_quotas, max_moves=cfg.max_moves, packing=cfg.packing,
                packing_tolerance=cfg.packing_tolerance, fairness=cfg.fairness)
    cluster = Instance("cluster", nodes, (), rnd)  # the nodes' types and spread bases (_assignment_rate)

    submit = np.array([j.submit_s for j in jobs], dtype=np.float64)
    gpus = np.array([j.gpus for j in jobs], dtype=np.int64)
    demand_thr = np.array([j.profile.at(*j.demand) for j in jobs], dtype=np.float64)
    remaining = np.array([j.duration_s for j in jobs], dtype=np.float64) * demand_thr
    restart = np.array([j.restart_s for j in jobs], dtype=np.float64)
    extras = _policy_extras(jobs, nodes, total_gpus)
    rate = np.zeros(n)
    delay_left = np.zeros(n)
    attained = np.zeros(n)
    run_s = np.zeros(n)
    start = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    done = np.zeros(n, dtype=bool)
    ever_ran = np.zeros(n, dtype=bool)
    preempt = np.zeros(n, dtype=np.int64)
    moves = np.zeros(n, dtype=np.int64)
    alloc = np.zeros((n, 3))  # GPUs, cores, GB held now
    assign: list[Assignment | None] = [None] * n
    base: list[Job | None] = [None] * n
    speeds: dict[Any, Mapping[str, float]] = {}  # interned gpu_speed mappings (see _interned)
    deadline = slo_mod.mark_deadlines(jobs, cfg.slo_share, cfg.slo_slack, cfg.slo_seed)
    slo = np.zeros(n, dtype=np.int64)
    undecided = np.isfinite(deadline)  # SLO jobs not through admission yet
    any_slo = bool(undecided.any())
    best, slow = slo_mod.job_rates(jobs, nodes, cfg.fair) if any_slo else (np.zeros(n), np.zeros(n))

    rec: dict[str, list[float]] = {k: [] for k in (
        "t_s", "span_s", "active", "running", "waiting", "offered", "gpu_util", "cpu_util", "mem_util", "solved", "solve_s", "solve_cpu_s", "objective", "gap")}
    last_sig: tuple[bytes, bytes] | None = None
    schedule: Schedule | None = None
    solver_calls = 0
    checked = 0
    stalled = False
    empty_sig: bytes | None = None

    t = 0.0 if n == 0 else math.floor(submit[0] / R) * R
    arrived = 0
    bar = None
    if cfg.progress:
        from tqdm import tqdm

        bar = tqdm(total=float(submit[-1]) if n else 0.0, unit="sim-s", desc=cfg.name, unit_scale=True, leave=False)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    try:
        while True:
            if cfg.horizon_s is not None and t >= cfg.horizon_s:
                break
            while arrived < n and submit[arrived] <= t + _EPS:
                arrived += 1
            active = np.flatnonzero(~done[:arrived])
            if active.size == 0:
                if arrived == n:
                    break
                t = math.ceil((submit[arrived] - _EPS) / R) * R
                continue
            running_now = rate[active] > 0
            state = QueueState(now=t, submit_s=submit[active], gpus=gpus[active], attained_gpu_s=attained[active],
                               remaining_s=remaining[active] / demand_thr[active], running=running_now,
                               **extras.at(active, attained, done))
            w = np.asarray(policy.weights(state), dtype=np.float64)
            if w.shape != active.shape or not np.all(np.isfinite(w)) or np.any(w <= 0):
                raise InputError("policy.weights", w[:5].tolist(), f"{policy.name} must give one finite weight > 0 per active job")
            slo_live: dict[int, tuple[float, float]] = {}
            if any_slo:
                admitted, due = _slo_step(t, R, active, deadline, slo, undecided, best, slow, remaining, demand_thr, gpus,
                                          total_gpus, rate, delay_left, restart, ever_ran)
                w = slo_mod.due_weights(w, due)
                rem_d = remaining[active] / demand_thr[active]
                slo_live = {int(j): (float(deadline[j] - t), float(r)) for j, r in zip(active[admitted], rem_d[admitted], strict=True)}
            free = None
            if cfg.queue_window is not None or pin:
                free = type_gpus.copy()
                for j in active[running_now]:
                    for nid, k in assign[j].nodes.items():
                        free[type_of[nid]] -= k
            if pin and not running_now.all():
                # a queue that does not preempt starts its head first: when the first waiting job
                # fits in the GPUs the pinned running jobs leave, it is worth more than any set of
                # waiting jobs that could take them (the rest backfill)
                wait = np.flatnonzero(~running_now)
                h = wait[np.argmax(w[wait])]
                if (allowed[active[h]] & (gpus[active[h]] <= free)).any():
                    w = _head_first(w, wait, h, int(gpus[active[h]]))
            sel = _offer(active, w, running_now, gpus, total_gpus, cfg.queue_window, cfg.queue_min_jobs,
                         free if cfg.queue_window is not None else None, allowed)
            w_sel = w[np.searchsorted(active, sel)]
            sig = (sel.tobytes(), np.round(w_sel, 12).tobytes())
            if slo_live:
                last_sig = None  # deadlines tighten every round: solve again
            solve_s, solve_cpu, objective, gap, solved = 0.0, 0.0, math.nan, math.nan, 0.0
            if not (cfg.reuse_unchanged and sig == last_sig and schedule is not None):
                inst = _instance(f"{cfg.name}-t{int(t)}", nodes, rnd, jobs, sel, w_sel, assign, base, speeds, slo_live, pin)
                t0, c0 = time.perf_counter(), time.process_time()
                out = yield inst
                solve_s, solve_cpu = time.perf_counter() - t0, time.process_time() - c0
                solver_calls += 1
                solved = 1.0
                if isinstance(out, Result):
                    schedule, objective = out.schedule, out.objective
                    gap = math.nan if out.gap is None else out.gap
                elif isinstance(out, Schedule):
                    schedule = out
                else:
                    raise SimulationError(f"allocator returned {type(out).__name__}, not a Schedule or Result")
                if cfg.check:
                    report = check_schedule(inst, schedule)
                    checked += 1
                    if report:
                        raise SimulationError(f"round at t={t:g}: infeasible schedule: {[str(v) for v in report[:3]]}")
                    objective = report.objective
                _apply(schedule, sel, jobs, assign, rate, delay_left, restart, ever_ran, start, preempt, moves, alloc, t, cluster)
                last_sig = sig
            # advance the round
            run_idx = np.flatnonzero(rate > 0)
            span = R
            if run_idx.size:
                empty_sig = None
                d = delay_left[run_idx]
                r = rate[run_idx]
                t_fin = t + d + remaining[run_idx] / r
                if cfg.reuse_unchanged and not slo_live:
                    span = R * _rounds_unchanged(t, R, t_fin, submit[arrived] if arrived < n else None, cfg.horizon_s,
                                                 policy, active, rate, submit, gpus, attained, remaining, demand_thr, extras, done)
            held_alloc = alloc[active].sum(axis=0)
            rec["t_s"].append(t)
            rec["span_s"].append(span)
            rec["active"].append(active.size)
            rec["running"].append(run_idx.size)
            rec["waiting"].append(active.size - run_idx.size)
            rec["offered"].append(sel.size)
            for k, name in enumerate(("gpu_util", "cpu_util", "mem_util")):
                rec[name].append(held_alloc[k] / caps[k] if caps[k] else 0.0)
            rec["solved"].append(solved)
            rec["solve_s"].append(solve_s)
            rec["solve_cpu_s"].append(solve_cpu)
            rec["objective"].append(objective)
            rec["gap"].append(gap)
            if run_idx.size:
                fin = t_fin <= t + span + _EPS * max(1.0, t)
                eff = np.clip(span - d, 0.0, span)
                held = np.where(fin, t_fin - t, span)
                attained[run_idx] += alloc[run_idx, 0] * held  # the GPUs held (an elastic job's vary)
                run_s[run_idx] += held
                remaining[run_idx] = np.where(fin, 0.0, np.maximum(remaining[run_idx] - r * eff, 0.0))
                delay_left[run_idx] = np.maximum(d - span, 0.0)
                f_idx = run_idx[fin]
                finish[f_idx] = t_fin[fin]
                done[f_idx] = True
                rate[f_idx] = 0.0
                alloc[f_idx] = 0.0
                for j in f_idx:
                    assign[j] = None
            elif arrived == n:
                # nothing runs and nothing will arrive: if the allocator placed nothing in two rounds
                # in a row offered the same jobs, it never will (it sees only the round's state)
                if sig[0] == empty_sig:
                    stalled = True
                    break
                empty_sig = sig[0]
            t += span
            if run_idx.size == 0 and arrived < n:
                t = max(t, math.ceil((submit[arrived] - _EPS) / R) * R)
            if bar is not None:
                bar.update(max(0.0, min(t, bar.total) - bar.n))
                bar.set_postfix(done=int(done.sum()), running=int(run_idx.size), waiting=int(active.size - run_idx.size), refresh=False)
    finally:
        if bar is not None:
            bar.close()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0

    jobs_cols = {
        "id": np.array([j.id for j in jobs], dtype=object),
        "model": np.array([j.model for j in jobs], dtype=object),
        "gpus": gpus,
        "submit_s": submit,
        "start_s": start,
        "finish_s": finish,
        "duration_s": np.array([j.duration_s for j in jobs], dtype=np.float64),
        "run_s": run_s,
        "preemptions": preempt,
        "moves": moves,
        "demand_cpus_per_gpu": np.array([j.demand[0] for j in jobs], dtype=np.int64),
        "demand_mem_per_gpu_gb": np.array([j.demand[1] for j in jobs], dtype=np.int64),
        "deadline_s": deadline,  #: absolute; nan for best-effort jobs
        "slo": slo,  #: optsched.sim.deadlines.SLO_STATES (0 best-effort, 1 admitted, 2 rejected, 3 demoted)
        "elastic": np.array([j.elastic is not None for j in jobs], dtype=np.int64),
        "gpu_s": attained,  #: GPU-seconds held (a rigid job's is gpus x run_s)
    }
    rounds = {k: np.asarray(v, dtype=np.float64) for k, v in rec.items()}
    info = {
        "name": cfg.name,
        "policy": policy.name,
        "allocator": allocator_name,
        "config": {**{k: getattr(cfg, k) for k in ("round_s", "fair", "queue_window", "queue_min_jobs", "horizon_s", "reuse_unchanged",
                                                   "preemption")}, "pinned": pin},
        "round_policies": {"tenant_quotas": None if cfg.tenant_quotas is None else dict(cfg.tenant_quotas), "max_moves": cfg.max_moves,
                           "fairness": cfg.fairness,
                           "slo_share": cfg.slo_share, "slo_slack": cfg.slo_slack, "slo_seed": cfg.slo_seed,
                           "packing": cfg.packing, "packing_tolerance": cfg.packing_tolerance,
                           "elastic_share": cfg.elastic_share, "elastic_seed": cfg.elastic_seed},
        "jobs": n,
        "arrived": arrived,
        "nodes": len(nodes),
        "gpus": int(caps[0]),
        "end_s": t,
        "rounds": len(rec["t_s"]),
        "solver_calls": solver_calls,
        "checked_rounds": checked,
        "stalled": stalled,
        "wall_s": wall,
        "cpu_s": cpu,  #: this process's CPU time (fairer than wall time on a shared machine)
        "notes": dict(workload.notes) if isinstance(workload, Workload) else {},
    }
    return SimResult(name=cfg.name, jobs=jobs_cols, rounds=rounds, info=info)


def _with_elastic(jobs: tuple[SimJob, ...], nodes: tuple[Node, ...], cfg: SimConfig) -> tuple[SimJob, ...]:
    """``jobs`` with ``cfg.elastic_share`` of them (drawn with ``cfg.elastic_seed``, in order)
    made elastic (:func:`optsched.elastic.mark_elastic`, sizes up to the largest GPU type's total);
    jobs that carry a spec keep it."""
    if cfg.elastic_share <= 0:
        return jobs
    from optsched.elastic import mark_elastic

    per_type: dict[str, int] = {}
    for nd in nodes:
        per_type[nd.gpu_type] = per_type.get(nd.gpu_type, 0) + nd.gpus
    specs = mark_elastic([(j.model, j.gpus) for j in jobs], cfg.elastic_share, cfg.elastic_seed, max(per_type.values(), default=1))
    return tuple(replace(j, elastic=e) if j.elastic is None and e is not None else j for j, e in zip(jobs, specs, strict=True))


def _rounds_unchanged(
    t: float, R: float, t_fin: np.ndarray, next_submit: float | None, horizon: float | None, policy: QueuePolicy,
    active: np.ndarray, rate: np.ndarray, submit: np.ndarray, gpus: np.ndarray, attained: np.ndarray,
    remaining: np.ndarray, demand_thr: np.ndarray, extras: _PolicyExtras | None = None, done: np.ndarray | None = None,
) -> int:
    """How many rounds from ``t`` the current schedule provably stands: no job finishes before
    the last of them starts, no job arrives, and the policy's weights do not change (its
    ``stable_for``; a policy without one changes every round). Advancing them in one step is
    exactly what round-by-round simulation with ``reuse_unchanged`` computes, only faster."""
    stable = getattr(policy, "stable_for", None)
    if stable is None:
        return 1
    k = max(1, math.ceil((float(t_fin.min()) - t) / R - 1e-12))
    if next_submit is not None:
        k = min(k, max(1, round((math.ceil((next_submit - _EPS) / R) * R - t) / R)))
    if horizon is not None:
        k = min(k, max(1, math.ceil((horizon - t) / R)))
    if k > 1:
        more = {} if extras is None or done is None else extras.at(active, attained, done)
        state = QueueState(now=t, submit_s=submit[active], gpus=gpus[active], attained_gpu_s=attained[active],
                           remaining_s=remaining[active] / demand_thr[active], running=rate[active] > 0, **more)
        s = float(stable(state))
        if s < math.inf:
            k = min(k, max(1, math.ceil(s / R - 1e-12)))
    return k


@dataclass(frozen=True)
class _PolicyExtras:
    """Per-job quantities some queue policies use (the optional fields of :class:`QueueState`)."""

    work_s: np.ndarray
    equal_speed: np.ndarray
    total_gpus: float

    def at(self, active: np.ndarray, attained: np.ndarray, done: np.ndarray) -> dict[str, Any]:
        return {"work_s": self.work_s[active], "equal_speed": self.equal_speed[active], "total_gpus": self.total_gpus,
                "finished_gpu_s": attained[done]}


def _policy_extras(jobs: tuple[SimJob, ...], nodes: tuple[Node, ...], total_gpus: float) -> _PolicyExtras:
    """Each job's run time at demand, and its GPU-weighted mean speed over the GPUs it may use
    (what an equal share of the cluster would give it; Gavel's normalisation)."""
    per_type: dict[str, int] = {}
    for nd in nodes:
        per_type[nd.gpu_type] = per_type.get(nd.gpu_type, 0) + nd.gpus
    cache: dict[tuple[tuple[str, float], ...] | None, float] = {}
    eq = np.ones(len(jobs))
    for i, j in enumerate(jobs):
        key = None if j.gpu_speed is None else tuple(sorted(j.gpu_speed.items()))
        if key not in cache:
            sp = {t: (1.0 if j.gpu_speed is None else j.gpu_speed.get(t)) for t in per_type}
            tot = sum(per_type[t] for t, v in sp.items() if v is not None)
            cache[key] = sum(per_type[t] * v for t, v in sp.items() if v is not None) / tot if tot else 1.0
        eq[i] = cache[key]
    return _PolicyExtras(np.array([j.duration_s for j in jobs], dtype=np.float64), eq, total_gpus)


def _head_first(w: np.ndarray, wait: np.ndarray, h: int, g: int) -> np.ndarray:
    """``w`` with the head of the queue (position ``h``, ``g`` GPUs) weighing more than any set
    of other waiting jobs that could take its GPUs: at most ``g`` of them, so 4 x the sum of the
    ``g`` largest other waiting weights, plus 1 (the 4 covers their better throughput ratios, as
    for due deadline jobs). Bounded by the head's size, not the queue's length, so the round's
    values stay within the range every method accepts (``optsched.limits``)."""
    others = np.sort(w[wait[wait != h]])[::-1][:g]
    out = w.copy()
    out[h] = max(float(w[h]), 4.0 * float(others.sum()) + 1.0)
    return out


def _offer(
    active: np.ndarray, w: np.ndarray, running: np.ndarray, gpus: np.ndarray, total_gpus: float, window: float | None, min_jobs: int,
    free: np.ndarray | None = None, allowed: np.ndarray | None = None,
) -> np.ndarray:
    """Job indices offered this round, sorted: every running job, then waiting ones by weight
    until their GPUs reach ``window`` x the cluster's GPUs (the one crossing it included) and at
    least ``min_jobs`` of them (so a few huge jobs at the head cannot hide the whole queue).

    Backfill: with ``free`` (GPUs per type not held by running jobs) and ``allowed`` (job x type,
    the types each job may use), later waiting jobs that fit in the free GPUs of a type they may
    use join, in weight order, until the offered jobs that fit could fill the free GPUs ``window``
    times over. So a queue whose head is a backlog of gangs too big for the free GPUs never hides
    the smaller jobs that could use them (docs/simulator.md, "Queue window")."""
    if window is None:
        return active
    waiting = active[~running]
    order = np.lexsort((waiting, -w[~running]))
    ranked = waiting[order]
    cum = np.cumsum(gpus[ranked])
    k = max(int(np.searchsorted(cum, window * total_gpus, side="left")) + 1, min_jobs)
    chosen = ranked[:k]
    if free is not None and allowed is not None and k < ranked.size and free.sum() > 0:
        fits = (allowed[ranked] & (gpus[ranked][:, None] <= free[None, :])).any(axis=1)
        need = window * float(free.sum()) - float(gpus[chosen][fits[:k]].sum())
        if need > 0:
            extra = ranked[k:][fits[k:]]
            m = int(np.searchsorted(np.cumsum(gpus[extra]), need, side="left")) + 1
            chosen = np.concatenate([chosen, extra[:m]])
    return np.sort(np.concatenate([active[running], chosen]))


def _slo_step(
    t: float, R: float, active: np.ndarray, deadline: np.ndarray, slo: np.ndarray, undecided: np.ndarray, best: np.ndarray,
    slow: np.ndarray, remaining: np.ndarray, demand_thr: np.ndarray, gpus: np.ndarray, total_gpus: float, rate: np.ndarray,
    delay_left: np.ndarray, restart: np.ndarray, ever_ran: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Admission of the SLO jobs that arrived (earliest deadline first), demotion of admitted jobs
    that can no longer finish at their best rate; returns ``(admitted, due)`` masks over ``active``
    (optsched.sim.deadlines states the rules)."""
    rem_d = remaining[active] / demand_thr[active]  # run time left at demand on a speed-1.0 GPU
    pending = np.where(rate[active] > 0, delay_left[active], np.where(ever_ran[active], restart[active], 0.0))
    with np.errstate(divide="ignore"):
        at_best = pending + np.where(best[active] > 0, rem_d / np.maximum(best[active], 1e-300), np.inf)
        at_demand = pending + np.where(slow[active] > 0, rem_d / np.maximum(slow[active], 1e-300), np.inf)
    left = deadline[active] - t
    new = np.flatnonzero(undecided[active])
    for k in new[np.argsort(deadline[active[new]], kind="stable")]:
        j = active[k]
        undecided[j] = False
        if not at_best[k] <= left[k]:
            slo[j] = slo_mod.SLO_REJECTED
            continue
        mine = np.flatnonzero(slo[active] == slo_mod.SLO_ADMITTED)
        cand = np.append(mine, k)
        rounds_needed = np.ceil(at_demand[cand] / R - 1e-9) * R  # resources free only at round boundaries
        ok = slo_mod.edf_fits(t, deadline[active[cand]], gpus[active[cand]] * rounds_needed, total_gpus)
        slo[j] = slo_mod.SLO_ADMITTED if ok else slo_mod.SLO_REJECTED
    admitted = slo[active] == slo_mod.SLO_ADMITTED
    lost = admitted & ~(at_best <= left + _EPS)
    slo[active[lost]] = slo_mod.SLO_DEMOTED
    admitted &= ~lost
    due = admitted & (R + at_demand > left)
    return admitted, due


def _instance(
    name: str, nodes: tuple[Node, ...], rnd: Round, jobs: tuple[SimJob, ...], sel: np.ndarray, w: np.ndarray,
    assign: list[Assignment | None], base: list[Job | None], speeds: dict[Any, Mapping[str, float]],
    slo_live: Mapping[int, tuple[float, float]] | None = None, pin: bool = False,
) -> Instance:
    out = []
    for k, j in enumerate(sel):
        b = base[j]
        if b is None:
            s = jobs[j]
            tenant = _round_tenant(rnd, s.tenant)
            b = base[j] = _interned(Job(id=s.id, gpus=s.gpus, profile=s.profile, demand=s.demand, model=s.model, tenant=tenant, elastic=s.elastic,
                                        gpu_speed=s.gpu_speed, spread_factor=s.spread_factor, restart_s=s.restart_s), speeds)
        a = assign[j]
        out.append(_with_state(b, float(w[k]), None if a is None else a.nodes, (slo_live or {}).get(int(j)),
                               pinned=pin and a is not None and b.elastic is None))
    try:
        return Instance(name=name, nodes=nodes, jobs=tuple(out), round=rnd)
    except InputError as e:
        # a fair round whose pinned jobs' cheapest fair points outgrow their nodes (their
        # current points fit, but the round does not carry them): no pins this round
        if not pin or not str(e.field).startswith("jobs.preemptible"):
            raise
        return Instance(name=name, nodes=nodes, jobs=tuple(_with_state(j, j.weight, j.placement, None, pinned=False) for j in out),
                        round=rnd)


def _round_tenant(rnd: Round, tenant: str) -> str | None:
    """The ``tenant`` a job carries into the round: its trace tenant when quotas name it, or under
    DRF (without quotas) any non-empty one; ``None`` otherwise."""
    if rnd.tenants is not None:
        return tenant if tenant in rnd.tenants else None
    return tenant or None if rnd.fairness is not None else None


def _interned(job: Job, speeds: dict[tuple[tuple[str, float], ...], Mapping[str, float]]) -> Job:
    """``job`` sharing its (validated, read-only) ``gpu_speed`` mapping with every other job of
    the run with equal speeds (``speeds`` holds them), so that allocators can memoise
    per-mapping work (allowed GPU types by speed) across the jobs of one model."""
    if job.gpu_speed is not None:
        key = tuple(sorted(job.gpu_speed.items()))
        job.__dict__["gpu_speed"] = speeds.setdefault(key, job.gpu_speed)
    return job


def _with_state(base: Job, weight: float, placement: Mapping[str, int] | None,
                deadline: tuple[float, float] | None = None, pinned: bool = False) -> Job:
    """``replace(base, weight=..., placement=...)`` (and ``deadline_s``, ``remaining_s`` from
    ``deadline``) without re-validating the profile, which is most of a round's build time. Safe
    because the values are already valid: the engine has checked the weight (finite, > 0), the
    placement is a checked schedule's read-only node map for this very job, and a deadline is
    passed only for an admitted job that can still make it (deadline >= 0, remaining > 0)."""
    job = object.__new__(Job)
    job.__dict__.update(base.__dict__)
    job.__dict__["weight"] = weight
    job.__dict__["placement"] = placement
    job.__dict__["preemptible"] = not pinned
    if deadline is not None:
        job.__dict__["deadline_s"] = max(0.0, deadline[0])
        job.__dict__["remaining_s"] = max(deadline[1], 1e-9)
    return job


def _apply(
    schedule: Schedule, sel: np.ndarray, jobs: tuple[SimJob, ...], assign: list[Assignment | None], rate: np.ndarray,
    delay_left: np.ndarray, restart: np.ndarray, ever_ran: np.ndarray, start: np.ndarray, preempt: np.ndarray,
    moves: np.ndarray, alloc: np.ndarray, t: float, cluster: Instance,
) -> None:
    offered = {jobs[j].id: int(j) for j in sel}
    unknown = [jid for jid in schedule.jobs if jid not in offered]
    if unknown:
        raise SimulationError(f"schedule names jobs that were not offered: {unknown[:3]}")
    for jid, j in offered.items():
        new = schedule.jobs.get(jid)
        old = assign[j]
        if new is None:
            if old is not None:
                preempt[j] += 1
                assign[j] = None
                rate[j] = 0.0
                alloc[j] = 0.0
            continue
        if old is not None and old == new:  # same nodes and grid point: nothing changes
            continue
        if old is None or old.nodes != new.nodes:
            if old is not None:
                moves[j] += 1
            delay_left[j] = restart[j] if ever_ran[j] else 0.0
            if not ever_ran[j]:
                start[j] = t
                ever_ran[j] = True
        assign[j] = new
        rate[j] = _assignment_rate(jobs[j], new, cluster)
        g = new.gpus
        alloc[j] = (g, g * new.cpus_per_gpu, g * new.mem_per_gpu_gb)
