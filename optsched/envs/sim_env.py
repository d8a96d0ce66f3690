"""``SimEnv``: a Gymnasium environment over the trace-driven simulator (:mod:`optsched.sim`).

An episode replays a workload on a cluster. Every round the simulator offers (its queue policy
sets the jobs' weights), the agent decides job by job exactly as in
:class:`~optsched.envs.RoundEnv` -- same observation arrays, same masked action space -- and
when the round's last job is decided the simulator applies the schedule, advances one round and
offers the next. The simulator is driven as a coroutine (:func:`optsched.sim.engine.simulate_steps`),
so the environment is the engine itself, not a re-implementation.

Rewards (``reward=``):

- ``"jct"`` (default): at the step that closes a round, ``-(jobs in the system) x round_s / 3600``:
  minus the job-hours spent in the system that round. An episode's rewards sum to minus the total
  job completion time in hours, counted in whole rounds (a job counts from the first round
  boundary at or after its arrival up to the boundary before it finishes).
- ``"objective"``: the round objective's increase at every step, as in ``RoundEnv``.

A round holds at most ``max_jobs`` jobs: running jobs first, then the waiting ones by the queue
policy's weight; the rest wait. ``obs["sim"]`` adds ``[round index, jobs in the system, jobs
offered]``. The episode ends when every job has finished, at ``horizon_s`` (truncated), or when
the simulator stalls (nothing runs and nothing is left to arrive, and the agent keeps queueing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from optsched.envs.builder import EnvSizes, RoundBuilder, allowed
from optsched.envs.export import DecisionAccess
from optsched.envs.spaces import OBS_HIGH, action_space, observation_space
from optsched.errors import InputError
from optsched.incremental import RoundSolver
from optsched.model import Instance, Node, Round
from optsched.result import Result
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate_steps
from optsched.sim.policies import get_policy
from optsched.sim.result import SimResult
from optsched.sim.workload import SimJob, Workload

__all__ = ["SimEnv"]


class SimEnv(DecisionAccess, gym.Env):
    """A simulation per episode, each round decided job by job (see the module docstring)."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        workload: Workload | Sequence[SimJob],
        nodes: Sequence[Node],
        *,
        policy: str = "las",
        round_s: float = 300.0,
        fair: bool = False,
        horizon_s: float | None = None,
        reward: str = "jct",
        max_jobs: int = 16,
        max_nodes: int | None = None,
        max_grid: tuple[int, int] = (9, 5),
        invalid_action: str = "noop",
        render_mode: str | None = None,
        reference_chain: RoundSolver | None = None,
    ) -> None:
        if reward not in ("jct", "objective"):
            raise InputError("reward", reward, "must be 'jct' or 'objective'")
        if invalid_action not in ("noop", "raise"):
            raise InputError("invalid_action", invalid_action, "must be 'noop' or 'raise'")
        if render_mode not in (None, "ansi"):
            raise InputError("render_mode", render_mode, "must be None or 'ansi'")
        self.nodes = tuple(nodes)
        self.workload = workload
        self.sizes = EnvSizes(max_jobs, max_nodes or max(1, len(self.nodes)), tuple(max_grid))
        if len(self.nodes) > self.sizes.max_nodes:
            raise InputError("max_nodes", self.sizes.max_nodes, f"the cluster has {len(self.nodes)} nodes")
        jobs = workload.jobs if isinstance(workload, Workload) else tuple(workload)
        for j in jobs:
            if j.profile.shape[0] > self.sizes.max_grid[0] or j.profile.shape[1] > self.sizes.max_grid[1]:
                raise InputError("max_grid", self.sizes.max_grid, f"job {j.id} has a {j.profile.shape} grid")
        get_policy(policy)
        self.policy = policy
        self.config = SimConfig(round_s=round_s, fair=fair, queue_window=None, horizon_s=horizon_s,
                                reuse_unchanged=False, progress=False, name="env")
        self.reward_kind = reward
        self.invalid_action = invalid_action
        self.render_mode = render_mode
        #: what :meth:`reference` solves the episode's rounds with (one chain per episode)
        self.reference_chain = reference_chain if reference_chain is not None else RoundSolver("cpsat", time_limit=1.0)
        obs = dict(observation_space(self.sizes).spaces)
        obs["sim"] = spaces.Box(0.0, OBS_HIGH, (3,), dtype=np.float32)
        self.observation_space = spaces.Dict(obs)
        self.action_space = action_space(self.sizes)
        self.builder: RoundBuilder | None = None
        self.result: SimResult | None = None  #: the finished simulation (after the episode ends)
        self._steps: Any = None
        self._round = 0
        self._active = 0

    # --- episode ---------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        if self._steps is not None:
            self._steps.close()
        self.result = None
        self._round = 0
        self.reference_chain.reset()
        self._steps = simulate_steps(self.workload, self.nodes, get_policy(self.policy), self.config, allocator_name="agent")
        try:
            self._begin(next(self._steps))
        except StopIteration as stop:  # nothing to schedule at all
            self.builder = RoundBuilder(Instance("env-empty", self.nodes, (), Round(self.config.round_s, self.config.fair)), self.sizes)
            self._end(stop.value)
        return self._obs(), self._info()

    def _begin(self, engine_round: Instance) -> None:
        self._active = len(engine_round.jobs)
        jobs = sorted(engine_round.jobs, key=lambda j: (j.placement is None, -j.weight))[: self.sizes.max_jobs]
        order = {j.id: k for k, j in enumerate(engine_round.jobs)}
        jobs.sort(key=lambda j: order[j.id])
        offered = Instance(engine_round.name, engine_round.nodes, tuple(jobs), engine_round.round)
        self.builder = RoundBuilder(offered, self.sizes)

    def _end(self, result: SimResult) -> None:
        self.result = result
        self._steps = None

    def step(self, action: int) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        b = self.builder
        if b is None or self._steps is None:
            raise RuntimeError("the episode has ended (or never began): call reset()")
        if not allowed(b, action, self.invalid_action):
            return self._obs(), 0.0, False, False, self._info(invalid=True)
        gain, _ = b.step(action)
        reward = gain if self.reward_kind == "objective" else 0.0
        info_round: dict[str, Any] = {}
        if b.done:
            if self.reward_kind == "jct":
                reward -= self._active * self.config.round_s / 3600.0
            info_round = {"round": self._round, "round_objective": b.objective, "schedule": b.schedule()}
            self._round += 1
            try:
                self._begin(self._steps.send(b.schedule()))
            except StopIteration as stop:
                self._end(stop.value)
        ended = self._steps is None
        truncated = (ended and self.result is not None and self.config.horizon_s is not None and not self.result.info["stalled"]
                     and bool(np.any(~np.isfinite(self.result.jobs["finish_s"]))))
        info = self._info() | info_round
        if ended and self.result is not None:
            info["summary"] = self.result.summary()
        return self._obs(), float(reward), ended and not truncated, truncated, info

    def reference(self) -> Result:
        """The exact answer to the round being decided, the episode's rounds solved as one chain
        (``reference_chain``, an :class:`~optsched.incremental.RoundSolver`: cpsat with 1 s per
        searched round unless given): a yardstick for the agent's decision (its gap, imitation
        targets). Never applied: the agent's decisions drive the simulation."""
        if self.builder is None:
            raise RuntimeError("call reset() first")
        return self.reference_chain.solve(self.builder.instance)

    # --- views ------------------------------------------------------------------------------

    def _obs(self) -> dict[str, Any]:
        assert self.builder is not None
        obs = self.builder.observation()
        if self._steps is None:
            obs["action_mask"][:] = 0
        obs["sim"] = np.array([self._round, self._active, self.builder.n_jobs], dtype=np.float32)
        return obs

    def _info(self, invalid: bool = False) -> dict[str, Any]:
        assert self.builder is not None
        mask = self.builder.mask().copy() if self._steps is not None else np.zeros(self.sizes.n_actions, dtype=np.int8)
        return {"action_mask": mask, "current_job": self.builder.current_job_id, "invalid_action": invalid}

    def action_masks(self) -> np.ndarray:
        return self._info()["action_mask"].astype(bool)

    def render(self) -> str | None:
        if self.render_mode == "ansi" and self.builder is not None:
            return f"round {self._round}, {self._active} jobs in the system\n" + self.builder.render()
        return None

    def close(self) -> None:
        if self._steps is not None:
            self._steps.close()
            self._steps = None
