"""Synthetic traces: Poisson arrivals, parametric or resampled durations and GPU counts.

:func:`synthetic_trace` returns a :class:`~optsched.sim.traces.Trace`, so a generated workload
goes through ``window``, ``scale_load``, ``cap_sizes`` and ``build_workload`` exactly as a real
trace does. Every setting lives in one frozen, validated :class:`SyntheticSpec`; a named
preset (:data:`PRESETS`) is a spec, and keyword overrides replace some of its fields::

    from optsched.sim.synthetic import synthetic_trace
    tr = synthetic_trace("gang-heavy", jobs=2000, gpus=176, load=1.1, seed=0)

Arrivals are a Poisson process: with ``rate_per_h`` its rate; with ``load`` (offered load on
``gpus`` GPUs, ``sum(gpus x duration) / (gpus_total x span)``, the definition of
:func:`~optsched.sim.workload.offered_load`) the arrival times of a Poisson process are rescaled so
that their span makes the offered load exactly ``load`` (a Poisson process conditioned on its
span). The trace's length is ``jobs`` jobs or a time span ``span_s``.

Durations (``duration``):

* ``"lognormal"``: median ``median_s`` and one or two upper quantiles ``p90_s`` / ``p99_s``. With
  one quantile it is the log-normal through both points. With both it is a *two-part* log-normal,
  spliced at p90: below p90 the log-normal through (median, p90), above it a log-normal tail
  whose log-slope puts p99 where asked (a 90 / 10 mixture of the two truncated parts, continuous
  at p90; when p99 is where the body's log-normal puts it, it is that single log-normal).
* ``"synergy"``: the duration distribution of Synergy's synthetic workload (its simulator's
  ``get_gavel_like_iter`` with 1 s iterations, after Gavel): ``60 x 10^U`` seconds with ``U``
  uniform on [1.5, 3] with probability 0.8 and on [3, 4] otherwise (32 min to 6.9 days; mean 16.8 h).
* ``"trace"``: resampled (with replacement) from ``source``'s durations.

``max_duration_s`` clips longer draws (the quantiles below it are unchanged).

GPU counts (``sizes``): a named distribution of :data:`SIZE_DISTRIBUTIONS`, an explicit
``{gpus: share}`` map, or ``"trace"`` (resampled from ``source``; with ``duration="trace"`` too,
size and duration are drawn together, keeping their correlation). ``gang_share`` then reshapes
the mix so that that share of jobs are multi-node gangs (more GPUs than a node's ``node_gpus``),
scaling gang and non-gang sizes each by one factor (when the base mix has no gangs, gangs are 2
and 4 nodes, evenly). Models are drawn from the catalogue with ``mix`` (as ``build_workload``
would) and written to the trace's ``model`` column; ``tenants`` labels jobs ``t0 .. t(k-1)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from statistics import NormalDist
from types import MappingProxyType
from typing import Any

import numpy as np

from optsched.errors import InputError
from optsched.limits import MAX_COUNT, MAX_TRACE_JOBS, check_at_most, check_count, share_total, whole_number
from optsched.sim.csv_rows import MAX_DURATION_S
from optsched.sim.traces import SAMPLE, Trace, load_trace, sample_trace_path
from optsched.sim.workload import Catalogue, default_catalogue, offered_load, parse_duration

__all__ = [
    "PRESETS",
    "SIZE_DISTRIBUTIONS",
    "SyntheticSpec",
    "describe",
    "parse_spec",
    "resolve_spec",
    "size_shares",
    "spliced_lognormal_quantile",
    "synthetic_trace",
]

_Z = NormalDist()
Z90, Z99 = _Z.inv_cdf(0.9), _Z.inv_cdf(0.99)


def _bucket(lo: int, hi: int, node_gpus: int = 8) -> tuple[int, ...]:
    """The sizes a bucket ``lo..hi`` draws from, evenly: powers of two up to a node, whole nodes
    (multiples of ``node_gpus``) above it -- what jobs of those sizes ask for in practice."""
    out = [g for g in range(lo, hi + 1) if (g <= node_gpus and g & (g - 1) == 0) or (g > node_gpus and g % node_gpus == 0)]
    return tuple(out) or tuple(range(lo, hi + 1))


def _spread(buckets: Mapping[tuple[int, int], float]) -> Mapping[int, float]:
    out: dict[int, float] = {}
    for (lo, hi), share in buckets.items():
        sizes = _bucket(lo, hi)
        for g in sizes:
            out[g] = out.get(g, 0.0) + share / len(sizes)
    return MappingProxyType(out)


#: named GPU-count distributions, ``{gpus: share}``
SIZE_DISTRIBUTIONS: Mapping[str, Mapping[int, float]] = MappingProxyType({
    "single": MappingProxyType({1: 1.0}),
    #: Synergy's multi-GPU synthetic mix (``get_job_gpu_demand``): 70 % 1, 10 % 2, 15 % 4, 5 % 8
    "synergy": MappingProxyType({1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05}),
    #: Philly's GPU counts (93.2 % of jobs on one GPU)
    "philly": MappingProxyType({1: 0.932, 2: 0.022, 4: 0.023, 8: 0.020, 16: 0.003}),
    #: gang-heavy: 4 % 1 GPU, 12 % 2-7, 37 % 8, 12 % 9-32, 3 % 33-64, 29 % 65-128 (see _bucket); these
    #: add up to 97 %, and shares are normalised, so each is drawn at 1/0.97 of its figure
    "gang-heavy": _spread({(1, 1): 0.04, (2, 7): 0.12, (8, 8): 0.37, (9, 32): 0.12, (33, 64): 0.03, (65, 128): 0.29}),
})

DURATIONS = ("lognormal", "synergy", "trace")
#: Synergy's synthetic model choice (its simulator's model zoo): image, language, speech 20/70/10,
#: each split evenly over the models Synergy draws from
SYNERGY_MIX: Mapping[str, float] = MappingProxyType({
    **{m: 0.2 / 5 for m in ("alexnet", "resnet18", "resnet50", "mobilenet", "shufflenet")},
    **{m: 0.7 / 3 for m in ("gnmt", "transformer", "lstm")},
    **{m: 0.1 / 2 for m in ("m5", "deepspeech")},
})


@dataclass(frozen=True)
class SyntheticSpec:
    """Everything that shapes a synthetic trace; validated at construction (errors name the field).

    Exactly one of ``jobs`` / ``span_s`` sets the length, exactly one of ``rate_per_h`` /
    ``load`` the arrivals (``load`` needs ``gpus``, the cluster's GPUs). See the module
    docstring for the distributions.
    """

    name: str = "parametric"
    jobs: int | None = None
    span_s: float | None = None
    rate_per_h: float | None = None
    load: float | None = None
    gpus: int | None = None
    duration: str = "lognormal"
    median_s: float | None = None
    p90_s: float | None = None
    p99_s: float | None = None
    max_duration_s: float | None = None
    sizes: str | Mapping[int, float] = "single"
    gang_share: float | None = None
    node_gpus: int = 8
    source: str | Path | Trace | None = None
    source_min_gpus: int = 1
    mix: Mapping[str, float] | None = None
    tenants: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        def pos(name: str, integer: bool = False, zero: bool = False) -> None:
            v = getattr(self, name)
            if v is None:
                return
            ok = (isinstance(v, (int, np.integer)) if integer else isinstance(v, (int, float, np.integer, np.floating)))
            if isinstance(v, bool) or not ok or not math.isfinite(v) or v < 0 or (v == 0 and not zero):
                raise InputError(name, v, f"must be a {'whole number' if integer else 'finite number'} {'>= 0' if zero else '> 0'}")

        for n in ("jobs", "gpus", "node_gpus", "source_min_gpus", "tenants"):
            pos(n, integer=True)
        for n in ("gpus", "source_min_gpus"):
            if getattr(self, n) is not None:
                check_count(n, getattr(self, n))
        if self.node_gpus * 4 > MAX_COUNT:  # gangs of up to 4 nodes: a trace reader refuses more GPUs a job
            raise InputError("node_gpus", self.node_gpus, f"must be <= {MAX_COUNT // 4:,}: the gangs a gang share adds span 2 or 4 nodes, and a job "
                                                          f"holds at most {MAX_COUNT:,} GPUs")
        for n in ("span_s", "rate_per_h", "load", "median_s", "p90_s", "p99_s", "max_duration_s"):
            pos(n)
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise InputError("seed", self.seed, "must be a whole number >= 0")
        if (self.jobs is None) == (self.span_s is None):
            raise InputError("jobs/span_s", (self.jobs, self.span_s), "give exactly one: a number of jobs or a time span")
        if (self.rate_per_h is None) == (self.load is None):
            raise InputError("rate_per_h/load", (self.rate_per_h, self.load), "give exactly one: an arrival rate or an offered load")
        if self.jobs is not None:
            check_at_most("jobs", self.jobs, MAX_TRACE_JOBS, "jobs per trace")
        if self.span_s is not None and self.rate_per_h is not None and self.span_s * self.rate_per_h / 3600.0 > MAX_TRACE_JOBS:
            raise InputError("span_s", self.span_s, f"at {self.rate_per_h:g} arrivals per hour asks for about "
                                                    f"{self.span_s * self.rate_per_h / 3600.0:.3g} jobs; a trace has at most {MAX_TRACE_JOBS:,}")
        if self.load is not None and self.gpus is None:
            raise InputError("gpus", None, "an offered load needs the cluster's GPU count")
        if self.duration not in DURATIONS:
            raise InputError("duration", self.duration, f"unknown duration distribution; known: {list(DURATIONS)}")
        if self.duration == "lognormal":
            if self.median_s is None or (self.p90_s is None and self.p99_s is None):
                raise InputError("median_s", self.median_s, "a log-normal needs median_s and p90_s and/or p99_s")
            qs = [q for q in (self.median_s, self.p90_s, self.p99_s) if q is not None]
            if any(b <= a for a, b in zip(qs, qs[1:], strict=False)):
                raise InputError("p90_s/p99_s", (self.median_s, self.p90_s, self.p99_s), "quantiles must increase: median < p90 < p99")
        if self.gang_share is not None and (isinstance(self.gang_share, bool) or not 0.0 <= self.gang_share <= 1.0):
            raise InputError("gang_share", self.gang_share, "must be a share in [0, 1]")
        if isinstance(self.sizes, str):
            if self.sizes != "trace" and self.sizes not in SIZE_DISTRIBUTIONS:
                raise InputError("sizes", self.sizes, f"unknown size distribution; known: {[*SIZE_DISTRIBUTIONS, 'trace']} or a {{gpus: share}} map")
        else:
            object.__setattr__(self, "sizes", MappingProxyType(_check_sizes(self.sizes)))
        if "trace" in (self.sizes, self.duration) and self.source is None:
            raise InputError("source", None, f"{self.name}: resampling sizes or durations needs a trace to resample (source=PATH)")
        if self.mix is not None:
            object.__setattr__(self, "mix", MappingProxyType(dict(self.mix)))


def _check_sizes(sizes: Any) -> dict[int, float]:
    if not isinstance(sizes, Mapping) or not sizes:
        raise InputError("sizes", sizes, "must be a distribution name or a non-empty {gpus: share} map")
    out: dict[int, float] = {}
    for g, w in sizes.items():
        try:
            gi = int(g)
        except (TypeError, ValueError):
            raise InputError("sizes", g, "GPU counts must be whole numbers >= 1") from None
        if gi < 1 or gi != float(g):
            raise InputError("sizes", g, "GPU counts must be whole numbers >= 1")
        check_count(f"sizes.{gi}", gi)  # a trace reader refuses more (csv_rows.gpu_count): the written trace would not load
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise InputError(f"sizes.{gi}", w, "must be a finite share >= 0")
        out[gi] = out.get(gi, 0.0) + float(w)
    total = share_total("sizes", dict(sizes), out.values())
    if total <= 0:
        raise InputError("sizes", dict(sizes), "must give some GPU count a positive share")
    return {g: w / total for g, w in sorted(out.items())}


#: named presets (see docs/simulator.md, "Synthetic workloads")
PRESETS: Mapping[str, SyntheticSpec] = MappingProxyType({
    "parametric": SyntheticSpec("parametric", jobs=1000, rate_per_h=30.0, duration="lognormal", median_s=1144.0,
                                p90_s=11265.0, p99_s=254758.0, sizes="philly"),
    "synergy": SyntheticSpec("synergy", jobs=1000, rate_per_h=9.0, duration="synergy", sizes="single", mix=SYNERGY_MIX),
    "gang-heavy": SyntheticSpec("gang-heavy", jobs=2000, load=1.1, gpus=176, duration="lognormal", median_s=93.0,
                                p90_s=42 * 60.0, p99_s=45 * 3600.0, max_duration_s=7 * 86400.0, sizes="gang-heavy"),
    "philly-multi": SyntheticSpec("philly-multi", jobs=1000, rate_per_h=2.1, duration="trace", sizes="trace",
                                  source="", source_min_gpus=2),
})


def spliced_lognormal_quantile(u: np.ndarray, median_s: float, p90_s: float | None, p99_s: float | None) -> np.ndarray:
    """Quantile function of the (two-part) log-normal through the given quantiles (module docstring)."""
    z = np.array([_Z.inv_cdf(float(x)) for x in np.clip(np.ravel(u), 1e-12, 1 - 1e-12)]).reshape(np.shape(u))
    mu = math.log(median_s)
    if p90_s is None:
        assert p99_s is not None
        return np.exp(mu + z * (math.log(p99_s) - mu) / Z99)
    s1 = (math.log(p90_s) - mu) / Z90
    if p99_s is None:
        return np.exp(mu + s1 * z)
    s2 = (math.log(p99_s) - math.log(p90_s)) / (Z99 - Z90)
    return np.exp(np.where(z <= Z90, mu + s1 * z, math.log(p90_s) + s2 * (z - Z90)))


def size_shares(spec: SyntheticSpec) -> dict[int, float]:
    """The ``{gpus: share}`` a parametric spec draws from, after ``gang_share``."""
    if spec.sizes == "trace":
        raise InputError("sizes", "trace", "resampled sizes have no closed-form shares")
    base = _check_sizes(SIZE_DISTRIBUTIONS[spec.sizes] if isinstance(spec.sizes, str) else spec.sizes)
    return _reshape(base, spec.gang_share, spec.node_gpus)


def _reshape(base: dict[int, float], gang_share: float | None, node_gpus: int) -> dict[int, float]:
    if gang_share is None:
        return base
    gang = {g: w for g, w in base.items() if g > node_gpus and w > 0}
    rest = {g: w for g, w in base.items() if g <= node_gpus and w > 0}
    if not gang:
        gang = {2 * node_gpus: 1.0, 4 * node_gpus: 1.0}
    if not rest:
        rest = {1: 1.0}
    tg, tr = sum(gang.values()), sum(rest.values())
    out = {g: (1.0 - gang_share) * w / tr for g, w in rest.items()}
    out.update({g: gang_share * w / tg for g, w in gang.items()})
    return {g: w for g, w in sorted(out.items()) if w > 0}


def _source(spec: SyntheticSpec, catalogue: Catalogue) -> Trace:
    src = spec.source
    if not isinstance(src, Trace):
        if src is None or str(src) == "":
            raise InputError("source", src, f"the {spec.name} preset resamples a trace: give its path (--source PATH, or source=PATH after synthetic:)")
        src = load_trace(sample_trace_path() if str(src) == SAMPLE else src, catalogue=catalogue)
    keep = src.gpus >= spec.source_min_gpus
    if not keep.any():
        raise InputError("source", src.name, f"has no job with >= {spec.source_min_gpus} GPUs to resample")
    return src.take(keep)


def _draw_sizes_durations(spec: SyntheticSpec, rng: np.random.Generator, n: int, catalogue: Catalogue) -> tuple[np.ndarray, np.ndarray]:
    src = _source(spec, catalogue) if "trace" in (spec.sizes, spec.duration) else None
    if spec.sizes == "trace":
        assert src is not None
        gang = src.gpus > spec.node_gpus
        pools = [np.arange(len(src))]
        if spec.gang_share is not None:
            if not gang.any() or gang.all():
                raise InputError("gang_share", spec.gang_share, f"the source has {'no' if not gang.any() else 'only'} multi-node jobs to reshape")
            pools = [np.flatnonzero(~gang), np.flatnonzero(gang)]
        which = (rng.random(n) < spec.gang_share).astype(int) if spec.gang_share is not None else np.zeros(n, dtype=int)
        pick = np.empty(n, dtype=np.int64)
        for k, pool in enumerate(pools):
            m = which == k
            pick[m] = pool[rng.integers(0, len(pool), int(m.sum()))]
        gpus = src.gpus[pick].astype(np.int64)
        joint = src.duration_s[pick]
    else:
        shares = size_shares(spec)
        sizes = np.array(list(shares), dtype=np.int64)
        gpus = sizes[rng.choice(len(sizes), size=n, p=np.array(list(shares.values())))]
        joint = None
    if spec.duration == "trace":
        assert src is not None
        dur = joint if joint is not None else src.duration_s[rng.integers(0, len(src), n)]
    elif spec.duration == "synergy":
        u = np.where(rng.random(n) < 0.8, rng.uniform(1.5, 3.0, n), rng.uniform(3.0, 4.0, n))
        dur = 60.0 * 10.0**u
    else:
        assert spec.median_s is not None
        dur = spliced_lognormal_quantile(rng.random(n), spec.median_s, spec.p90_s, spec.p99_s)
    dur = np.asarray(dur, dtype=np.float64)
    if spec.max_duration_s is not None:
        dur = np.minimum(dur, spec.max_duration_s)
    return gpus, np.maximum(np.round(dur, 3), 1.0)


def synthetic_trace(preset: str | SyntheticSpec = "parametric", *, catalogue: Catalogue | None = None, **overrides: Any) -> Trace:
    """A synthetic :class:`~optsched.sim.traces.Trace` from a preset (or spec) and overrides.

    Parameters
    ----------
    preset
        A name of :data:`PRESETS` (``parametric``, ``synergy``, ``gang-heavy``,
        ``philly-multi``) or a :class:`SyntheticSpec`.
    catalogue
        Where models come from (default: :mod:`optsched.catalogue`); a ``source`` file's model
        names are matched against it.
    **overrides
        :class:`SyntheticSpec` fields replacing the preset's. Setting ``jobs`` clears the preset's
        ``span_s`` and vice versa; likewise ``rate_per_h`` and ``load``; setting any of
        ``median_s`` / ``p90_s`` / ``p99_s`` (or a non-log-normal ``duration``) clears the others.

    Returns
    -------
    Trace
        Sorted by submit time, the first arrival at 0; ids ``<name>-<k>``; the ``model`` column
        filled; same spec and seed, same trace.

    Examples
    --------
    >>> tr = synthetic_trace("gang-heavy", jobs=500, seed=1)
    >>> from optsched.sim.workload import offered_load
    >>> round(offered_load(tr, 176), 6)
    1.1
    """
    spec = resolve_spec(preset, **overrides)
    rng = np.random.default_rng(spec.seed)
    cat = catalogue if catalogue is not None else default_catalogue()
    if spec.jobs is not None:
        gpus, dur = _draw_sizes_durations(spec, rng, spec.jobs, cat)
        gaps = rng.exponential(1.0, spec.jobs)
        gaps[0] = 0.0
        t = np.cumsum(gaps)
        if spec.load is not None:
            assert spec.gpus is not None
            span = float(np.sum(gpus * dur)) / (spec.gpus * spec.load)
            t = t * (span / t[-1]) if spec.jobs > 1 and t[-1] > 0 else t * 0.0
        else:
            assert spec.rate_per_h is not None
            t = t * 3600.0 / spec.rate_per_h
    else:
        assert spec.span_s is not None
        if spec.rate_per_h is not None:
            n = int(rng.poisson(spec.rate_per_h * spec.span_s / 3600.0))
            gpus, dur = _draw_sizes_durations(spec, rng, n, cat)
            t = np.sort(rng.uniform(0.0, spec.span_s, n))
        else:
            assert spec.gpus is not None and spec.load is not None
            need = spec.load * spec.gpus * spec.span_s
            gpus, dur = _draw_sizes_durations(spec, rng, 64, cat)
            if need > 100 * MAX_TRACE_JOBS * float(np.mean(gpus * dur)):  # far beyond the limit: no need to draw up to it
                _too_many(spec)
            while float(np.sum(gpus * dur)) < need:
                if len(gpus) >= MAX_TRACE_JOBS:
                    _too_many(spec)
                g2, d2 = _draw_sizes_durations(spec, rng, min(max(64, len(gpus)), MAX_TRACE_JOBS - len(gpus)), cat)
                gpus, dur = np.concatenate([gpus, g2]), np.concatenate([dur, d2])
            cum = np.cumsum(gpus * dur)
            n = int(np.searchsorted(cum, need)) + 1  # the job that crosses the need, or the one before
            if n > 1 and need - cum[n - 2] < cum[n - 1] - need:
                n -= 1
            gpus, dur = gpus[:n], dur[:n]
            t = np.sort(rng.uniform(0.0, spec.span_s, n))
            if n > 1:  # the arrival span is the time span (offered_load measures it first to last)
                t = (t - t[0]) * (spec.span_s / (t[-1] - t[0]))
        if len(t):
            t = t - t[0]
    if len(t) and not float(np.max(t)) <= MAX_DURATION_S:  # as a trace file's arrivals (csv_rows.drop_and_rebase); NaN too
        field, value = ("load", spec.load) if spec.load is not None else ("rate_per_h", spec.rate_per_h)
        raise InputError(field, value, f"spreads the arrivals of {len(t):,} jobs over more than {MAX_DURATION_S:.0e} seconds (31.7 "
                                       "million years), beyond what the simulator computes with")
    n = len(t)
    models = list(cat.sample_models(rng, n, spec.mix)) if n else []
    tenants = [f"t{i}" for i in rng.integers(0, spec.tenants, n)] if spec.tenants else [""] * n
    cols = {"job_id": [f"{spec.name}-{i}" for i in range(n)], "submit_s": np.round(t, 3), "duration_s": dur,
            "gpus": gpus, "model": models, "tenant": tenants}
    return Trace.from_columns(f"synthetic-{spec.name}", cols)


def _too_many(spec: SyntheticSpec) -> None:
    raise InputError("span_s", spec.span_s, f"with an offered load of {spec.load:g} on {spec.gpus:,} GPUs asks for more than "
                                            f"{MAX_TRACE_JOBS:,} jobs, the most a trace has")


_PAIRS = (("jobs", "span_s"), ("rate_per_h", "load"))


def resolve_spec(preset: str | SyntheticSpec = "parametric", **overrides: Any) -> SyntheticSpec:
    """The preset's spec with ``overrides`` applied and validated."""
    if isinstance(preset, SyntheticSpec):
        base = preset
    elif preset in PRESETS:
        base = PRESETS[preset]
    else:
        raise InputError("preset", preset, f"unknown synthetic workload; known: {sorted(PRESETS)}")
    known = {f.name for f in fields(SyntheticSpec)}
    for k in overrides:
        if k not in known:
            raise InputError(k, overrides[k], f"is not a synthetic-workload setting; known: {sorted(known - {'name'})}")
    clear: dict[str, Any] = {}
    for a, b in _PAIRS:
        if a in overrides and overrides[a] is not None and b not in overrides:
            clear[b] = None
        if b in overrides and overrides[b] is not None and a not in overrides:
            clear[a] = None
    quantiles = ("median_s", "p90_s", "p99_s")
    if any(q in overrides for q in quantiles) or overrides.get("duration") not in (None, "lognormal"):
        clear.update(dict.fromkeys(quantiles))  # the quantiles are one setting: given ones replace all
        given = {q: overrides[q] for q in quantiles if overrides.get(q) is not None}
        if given and (overrides.get("duration") or base.duration) == "lognormal" and not ("median_s" in given and len(given) > 1):
            had = ", ".join(f"{q} {getattr(base, q):g}" for q in quantiles if getattr(base, q) is not None) or "none"
            raise InputError(next(iter(given)), next(iter(given.values())),
                             "the duration quantiles are one setting: give median_s (--median) with p90_s (--p90) and/or "
                             f"p99_s (--p99); those given replace all of the preset's ({had})")
    return replace(base, **{**clear, **overrides})


_FLOATS = {"span_s", "rate_per_h", "load", "median_s", "p90_s", "p99_s", "max_duration_s", "gang_share"}
_INTS = {"jobs", "gpus", "node_gpus", "source_min_gpus", "tenants", "seed"}


def parse_spec(text: str, *, seed: int | None = None, gpus: int | None = None) -> SyntheticSpec:
    """``PRESET[:k=v,...]`` (the ``synthetic:`` trace argument without its prefix) -> spec.

    Values: numbers for numeric fields (durations also as ``90m``, ``45h``, ``7d``);
    ``sizes=1:0.5/8:0.5`` (``gpus:share`` pairs separated by ``/``) or a name;
    ``mix=image:0.2/language:0.8``; ``source=PATH``. ``seed`` is used unless the text sets one;
    ``gpus`` (the cluster's GPUs) where an offered load needs a GPU count that neither the text
    nor the preset gives.
    """
    name, _, rest = text.partition(":")
    over: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, val = part.partition("=")
        key, val = key.strip(), val.strip()
        if not eq or not key:
            raise InputError("synthetic", part, "settings must be KEY=VALUE pairs separated by commas")
        if key in over:  # the later value silently replaced the earlier one
            raise InputError("synthetic", text, f"sets {key} twice: give each setting once")
        try:
            if key in _INTS:
                over[key] = whole_number(val)
            elif key in {"span_s", "median_s", "p90_s", "p99_s", "max_duration_s"}:
                over[key] = parse_duration(val, key)
            elif key in _FLOATS:
                over[key] = float(val)
            elif key in ("sizes", "mix"):
                if ":" in val:
                    pairs = [p.split(":", 1) for p in val.split("/")]
                    over[key] = {(int(a) if key == "sizes" else a.strip()): float(b) for a, b in pairs}
                else:
                    over[key] = val if key == "sizes" else {val: 1.0}
            else:
                over[key] = val
        except ValueError:
            raise InputError(key, val, "is not a valid value for this setting") from None
        if key in ("sizes", "mix") and ":" in val and len(over[key]) <= val.count("/"):  # a later share replaced an earlier one
            raise InputError(key, val, "gives a name twice: name each once")
    if seed is not None and "seed" not in over:
        over["seed"] = seed
    if gpus is not None and "gpus" not in over:
        try:
            return resolve_spec(name, **over)
        except InputError as e:
            if e.field != "gpus":
                raise
            over["gpus"] = gpus  # an offered load on the cluster the replay runs on
    return resolve_spec(name, **over)



def describe(trace: Trace, gpus: int | None = None, node_gpus: int = 8) -> str:
    """One line: jobs, arrival span, offered load on ``gpus`` GPUs (else the average GPUs
    asked for), and the share of jobs per size (per bucket when there are many sizes)."""

    n = len(trace)
    if n == 0:
        return f"{trace.name}: 0 jobs"
    span = float(trace.submit_s[-1] - trace.submit_s[0])
    if span > 0:
        busy = float(np.sum(trace.gpus * trace.duration_s)) / span
        load = f"offered load {offered_load(trace, gpus):.3g} on {gpus} GPUs" if gpus else f"{busy:.4g} GPUs asked for on average"
    else:
        load = "all arriving at once" if n > 1 else "one arrival"
    sizes = np.unique(trace.gpus)
    if len(sizes) <= 6:
        buckets = [(int(g), int(g)) for g in sizes]
    else:
        buckets = [(1, 1), (2, node_gpus - 1), (node_gpus, node_gpus), (node_gpus + 1, 4 * node_gpus),
                   (4 * node_gpus + 1, 8 * node_gpus), (8 * node_gpus + 1, int(sizes.max()))]
    parts = []
    for lo, hi in buckets:
        share = float(np.mean((trace.gpus >= lo) & (trace.gpus <= hi)))
        if share > 0:
            parts.append(f"{lo if lo == hi else f'{lo}-{hi}'}: {100 * share:.1f}%")
    gang = float(np.mean(trace.gpus > node_gpus))
    return (f"{trace.name}: {n} jobs over {_human(span)}, {load}; GPUs {', '.join(parts)}; "
            f"multi-node gangs (> {node_gpus} GPUs) {100 * gang:.1f}%")


def _human(seconds: float) -> str:
    for unit, s in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= s:
            return f"{seconds / s:.3g} {unit}"
    return f"{seconds:.3g} s"
