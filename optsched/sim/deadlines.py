"""Deadline (SLO) jobs in the simulator: marking, admission control and due jobs (Chronus /
ElasticFlow style; ``formulations/policies.md``, "Deadlines in the simulator").

* **Marking.** A job is an SLO job when its :class:`~optsched.sim.workload.SimJob` carries a
  ``deadline_s`` (absolute simulated time), or when :func:`mark_deadlines` picks it: each job
  independently with probability ``share`` (a numpy generator seeded with ``seed``, in trace
  order), deadline ``submit + slack x duration`` (``duration`` is the trace's run time at the
  fixed demand on a speed-1.0 GPU: the job's isolated duration).
* **Rates.** ``best`` is the job's fastest rate relative to its demand on a speed-1.0 GPU (the
  fastest allowed GPU type present x the best grid point, fair-eligible points only in fair
  rounds: what :func:`optsched.round_policies.best_speedup` computes for a round); ``slow`` is
  the speed of the slowest allowed GPU type present (a job held at its demand runs at least at
  ``slow``).
* **Admission** at the job's first round boundary: admitted when it can finish alone at its best
  rate (``remaining / best <= deadline - now``) and a fluid earliest-deadline-first test over the
  admitted unfinished jobs and it passes at demand rate (for every admitted deadline ``d``, the
  GPU-seconds that the jobs due by ``d`` still need at demand on their slowest type, each rounded
  up to whole rounds since resources are released only at round boundaries, fit in the cluster's
  GPUs until ``d``: a necessary condition for gangs and packing, not a sufficient one). Otherwise it is
  *rejected*: it runs as a best-effort job (never dropped) and counts as a miss.
* **Due** jobs: an admitted job that could not finish at demand rate on its slowest type if it
  waited one more round (``now + round + pending restart + remaining / slow > deadline``). The
  engine raises a due job's weight above the sum of every other offered job's (so every
  allocator, exact or greedy, runs due jobs first) and always offers it.
* **Demotion**: an admitted job that can no longer finish even at its best rate (counting a
  pending restart delay) is demoted to best-effort (it keeps running, its deadline is dropped
  from the rounds) and counts as a miss.

Rounds carry the contract-v2 fields of every admitted job: ``deadline_s`` (seconds from the
round's start) and ``remaining_s`` (run time left at demand on a speed-1.0 GPU), so solvers with
the ``deadlines`` family also force in contract-urgent jobs and report misses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from optsched.errors import InputError
from optsched.model import Node
from optsched.round_policies import peak_rate
from optsched.sim.workload import SimJob

__all__ = [
    "SLO_ADMITTED",
    "SLO_DEMOTED",
    "SLO_NONE",
    "SLO_REJECTED",
    "SLO_STATES",
    "admission_step",
    "deadline_metrics",
    "due_weights",
    "edf_fits",
    "job_rates",
    "mark_deadlines",
]

_EPS = 1e-9  #: the engine's time tolerance (seconds)

#: per-job SLO state codes (the ``slo`` column of a run's jobs)
SLO_NONE, SLO_ADMITTED, SLO_REJECTED, SLO_DEMOTED = 0, 1, 2, 3
SLO_STATES = {SLO_NONE: "best-effort", SLO_ADMITTED: "admitted", SLO_REJECTED: "rejected", SLO_DEMOTED: "demoted"}


def mark_deadlines(jobs: Sequence[SimJob], share: float, slack: float, seed: int) -> np.ndarray:
    """Absolute deadlines per job (``nan``: best-effort): each job's own ``deadline_s`` if set,
    else with probability ``share`` ``submit + slack x duration``; deterministic in ``seed``."""
    if not (0.0 <= share <= 1.0):
        raise InputError("slo_share", share, "must be a share in [0, 1]")
    if not (math.isfinite(slack) and slack > 0):
        raise InputError("slo_slack", slack, "must be > 0 (deadline = submit + slack x duration)")
    n = len(jobs)
    pick = np.random.default_rng(seed).random(n) < share if share > 0 else np.zeros(n, dtype=bool)
    out = np.full(n, np.nan)
    for i, j in enumerate(jobs):
        own = getattr(j, "deadline_s", None)
        if own is not None:
            out[i] = float(own)
        elif pick[i]:
            out[i] = j.submit_s + slack * j.duration_s
    return out


def job_rates(jobs: Sequence[SimJob], nodes: Sequence[Node], fair: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per job ``(best, slow)``: the best rate relative to demand on a speed-1.0 GPU, and the
    speed of the slowest allowed GPU type present (0 for both when no allowed type is present)."""
    types = sorted({nd.gpu_type for nd in nodes})
    best = np.zeros(len(jobs))
    slow = np.zeros(len(jobs))
    for i, j in enumerate(jobs):
        speeds = [1.0 if j.gpu_speed is None else j.gpu_speed.get(t) for t in types]
        speeds = [s for s in speeds if s is not None]
        if not speeds:
            continue
        best[i] = peak_rate(j.profile, j.demand, max(speeds), fair, j.elastic)
        slow[i] = min(speeds)
    return best, slow


def edf_fits(now: float, deadlines: np.ndarray, gpu_s: np.ndarray, total_gpus: float) -> bool:
    """Fluid EDF test: for every deadline ``d``, the GPU-seconds of the jobs due by ``d`` fit in
    ``total_gpus x (d - now)``."""
    if deadlines.size == 0:
        return True
    order = np.argsort(deadlines, kind="stable")
    need = np.cumsum(gpu_s[order])
    room = total_gpus * (deadlines[order] - now)
    return bool(np.all(need <= room + 1e-6))


def due_weights(w: np.ndarray, due: np.ndarray, gpus: np.ndarray) -> np.ndarray:
    """``w`` with every due job's weight raised above any set of other jobs it could displace
    (their order among themselves kept). A job holds at least one GPU, so the due jobs (``gpus``
    each) displace at most ``k`` = their GPUs of other jobs: the lift is 4 x the sum of the ``k``
    largest other weights, plus 1 (the 4 covers the others' better throughput ratios), as for the
    head of a non-preemptive queue (:func:`optsched.sim.queue.head_first`). Bounded by the due
    jobs' size, not the queue's length, so the round's values stay within the range every method
    accepts (``optsched.limits``)."""
    if not due.any():
        return w
    k = int(gpus[due].sum())
    others = np.sort(w[~due])[::-1][:k]
    lift = 4.0 * float(others.sum()) + 1.0
    out = w.copy()
    out[due] = lift * (1.0 + w[due] / max(float(w[due].max()), 1e-300))
    return out


def deadline_metrics(jobs: dict[str, np.ndarray]) -> dict[str, float | int | None]:
    """Deadline satisfaction of a run from its per-job ``deadline_s`` and ``slo`` columns (empty
    when the run had no SLO job): counts per state, jobs finished by their deadline, the share of
    all SLO jobs (``deadline_satisfaction``) and of admitted ones (``admitted_deadline_satisfaction``;
    demoted jobs were admitted), and the best-effort jobs' average JCT."""
    if "deadline_s" not in jobs or "slo" not in jobs:
        return {}
    dl = np.asarray(jobs["deadline_s"], dtype=np.float64)
    slo = np.asarray(jobs["slo"], dtype=np.float64)
    is_slo = np.isfinite(dl)
    if not is_slo.any():
        return {}
    finish = np.asarray(jobs["finish_s"], dtype=np.float64)
    met = is_slo & np.isfinite(finish) & (finish <= dl + 1e-6)
    admitted = (slo == SLO_ADMITTED) | (slo == SLO_DEMOTED)
    be = ~is_slo & np.isfinite(finish)
    jct = finish - np.asarray(jobs["submit_s"], dtype=np.float64)
    return {
        "slo_jobs": int(is_slo.sum()),
        "slo_admitted": int(admitted.sum()),
        "slo_rejected": int((slo == SLO_REJECTED).sum()),
        "slo_demoted": int((slo == SLO_DEMOTED).sum()),
        "deadline_met": int(met.sum()),
        "deadline_satisfaction": float(met.sum() / is_slo.sum()),
        "admitted_deadline_satisfaction": float((met & admitted).sum() / admitted.sum()) if admitted.any() else None,
        "best_effort_avg_jct_s": float(jct[be].mean()) if be.any() else None,
    }


def admission_step(
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
            slo[j] = SLO_REJECTED
            continue
        mine = np.flatnonzero(slo[active] == SLO_ADMITTED)
        cand = np.append(mine, k)
        rounds_needed = np.ceil(at_demand[cand] / R - 1e-9) * R  # resources free only at round boundaries
        ok = edf_fits(t, deadline[active[cand]], gpus[active[cand]] * rounds_needed, total_gpus)
        slo[j] = SLO_ADMITTED if ok else SLO_REJECTED
    admitted = slo[active] == SLO_ADMITTED
    lost = admitted & ~(at_best <= left + _EPS)
    slo[active[lost]] = SLO_DEMOTED
    admitted &= ~lost
    due = admitted & (R + at_demand > left)
    return admitted, due
