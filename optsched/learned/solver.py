"""``LearnedSolver`` ("maifs"): the distilled attention policy as a solve method.

It featurises the round, runs the network once, decodes greedily with capacity masks (see
:mod:`optsched.learned.decode`), on rounds larger than the training rounds repairs the decode
with prices (:mod:`optsched.learned.repair`), optionally samples more schedules within the time
limit, keeps the best, and returns a feasible schedule (status FEASIBLE, no bound). The network runs
in numpy (:mod:`optsched.learned.inference`): solving needs no torch. Weights load once per process
and path (cached); the default is the shipped :data:`~optsched.learned.inference.DEFAULT_WEIGHTS`.
"""

from __future__ import annotations

import pickle
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from optsched.capacity import FreeCapacity
from optsched.errors import InputError
from optsched.fields import file_path
from optsched.heuristics.fungible_greedy import fungible_greedy_schedule
from optsched.learned.decode import PlacementState, decode, decode_state, state_schedule
from optsched.learned.features import featurise
from optsched.learned.inference import DEFAULT_WEIGHTS, INFERENCE_THREADS, NumpyPolicy, load_npz
from optsched.learned.moves import polish
from optsched.learned.options import MaifsOptions
from optsched.learned.repair import FORCED_CELLS, first_decodes, improve, state_value
from optsched.model import Instance
from optsched.result import Result, Status
from optsched.round_policies import policy_families
from optsched.schedule import Schedule
from optsched.trajectory import current, recorded
from optsched.values import schedule_value

__all__ = ["DEFAULT_WEIGHTS", "INFERENCE_THREADS", "LearnedSolver", "load_policy", "policy_schedule"]

#: sampled decodes by default on rounds of at most SAMPLE_CELLS nodes x jobs (best of greedy and
#: these; on unseen 4-8 node rounds best-of-16 cut the median gap from ~4.7 % to ~0.4 %)
DEFAULT_SAMPLES = 16
SAMPLE_CELLS = 4096

#: what the policy's features cost per cell (node x job) to build and score: seconds, bytes
#: (measured on 2 cores: 45.7 s and 15.4 GB at 12,500 x 50,000 nodes x jobs, 5.1 s and 1.8 GB
#: at 4,096 x 16,000; `benchmarks/bench_scale.py`)
FEATURE_S_PER_CELL = 1e-7
FEATURE_BYTES_PER_CELL = 25
#: the most memory the policy's features may take, and the share of the time limit they may be
#: expected to take: beyond either, the policy does not run and the solver answers with
#: fungible-greedy's schedule (``Result.stats["policy_skipped"]`` says why; ``partitioned``, which
#: ``method="auto"`` runs on such rounds, is the method for them)
FEATURE_MEMORY = 4 * 2**30
FEATURE_TIME_SHARE = 0.75


@lru_cache(maxsize=8)
def _load(path: str, mtime: float) -> NumpyPolicy:
    if not path.endswith(".pt"):
        return load_npz(path)
    # a torch checkpoint of `optsched train` (ckpt-last.pt, best.pt): converted once, needs torch
    from optsched.learned.policy import PolicyNet, torch  # lazy: torch is the train extra

    try:
        return PolicyNet.from_checkpoint(torch.load(path, map_location="cpu", weights_only=True)).to_numpy()
    except (ValueError, KeyError, RuntimeError, OSError, pickle.UnpicklingError) as e:
        raise InputError("weights", path, f"is not a usable optsched MAIFS checkpoint: {e}") from None


def load_policy(weights: str | Path | None = None) -> NumpyPolicy:
    """The policy stored at ``weights`` (default: the shipped small model), loaded once per process
    and file version.

    A weights file (``.npz``, written by :func:`optsched.learned.policy.export_weights`) loads
    with numpy alone; a torch checkpoint (``.pt``) needs the ``train`` extra."""
    p = file_path(weights, "weights") if weights is not None else DEFAULT_WEIGHTS
    if not p.is_file():
        raise InputError("weights", str(p), "no such file (train weights with `optsched train`)")
    return _load(str(p.resolve()), p.stat().st_mtime)


def _too_large(cells: int, time_limit: float) -> str | None:
    """Why the policy does not run on a round of ``cells`` nodes x jobs within ``time_limit``
    (:data:`FEATURE_MEMORY`, :data:`FEATURE_TIME_SHARE`), or ``None`` when it does."""
    if cells * FEATURE_BYTES_PER_CELL > FEATURE_MEMORY:
        return f"its features would take about {cells * FEATURE_BYTES_PER_CELL / 2**30:.0f} GB (at most {FEATURE_MEMORY / 2**30:.0f})"
    if cells * FEATURE_S_PER_CELL > FEATURE_TIME_SHARE * time_limit:
        return (f"its features would take about {cells * FEATURE_S_PER_CELL:.1f} s, more than {FEATURE_TIME_SHARE:.0%} "
                f"of the {time_limit:g} s limit")
    return None


def _with_hint(instance: Instance, hint: Schedule | None, best: Schedule, best_val: float, source: str) -> tuple[Schedule, float, str]:
    """``(schedule, worth, source)``: ``hint`` (source ``"hint"``, recorded on the trajectory)
    where it is worth more than ``best``, else ``best`` as given."""
    if hint is not None and (hv := schedule_value(instance, hint)) > best_val + 1e-12:
        current().record(hv)
        return hint, hv, "hint"
    return best, best_val, source


def _greedy_instead(instance: Instance, hint: Schedule | None, why: str, start: float) -> Result:
    """The answer where the policy does not run: fungible-greedy's schedule, or ``hint`` where it
    is worth more."""
    greedy = fungible_greedy_schedule(instance)
    greedy_val = schedule_value(instance, greedy)
    current().record(greedy_val)
    best, best_val, source = _with_hint(instance, hint, greedy, greedy_val, "fungible-greedy")
    stats = {"policy_skipped": f"{instance.size[0]} x {instance.size[1]} round: {why}; partitioned (method='auto' here) "
                               "splits such rounds", "source": source, "greedy_objective": greedy_val}
    return Result(best, Status.FEASIBLE, best_val, None, "maifs", "learned", time.perf_counter() - start, stats)


def policy_schedule(
    net: NumpyPolicy, instance: Instance, *, seed: int | None = None, temperature: float = 1.0
) -> Schedule:
    """The policy's greedy (``seed=None``) or sampled schedule for one round."""
    feats = featurise(instance)
    rng = None if seed is None else np.random.default_rng(seed)
    return decode(instance, feats, net.scores(feats), rng=rng, temperature=temperature)


def _fixed_from(instance: Instance, feats: Any, hint: Schedule) -> dict[int, tuple[dict[int, int], int]]:
    """The decoder's ``fixed`` map (job index -> ({node index: GPUs}, point index)) of a hint's
    assignments whose grid point is an allowed point of the job (others are left to the decoder)."""
    out = {}
    free = FreeCapacity(feats.node_gpus, feats.node_cpus, feats.node_mem)
    for jid, a in hint.jobs.items():
        try:
            j = instance.job_idx(jid)
            nodes = {instance.node_idx(n): k for n, k in a.nodes.items()}
        except (KeyError, ValueError):
            continue
        hits = np.flatnonzero(feats.point_ok[j] & feats.point_mask[j] & (feats.point_c[j] == a.cpus_per_gpu) & (feats.point_m[j] == a.mem_per_gpu_gb))
        if not hits.size or sum(nodes.values()) != feats.gpus[j] or any(feats.speed[j, n] <= 0 for n in nodes):
            continue
        if free.fits(nodes, a.cpus_per_gpu, a.mem_per_gpu_gb):  # a hint that does not fit is not trusted
            free.reserve(nodes, a.cpus_per_gpu, a.mem_per_gpu_gb)
            out[j] = (nodes, int(hits[0]))
    return out


class LearnedSolver:
    """The learned policy as a solver. Options: ``weights`` (path), ``samples`` (extra sampled
    decodes within the time limit; default DEFAULT_SAMPLES on rounds of at most SAMPLE_CELLS
    nodes x jobs, else 0), ``temperature`` (default 1.0), ``threads`` (BLAS threads for the
    forward pass, default :data:`~optsched.learned.inference.INFERENCE_THREADS`), ``repair`` (the price-guided repair of
    :mod:`optsched.learned.repair` after the greedy decode, kept only when it is worth more;
    default on every round without contract-v2 policies: on small rounds from generators the policy
    never saw it cuts the p90 gap to the optimum several times over for about 5-10 ms,
    docs/results.md). With the repair on, a sample that beats the repaired decode is polished too
    (:func:`~optsched.learned.moves.polish`), and on rounds of at most
    :data:`~optsched.learned.repair.FORCED_CELLS` nodes x jobs the most valuable waiting gangs are
    each decoded first once (:func:`~optsched.learned.repair.first_decodes`). ``Result.stats["source"]``
    says which schedule won: ``policy``, ``policy+polish``, ``repair``, ``sample``, ``sample+polish``,
    ``gang first`` or ``hint``. Sampling is seeded by ``seed``, so the result is deterministic unless the time limit cuts the
    samples or the repair short. A feasible ``hint`` is kept when it is worth more, and the
    policy also decodes around it (its jobs fixed where the hint puts them at an allowed grid
    point; the simulator's hint is the previous round's schedule, so its running jobs stay put),
    which replaces the plain decode when worth more."""

    @recorded
    def solve(
        self, instance: Instance, *, time_limit: float, seed: int, hint: Schedule | None = None, **options: Any
    ) -> Result:
        start = time.perf_counter()
        opts = MaifsOptions.from_mapping(options)
        n_nodes, n_jobs = instance.size
        samples = opts.samples if opts.samples is not None else DEFAULT_SAMPLES if n_nodes * n_jobs <= SAMPLE_CELLS else 0
        temperature, threads, repair = opts.temperature, opts.threads, opts.repair
        if repair is None:
            repair = not policy_families(instance)
        rec = current()  # the trajectory (optsched.trajectory): the policy's schedule, the repaired one, better samples
        skipped = _too_large(n_nodes * n_jobs, time_limit)
        if skipped is not None:
            return _greedy_instead(instance, hint, skipped, start)
        net = load_policy(opts.weights)
        t0 = time.perf_counter()
        feats = featurise(instance)
        scores = net.scores(feats, threads=threads)
        t1 = time.perf_counter()
        # keep a margin for building the Result; past the deadline the decoder stops placing jobs
        deadline = start + max(0.0, 0.95 * time_limit - 0.02)
        st = decode_state(instance, feats, scores, deadline=deadline)
        cut = time.perf_counter() > deadline
        stats: dict[str, Any] = {}
        hint_fixed = _fixed_from(instance, feats, hint) if hint is not None and not cut else None
        if hint_fixed:  # the policy also completes the hint around its jobs (e.g. the simulator's running jobs, unmoved)
            st_h = decode_state(instance, feats, scores, fixed=hint_fixed, deadline=deadline)
            cut = time.perf_counter() > deadline
            if not cut and state_value(instance, feats, st_h) > state_value(instance, feats, st) + 1e-12:
                st = st_h
                stats["hint_completed"] = True
        if cut:  # the decode stopped placing jobs at the deadline: place the rest greedily around them

            best = fungible_greedy_schedule(instance, fixed=state_schedule(instance, feats, st))
            best_val = greedy_val = schedule_value(instance, best)
            rec.record(best_val)
        else:
            t_dec = time.perf_counter()
            if repair:  # only the winner becomes a Schedule (objectives come from the states)
                won, best_val = improve(instance, feats, st, deadline=deadline, first_estimate=t_dec - t1, stats=stats)
                greedy_val = stats["repair_base_objective"]
                best = state_schedule(instance, feats, won if won is not None else st)
                rec.record(greedy_val, at=t_dec)  # the policy's schedule, decoded at t_dec
                rec.record(best_val)
            else:
                best = state_schedule(instance, feats, st)
                best_val = greedy_val = schedule_value(instance, best)
                rec.record(best_val)
        t2 = time.perf_counter()
        rng = np.random.default_rng(seed)
        done = 0
        per = t2 - t1
        sampled: PlacementState | None = None  # the best sample's state, where a sample is best
        for _ in range(samples):
            if time.perf_counter() + per > deadline:
                break
            s_st = decode_state(instance, feats, scores, rng=rng, temperature=temperature, deadline=deadline)
            v = state_value(instance, feats, s_st)
            done += 1
            if v > best_val + 1e-12:
                sampled, best_val = s_st, v
                rec.record(best_val)
        source = "repair" if stats.get("repair_used") else "policy"
        if source == "policy" and stats.get("repair_polished_objective", 0.0) > stats.get("repair_base_objective", 0.0) + 1e-9:
            source = "policy+polish"
        if sampled is not None:
            source = "sample"
            if repair and time.perf_counter() < deadline:  # the repair's local moves on the best sample too (they only raise its worth)
                polish(instance, feats, sampled, deadline=deadline)
                best_val = state_value(instance, feats, sampled)
                rec.record(best_val)
                source = "sample+polish"
            best = state_schedule(instance, feats, sampled)
        if repair and n_nodes * n_jobs <= FORCED_CELLS and not cut:
            placed = set(best.jobs)
            gangs = [j for j, job in enumerate(instance.jobs) if job.gpus > 1 and job.id not in placed]
            forced = first_decodes(instance, feats, scores, gangs, best_val, deadline=deadline)
            if forced is not None:
                best_val = state_value(instance, feats, forced)
                best = state_schedule(instance, feats, forced)
                rec.record(best_val)
                source = "gang first"
        best, best_val, source = _with_hint(instance, hint, best, best_val, source)
        stats = {
            "greedy_cut_by_deadline": cut,  # then completed by fungible-greedy
            "featurise_forward_s": t1 - t0,
            "decode_s": (t_dec - t1) if not cut else t2 - t1,
            "samples": done,
            "greedy_objective": greedy_val,
            "source": source,
            "weights": str(opts.weights or DEFAULT_WEIGHTS.name),
            **stats,
        }
        return Result(best, Status.FEASIBLE, best_val, None, "maifs", "learned", time.perf_counter() - start, stats)
