"""``RoundAECEnv``: a PettingZoo AEC environment with one agent per job of a round.

Agents are job slots ``job_0 .. job_{max_jobs-1}``; an episode's agents are the slots of its
round's jobs (``job_k`` is the round's k-th job, ``infos[agent]["job"]`` its id). They act in
the round's job order, each until its gang is placed or it queues (a gang spanning nodes acts
once per node), with the same masked action space as :class:`~optsched.envs.RoundEnv`. An
agent's reward is its own job's worth, given when it is decided; the agent then terminates. So
the rewards of all agents sum to the round's objective, and the joint decision is always
feasible. Observations are ``{"observation": <the round arrays, plus "agent": its one-hot
slot>, "action_mask": ...}``; an agent that is not selected sees an all-zero mask.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from optsched.extras import require_extra

AECEnv = require_extra("pettingzoo", "rl", "the PettingZoo environment (RoundAECEnv)").AECEnv

from optsched.envs.builder import EnvSizes, RoundBuilder, allowed  # noqa: E402
from optsched.envs.export import DecisionAccess  # noqa: E402
from optsched.envs.round_env import InstanceSource, RoundEnv  # noqa: E402
from optsched.envs.spaces import action_space, observation_space  # noqa: E402
from optsched.errors import InputError  # noqa: E402

__all__ = ["RoundAECEnv"]


class RoundAECEnv(DecisionAccess, AECEnv):
    """One round per episode, one agent per job (see the module docstring and ``docs/envs.md``)."""

    metadata = {"name": "optsched_round_v0", "render_modes": ["ansi"], "is_parallelizable": False}

    def __init__(
        self,
        instances: InstanceSource = None,
        *,
        max_jobs: int = 16,
        max_nodes: int = 8,
        max_grid: tuple[int, int] = (9, 5),
        invalid_action: str = "noop",
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        # RoundEnv validates the arguments and draws the rounds (same sources, same seeding)
        self._rounds = RoundEnv(instances, max_jobs=max_jobs, max_nodes=max_nodes, max_grid=max_grid,
                                invalid_action=invalid_action, render_mode=render_mode)
        self.sizes: EnvSizes = self._rounds.sizes
        self.invalid_action = invalid_action
        self.render_mode = render_mode
        self.possible_agents = [f"job_{k}" for k in range(self.sizes.max_jobs)]
        inner = dict(observation_space(self.sizes, with_action_mask=False).spaces)
        inner["agent"] = spaces.Box(0, 1, (self.sizes.max_jobs,), dtype=np.int8)
        self._obs_space = spaces.Dict({"observation": spaces.Dict(inner), "action_mask": spaces.Box(0, 1, (self.sizes.n_actions,), dtype=np.int8)})
        self._act_space = action_space(self.sizes)
        self.observation_spaces = dict.fromkeys(self.possible_agents, self._obs_space)
        self.action_spaces = dict.fromkeys(self.possible_agents, self._act_space)
        self.builder: RoundBuilder | None = None

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._rounds.reset(seed=seed, options=options)
        self.builder = b = self._rounds.builder
        assert b is not None
        self.agents = [f"job_{k}" for k in range(b.n_jobs)]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {"job": j.id} for a, j in zip(self.agents, b.instance.jobs, strict=True)}
        self._skip_agent_selection = None
        self.agent_selection = self.agents[0] if self.agents else self.possible_agents[0]

    def observe(self, agent: str) -> dict[str, Any]:
        b = self.builder
        if b is None:
            raise RuntimeError("call reset() first")
        obs = b.observation()
        mask = obs.pop("action_mask")
        k = self.possible_agents.index(agent)
        if b.done or k != b.current:
            mask = np.zeros_like(mask)
        one_hot = np.zeros(self.sizes.max_jobs, dtype=np.int8)
        one_hot[k] = 1
        obs["agent"] = one_hot
        return {"observation": obs, "action_mask": mask}

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        b = self.builder
        assert b is not None
        self._cumulative_rewards[agent] = 0.0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        if action is None:
            raise InputError("action", None, f"{agent} is live: give it an action")
        if not allowed(b, action, self.invalid_action):
            self.infos[agent]["invalid_action"] = True
            self._accumulate_rewards()
            return
        self.infos[agent]["invalid_action"] = False
        reward, decided = b.step(action)
        if decided is not None:
            self.rewards[agent] = reward
            self.terminations[agent] = True
            self.infos[agent]["scheduled"] = decided in b.points
        self._accumulate_rewards()
        if decided is not None:
            if not b.done:
                self.agent_selection = self.possible_agents[b.current]
            self._deads_step_first()

    # --- the decision --------------------------------------------------------------------------

    def render(self) -> str | None:
        if self.render_mode == "ansi" and self.builder is not None:
            return self.builder.render()
        return None

    def close(self) -> None:
        self._rounds.close()
