"""The MAIFS-style attention policy: jobs and nodes as agents sharing state through attention.

Each job is an agent; each node a resource agent. Their tokens go through stacked layers of
job self-attention, node self-attention and job <-> node cross-attention (pre-norm transformer
blocks, no positional encodings, so the network is permutation-equivariant in jobs and nodes).
Two exact-or-linear devices keep 4,000 jobs x 1,024 nodes cheap: identical nodes share one
*class* token whose attention weight is its node count (``log count`` bias: exactly attention
over the nodes), and job self-attention is induced-set attention (Set Transformer's ISAB: a
few learned inducing tokens summarise the jobs, and every job reads the summary), linear in jobs.
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
from pathlib import Path
from typing import Any

from optsched.extras import require_extra

torch = require_extra("torch", "train", "training the learned policy (inference needs no torch)")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from optsched.learned.features import JOB_FEATURES, NEG, NODE_FEATURES, POINT_FEATURES, RoundFeatures  # noqa: E402
from optsched.learned.inference import NumpyPolicy, collate_arrays, load_npz, save_npz  # noqa: E402

__all__ = ["NEG", "Batch", "PolicyNet", "PolicyOutput", "collate", "export_weights"]


@dataclass
class Batch:
    """Padded tensors of several rounds; masks are ``True`` on real entries.

    Nodes appear twice: as class tokens (``cls``: identical nodes share one token, with its
    ``cls_logcount`` as attention bias) for the network, and as nodes (``node_class``,
    ``node_mask``, ``placed``) for the per-node output.
    """

    job: torch.Tensor  # (B, J, JOB_FEATURES)
    job_mask: torch.Tensor  # (B, J)
    point: torch.Tensor  # (B, J, P, POINT_FEATURES)
    point_mask: torch.Tensor  # (B, J, P)
    point_ok: torch.Tensor  # (B, J, P) allowed points (fairness, dominance)
    cls: torch.Tensor  # (B, K, NODE_FEATURES)
    cls_mask: torch.Tensor  # (B, K)
    cls_logcount: torch.Tensor  # (B, K)
    cls_speed: torch.Tensor  # (B, J, K)
    node_class: torch.Tensor  # (B, N) long
    node_mask: torch.Tensor  # (B, N)
    placed: torch.Tensor  # (B, J, N)

    def to(self, device: torch.device | str) -> Batch:
        return Batch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})


def collate(feats: list[RoundFeatures], device: torch.device | str = "cpu") -> Batch:
    """Pad rounds to the largest job, class, node and grid-point counts of the list
    (:func:`optsched.learned.inference.collate_arrays`, as tensors on ``device``)."""
    a = collate_arrays(feats)
    return Batch(**{f.name: torch.from_numpy(a[f.name]).to(device) for f in fields(Batch)})


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

    def forward(self, x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """``bias`` is an additive attention bias broadcastable to ``(B, heads, Lq, Lk)``, or None."""
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

    def __init__(
        self, d_model: int = 64, heads: int = 4, layers: int = 2, ff: int = 2, d_point: int = 32, inducing: int = 16
    ) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model={d_model} must be a multiple of heads={heads}")
        self.config: dict[str, Any] = dict(
            d_model=d_model, heads=heads, layers=layers, ff=ff, d_point=d_point, inducing=inducing
        )
        d = d_model
        self.point_enc = nn.Sequential(nn.Linear(POINT_FEATURES, d_point), nn.ReLU(), nn.Linear(d_point, d_point))
        self.job_in = nn.Sequential(nn.Linear(JOB_FEATURES + 2 * d_point, d), nn.ReLU(), nn.Linear(d, d))
        self.node_in = nn.Sequential(nn.Linear(NODE_FEATURES, d), nn.ReLU(), nn.Linear(d, d))
        self.inducing = nn.Parameter(torch.randn(1, inducing, d) / math.sqrt(d))
        self.job_pool = nn.ModuleList(_Block(d, heads, ff) for _ in range(layers))
        self.job_self = nn.ModuleList(_Block(d, heads, ff) for _ in range(layers))
        self.node_self = nn.ModuleList(_Block(d, heads, ff) for _ in range(layers))
        self.job_cross = nn.ModuleList(_Block(d, heads, ff) for _ in range(layers))
        self.node_cross = nn.ModuleList(_Block(d, heads, ff) for _ in range(layers))
        # the job's speed on a class's GPU type as an attention bias in the cross blocks (per layer)
        self.pair_bias = nn.Parameter(torch.zeros(layers))
        self.final = nn.LayerNorm(d)
        self.admit = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 1))
        self.node_q = nn.Linear(d, d)
        self.node_k = nn.Linear(d, d)
        self.node_final = nn.LayerNorm(d)
        self.coef = nn.Linear(d, 3)  # per-job weights of speed, placed, fit
        self.point_q = nn.Linear(d, d_point)
        self.point_b = nn.Linear(d_point, 1)

    def forward(self, batch: Batch) -> PolicyOutput:
        jm, km, pm = batch.job_mask, batch.cls_mask, batch.point_mask
        B, J, P, _ = batch.point.shape
        N = batch.node_class.shape[1]
        pe = self.point_enc(batch.point)  # (B, J, P, dp)
        pmf = pm.unsqueeze(-1).to(pe.dtype)
        mean = (pe * pmf).sum(2) / pmf.sum(2).clamp(min=1.0)
        mx = pe.masked_fill(~pm.unsqueeze(-1), NEG).amax(2).masked_fill(~pm.any(2, keepdim=True), 0.0)
        hj = self.job_in(torch.cat([batch.job, mean, mx], dim=-1))
        hk = self.node_in(batch.cls)

        neg = torch.full((), NEG, dtype=hj.dtype, device=hj.device)
        zero = torch.zeros((), dtype=hj.dtype, device=hj.device)
        jj = torch.where(jm, zero, neg)[:, None, None, :]  # (B, 1, 1, J) key mask over jobs
        logc = torch.where(km, batch.cls_logcount, neg)  # (B, K): a class weighs as its nodes
        kk = logc[:, None, None, :]  # (B, 1, 1, K)
        allowed = (batch.cls_speed > 0) & km[:, None, :] & jm[:, :, None]  # (B, J, K)
        # a job allowed nowhere attends to every real class, a class no job may use to every job
        jk_ok = torch.where(allowed.any(-1, keepdim=True), allowed, km[:, None, :] & jm[:, :, None])
        kj_ok = allowed.transpose(1, 2)
        kj_ok = torch.where(kj_ok.any(-1, keepdim=True), kj_ok, jm[:, None, :] & km[:, :, None])
        jk = torch.where(jk_ok, logc[:, None, :], neg)[:, None]  # (B, 1, J, K)
        kj = torch.where(kj_ok, zero, neg)[:, None]  # (B, 1, K, J)
        speed_t = batch.cls_speed.transpose(1, 2)[:, None]
        inducing = self.inducing.expand(B, -1, -1)
        for i in range(len(self.job_self)):
            w = self.pair_bias[i]
            summary = self.job_pool[i](inducing, hj, jj)  # induced-set attention: O(J x m)
            hj = self.job_self[i](hj, summary, None)
            hk = self.node_self[i](hk, hk, kk)
            hj_new = self.job_cross[i](hj, hk, jk + w * batch.cls_speed[:, None])
            hk = self.node_cross[i](hk, hj, kj + w * speed_t)
            hj = hj_new
        hj = self.final(hj)
        hk = self.node_final(hk)

        admit = self.admit(hj).squeeze(-1)
        coef = self.coef(hj)
        d = hj.shape[-1]
        per_class = torch.einsum("bjd,bkd->bjk", self.node_q(hj), self.node_k(hk)) / math.sqrt(d)
        per_class = per_class + coef[..., 0:1] * batch.cls_speed
        per_class = per_class.masked_fill(~allowed, NEG)
        idx = batch.node_class[:, None, :].expand(B, J, N)
        node = per_class.gather(2, idx) + coef[..., 1:2] * batch.placed
        node_ok = allowed.gather(2, idx) & batch.node_mask[:, None, :]
        node = node.masked_fill(~node_ok, NEG)
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

    @classmethod
    def from_weights(cls, weights: NumpyPolicy | str | Path) -> PolicyNet:
        """The module of an exported weights file (or a loaded :class:`NumpyPolicy`), e.g. to
        fine-tune the shipped policy or score schedules with :func:`~optsched.learned.decode.log_likelihood`."""
        policy = weights if isinstance(weights, NumpyPolicy) else load_npz(weights)
        net = cls(**policy.config)
        net.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in policy.params.items()})
        return net

    def to_numpy(self, **meta: Any) -> NumpyPolicy:
        """The same network for numpy inference (:mod:`optsched.learned.inference`)."""
        params = {k: v.detach().cpu().numpy().astype("float32") for k, v in self.state_dict().items()}
        return NumpyPolicy(dict(self.config), params, meta)


def export_weights(net: PolicyNet, path: str | Path, **meta: Any) -> Path:
    """The exporter: write ``net`` as a weights file (``.npz``) that numpy inference loads.

    Training calls it whenever it saves a checkpoint, so the shipped form always matches the
    torch module. Returns the path."""
    policy = net.to_numpy(**meta)
    return save_npz(path, policy.config, policy.params, policy.meta)
