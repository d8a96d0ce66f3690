"""Featurisation of a round for the learned policy: job, grid-point, node and pair features.

Everything is computed with numpy, without positional information, so that permuting jobs or
nodes permutes the features (the policy is permutation-equivariant by construction). Scale-free
quantities are used throughout (ratios to cluster references), so one network serves rounds of
any size. :func:`collate` pads several rounds into one batch with boolean masks (``True`` =
real entry).

Features (see docs/learned.md for the rationale of each):

- job: gang size, weight, spread factor, running state, restart share of the round, demand,
  best/worst throughput ratios on the grid, GPU-type speeds summary, round load;
- grid point (per job, per profile point): per-GPU cores and memory relative to the cluster's
  per-GPU share and to the job's demand, throughput relative to demand throughput, whether the
  point is allowed (fair rounds), whether it is the demand;
- node: GPUs, cores and memory (absolute scale and per GPU), the GPU type's popularity and
  mean speed among jobs, the share of its GPUs held by running jobs, round load;
- pair (job, node): the job's speed on the node's type (0: not allowed) and the share of the
  job's GPUs it holds on that node now (running placement).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from optsched.model import Instance

#: the logit the policy gives impossible choices (finite, so fully masked rows stay NaN-free); here,
#: not in the policy module, so that decoding and the repair need no torch
NEG = -1e9

__all__ = ["JOB_FEATURES", "NEG", "NODE_FEATURES", "POINT_FEATURES", "RoundFeatures", "featurise"]

JOB_FEATURES = 16
POINT_FEATURES = 9
NODE_FEATURES = 12


@dataclass
class RoundFeatures:
    """The numeric view of one round, plus what decoding needs to map indices back to ids.

    Arrays: ``job`` (J, JOB_FEATURES), ``point`` (J, P, POINT_FEATURES), ``point_mask`` (J, P),
    ``node`` (N, NODE_FEATURES), ``speed`` (J, N) (0 where the type is not allowed),
    ``placed`` (J, N) (share of the job's GPUs held there now).

    Node classes: nodes with identical features (same GPU type, capacities, running share, ...)
    are interchangeable for the network, so it sees one token per class: ``node_class`` (N,)
    maps nodes to classes, ``cls`` (K, NODE_FEATURES), ``cls_count`` (K,) and ``cls_speed``
    (J, K). Attention over class tokens with a ``log(count)`` bias is exactly attention over
    the nodes, at a cost in classes rather than nodes (a 1,024-node cluster has a few dozen).

    Raw integers for decoding:
    ``point_c``/``point_m`` (J, P) grid values, ``point_value`` (J, P) the job's worth at the point
    on a speed-1 GPU, one node, not moved (``weight * tp / tp_demand``), ``point_ok`` (J, P)
    (on the grid, allowed by fairness and not dominated by another allowed point), ``gpus`` (J,), node capacities ``node_gpus``,
    ``node_cpus``, ``node_mem`` (N,), ``node_type`` (N,) type indices.
    """

    job: np.ndarray
    point: np.ndarray
    point_mask: np.ndarray
    node: np.ndarray
    speed: np.ndarray
    placed: np.ndarray
    point_c: np.ndarray
    point_m: np.ndarray
    point_value: np.ndarray
    point_ok: np.ndarray
    gpus: np.ndarray
    node_gpus: np.ndarray
    node_cpus: np.ndarray
    node_mem: np.ndarray
    node_type: np.ndarray
    node_class: np.ndarray
    cls: np.ndarray
    cls_count: np.ndarray
    cls_speed: np.ndarray

    @property
    def n_classes(self) -> int:
        return self.cls.shape[0]

    @property
    def n_jobs(self) -> int:
        return self.job.shape[0]

    @property
    def n_nodes(self) -> int:
        return self.node.shape[0]


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else 0.0


def _undominated(c: np.ndarray, m: np.ndarray, tp: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Points no other admissible point dominates (no more cores, no more memory, no less
    throughput, not identical). Dropping dominated points keeps the optimum (the exact model
    does the same), and the leftover pass can still reach any better point."""
    le = (c[None, :] <= c[:, None]) & (m[None, :] <= m[:, None]) & (tp[None, :] >= tp[:, None])
    same = (c[None, :] == c[:, None]) & (m[None, :] == m[:, None])
    dominated = (le & ~same & ok[None, :]).any(axis=1)
    return ~dominated


def _point_block(
    prof: Any, demand: tuple[int, int], demand_tp: float, fair: bool, ref_c: float, ref_m: float
) -> tuple[np.ndarray, ...]:
    """Grid values, relative throughput, allowed mask and point features of one profile."""
    c = np.repeat(np.asarray(prof.cpus_per_gpu, dtype=np.int64), len(prof.mem_per_gpu_gb))
    m = np.tile(np.asarray(prof.mem_per_gpu_gb, dtype=np.int64), len(prof.cpus_per_gpu))
    tp = np.asarray(prof.throughput, dtype=np.float64).ravel()
    rel = tp / demand_tp
    ok = tp >= demand_tp if fair else np.ones(len(tp), dtype=bool)  # as the checker compares (fair_floor)
    ok &= _undominated(c, m, tp, ok)
    dc, dm = demand
    feat = np.stack(
        [
            c / ref_c,
            m / ref_m,
            np.log1p(c) - math.log1p(dc),
            np.log1p(m) - math.log1p(dm),
            rel,
            np.log(rel),
            ok.astype(np.float64),
            ((c == dc) & (m == dm)).astype(np.float64),
            rel / np.maximum(c / ref_c + m / ref_m, 1e-3),  # worth per unit of resources
        ],
        axis=1,
    )
    return c, m, rel, ok, feat


def featurise(instance: Instance) -> RoundFeatures:
    """Features of ``instance`` (no padding; see :func:`optsched.learned.policy.collate`)."""
    jobs, nodes = instance.jobs, instance.nodes
    J, N = len(jobs), len(nodes)
    types = instance.gpu_types
    type_idx = {t: i for i, t in enumerate(types)}
    node_type = np.array([type_idx[n.gpu_type] for n in nodes], dtype=np.int64)
    node_gpus = np.array([n.gpus for n in nodes], dtype=np.int64)
    node_cpus = np.array([n.cpus for n in nodes], dtype=np.int64)
    node_mem = np.array([n.mem_gb for n in nodes], dtype=np.int64)
    total_gpus = max(int(node_gpus.sum()), 1)
    # cluster references: per-GPU share of cores and memory, largest node
    ref_c = max(_ratio(float(node_cpus.sum()), total_gpus), 1e-3)
    ref_m = max(_ratio(float(node_mem.sum()), total_gpus), 1e-3)
    max_gpus = max(int(node_gpus.max()) if N else 1, 1)
    gpus = np.array([j.gpus for j in jobs], dtype=np.int64)
    load = float(gpus.sum()) / total_gpus
    mean_weight = float(np.mean([j.weight for j in jobs])) if jobs else 1.0

    # job x type speeds (0 = not allowed)
    speed_t = np.zeros((J, max(len(types), 1)), dtype=np.float64)
    for i, j in enumerate(jobs):
        if j.gpu_speed is None:
            speed_t[i, :] = 1.0
            continue
        for t, s in j.gpu_speed.items():
            if t in type_idx:
                speed_t[i, type_idx[t]] = s
    speed = speed_t[:, node_type] if N else np.zeros((J, 0))
    placed = np.zeros((J, N), dtype=np.float64)
    for i, j in enumerate(jobs):
        for nid, k in (j.placement or {}).items():
            placed[i, instance.node_idx(nid)] = k / j.gpus

    P = max((len(j.profile.cpus_per_gpu) * len(j.profile.mem_per_gpu_gb) for j in jobs), default=1)
    point = np.zeros((J, P, POINT_FEATURES), dtype=np.float32)
    point_mask = np.zeros((J, P), dtype=bool)
    point_c = np.zeros((J, P), dtype=np.int64)
    point_m = np.zeros((J, P), dtype=np.int64)
    point_value = np.zeros((J, P), dtype=np.float64)
    point_ok = np.zeros((J, P), dtype=bool)
    job = np.zeros((J, JOB_FEATURES), dtype=np.float32)
    fair = instance.round.fair
    duration = instance.round.duration_s
    # jobs of one model share a profile by value (not by object: every job parses its own), so
    # blocks are keyed by value (1,024 x 4,000 library round: 50 blocks instead of 4,000)
    blocks: dict[tuple[Any, tuple[int, int]], tuple[np.ndarray, ...]] = {}
    for i, j in enumerate(jobs):
        prof = j.profile
        key = (prof, j.demand)
        if key not in blocks:
            blocks[key] = _point_block(prof, j.demand, j.demand_throughput, fair, ref_c, ref_m)
        c, m, rel, ok, feat = blocks[key]
        k = len(c)
        point_c[i, :k], point_m[i, :k] = c, m
        point_value[i, :k] = j.weight * rel
        point_ok[i, :k] = ok
        point_mask[i, :k] = True
        point[i, :k] = feat
        dc, dm = j.demand
        allowed = speed_t[i] > 0
        job[i] = (
            math.log1p(j.gpus),
            j.gpus / max_gpus,
            math.log(j.weight),
            j.spread_factor,
            float(j.running),
            j.restart_s / duration,
            float(len(j.placement or {})),
            dc / ref_c,
            dm / ref_m,
            float(rel.max()),
            float(rel.min()),
            float(allowed.mean()),
            float(speed_t[i].max()),
            float(speed_t[i][allowed].mean()) if allowed.any() else 0.0,
            load,
            j.weight / mean_weight,
        )

    node = np.zeros((N, NODE_FEATURES), dtype=np.float32)
    if N:
        allow_frac = (speed_t > 0).mean(axis=0) if J else np.zeros(len(types))
        mean_speed = np.where((speed_t > 0).any(axis=0), speed_t.sum(axis=0) / np.maximum((speed_t > 0).sum(axis=0), 1), 0.0) if J else np.zeros(len(types))
        held = (placed * gpus[:, None]).sum(axis=0) if J else np.zeros(N)
        type_share = np.bincount(node_type, minlength=len(types)) / N
        racks = [n.rack for n in nodes]
        rack_count = {r: racks.count(r) for r in set(racks)} if len(set(racks)) < N else None
        safe_g = np.maximum(node_gpus, 1)
        node[:] = np.stack(
            [
                node_gpus / max_gpus,
                np.log1p(node_gpus),
                node_cpus / safe_g / ref_c,
                node_mem / safe_g / ref_m,
                np.log1p(node_cpus),
                np.log1p(node_mem),
                allow_frac[node_type],
                mean_speed[node_type],
                held / safe_g,
                type_share[node_type],
                np.array([(rack_count[r] if rack_count else 1) / N for r in racks]),
                np.full(N, load),
            ],
            axis=1,
        )
    if N:
        keyed = np.concatenate([node_type[:, None].astype(np.float32), node], axis=1)
        uniq, node_class, counts = np.unique(keyed, axis=0, return_inverse=True, return_counts=True)
        node_class = node_class.reshape(-1)
        cls = uniq[:, 1:].astype(np.float32)
        cls_type = uniq[:, 0].astype(np.int64)
    else:
        node_class = np.zeros(0, dtype=np.int64)
        cls = np.zeros((0, NODE_FEATURES), dtype=np.float32)
        counts = np.zeros(0, dtype=np.int64)
        cls_type = np.zeros(0, dtype=np.int64)
    return RoundFeatures(
        job=job,
        point=point,
        point_mask=point_mask,
        node=node,
        speed=speed.astype(np.float32),
        placed=placed.astype(np.float32),
        point_c=point_c,
        point_m=point_m,
        point_value=point_value,
        point_ok=point_ok,
        gpus=gpus,
        node_gpus=node_gpus,
        node_cpus=node_cpus,
        node_mem=node_mem,
        node_type=node_type,
        node_class=node_class.astype(np.int64),
        cls=cls,
        cls_count=counts.astype(np.int64),
        cls_speed=speed_t[:, cls_type].astype(np.float32) if J else np.zeros((0, len(cls_type)), np.float32),
    )
