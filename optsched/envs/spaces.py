"""Gymnasium spaces of the environments' observations and actions (shapes from :class:`EnvSizes`)."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from optsched.envs.builder import JOB_FEATURES, NODE_FEATURES, EnvSizes

__all__ = ["OBS_HIGH", "action_space", "observation_space"]

#: upper bound of the real-valued arrays (raw GPUs, cores, GB, speeds: never near it; finite so
#: that wrappers which normalise by the bounds keep working)
OBS_HIGH = 1e9


def observation_space(sizes: EnvSizes, *, with_action_mask: bool = True) -> spaces.Dict:
    """The round observation (see ``docs/envs.md`` for every array)."""
    J, N, (Gc, Gm) = sizes.max_jobs, sizes.max_nodes, sizes.max_grid

    def real(*shape: int) -> spaces.Box:
        return spaces.Box(0.0, OBS_HIGH, shape, dtype=np.float32)

    def flags(*shape: int) -> spaces.Box:
        return spaces.Box(0, 1, shape, dtype=np.int8)

    d = {
        "nodes": real(N, len(NODE_FEATURES)),
        "node_mask": flags(N),
        "jobs": real(J, len(JOB_FEATURES)),
        "job_mask": flags(J),
        "speed": real(J, N),
        "placement": real(J, N),
        "assigned": real(J, N),
        "throughput": real(J, Gc, Gm),
        "point_mask": flags(J, Gc, Gm),
        "cpus_grid": real(J, Gc),
        "mem_grid": real(J, Gm),
    }
    if with_action_mask:
        d["action_mask"] = flags(sizes.n_actions)
    return spaces.Dict(d)


def action_space(sizes: EnvSizes) -> spaces.Discrete:
    """``(grid point, node)`` pairs flattened, and *queue* last (:meth:`EnvSizes.encode`)."""
    return spaces.Discrete(sizes.n_actions)
