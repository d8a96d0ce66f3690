"""The MAIFS-style attention policy: jobs and nodes as agents sharing state through attention.

Each job is an agent; each node a resource agent. Their tokens go through stacked layers of
job self-attention, node self-attention and job <-> node cross-attention (pre-norm transformer
blocks, no positional encodings, so the network is permutation-equivariant in jobs and nodes).
Three heads read the final tokens:

- **admit** ``(B, J)``: a logit for "run this round" (also the decoding order: most confident first);
- **node** ``(B, J, N)``: a logit per (job, node): a scaled dot product of job queries and node
  keys plus per-job learned coefficients on the pair features (speed on the node's type, share of
  the job's GPUs already there); ``-inf``-like where the type is not allowed or the node is padding;
- **point** ``(B, J, P)``: a logit per grid point of the job's profile;
- **fit** ``(B, J)``: a per-job coefficient of the dynamic best-fit / worst-fit term that
  decoding adds to node logits as capacity is used (the learned coordination term).

:func:`collate` pads a list of :class:`~optsched.learned.features.RoundFeatures` into a
:class:`Batch` with masks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from optsched.learned.features import JOB_FEATURES, NODE_FEATURES, POINT_FEATURES, RoundFeatures

__all__ = ["NEG", "Batch", "PolicyNet", "PolicyOutput", "collate"]

#: the logit given to impossible choices (finite, so fully masked rows stay NaN-free)
NEG = -1e9


@dataclass
class Batch:
    """Padded tensors of several rounds; masks are ``True`` on real entries."""

    job: torch.Tensor  # (B, J, JOB_FEATURES)
    job_mask: torch.Tensor  # (B, J)
    point: torch.Tensor  # (B, J, P, POINT_FEATURES)
    point_mask: torch.Tensor  # (B, J, P)
    point_ok: torch.Tensor  # (B, J, P) allowed points (fairness)
    node: torch.Tensor  # (B, N, NODE_FEATURES)
    node_mask: torch.Tensor  # (B, N)
    speed: torch.Tensor  # (B, J, N)
    placed: torch.Tensor  # (B, J, N)

    def to(self, device: torch.device | str) -> Batch:
        return Batch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})


def collate(feats: list[RoundFeatures], device: torch.device | str = "cpu") -> Batch:
    """Pad rounds to the largest job, node and grid-point counts of the list."""
    B = len(feats)
    J = max(max(f.n_jobs for f in feats), 1)
    N = max(max(f.n_nodes for f in feats), 1)
    P = max(max(f.point.shape[1] for f in feats), 1)
    job = np.zeros((B, J, JOB_FEATURES), np.float32)
    job_mask = np.zeros((B, J), bool)
    point = np.zeros((B, J, P, POINT_FEATURES), np.float32)
    point_mask = np.zeros((B, J, P), bool)
    point_ok = np.zeros((B, J, P), bool)
    node = np.zeros((B, N, NODE_FEATURES), np.float32)
    node_mask = np.zeros((B, N), bool)
    speed = np.zeros((B, J, N), np.float32)
    placed = np.zeros((B, J, N), np.float32)
    for b, f in enumerate(feats):
        nj, nn_, npt = f.n_jobs, f.n_nodes, f.point.shape[1]
        job[b, :nj] = f.job
        job_mask[b, :nj] = True
        point[b, :nj, :npt] = f.point
        point_mask[b, :nj, :npt] = f.point_mask
        point_ok[b, :nj, :npt] = f.point_ok & f.point_mask
        node[b, :nn_] = f.node
        node_mask[b, :nn_] = True
        speed[b, :nj, :nn_] = f.speed
        placed[b, :nj, :nn_] = f.placed
    t = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
    return Batch(t(job), t(job_mask), t(point), t(point_mask), t(point_ok), t(node), t(node_mask), t(speed), t(placed))


@dataclass
class PolicyOutput:
    admit: torch.Tensor  # (B, J)
    node: torch.Tensor  # (B, J, N), NEG where impossible
    point: torch.Tensor  # (B, J, P), NEG where impossible
    fit: torch.Tensor  # (B, J)


class _Block(nn.Module):
    """Pre-norm multi-head attention of queries ``x`` over keys ``y``, then a feed-forward layer."""

    def __init__(self, d: int, heads: int, ff: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm_q = nn.LayerNorm(d)
        self.norm_k = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * d)
        self.out = nn.Linear(d, d)
        self.norm_ff = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, ff * d), nn.ReLU(), nn.Linear(ff * d, d))

    def forward(self, x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """``bias`` is an additive attention bias broadcastable to ``(B, heads, Lq, Lk)``."""
        B, Lq, d = x.shape
        Lk = y.shape[1]
        h = self.heads
        q = self.q(self.norm_q(x)).view(B, Lq, h, d // h).transpose(1, 2)
        k, v = self.kv(self.norm_k(y)).view(B, Lk, 2, h, d // h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        x = x + self.out(a.transpose(1, 2).reshape(B, Lq, d))
        return x + self.ff(self.norm_ff(x))


class PolicyNet(nn.Module):
    """Jobs x nodes attention policy (see the module docstring). ``config`` rebuilds it."""

    def __init__(self, d_model: int = 64, heads: int = 4, layers: int = 2, ff: int = 2, d_point: int = 32) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model={d_model} must be a multiple of heads={heads}")
        self.config: dict[str, Any] = dict(d_model=d_model, heads=heads, layers=layers, ff=ff, d_point=d_point)
        d = d_model
        self.point_enc = nn.Sequential(nn.Linear(POINT_FEATURES, d_point), nn.ReLU(), nn.Linear(d_point, d_point))
        self.job_in = nn.Sequential(nn.Linear(JOB_FEATURES + 2 * d_point, d), nn.ReLU(), nn.Linear(d, d))
        self.node_in = nn.Sequential(nn.Linear(NODE_FEATURES, d), nn.ReLU(), nn.Linear(d, d))
        self.job_self = nn.ModuleList(_Block(d, heads, ff) for _ in range(layers))
        self.node_self = nn.ModuleList(_Block(d, heads, ff) for _ in range(layers))
        self.job_cross = nn.ModuleList(_Block(d, heads, ff) for _ in range(layers))
        self.node_cross = nn.ModuleList(_Block(d, heads, ff) for _ in range(layers))
        # pair features as attention biases in the cross blocks: speed, placed (one weight each per layer)
        self.pair_bias = nn.Parameter(torch.zeros(layers, 2))
        self.final = nn.LayerNorm(d)
        self.admit = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 1))
        self.node_q = nn.Linear(d, d)
        self.node_k = nn.Linear(d, d)
        self.node_final = nn.LayerNorm(d)
        self.coef = nn.Linear(d, 3)  # per-job weights of speed, placed, fit
        self.point_q = nn.Linear(d, d_point)
        self.point_b = nn.Linear(d_point, 1)

    def forward(self, batch: Batch) -> PolicyOutput:
        jm, nm, pm = batch.job_mask, batch.node_mask, batch.point_mask
        B, J, P, _ = batch.point.shape
        N = batch.node.shape[1]
        pe = self.point_enc(batch.point)  # (B, J, P, dp)
        pmf = pm.unsqueeze(-1).to(pe.dtype)
        mean = (pe * pmf).sum(2) / pmf.sum(2).clamp(min=1.0)
        mx = pe.masked_fill(~pm.unsqueeze(-1), NEG).amax(2).masked_fill(~pm.any(2, keepdim=True), 0.0)
        hj = self.job_in(torch.cat([batch.job, mean, mx], dim=-1))
        hn = self.node_in(batch.node)

        zero = torch.zeros((), dtype=hj.dtype, device=hj.device)
        neg = torch.full((), NEG, dtype=hj.dtype, device=hj.device)
        jj = torch.where(jm[:, None, None, :], zero, neg)  # (B, 1, 1, J) key mask over jobs
        nn_ = torch.where(nm[:, None, None, :], zero, neg)  # (B, 1, 1, N)
        allowed = (batch.speed > 0) & nm[:, None, :] & jm[:, :, None]  # (B, J, N)
        # a job allowed nowhere attends to every real node rather than to nothing
        cross_mask = torch.where(allowed.any(-1, keepdim=True), allowed, nm[:, None, :] & jm[:, :, None])
        jn = torch.where(cross_mask, zero, neg)[:, None]  # (B, 1, J, N)
        nj = jn.transpose(2, 3)  # (B, 1, N, J); nodes attend to the jobs allowed on them
        nj = torch.where((nj > NEG / 2).any(-1, keepdim=True), nj, jj.expand(B, 1, N, J))
        for i in range(len(self.job_self)):
            w = self.pair_bias[i]
            pair = (w[0] * batch.speed + w[1] * batch.placed)[:, None]
            hj = self.job_self[i](hj, hj, jj)
            hn = self.node_self[i](hn, hn, nn_)
            hj_new = self.job_cross[i](hj, hn, jn + pair)
            hn = self.node_cross[i](hn, hj, nj + pair.transpose(2, 3))
            hj = hj_new
        hj = self.final(hj)
        hn = self.node_final(hn)

        admit = self.admit(hj).squeeze(-1)
        coef = self.coef(hj)
        d = hj.shape[-1]
        node = torch.einsum("bjd,bnd->bjn", self.node_q(hj), self.node_k(hn)) / math.sqrt(d)
        node = node + coef[..., 0:1] * batch.speed + coef[..., 1:2] * batch.placed
        node = node.masked_fill(~allowed, NEG)
        point = torch.einsum("bjd,bjpd->bjp", self.point_q(hj), pe) + self.point_b(pe).squeeze(-1)
        point = point.masked_fill(~(batch.point_ok & jm[..., None]), NEG)
        return PolicyOutput(admit=admit, node=node, point=point, fit=coef[..., 2])

    # --- persistence --------------------------------------------------------------------------

    def checkpoint(self, **meta: Any) -> dict[str, Any]:
        return {"format": "optsched-maifs-1", "config": self.config, "state_dict": self.state_dict(), "meta": meta}

    @classmethod
    def from_checkpoint(cls, ckpt: dict[str, Any]) -> PolicyNet:
        if not isinstance(ckpt, dict) or ckpt.get("format") != "optsched-maifs-1":
            raise ValueError("not an optsched MAIFS checkpoint (format 'optsched-maifs-1' expected)")
        net = cls(**ckpt["config"])
        net.load_state_dict(ckpt["state_dict"])
        return net
