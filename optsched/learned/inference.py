"""The policy network's forward pass in numpy: the shipped policy runs without torch.

:class:`NumpyPolicy` holds the exported weights of a :class:`~optsched.learned.policy.PolicyNet`
(its ``state_dict`` as arrays, and the ``config`` that rebuilds it) and computes the same
outputs as the torch module, layer by layer, in float32 (equal within 1e-5 on the test rounds;
``tests/test_learned_inference.py`` compares both and the schedules decoded from them):

======================================  ==============================================================
torch (:mod:`optsched.learned.policy`)  numpy (this module)
======================================  ==============================================================
``nn.Linear`` ``name``                  :func:`_linear`: ``x @ W.T + b`` (``name.weight``, ``name.bias``)
``nn.LayerNorm`` ``name``               :func:`_layer_norm`: biased variance, eps 1e-5
``nn.Sequential(Linear, ReLU, Linear)`` :func:`_mlp`: entries ``name.0`` and ``name.2``
``F.scaled_dot_product_attention``      :func:`_attention`: ``softmax(q k^T / sqrt(d_head) + bias) v``
``_Block.forward``                      :func:`_block`: pre-norm attention, residual, pre-norm feed-forward
``PolicyNet.forward``                   :meth:`NumpyPolicy.forward` (same statements and order; ``gather`` per round)
``policy.collate``                      :func:`collate_arrays` (the torch ``collate`` wraps it)
======================================  ==============================================================

Weights files (``.npz``, format :data:`FORMAT`) are written by
:func:`optsched.learned.policy.export_weights` (training calls it whenever it saves a checkpoint,
so the torch and numpy forms never drift apart) and read by :func:`load_npz`. They hold every
``state_dict`` entry, so torch can rebuild the module from them too
(:meth:`optsched.learned.policy.PolicyNet.from_weights`). The shipped model is
:data:`DEFAULT_WEIGHTS` (package data, with its model card beside it).
"""

from __future__ import annotations

import json
import math
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from optsched.errors import InputError
from optsched.learned.decode import Scores
from optsched.learned.features import JOB_FEATURES, NEG, NODE_FEATURES, POINT_FEATURES, RoundFeatures

__all__ = ["DEFAULT_WEIGHTS", "FORMAT", "INFERENCE_THREADS", "NumpyPolicy", "collate_arrays", "load_npz", "save_npz"]

#: the format tag of a weights file (an ``.npz`` of the state dict, the config and training metadata)
FORMAT = "optsched-maifs-npz-1"

#: the shipped small model (package data; its model card is ``maifs-small.md`` beside it)
DEFAULT_WEIGHTS = Path(str(resources.files("optsched.learned") / "weights" / "maifs-small.npz"))

_CONFIG_KEYS = ("d_model", "heads", "layers", "ff", "d_point", "inducing")

#: BLAS threads for one forward pass. Measured on the shared 2-core machine at load 3-4: with
#: OpenBLAS's default of two threads one 16 x 4,000 attention product took 1.1 s, with one 0.2 ms
#: (busy-waiting threads, as torch's OpenMP threads were before); one round is too small to gain
#: from more.
INFERENCE_THREADS = 1


@lru_cache(maxsize=1)
def _blas() -> ThreadpoolController:
    return ThreadpoolController()  # after numpy's import: it finds numpy's OpenBLAS


def collate_arrays(feats: list[RoundFeatures]) -> dict[str, np.ndarray]:
    """Pad rounds to the largest job, class, node and grid-point counts of the list.

    Returns the arrays of :class:`optsched.learned.policy.Batch` (same names; masks ``True`` on
    real entries)."""
    B = len(feats)
    J = max(max(f.n_jobs for f in feats), 1)
    N = max(max(f.n_nodes for f in feats), 1)
    K = max(max(f.n_classes for f in feats), 1)
    P = max(max(f.point.shape[1] for f in feats), 1)
    a = {
        "job": np.zeros((B, J, JOB_FEATURES), np.float32),
        "job_mask": np.zeros((B, J), bool),
        "point": np.zeros((B, J, P, POINT_FEATURES), np.float32),
        "point_mask": np.zeros((B, J, P), bool),
        "point_ok": np.zeros((B, J, P), bool),
        "cls": np.zeros((B, K, NODE_FEATURES), np.float32),
        "cls_mask": np.zeros((B, K), bool),
        "cls_logcount": np.zeros((B, K), np.float32),
        "cls_speed": np.zeros((B, J, K), np.float32),
        "node_class": np.zeros((B, N), np.int64),
        "node_mask": np.zeros((B, N), bool),
        "placed": np.zeros((B, J, N), np.float32),
    }
    for b, f in enumerate(feats):
        nj, nn_, nk, npt = f.n_jobs, f.n_nodes, f.n_classes, f.point.shape[1]
        a["job"][b, :nj] = f.job
        a["job_mask"][b, :nj] = True
        a["point"][b, :nj, :npt] = f.point
        a["point_mask"][b, :nj, :npt] = f.point_mask
        a["point_ok"][b, :nj, :npt] = f.point_ok & f.point_mask
        a["cls"][b, :nk] = f.cls
        a["cls_mask"][b, :nk] = True
        a["cls_logcount"][b, :nk] = np.log(f.cls_count)
        a["cls_speed"][b, :nj, :nk] = f.cls_speed
        a["node_class"][b, :nn_] = f.node_class
        a["node_mask"][b, :nn_] = True
        a["placed"][b, :nj, :nn_] = f.placed
    return a


# --- layers (each mirrors one torch module; see the table in the module docstring) -------------


def _linear(p: dict[str, np.ndarray], name: str, x: np.ndarray) -> np.ndarray:
    return x @ p[f"{name}.weight"].T + p[f"{name}.bias"]


def _layer_norm(p: dict[str, np.ndarray], name: str, x: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = np.square(x - mu).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + np.float32(1e-5)) * p[f"{name}.weight"] + p[f"{name}.bias"]


def _mlp(p: dict[str, np.ndarray], name: str, x: np.ndarray) -> np.ndarray:
    return _linear(p, f"{name}.2", np.maximum(_linear(p, f"{name}.0", x), 0))


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    s = q @ k.swapaxes(-1, -2) * np.float32(1.0 / math.sqrt(q.shape[-1]))
    if bias is not None:
        s = s + bias
    s = np.exp(s - s.max(-1, keepdims=True))
    return (s / s.sum(-1, keepdims=True)) @ v


def _block(p: dict[str, np.ndarray], name: str, heads: int, x: np.ndarray, y: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """``_Block.forward``: queries ``x`` attend over keys ``y`` (``bias`` broadcastable to ``(B, heads, Lq, Lk)``)."""
    B, Lq, d = x.shape
    Lk = y.shape[1]
    h = heads
    q = _linear(p, f"{name}.q", _layer_norm(p, f"{name}.norm_q", x)).reshape(B, Lq, h, d // h).transpose(0, 2, 1, 3)
    k, v = _linear(p, f"{name}.kv", _layer_norm(p, f"{name}.norm_k", y)).reshape(B, Lk, 2, h, d // h).transpose(2, 0, 3, 1, 4)
    a = _attention(q, k, v, bias)
    x = x + _linear(p, f"{name}.out", a.transpose(0, 2, 1, 3).reshape(B, Lq, d))
    return x + _mlp(p, f"{name}.ff", _layer_norm(p, f"{name}.norm_ff", x))


@dataclass(frozen=True)
class NumpyPolicy:
    """The policy network's weights as numpy arrays, and its forward pass (see the module docstring).

    ``params`` maps ``state_dict`` names to float32 arrays; ``config`` holds the constructor
    arguments of :class:`~optsched.learned.policy.PolicyNet`; ``meta`` what training recorded."""

    config: dict[str, int]
    params: dict[str, np.ndarray]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [k for k in _CONFIG_KEYS if not isinstance(self.config.get(k), int)]
        if missing:
            raise ValueError(f"config lacks integer {missing}")
        for name in ("point_enc.0.weight", "job_in.0.weight", "node_in.0.weight", "inducing", "pair_bias", "final.weight",
                     "admit.2.weight", "node_q.weight", "node_k.weight", "coef.weight", "point_q.weight", "point_b.weight"):
            if name not in self.params:
                raise ValueError(f"weights lack {name!r}")
        if self.params["pair_bias"].shape != (self.config["layers"],):
            raise ValueError(f"pair_bias has shape {self.params['pair_bias'].shape}, config says {self.config['layers']} layers")

    @property
    def n_parameters(self) -> int:
        return sum(int(v.size) for v in self.params.values())

    def forward(self, batch: dict[str, np.ndarray], *, threads: int = INFERENCE_THREADS) -> dict[str, np.ndarray]:
        """``PolicyNet.forward`` on the arrays of :func:`collate_arrays`: ``admit`` (B, J),
        ``node`` (B, J, N), ``point`` (B, J, P), ``fit`` (B, J), NEG where impossible. BLAS
        runs with ``threads`` threads inside (the previous setting is restored)."""
        with _blas().limit(limits=threads, user_api="blas"):
            return self._forward(batch)

    def _forward(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        p, heads = self.params, self.config["heads"]
        neg, zero = np.float32(NEG), np.float32(0.0)
        jm, km, pm = batch["job_mask"], batch["cls_mask"], batch["point_mask"]
        B = batch["point"].shape[0]
        pe = _mlp(p, "point_enc", batch["point"])  # (B, J, P, dp)
        pmf = pm[..., None].astype(pe.dtype)
        mean = (pe * pmf).sum(2) / np.maximum(pmf.sum(2), 1.0)
        mx = np.where(pm[..., None], pe, neg).max(2)
        mx = np.where(pm.any(2, keepdims=True), mx, zero)
        hj = _mlp(p, "job_in", np.concatenate([batch["job"], mean, mx], axis=-1))
        hk = _mlp(p, "node_in", batch["cls"])

        jj = np.where(jm, zero, neg)[:, None, None, :]  # (B, 1, 1, J)
        logc = np.where(km, batch["cls_logcount"], neg)  # (B, K)
        kk = logc[:, None, None, :]  # (B, 1, 1, K)
        allowed = (batch["cls_speed"] > 0) & km[:, None, :] & jm[:, :, None]  # (B, J, K)
        jk_ok = np.where(allowed.any(-1, keepdims=True), allowed, km[:, None, :] & jm[:, :, None])
        kj_ok = allowed.transpose(0, 2, 1)
        kj_ok = np.where(kj_ok.any(-1, keepdims=True), kj_ok, jm[:, None, :] & km[:, :, None])
        jk = np.where(jk_ok, logc[:, None, :], neg)[:, None]  # (B, 1, J, K)
        kj = np.where(kj_ok, zero, neg)[:, None]  # (B, 1, K, J)
        speed = batch["cls_speed"][:, None]
        speed_t = batch["cls_speed"].transpose(0, 2, 1)[:, None]
        inducing = np.broadcast_to(p["inducing"], (B, *p["inducing"].shape[1:]))
        for i in range(self.config["layers"]):
            w = p["pair_bias"][i]
            summary = _block(p, f"job_pool.{i}", heads, inducing, hj, jj)
            hj = _block(p, f"job_self.{i}", heads, hj, summary, None)
            hk = _block(p, f"node_self.{i}", heads, hk, hk, kk)
            hj_new = _block(p, f"job_cross.{i}", heads, hj, hk, jk + w * speed)
            hk = _block(p, f"node_cross.{i}", heads, hk, hj, kj + w * speed_t)
            hj = hj_new
        hj = _layer_norm(p, "final", hj)
        hk = _layer_norm(p, "node_final", hk)

        admit = _mlp(p, "admit", hj)[..., 0]
        coef = _linear(p, "coef", hj)
        d = hj.shape[-1]
        per_class = _linear(p, "node_q", hj) @ _linear(p, "node_k", hk).swapaxes(-1, -2) / np.float32(math.sqrt(d))
        per_class = per_class + coef[..., 0:1] * batch["cls_speed"]
        per_class = np.where(allowed, per_class, neg)
        # torch's gather over (B, J, N) indices: per round, one index per node (its class)
        cls_of = batch["node_class"]
        node = np.stack([np.take(per_class[b], cls_of[b], axis=1) for b in range(B)]) + coef[..., 1:2] * batch["placed"]
        node_ok = np.stack([np.take(allowed[b], cls_of[b], axis=1) for b in range(B)]) & batch["node_mask"][:, None, :]
        node = np.where(node_ok, node, neg)
        point = np.einsum("bjd,bjpd->bjp", _linear(p, "point_q", hj), pe) + _linear(p, "point_b", pe)[..., 0]
        point = np.where(batch["point_ok"] & jm[..., None], point, neg)
        return {"admit": admit, "node": node, "point": point, "fit": coef[..., 2]}

    def scores(self, feats: RoundFeatures, *, threads: int = INFERENCE_THREADS) -> Scores:
        """One round's scores for decoding (float64, cut to the round's sizes)."""
        out = self.forward(collate_arrays([feats]), threads=threads)
        J, N, P = feats.n_jobs, feats.n_nodes, feats.point.shape[1]
        f = lambda a: np.asarray(a, np.float64)  # noqa: E731
        return Scores(admit=f(out["admit"][0, :J]), node=f(out["node"][0, :J, :N]), point=f(out["point"][0, :J, :P]), fit=f(out["fit"][0, :J]))


def save_npz(path: str | Path, config: dict[str, int], params: dict[str, np.ndarray], meta: dict[str, Any] | None = None) -> Path:
    """Write a weights file (float32 arrays, the config and ``meta`` as JSON); returns its path."""
    policy = NumpyPolicy(dict(config), {k: np.asarray(v, np.float32) for k, v in params.items()}, dict(meta or {}))
    reserved = [k for k in policy.params if k.startswith("__")]
    if reserved:
        raise ValueError(f"parameter names may not start with '__': {reserved}")
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, Any] = {
        "__format__": np.array(FORMAT),
        "__config__": np.array(json.dumps(policy.config, sort_keys=True)),
        "__meta__": np.array(json.dumps(policy.meta, sort_keys=True, default=str)),
        **policy.params,
    }
    with p.open("wb") as fh:
        np.savez_compressed(fh, **arrays)
    return p


def load_npz(path: str | Path) -> NumpyPolicy:
    """Read a weights file written by :func:`save_npz`; an unusable file is an InputError naming it."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if "__format__" not in z.files or str(z["__format__"]) != FORMAT:
                raise ValueError(f"format {FORMAT!r} expected")
            config = json.loads(str(z["__config__"]))
            meta = json.loads(str(z["__meta__"]))
            params = {k: z[k].astype(np.float32, copy=False) for k in z.files if not k.startswith("__")}
        return NumpyPolicy(config, params, meta)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise InputError("weights", str(path), f"is not a usable optsched policy weights file: {e}") from None
