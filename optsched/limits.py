"""The numeric range every method accepts, and the round sizes each method is trusted with.

One place for the limits that the contract's field checks (:mod:`optsched.model`) leave open:
integers and floats that are valid JSON and valid Python but that no backend can compute with
(10^400 GPUs, a weight of 1e308, throughputs spanning 1e-9 to 1e9), and the round sizes beyond
which a MIP backend no longer honours its time limit. Every refusal is an
:class:`~optsched.errors.InputError` naming the field, the value and the limit.

- :func:`check_ranges` runs when a round is read (``Instance.from_dict``: the CLI, the HTTP
  service, ``load_instance``) and again in ``solve_round`` before any method (a round built in
  Python skips ``from_dict``);
- :func:`check_value_span` runs in ``solve_round`` before any method and in the MIP solvers, so
  ``cpsat``, ``lns``, ``scip``, ``cbc``, ``pulp`` and the heuristics refuse the same rounds with
  the same message (CP-SAT's integer scaling, :mod:`optsched.exact.scaling`, relies on it);
- :func:`check_size` refuses a round larger than :data:`MAX_CELLS` allows for a method;
- :func:`check_at_most` refuses a size asked for on the command line or in Python (the nodes and
  jobs of a generated round, :data:`MAX_NODES` and :data:`MAX_ROUND_JOBS`; a simulated cluster's
  nodes; a synthetic trace's jobs, :data:`MAX_TRACE_JOBS`) before anything of that size is built.

The same figures are stated in ``docs/contract.md`` ("Numeric range") and ``docs/cli.md``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

from optsched.errors import InputError
from optsched.job import fair_floor

if TYPE_CHECKING:
    from optsched.model import Instance, Job

__all__ = [
    "MAX_CELLS",
    "MAX_COUNT",
    "MAX_DEPTH",
    "MAX_FACTOR",
    "MAX_GEN_COUNT",
    "MAX_NODES",
    "MAX_ROUND_JOBS",
    "MAX_SECONDS",
    "MAX_SEED",
    "MAX_THREADS",
    "MAX_THROUGHPUT",
    "MAX_TRACE_JOBS",
    "MAX_VALUE_SPAN",
    "MIN_FACTOR",
    "MIN_THROUGHPUT",
    "check_at_most",
    "check_count",
    "check_ranges",
    "check_seed",
    "check_size",
    "check_value_span",
    "job_value_range",
    "present_types",
    "share_total",
    "whole_number",
]

#: deepest JSON nesting read (a contract document nests 7 deep, an HTTP request 8)
MAX_DEPTH = 64
#: largest integer field (GPUs, cores, GB, grid values, placements, quotas, ``max_moves``): a
#: product of two of them summed over a million terms stays inside CP-SAT's 64-bit integers
MAX_COUNT = 1_000_000
#: range of the multiplicative factors ``weight``, ``gpu_speed`` values and ``elastic.scaling``
MIN_FACTOR, MAX_FACTOR = 1e-6, 1e6
#: range of ``profile.throughput`` values (samples/s)
MIN_THROUGHPUT, MAX_THROUGHPUT = 1e-6, 1e12
#: largest duration in seconds (``round.duration_s``, ``restart_s``, ``deadline_s``, ``remaining_s``): 31.7 years
MAX_SECONDS = 1e9
#: largest ratio between two positive job values (``weight x speed x throughput / demand
#: throughput``, see :func:`job_value_range`) in one round: MIP solvers work to relative
#: tolerances near 1e-9, and CP-SAT scales values to integers with 1e-5 resolution under 2^50
MAX_VALUE_SPAN = 1e6
#: the most threads or worker processes a method is asked to start (``num_workers``, ``threads``, ``workers``)
MAX_THREADS = 1024
#: largest seed: the solvers pass it to 32-bit random-seed parameters (CP-SAT, SCIP)
MAX_SEED = 2**31 - 1
#: the most ``nodes x jobs`` cells each method takes. Measured at the default 10 s time limit on
#: ``optsched gen`` rounds (seed 0) on a loaded 2-core machine: at 128 x 512 (65,536 cells) scip,
#: cbc and pulp answered in 12.0, 15.8 and 11.1 s (the greedy schedule: the time went into building
#: the MIP); at 256 x 1,024 (262,144) scip and cbc needed 32 and 28 s, and 1,024 x 4,000 rounds
#: none at all within 60-200 s. Methods not listed take rounds of any size (they stop at their
#: time limit).
MAX_CELLS: dict[str, int] = {"scip": 65_536, "cbc": 65_536, "pulp": 65_536}
#: the most nodes of a generated round (``optsched gen``) or a simulated cluster (``--cluster``):
#: eight times the 12,500-node rounds the solvers are built for
MAX_NODES = 100_000
#: the most jobs of a generated round: ten times the 50,000-job rounds the solvers are built for
#: (a round of 500,000 jobs is about 650 MB of JSON; the readers take at most 1 GiB)
MAX_ROUND_JOBS = 500_000
#: the most jobs of a synthetic trace (``optsched workload``, ``simulate synthetic:...``): ten
#: times the largest public GPU traces' million (a million jobs take about 0.4 GB to draw)
MAX_TRACE_JOBS = 10_000_000
#: the most instances one ``optsched gen`` writes (``--count``, per shape of a size class)
MAX_GEN_COUNT = 10_000


def check_count(field: str, v: int) -> None:
    """Refuse an integer field above :data:`MAX_COUNT` (GPUs, cores, GB, ... of one node or job)."""
    if v > MAX_COUNT:
        raise InputError(field, v, f"must be <= {MAX_COUNT:,} (the largest count optsched computes with)")


def share_total(field: str, value: Any, shares: Iterable[float], what: str = "shares") -> float:
    """The sum of ``shares`` (each finite already); refuses, naming ``field`` and ``value``, a sum
    that overflows to infinity (every normalised share would read 0 or NaN)."""
    total = sum(shares)
    if not math.isfinite(total):
        raise InputError(field, value, f"the {what} add up to more than the largest float: give them on a smaller scale")
    return total


def check_at_most(field: str, value: float, limit: int, what: str) -> None:
    """Refuse ``value`` above ``limit`` (a size asked for: ``what`` names its unit, e.g. "nodes")."""
    if value > limit:
        raise InputError(field, value, f"must be at most {limit:,} {what}")


def whole_number(text: str) -> int:
    """An integer written plainly (``100000``, ``100_000``) or in scientific notation (``1e5``), as
    the command line's sizes (``--jobs``, ``--nodes``) take them; ``ValueError`` for anything else
    (``1.5``, ``1e400``). The size is not checked here: the verb refuses it, naming its limit."""
    try:
        return int(text)
    except ValueError:
        pass
    x = float(text)  # ValueError for text that is no number
    if not math.isfinite(x) or x != int(x):
        raise ValueError(f"not a whole number: {text!r}")
    return int(x)


def _between(field: str, v: float, lo: float, hi: float, what: str) -> None:
    if not lo <= v <= hi:
        raise InputError(field, v, f"must be in [{lo:g}, {hi:g}] ({what})")


def check_seed(seed: object, field: str = "seed") -> int:
    """``seed`` if it is an integer in ``[0, MAX_SEED]``, else :class:`~optsched.errors.InputError`."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InputError(field, seed, f"must be an integer in [0, {MAX_SEED}] (solvers take 32-bit seeds)")
    return seed


def _seconds(field: str, v: float | None) -> None:
    if v is not None and v > MAX_SECONDS:
        raise InputError(field, v, f"must be <= {MAX_SECONDS:g} seconds")


def check_ranges(instance: Instance) -> None:
    """Refuse a round with a number outside the range every method computes with.

    The contract's own checks (types, signs, grids) have passed; this adds the upper (and for
    factors, lower) limits of :data:`MAX_COUNT`, :data:`MIN_FACTOR` .. :data:`MAX_FACTOR`,
    :data:`MIN_THROUGHPUT` .. :data:`MAX_THROUGHPUT` and :data:`MAX_SECONDS`. The field is named
    as a JSON path (``jobs[3].weight``).
    """
    rnd = instance.round
    _seconds("round.duration_s", rnd.duration_s)
    if rnd.max_moves is not None:
        check_count("round.max_moves", rnd.max_moves)
    for name, q in (rnd.tenants or {}).items():
        check_count(f"round.tenants.{name}.quota_gpus", q)
    for i, n in enumerate(instance.nodes):
        if n.gpus > MAX_COUNT or n.cpus > MAX_COUNT or n.mem_gb > MAX_COUNT:
            for key in ("gpus", "cpus", "mem_gb"):
                check_count(f"nodes[{i}].{key}", getattr(n, key))
    in_range: set[int] = set()  # ids of the profiles found in range (jobs of one model share theirs)
    for i, j in enumerate(instance.jobs):
        if not _job_in_range(j, in_range):
            _check_job(f"jobs[{i}]", j)


def _job_in_range(j: Job, in_range: set[int]) -> bool:
    """Whether every number of ``j`` is in range: the quick test, with no field names formatted;
    :func:`_check_job` names the first that is not (it also runs when this cannot tell: an elastic job)."""
    if j.gpus > MAX_COUNT or not MIN_FACTOR <= j.weight <= MAX_FACTOR or j.restart_s > MAX_SECONDS or j.elastic is not None:
        return False
    if (j.deadline_s is not None and j.deadline_s > MAX_SECONDS) or (j.remaining_s is not None and j.remaining_s > MAX_SECONDS):
        return False
    if j.gpu_speed is not None and not all(MIN_FACTOR <= s <= MAX_FACTOR for s in j.gpu_speed.values()):
        return False
    if j.placement is not None and max(j.placement.values()) > MAX_COUNT:
        return False
    prof = j.profile
    if id(prof) not in in_range:
        if prof.cpus_per_gpu[-1] > MAX_COUNT or prof.mem_per_gpu_gb[-1] > MAX_COUNT:  # grids increase
            return False
        if not all(MIN_THROUGHPUT <= min(row) and max(row) <= MAX_THROUGHPUT for row in prof.throughput):
            return False
        in_range.add(id(prof))
    return True


def _check_job(at: str, j: Job) -> None:
    check_count(f"{at}.gpus", j.gpus)
    _between(f"{at}.weight", j.weight, MIN_FACTOR, MAX_FACTOR, "the weight range")
    for t, s in (j.gpu_speed or {}).items():
        _between(f"{at}.gpu_speed.{t}", s, MIN_FACTOR, MAX_FACTOR, "the speed-factor range")
    prof = j.profile
    for key in ("cpus_per_gpu", "mem_per_gpu_gb"):
        for k, v in enumerate(getattr(prof, key)):
            check_count(f"{at}.profile.{key}[{k}]", v)
    for a, row in enumerate(prof.throughput):
        for b, v in enumerate(row):
            _between(f"{at}.profile.throughput[{a}][{b}]", v, MIN_THROUGHPUT, MAX_THROUGHPUT, "the throughput range")
    for n, k in (j.placement or {}).items():
        check_count(f"{at}.placement.{n}", k)
    _seconds(f"{at}.restart_s", j.restart_s)
    _seconds(f"{at}.deadline_s", j.deadline_s)
    _seconds(f"{at}.remaining_s", j.remaining_s)
    if j.elastic is not None:
        for k, g in enumerate(j.elastic.gpus):
            check_count(f"{at}.elastic.gpus[{k}]", g)
        for k, f in enumerate(j.elastic.scaling):
            _between(f"{at}.elastic.scaling[{k}]", f, MIN_FACTOR, MAX_FACTOR, "the speed-factor range")


def job_value_range(instance: Instance, job: Job, *, present: Collection[str] | None = None,
                    throughputs: dict[tuple[int, tuple[int, int]], tuple[float, float]] | None = None) -> tuple[float, float] | None:
    """Smallest and largest value ``weight x speed x throughput / demand throughput`` (times the
    smallest and largest ``elastic.scaling`` factor) of ``job`` over the GPU types it may use that
    the cluster has and its admissible grid points (in a ``fair`` round: throughput at least the
    demand's); ``None`` when the cluster has none of its GPU types.

    For many jobs of one round (:func:`check_value_span`): ``present`` is the round's GPU types
    with GPUs (:func:`present_types`), and ``throughputs`` a dict that keeps the smallest and
    largest admissible throughput per profile object and demand, for jobs that share them.
    """
    if present is None:
        present = present_types(instance)
    speeds = [s for t in present if (s := job.speed(t)) is not None]
    if not speeds:
        return None
    demand = job.demand_throughput
    key = (id(job.profile), job.demand)
    span = None if throughputs is None else throughputs.get(key)
    if span is None:
        thr = [v for _c, _m, v in job.profile.allowed(fair_floor(job, instance.round.fair))]
        span = min(thr), max(thr)
        if throughputs is not None:
            throughputs[key] = span
    lo_f, hi_f = (1.0, 1.0) if job.elastic is None else (min(job.elastic.scaling), max(job.elastic.scaling))
    lo = job.weight * min(speeds) * span[0] / demand * lo_f
    hi = job.weight * max(speeds) * span[1] / demand * hi_f
    return lo, hi


def present_types(instance: Instance) -> set[str]:
    """The GPU types of the round's nodes that have GPUs."""
    return {n.gpu_type for n in instance.nodes if n.gpus > 0}


def check_value_span(instance: Instance) -> None:
    """Refuse a round whose job values span more than :data:`MAX_VALUE_SPAN` (largest over
    smallest, :func:`job_value_range` over every job): no backend keeps such values apart (CP-SAT's
    integer scaling would overflow, MIP solvers stop with bounds below their own objective)."""
    lo, hi, lo_at, hi_at = math.inf, 0.0, -1, -1
    present, throughputs = present_types(instance), {}
    for i, job in enumerate(instance.jobs):
        r = job_value_range(instance, job, present=present, throughputs=throughputs)
        if r is None:
            continue
        if r[0] < lo:
            lo, lo_at = r[0], i
        if r[1] > hi:
            hi, hi_at = r[1], i
    if hi > 0 and hi > MAX_VALUE_SPAN * lo:
        raise InputError(
            "jobs",
            f"values from {lo:.3g} (jobs[{lo_at}]) to {hi:.3g} (jobs[{hi_at}])",
            f"job values (weight x speed x throughput / demand throughput) span more than {MAX_VALUE_SPAN:g}x, "
            "more than the solvers' tolerances keep apart; rescale the weights or the throughputs",
        )


def check_size(instance: Instance, method: str) -> None:
    """Refuse a round with more ``nodes x jobs`` cells than :data:`MAX_CELLS` gives ``method``."""
    limit = MAX_CELLS.get(method)
    if limit is None:
        return
    n_nodes, n_jobs = instance.size
    cells = n_nodes * n_jobs
    if cells > limit:
        raise InputError("instance", f"{n_nodes} nodes x {n_jobs} jobs = {cells:,} cells",
                         f"is larger than {method} takes ({limit:,} cells: above it, it does not answer within its time limit); "
                         f"use cpsat, lns or auto")

