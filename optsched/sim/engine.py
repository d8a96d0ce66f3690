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
  (:func:`optsched.sim.config.pins_running_jobs`, docs/simulator.md "Preemption"). A waiting
  job's start there keeps its nodes until it ends, so its round worth pays its spread as over
  ``SimConfig.start_spread_horizon_s`` (:func:`optsched.sim.rounds.start_job`).
* ``SimConfig.fairness = "drf"`` makes every round a DRF round (``round.fairness``): each job
  carries its trace ``tenant`` (jobs without one form one tenant; with ``tenant_quotas`` too, only
  the tenants the quotas name), and the allocator maximises the smallest dominant share first;
  ``"hug"`` likewise with the smallest HUG-style progress (cores and GB at the chosen points count).

The engine is this module's loop over numpy arrays of all jobs; a round's pieces live beside it:
the settings (:mod:`optsched.sim.config`), the allocators (:mod:`optsched.sim.solving`), the
queue window (:mod:`optsched.sim.queue`), deadline admission (:mod:`optsched.sim.deadlines`),
a round's instance and its schedule applied (:mod:`optsched.sim.rounds`), the livelock check
(:mod:`optsched.sim.progress`) and the result (:mod:`optsched.sim.result`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from tqdm import tqdm

from optsched.checker import check_schedule
from optsched.elastic import mark_elastic
from optsched.errors import InputError
from optsched.model import Instance, Job, Node, Profile, Round
from optsched.result import Result
from optsched.schedule import Assignment, Schedule
from optsched.sim.config import SimConfig, pins_running_jobs
from optsched.sim.deadlines import admission_step, due_weights, job_rates, mark_deadlines
from optsched.sim.policy_base import QueuePolicy, QueueState
from optsched.sim.progress import ProgressWatch
from optsched.sim.queue import PolicyExtras, head_first, offer, policy_extras, reservation, widen_next
from optsched.sim.result import SimResult
from optsched.sim.rounds import apply_schedule, build_instance, node_shapes, start_limits, within_value_span
from optsched.sim.solving import Allocator, SimulationError
from optsched.sim.workload import SimJob, Workload

__all__ = ["simulate", "simulate_steps"]

_EPS = 1e-9

#: the per-round columns of :attr:`SimResult.rounds`
_ROUND_COLUMNS = ("t_s", "span_s", "active", "running", "waiting", "offered", "gpu_util", "cpu_util", "mem_util", "solved", "solve_s",
                  "solve_cpu_s", "objective", "gap")


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


@dataclass
class _Run:
    """One replay: its settings, the cluster and the jobs as arrays (fixed), and the per-job
    state the rounds change (``remaining`` work in samples, current ``rate``, pending restart
    ``delay_left``, GPU-seconds ``attained``, ``assign`` ...), plus the per-round record."""

    cfg: SimConfig
    policy: QueuePolicy
    jobs: tuple[SimJob, ...]
    nodes: tuple[Node, ...]
    rnd: Round
    cluster: Instance  #: the nodes' types and spread bases (optsched.sim.rounds.assignment_rate)
    pin: bool  #: rounds pin the running jobs (optsched.sim.config.pins_running_jobs)
    start_spread: float  #: exponent of a waiting job's spread factor in pinned rounds (SimConfig.start_spread_horizon_s)
    type_of: dict[str, int]  #: node id -> index of its GPU type
    type_gpus: np.ndarray  #: GPUs per type
    #: job x type: the cluster's GPU types each job may start on (its allowed types, and in pinned
    #: rounds only those that feed it: SimConfig.start_min_throughput), for the queue window's
    #: backfill, the head-of-queue lift and EASY reservations
    start_allowed: np.ndarray
    start_limits: list[tuple[frozenset[str] | None, Profile | None]]  #: ... by name, and the grid it may start at (None: all)
    caps: np.ndarray  #: the cluster's GPUs, cores, GB
    submit: np.ndarray
    gpus: np.ndarray
    demand_thr: np.ndarray  #: throughput at the fixed demand
    restart: np.ndarray
    extras: PolicyExtras
    deadline: np.ndarray  #: absolute; nan for best-effort jobs
    best: np.ndarray  #: fastest rate relative to demand (deadline jobs only)
    slow: np.ndarray  #: slowest allowed type's speed (deadline jobs only)
    remaining: np.ndarray
    slo: np.ndarray
    undecided: np.ndarray  #: SLO jobs not through admission yet
    any_slo: bool  #: the run has deadline jobs
    rate: np.ndarray = field(init=False)
    delay_left: np.ndarray = field(init=False)
    attained: np.ndarray = field(init=False)
    run_s: np.ndarray = field(init=False)
    start: np.ndarray = field(init=False)
    finish: np.ndarray = field(init=False)
    done: np.ndarray = field(init=False)
    ever_ran: np.ndarray = field(init=False)
    preempt: np.ndarray = field(init=False)
    moves: np.ndarray = field(init=False)
    alloc: np.ndarray = field(init=False)  #: GPUs, cores, GB held now
    assign: list[Assignment | None] = field(init=False)
    base: list[Job | None] = field(init=False)  #: each job's contract Job, built once (optsched.sim.rounds.build_instance)
    start_base: list[Job | None] = field(init=False)  #: ... and, in pinned rounds, the one it carries while it waits
    value_per_weight: np.ndarray = field(init=False)  #: each job's smallest and largest round value per unit weight (nan: not yet)
    speeds: dict[Any, Mapping[str, float]] = field(default_factory=dict)  #: interned gpu_speed mappings
    rec: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in _ROUND_COLUMNS})

    def __post_init__(self) -> None:
        n = len(self.jobs)
        self.rate = np.zeros(n)
        self.delay_left = np.zeros(n)
        self.attained = np.zeros(n)
        self.run_s = np.zeros(n)
        self.start = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.done = np.zeros(n, dtype=bool)
        self.ever_ran = np.zeros(n, dtype=bool)
        self.preempt = np.zeros(n, dtype=np.int64)
        self.moves = np.zeros(n, dtype=np.int64)
        self.alloc = np.zeros((n, 3))
        self.assign = [None] * n
        self.base = [None] * n
        self.start_base = [None] * n
        self.value_per_weight = np.full((n, 2), np.nan)

    @property
    def n(self) -> int:
        return len(self.jobs)

    @property
    def total_gpus(self) -> float:
        return float(self.caps[0])


def _prepare(workload: Workload | Sequence[SimJob], nodes: Sequence[Node], policy: QueuePolicy, cfg: SimConfig) -> _Run:
    """The replay's fixed arrays and its initial state; refuses jobs not sorted by submit time."""
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
    allowed = np.array([[j.gpu_speed is None or t in j.gpu_speed for t in types] for j in jobs], dtype=bool).reshape(len(jobs), len(types))
    caps = np.array([[nd.gpus, nd.cpus, nd.mem_gb] for nd in nodes], dtype=np.float64).sum(axis=0) if nodes else np.zeros(3)
    rnd = Round(duration_s=cfg.round_s, fair=cfg.fair, tenants=cfg.tenant_quotas, max_moves=cfg.max_moves, packing=cfg.packing,
                packing_tolerance=cfg.packing_tolerance, fairness=cfg.fairness)
    demand_thr = np.array([j.profile.at(*j.demand) for j in jobs], dtype=np.float64)
    deadline = mark_deadlines(jobs, cfg.slo_share, cfg.slo_slack, cfg.slo_seed)
    undecided = np.isfinite(deadline)
    best, slow = job_rates(jobs, nodes, cfg.fair) if undecided.any() else (np.zeros(n), np.zeros(n))
    pin = pins_running_jobs(cfg, policy, any(j.deadline_s is not None for j in jobs))
    start_allowed, start_names = _start_limits(jobs, nodes, types, allowed, cfg.start_min_throughput if pin else 0.0)
    return _Run(
        cfg=cfg, policy=policy, jobs=jobs, nodes=nodes, rnd=rnd, cluster=Instance("cluster", nodes, (), rnd),
        pin=pin, start_spread=max(1.0, cfg.start_spread_horizon_s / cfg.round_s) if pin and cfg.start_spread_horizon_s is not None else 1.0,
        type_of=type_of, type_gpus=type_gpus, start_allowed=start_allowed, start_limits=start_names, caps=caps,
        submit=np.array([j.submit_s for j in jobs], dtype=np.float64), gpus=np.array([j.gpus for j in jobs], dtype=np.int64),
        demand_thr=demand_thr, restart=np.array([j.restart_s for j in jobs], dtype=np.float64),
        extras=policy_extras(jobs, nodes, float(caps[0])), deadline=deadline, best=best, slow=slow,
        remaining=np.array([j.duration_s for j in jobs], dtype=np.float64) * demand_thr,
        slo=np.zeros(n, dtype=np.int64), undecided=undecided, any_slo=bool(undecided.any()),
    )


def _start_limits(jobs: tuple[SimJob, ...], nodes: tuple[Node, ...], types: list[str], allowed: np.ndarray, share: float,
                  ) -> tuple[np.ndarray, list[tuple[frozenset[str] | None, Profile | None]]]:
    """Where each job may start in pinned rounds (:func:`optsched.sim.rounds.start_limits`,
    ``share``: SimConfig.start_min_throughput; 0 leaves every job as it is): the GPU types as a
    job x type mask, and per job its types and grid (``None`` each: all it allows). Elastic jobs
    are never pinned and keep theirs."""
    limits: list[tuple[frozenset[str] | None, Profile | None]] = [(None, None)] * len(jobs)
    if share <= 0.0:
        return allowed, limits
    shapes = node_shapes(nodes)
    memo: dict[tuple[Any, ...], tuple[frozenset[str] | None, Profile | None]] = {}
    mask = allowed.copy()
    for i, j in enumerate(jobs):
        if j.elastic is not None:
            continue
        ok = [t for t, a in zip(types, allowed[i], strict=True) if a]
        key = (j.profile, j.demand, j.gpus, tuple(ok))
        if key not in memo:
            memo[key] = start_limits(j, ok, shapes, share)
        limits[i] = memo[key]
        keep = limits[i][0]
        if keep is not None:
            mask[i] = [a and t in keep for t, a in zip(types, allowed[i], strict=True)]
    return mask, limits


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
    run = _prepare(workload, nodes, policy, cfg)
    n, R, submit = run.n, cfg.round_s, run.submit
    last_sig: tuple[bytes, bytes] | None = None
    schedule: Schedule | None = None
    solver_calls = checked = 0
    stall: str | None = None  # why a replay stopped with jobs left: 'idle' or 'no progress'
    widen, watch = False, ProgressWatch(run.restart, R)
    widened = 0
    empty_sig: bytes | None = None
    t = 0.0 if n == 0 else math.floor(submit[0] / R) * R
    arrived = 0
    bar = _progress_bar(cfg, float(submit[-1]) if n else 0.0)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    try:
        while True:
            if cfg.horizon_s is not None and t >= cfg.horizon_s:
                break
            while arrived < n and submit[arrived] <= t + _EPS:
                arrived += 1
            active = np.flatnonzero(~run.done[:arrived])
            if active.size == 0:
                if arrived == n:
                    break
                t = math.ceil((submit[arrived] - _EPS) / R) * R
                continue
            running_now = run.rate[active] > 0
            w, slo_live = _weights(run, t, active, running_now)
            sel, w_sel = _offered(run, active, w, running_now, widen)
            widened += widen
            sig = (sel.tobytes(), np.round(w_sel, 12).tobytes())
            if slo_live:
                last_sig = None  # deadlines tighten every round: solve again
            solve = (0.0, 0.0, 0.0, math.nan, math.nan)  # solved, solve_s, solve_cpu_s, objective, gap
            if not (cfg.reuse_unchanged and sig == last_sig and schedule is not None):
                schedule, solve = yield from _solve(run, t, sel, w_sel, slo_live)
                solver_calls += 1
                checked += cfg.check
                # a gang started on more nodes than it needs is worth more once it runs than the
                # round that started it counted (SimConfig.start_spread_horizon_s), and a job that
                # waited with a cut profile runs with its whole one (SimConfig.start_min_throughput):
                # solve the next round
                last_sig = None if _started_changed(run, sel, t) else sig
            widen = widen_next(run.cfg.queue_window is not None, active, running_now, sel, run.rate, run.gpus, run.total_gpus, widen)
            run_idx = np.flatnonzero(run.rate > 0)
            span, t_fin = R, None
            if run_idx.size:
                empty_sig = None
                t_fin = t + run.delay_left[run_idx] + run.remaining[run_idx] / run.rate[run_idx]
                if cfg.reuse_unchanged and not slo_live and last_sig is not None:
                    span = R * _rounds_unchanged(run, t, t_fin, submit[arrived] if arrived < n else None, active)
            _record(run, t, span, active, run_idx, sel, solve)
            if t_fin is not None:
                _advance(run, t, span, run_idx, t_fin)
            elif arrived == n:
                # nothing runs or will arrive: an allocator that placed nothing twice on one offer never will
                if sig[0] == empty_sig:
                    stall = "idle"
                    break
                empty_sig = sig[0]
            if arrived == n and t_fin is not None and (stall := watch.stall(t, run.done, run.remaining)):
                break  # jobs run, but every one is restarted before it does work
            t += span
            if run_idx.size == 0 and arrived < n:
                t = max(t, math.ceil((submit[arrived] - _EPS) / R) * R)
            if bar is not None:
                bar.update(max(0.0, min(t, bar.total) - bar.n))
                bar.set_postfix(done=int(run.done.sum()), running=int(run_idx.size), waiting=int(active.size - run_idx.size), refresh=False)
    finally:
        if bar is not None:
            bar.close()
    counts = {"arrived": arrived, "end_s": t, "solver_calls": solver_calls, "checked_rounds": checked, "stall": stall, "widened": widened,
              "wall_s": time.perf_counter() - wall0, "cpu_s": time.process_time() - cpu0}
    return _result(run, workload, allocator_name, counts)


def _started_changed(run: _Run, sel: np.ndarray, t: float) -> bool:
    """Whether the round at ``t`` started a job that the next round values differently: one on
    more nodes than it needs while the rounds charge waiting jobs a start spread
    (``run.start_spread``), or one that waited with a cut profile (``run.start_limits``).
    Running, it carries its own factor and whole profile."""
    for j in sel[run.start[sel] == t]:
        if run.start_limits[j][1] is not None:
            return True
        a = run.assign[j]
        if (run.start_spread > 1.0 and a is not None
                and len(a.nodes) > run.cluster.spread_base(run.cluster.node(next(iter(a.nodes))).gpu_type, a.gpus)):
            return True
    return False


def _progress_bar(cfg: SimConfig, total: float) -> Any:
    """A tqdm bar over simulated seconds, or ``None`` without ``cfg.progress``."""
    if not cfg.progress:
        return None
    return tqdm(total=total, unit="sim-s", desc=cfg.name, unit_scale=True, leave=False)


def _weights(run: _Run, t: float, active: np.ndarray, running_now: np.ndarray) -> tuple[np.ndarray, dict[int, tuple[float, float]]]:
    """The queue policy's weight for every active job, with deadline admission and demotion done
    and due deadline jobs lifted above the rest; and the admitted jobs' live deadlines
    (job index -> seconds to the deadline, run time left at demand)."""
    state = QueueState(now=t, submit_s=run.submit[active], gpus=run.gpus[active], attained_gpu_s=run.attained[active],
                       remaining_s=run.remaining[active] / run.demand_thr[active], running=running_now,
                       **run.extras.at(active, run.attained, run.done))
    w = np.asarray(run.policy.weights(state), dtype=np.float64)
    if w.shape != active.shape or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise InputError("policy.weights", w[:5].tolist(), f"{run.policy.name} must give one finite weight > 0 per active job")
    slo_live: dict[int, tuple[float, float]] = {}
    if run.any_slo:
        admitted, due = admission_step(t, run.cfg.round_s, active, run.deadline, run.slo, run.undecided, run.best, run.slow, run.remaining,
                                       run.demand_thr, run.gpus, run.total_gpus, run.rate, run.delay_left, run.restart, run.ever_ran)
        w = due_weights(w, due, run.gpus[active])
        rem_d = run.remaining[active] / run.demand_thr[active]
        slo_live = {int(j): (float(run.deadline[j] - t), float(r)) for j, r in zip(active[admitted], rem_d[admitted], strict=True)}
    return w, slo_live


def _offered(run: _Run, active: np.ndarray, w: np.ndarray, running_now: np.ndarray, widen: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The jobs the round offers (sorted indices: optsched.sim.queue.offer) and their weights;
    under pinned rounds the head of the queue first (optsched.sim.queue.head_first). ``widen``:
    every waiting job, the queue window left open (:func:`optsched.sim.queue.widen_next`)."""
    cfg = run.cfg
    free = None
    if cfg.queue_window is not None or run.pin:
        free = run.type_gpus.copy()
        for j in active[running_now]:
            for nid, k in run.assign[j].nodes.items():
                free[run.type_of[nid]] -= k
    if run.pin and not running_now.all():
        # a queue that does not preempt starts its head first: when the first waiting job
        # fits in the GPUs the pinned running jobs leave, it is worth more than any set of
        # waiting jobs that could take them (the rest backfill)
        wait = np.flatnonzero(~running_now)
        h = wait[np.argmax(w[wait])]
        if (run.start_allowed[active[h]] & (run.gpus[active[h]] <= free)).any():
            w = head_first(w, wait, h, int(run.gpus[active[h]]))
        elif cfg.backfill == "easy":
            keep = _reserved(run, active, w, running_now, h, free)
            active, w, running_now = active[keep], w[keep], running_now[keep]
    window = None if widen else cfg.queue_window
    sel = offer(active, w, running_now, run.gpus, run.total_gpus, window, cfg.queue_min_jobs,
                free if window is not None else None, run.start_allowed)
    return sel, w[np.searchsorted(active, sel)]


def _reserved(run: _Run, active: np.ndarray, w: np.ndarray, running_now: np.ndarray, h: int, free: np.ndarray) -> np.ndarray:
    """Which active jobs (a mask over ``active``) a non-preemptive round may offer under EASY
    backfilling (:func:`optsched.sim.queue.reservation`), the head ``h`` (a position in ``active``)
    not fitting now: running jobs end after their pending restart and their work left at their
    current rate, waiting ones run their work left at demand."""
    releases = []
    for j in active[running_now]:
        rate = run.rate[j]
        left = run.delay_left[j] + run.remaining[j] / rate if rate > 0 else math.inf
        by_type: dict[int, int] = {}
        for nid, k in run.assign[j].nodes.items():
            by_type[run.type_of[nid]] = by_type.get(run.type_of[nid], 0) + k
        releases.extend((float(left), ty, k) for ty, k in by_type.items())
    wait = np.flatnonzero(~running_now)
    others = wait[wait != h]
    others = others[np.lexsort((active[others], -w[others]))]
    run_s = np.zeros(run.gpus.size)
    run_s[active[others]] = run.remaining[active[others]] / run.demand_thr[active[others]]
    ok = reservation(int(active[h]), active[others], run.gpus, run.start_allowed, free, releases, run_s)
    keep = np.ones(active.size, dtype=bool)
    keep[others[~ok]] = False
    return keep


def _solve(run: _Run, t: float, sel: np.ndarray, w_sel: np.ndarray, slo_live: dict[int, tuple[float, float]],
           ) -> Generator[Instance, Schedule | Result, tuple[Schedule, tuple[float, float, float, float, float]]]:
    """Yield the round's instance, take the allocator's answer, check it (``SimConfig.check``)
    and apply it to the run; returns the schedule and the round's solve record (solved,
    solve_s, solve_cpu_s, objective, gap)."""
    inst = build_instance(f"{run.cfg.name}-t{int(t)}", run.nodes, run.rnd, run.jobs, sel, w_sel, run.assign, run.base, run.speeds,
                          slo_live, run.pin, run.start_spread, run.start_base, run.start_limits)
    fitted = within_value_span(run.cluster, inst, sel, w_sel, run.value_per_weight)
    if fitted is not None:  # lifted heads and the slowest points spread the values too far: lift the lightest jobs
        inst = build_instance(inst.name, run.nodes, run.rnd, run.jobs, sel, fitted, run.assign, run.base, run.speeds,
                              slo_live, run.pin, run.start_spread, run.start_base, run.start_limits)
    t0, c0 = time.perf_counter(), time.process_time()
    out = yield inst
    solve_s, solve_cpu = time.perf_counter() - t0, time.process_time() - c0
    schedule, objective, gap = _read_answer(out)
    if run.cfg.check:
        objective = _checked(inst, schedule, t)
    apply_schedule(schedule, sel, run.jobs, run.assign, run.rate, run.delay_left, run.restart, run.ever_ran, run.start,
                   run.preempt, run.moves, run.alloc, t, run.cluster)
    for j in sel[run.start[sel] == t]:
        if run.start_limits[j] != (None, None):  # running, it may use every type and point it allows: its values' range widens
            run.value_per_weight[j] = np.nan
    return schedule, (1.0, solve_s, solve_cpu, objective, gap)


def _read_answer(out: Any) -> tuple[Schedule, float, float]:
    """The allocator's answer as ``(schedule, objective, gap)`` (nan where a bare schedule says nothing)."""
    if isinstance(out, Result):
        return out.schedule, out.objective, math.nan if out.gap is None else out.gap
    if isinstance(out, Schedule):
        return out, math.nan, math.nan
    raise SimulationError(f"allocator returned {type(out).__name__}, not a Schedule or Result")


def _checked(inst: Instance, schedule: Schedule, t: float) -> float:
    """The independent checker's objective of ``schedule``; raises when it refuses it."""
    report = check_schedule(inst, schedule)
    if report:
        raise SimulationError(f"round at t={t:g}: infeasible schedule: {[str(v) for v in report[:3]]}")
    return report.objective


def _record(run: _Run, t: float, span: float, active: np.ndarray, run_idx: np.ndarray, sel: np.ndarray,
            solve: tuple[float, float, float, float, float]) -> None:
    """Append the step's row to the per-round record (``solve``: solved, solve_s, solve_cpu_s, objective, gap)."""
    rec, caps = run.rec, run.caps
    held_alloc = run.alloc[active].sum(axis=0)
    rec["t_s"].append(t)
    rec["span_s"].append(span)
    rec["active"].append(active.size)
    rec["running"].append(run_idx.size)
    rec["waiting"].append(active.size - run_idx.size)
    rec["offered"].append(sel.size)
    for k, name in enumerate(("gpu_util", "cpu_util", "mem_util")):
        rec[name].append(held_alloc[k] / caps[k] if caps[k] else 0.0)
    for name, value in zip(("solved", "solve_s", "solve_cpu_s", "objective", "gap"), solve, strict=True):
        rec[name].append(value)


def _advance(run: _Run, t: float, span: float, run_idx: np.ndarray, t_fin: np.ndarray) -> None:
    """Run the running jobs ``run_idx`` through ``[t, t + span)``: progress after any pending
    restart, exact finish times (``t_fin``) for those done, and their resources freed."""
    d = run.delay_left[run_idx]
    r = run.rate[run_idx]
    fin = t_fin <= t + span + _EPS * max(1.0, t)
    eff = np.clip(span - d, 0.0, span)
    held = np.where(fin, t_fin - t, span)
    run.attained[run_idx] += run.alloc[run_idx, 0] * held  # the GPUs held (an elastic job's vary)
    run.run_s[run_idx] += held
    run.remaining[run_idx] = np.where(fin, 0.0, np.maximum(run.remaining[run_idx] - r * eff, 0.0))
    run.delay_left[run_idx] = np.maximum(d - span, 0.0)
    f_idx = run_idx[fin]
    run.finish[f_idx] = t_fin[fin]
    run.done[f_idx] = True
    run.rate[f_idx] = 0.0
    run.alloc[f_idx] = 0.0
    for j in f_idx:
        run.assign[j] = None


def _result(run: _Run, workload: Workload | Sequence[SimJob], allocator_name: str, counts: dict[str, Any]) -> SimResult:
    """The :class:`SimResult` of a finished replay (``counts``: arrived, end_s, solver_calls,
    checked_rounds, stalled, widened, wall_s, cpu_s)."""
    cfg, jobs = run.cfg, run.jobs
    jobs_cols = {
        "id": np.array([j.id for j in jobs], dtype=object),
        "model": np.array([j.model for j in jobs], dtype=object),
        "gpus": run.gpus,
        "submit_s": run.submit,
        "start_s": run.start,
        "finish_s": run.finish,
        "duration_s": np.array([j.duration_s for j in jobs], dtype=np.float64),
        "run_s": run.run_s,
        "preemptions": run.preempt,
        "moves": run.moves,
        "demand_cpus_per_gpu": np.array([j.demand[0] for j in jobs], dtype=np.int64),
        "demand_mem_per_gpu_gb": np.array([j.demand[1] for j in jobs], dtype=np.int64),
        "deadline_s": run.deadline,  #: absolute; nan for best-effort jobs
        "slo": run.slo,  #: optsched.sim.deadlines.SLO_STATES (0 best-effort, 1 admitted, 2 rejected, 3 demoted)
        "elastic": np.array([j.elastic is not None for j in jobs], dtype=np.int64),
        "gpu_s": run.attained,  #: GPU-seconds held (a rigid job's is gpus x run_s)
    }
    rounds = {k: np.asarray(v, dtype=np.float64) for k, v in run.rec.items()}
    info = {
        "name": cfg.name,
        "policy": run.policy.name,
        "allocator": allocator_name,
        "config": {**{k: getattr(cfg, k) for k in ("round_s", "fair", "queue_window", "queue_min_jobs", "horizon_s", "reuse_unchanged",
                                                   "preemption")}, "pinned": run.pin},
        "round_policies": {"tenant_quotas": None if cfg.tenant_quotas is None else dict(cfg.tenant_quotas), "max_moves": cfg.max_moves,
                           "fairness": cfg.fairness,
                           "slo_share": cfg.slo_share, "slo_slack": cfg.slo_slack, "slo_seed": cfg.slo_seed,
                           "packing": cfg.packing, "packing_tolerance": cfg.packing_tolerance,
                           "elastic_share": cfg.elastic_share, "elastic_seed": cfg.elastic_seed},
        "jobs": run.n,
        "arrived": counts["arrived"],
        "nodes": len(run.nodes),
        "gpus": int(run.caps[0]),
        "end_s": counts["end_s"],
        "rounds": len(run.rec["t_s"]),
        "solver_calls": counts["solver_calls"],
        "checked_rounds": counts["checked_rounds"],
        "stalled": counts["stall"] is not None,
        "stall": counts["stall"],  #: "idle" (nothing fits) or "no progress" (optsched.sim.progress)
        "window_widened_rounds": counts["widened"],  #: rounds that offered every waiting job (queue.widen_next)
        "wall_s": counts["wall_s"],
        "cpu_s": counts["cpu_s"],  #: this process's CPU time (fairer than wall time on a shared machine)
        "notes": dict(workload.notes) if isinstance(workload, Workload) else {},
    }
    return SimResult(name=cfg.name, jobs=jobs_cols, rounds=rounds, info=info)


def _with_elastic(jobs: tuple[SimJob, ...], nodes: tuple[Node, ...], cfg: SimConfig) -> tuple[SimJob, ...]:
    """``jobs`` with ``cfg.elastic_share`` of them (drawn with ``cfg.elastic_seed``, in order)
    made elastic (:func:`optsched.elastic.mark_elastic`, sizes up to the largest GPU type's total);
    jobs that carry a spec keep it."""
    if cfg.elastic_share <= 0:
        return jobs
    per_type: dict[str, int] = {}
    for nd in nodes:
        per_type[nd.gpu_type] = per_type.get(nd.gpu_type, 0) + nd.gpus
    specs = mark_elastic([(j.model, j.gpus) for j in jobs], cfg.elastic_share, cfg.elastic_seed, max(per_type.values(), default=1))
    return tuple(replace(j, elastic=e) if j.elastic is None and e is not None else j for j, e in zip(jobs, specs, strict=True))


def _rounds_unchanged(run: _Run, t: float, t_fin: np.ndarray, next_submit: float | None, active: np.ndarray) -> int:
    """How many rounds from ``t`` the current schedule provably stands: no job finishes before
    the last of them starts, no job arrives, and the policy's weights do not change (its
    ``stable_for``; a policy without one changes every round). Advancing them in one step is
    exactly what round-by-round simulation with ``reuse_unchanged`` computes, only faster."""
    stable = getattr(run.policy, "stable_for", None)
    if stable is None:
        return 1
    R, horizon = run.cfg.round_s, run.cfg.horizon_s
    k = max(1, math.ceil((float(t_fin.min()) - t) / R - 1e-12))
    if next_submit is not None:
        k = min(k, max(1, round((math.ceil((next_submit - _EPS) / R) * R - t) / R)))
    if horizon is not None:
        k = min(k, max(1, math.ceil((horizon - t) / R)))
    if k > 1:
        state = QueueState(now=t, submit_s=run.submit[active], gpus=run.gpus[active], attained_gpu_s=run.attained[active],
                           remaining_s=run.remaining[active] / run.demand_thr[active], running=run.rate[active] > 0,
                           **run.extras.at(active, run.attained, run.done))
        s = float(stable(state))
        if s < math.inf:
            k = min(k, max(1, math.ceil(s / R - 1e-12)))
    return k
