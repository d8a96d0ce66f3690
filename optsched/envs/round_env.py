"""``RoundEnv``: a Gymnasium environment where one episode decides one scheduling round.

The agent decides the round's jobs one at a time (:mod:`optsched.envs.builder`): each action
is *queue* or a (grid point, node) pair for the current job, drawn from a flattened
``Discrete`` space with an action mask in ``obs["action_mask"]`` and ``info["action_mask"]``
(``int8``; pass it to ``action_space.sample(mask=...)``; :meth:`RoundEnv.action_masks` gives it
as booleans for MaskablePPO-style trainers). The reward is the increase of the round objective,
so an episode's rewards sum to its schedule's objective; the final schedule is always feasible.
A masked-out action changes nothing (reward 0, ``info["invalid_action"]`` is ``True``), as in
Gymnasium's own masked environments; ``invalid_action="raise"`` makes it an error instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from optsched import catalogue
from optsched.envs.builder import EnvSizes, RoundBuilder, allowed
from optsched.envs.export import DecisionAccess
from optsched.envs.spaces import action_space, observation_space
from optsched.errors import InputError
from optsched.gen import generate
from optsched.model import Instance

__all__ = ["RoundEnv", "random_round"]

InstanceSource = Instance | Sequence[Instance] | Callable[[np.random.Generator], Instance] | None


def random_round(rng: np.random.Generator, sizes: EnvSizes) -> Instance:
    """A random round that fits ``sizes`` (``optsched.gen``): 1-4 nodes of one or two GPU types,
    some jobs already running, the largest catalogue grid that fits ``max_grid``."""
    grids = [g for g in catalogue.GRIDS if len(catalogue.CPU_GRIDS[g]) <= sizes.max_grid[0] and len(catalogue.MEM_GRIDS[g]) <= sizes.max_grid[1]]
    if not grids:
        raise InputError("max_grid", sizes.max_grid, "no catalogue grid fits; give rounds of your own")
    grid = max(grids, key=lambda g: len(catalogue.CPU_GRIDS[g]) * len(catalogue.MEM_GRIDS[g]))
    nodes = int(rng.integers(1, min(sizes.max_nodes, 4) + 1))
    jobs = int(rng.integers(1, sizes.max_jobs + 1))
    types = ("V100", "K80") if nodes > 1 else ("V100",)
    return generate(nodes, jobs, seed=int(rng.integers(2**31 - 1)), gpu_types=types, grid=grid, running_fraction=0.3,
                    restrict_fraction=0.2, gpus_per_node=4, cpus_per_node=32, mem_per_node_gb=256)


class RoundEnv(DecisionAccess, gym.Env):
    """One round per episode, decided job by job (see the module docstring and ``docs/envs.md``).

    ``instances``: a fixed round, a list of rounds (one is drawn per episode), a function of a
    numpy ``Generator`` returning a round, or ``None`` for :func:`random_round`. A round can also
    be given per episode: ``reset(options={"instance": round})``. ``max_jobs``, ``max_nodes``
    and ``max_grid`` fix the padded shapes; a larger round is refused with an ``InputError``.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        instances: InstanceSource = None,
        *,
        max_jobs: int = 16,
        max_nodes: int = 8,
        max_grid: tuple[int, int] = (9, 5),
        render_mode: str | None = None,
        invalid_action: str = "noop",
    ) -> None:
        self.sizes = EnvSizes(max_jobs, max_nodes, tuple(max_grid))
        if invalid_action not in ("noop", "raise"):
            raise InputError("invalid_action", invalid_action, "must be 'noop' or 'raise'")
        self.invalid_action = invalid_action
        if render_mode not in (None, "ansi"):
            raise InputError("render_mode", render_mode, "must be None or 'ansi'")
        self.render_mode = render_mode
        if isinstance(instances, Instance):
            self.sizes.check_fits(instances)
        elif isinstance(instances, Sequence):
            if not instances:
                raise InputError("instances", [], "must hold at least one round")
            for inst in instances:
                self.sizes.check_fits(inst)
        self._source = instances
        self.observation_space = observation_space(self.sizes)
        self.action_space = action_space(self.sizes)
        self.builder: RoundBuilder | None = None

    def _draw(self) -> Instance:
        src = self._source
        if src is None:
            return random_round(self.np_random, self.sizes)
        if isinstance(src, Instance):
            return src
        if isinstance(src, Sequence):
            return src[int(self.np_random.integers(len(src)))]
        return src(self.np_random)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        inst = (options or {}).get("instance") or self._draw()
        self.builder = RoundBuilder(inst, self.sizes)
        return self.builder.observation(), self._info()

    def step(self, action: int) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        if self.builder is None:
            raise RuntimeError("call reset() first")
        if not allowed(self.builder, action, self.invalid_action):
            return self.builder.observation(), 0.0, self.builder.done, False, self._info(invalid=True)
        reward, _ = self.builder.step(action)
        return self.builder.observation(), reward, self.builder.done, False, self._info()

    def _info(self, invalid: bool = False) -> dict[str, Any]:
        b = self.builder
        if b is None:
            raise RuntimeError("call reset() first")
        return {"action_mask": b.mask().copy(), "current_job": b.current_job_id, "objective": b.objective, "invalid_action": invalid}

    def action_masks(self) -> np.ndarray:
        """The current action mask as booleans (the method MaskablePPO-style trainers call)."""
        if self.builder is None:
            raise RuntimeError("call reset() first")
        return self.builder.mask().astype(bool)

    def render(self) -> str | None:
        if self.render_mode == "ansi" and self.builder is not None:
            return self.builder.render()
        return None
