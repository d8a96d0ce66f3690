"""The simulator's settings (:class:`SimConfig`) and how its preemption setting resolves against a
queue policy (:func:`pins_running_jobs`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from optsched.elastic import mark_elastic
from optsched.errors import InputError
from optsched.model import Round
from optsched.sim.deadlines import mark_deadlines
from optsched.sim.policy_base import QueuePolicy
from optsched.sim.workload import parse_duration

__all__ = ["BACKFILL", "PREEMPTION", "SimConfig", "parse_start_spread_horizon", "pins_running_jobs", "round_families"]

#: the values of ``SimConfig.preemption``
PREEMPTION = ("auto", "none", "allowed")
#: the values of ``SimConfig.backfill``
BACKFILL = ("easy", "any")


@dataclass(frozen=True)
class SimConfig:
    """Simulation settings (their meaning: :mod:`optsched.sim.engine`)."""

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
    #: how waiting jobs fill GPUs the head of a non-preemptive queue cannot use yet:
    #: ``"easy"`` (EASY backfilling, the simplest reservation-based rule of batch schedulers: the
    #: head holds a reservation at the earliest time enough GPUs come free, and only jobs that end
    #: by then or fit beside it may start; optsched.sim.queue.reservation) or ``"any"`` (every waiting job
    #: that fits may start, however long it holds GPUs the head waits for, so a backlog of large
    #: gangs can starve behind younger long jobs)
    backfill: str = "easy"
    #: in rounds that pin the running jobs, how long a waiting job's start is charged its spread
    #: for: a pinned job keeps its nodes until it ends, so a gang started on more nodes than it
    #: needs is slower for its whole run, not for one round. Its round worth pays
    #: ``spread_factor ** max(1, start_spread_horizon_s / round_s)`` per extra node (no smaller
    #: than 1e-6) instead of ``spread_factor``; the simulated speed is unchanged. ``None``: one
    #: round (the job's own factor). Rounds that do not pin are not affected.
    start_spread_horizon_s: float | None = 7200.0
    #: in rounds that pin the running jobs, where a waiting job may start: only on GPU types whose
    #: nodes can give it at least this share of its demand's throughput (or of the best the
    #: cluster can, if less) from their cores and memory per GPU, and, where the fewest nodes of
    #: some node shape feed it and either those of another would starve it or the job is a gang
    #: larger than any node, only at the cores and memory levels that reach that share
    #: (optsched.sim.rounds.start_limits). A pinned start keeps its nodes, so a job started where
    #: they starve it (an image model on nodes with less memory per GPU than its data cache) runs
    #: slowly to its end. The GPU's own speed is not counted: slow GPUs are capacity. ``0``: no
    #: limit. Rounds that do not pin are not affected.
    start_min_throughput: float = 0.5

    def __post_init__(self) -> None:
        if not math.isfinite(self.round_s) or self.round_s <= 0:
            raise InputError("round_s", self.round_s, "must be > 0 seconds")
        if self.queue_window is not None and not self.queue_window > 0:
            raise InputError("queue_window", self.queue_window, "must be > 0 (or None for all)")
        if isinstance(self.queue_min_jobs, bool) or not isinstance(self.queue_min_jobs, int) or self.queue_min_jobs < 0:
            raise InputError("queue_min_jobs", self.queue_min_jobs, "must be an integer >= 0")
        if self.horizon_s is not None and not (math.isfinite(self.horizon_s) and self.horizon_s > 0):
            raise InputError("horizon_s", self.horizon_s, "must be a finite time > 0 (or None)")
        if self.start_spread_horizon_s is not None and not (math.isfinite(self.start_spread_horizon_s) and self.start_spread_horizon_s > 0):
            raise InputError("start_spread_horizon_s", self.start_spread_horizon_s, "must be > 0 seconds (or None for one round)")
        if not (isinstance(self.start_min_throughput, (int, float)) and 0.0 <= self.start_min_throughput <= 1.0):
            raise InputError("start_min_throughput", self.start_min_throughput, "must be a share in [0, 1]")
        if self.preemption not in PREEMPTION:
            raise InputError("preemption", self.preemption, f"must be one of {list(PREEMPTION)}")
        if self.backfill not in BACKFILL:
            raise InputError("backfill", self.backfill, f"must be one of {list(BACKFILL)}")
        if self.preemption == "none" and self.tenant_quotas is not None:
            raise InputError("preemption", self.preemption, "cannot be combined with tenant_quotas (reclaiming a quota preempts borrowers)")
        if (self.tenant_quotas is not None or self.max_moves is not None or self.packing is not None or self.packing_tolerance is not None
                or self.fairness is not None):
            # the contract's checks, field names and all
            Round(tenants=self.tenant_quotas, max_moves=self.max_moves, packing=self.packing, packing_tolerance=self.packing_tolerance,
                  fairness=self.fairness)
        mark_deadlines((), self.slo_share, self.slo_slack, 0)  # checks the share and the slack
        if isinstance(self.slo_seed, bool) or not isinstance(self.slo_seed, int) or self.slo_seed < 0:
            raise InputError("slo_seed", self.slo_seed, "must be an integer >= 0")
        mark_elastic((), self.elastic_share, self.elastic_seed, 1)  # checks the share and the seed


def pins_running_jobs(config: SimConfig, policy: QueuePolicy, deadlines: bool = False) -> bool:
    """Whether rounds pin the running jobs: ``SimConfig.preemption`` resolved against the policy.
    ``"auto"`` pins them under a non-preemptive policy (FIFO) unless a round policy of the run
    works by preempting: tenant quotas (reclaim), deadline jobs (``deadlines``: a due job
    preempts best-effort work) or DRF/HUG fairness (shares re-balanced every round)."""
    if config.preemption == "auto":
        needs = config.tenant_quotas is not None or deadlines or config.slo_share > 0 or config.fairness is not None
        return not getattr(policy, "preemptive", True) and not needs
    return config.preemption == "none"


def round_families(config: SimConfig, policy: QueuePolicy, deadlines: bool = False) -> frozenset[str]:
    """The round-policy families (:func:`optsched.round_policies.policy_families`) that the rounds
    of a run may use: those ``config`` switches on, ``"deadlines"`` with SLO jobs (or
    ``deadlines``: the workload has deadline jobs) and ``"preemption"`` where rounds pin running
    jobs. An allocator must honour all of them (``MethodInfo.policies``); ``solve_round`` refuses
    one that does not at the first round that uses the family."""
    out = {name for name, on in (("quotas", config.tenant_quotas is not None), ("max_moves", config.max_moves is not None),
                                 ("deadlines", deadlines or config.slo_share > 0), ("elastic", config.elastic_share > 0),
                                 ("packing", config.packing is not None)) if on}
    if config.fairness is not None:
        out.add(config.fairness)
    if pins_running_jobs(config, policy, deadlines):
        out.add("preemption")
    return frozenset(out)


def parse_start_spread_horizon(text: str, field_name: str = "--start-spread-horizon") -> float | None:
    """A ``start_spread_horizon_s`` from the command line: a duration (``"2h"``, ``"7200"``) in
    seconds, or ``None`` for ``"none"`` (one round)."""
    if text.strip().lower() == "none":
        return None
    s = parse_duration(text, field_name)
    if s is None or not s > 0:
        raise InputError(field_name, text, "must be a duration > 0, or none for one round")
    return s
