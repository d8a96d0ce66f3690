"""Reinforcement-learning environments over scheduling rounds and the simulator (extra ``rl``).

- :class:`RoundEnv` (Gymnasium): one episode decides one round, job by job.
- :class:`SimEnv` (Gymnasium): one episode replays a workload; every round is decided job by job.
- :class:`RoundAECEnv` (PettingZoo AEC, in :mod:`optsched.envs.multi_agent`): one agent per job.

All share one observation layout and one masked discrete action space (``docs/envs.md``); an
episode's decision exports as contract schedule JSON for ``optsched validate``.
"""

from optsched.extras import require_extra

require_extra("gymnasium", "rl", "the RL environments (optsched.envs)")

from optsched.envs.builder import EnvSizes, RoundBuilder  # noqa: E402
from optsched.envs.export import save_episode, schedule_json  # noqa: E402
from optsched.envs.round_env import RoundEnv, random_round  # noqa: E402
from optsched.envs.sim_env import SimEnv  # noqa: E402

__all__ = ["EnvSizes", "RoundAECEnv", "RoundBuilder", "RoundEnv", "SimEnv", "random_round", "save_episode", "schedule_json"]


def __getattr__(name: str):  # the PettingZoo environment loads on first use
    if name == "RoundAECEnv":
        from optsched.envs.multi_agent import RoundAECEnv  # lazy: pettingzoo is optional even with gymnasium installed

        return RoundAECEnv
    raise AttributeError(name)
