"""The RL environments: API checkers, feasibility of masked rollouts, rewards = objective, determinism, export."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from optsched.checker import check_schedule  # noqa: E402
from optsched.envs import EnvSizes, RoundBuilder, RoundEnv, SimEnv  # noqa: E402
from optsched.errors import InputError  # noqa: E402
from optsched.io import load_instance  # noqa: E402
from optsched.model import Instance, Job, Node, Profile, Round  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TINY = sorted((REPO / "instances" / "tiny").glob("*.json"))


def _rollout(env, seed: int):
    """A random masked episode; returns (summed reward, number of steps)."""
    _, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    total, steps, done = 0.0, 0, False
    while not done:
        mask = info["action_mask"]
        assert mask.dtype == np.int8 and mask.sum() > 0, "a live episode always has an allowed action"
        _, r, term, trunc, info = env.step(env.action_space.sample(mask=mask))
        assert not info["invalid_action"]
        total, steps, done = total + r, steps + 1, term or trunc
    return total, steps


def _small_sim():
    from optsched.sim import cluster
    from optsched.sim.traces import Trace
    from optsched.sim.workload import build_workload

    nodes = cluster.homogeneous(2, gpus=4, cpus=32, mem_gb=256)
    rng = np.random.default_rng(0)
    n = 10
    tr = Trace.from_columns("t", {"job_id": [f"j{i}" for i in range(n)], "submit_s": np.sort(rng.uniform(0, 900, n)),
                                  "duration_s": rng.uniform(100, 800, n), "gpus": rng.choice([1, 2, 4, 8], n)})
    return build_workload(tr, nodes, seed=0), nodes


def _two_node_round() -> Instance:
    """Two 4-GPU nodes of one type, a third of another type; one 8-GPU gang and a 1-GPU job."""
    prof = Profile((1, 2, 4), (16, 32), ((1.0, 1.1), (1.5, 1.6), (1.8, 2.0)))
    nodes = (Node("a", "V100", 4, 16, 256), Node("b", "V100", 4, 16, 256), Node("c", "K80", 4, 16, 256))
    jobs = (Job("big", 8, prof, (2, 16), gpu_speed={"V100": 1.0}, spread_factor=0.9), Job("one", 1, prof, (1, 16)))
    return Instance("two-node", nodes, jobs, Round(300.0))


# --- API checkers ----------------------------------------------------------------------------


def test_round_env_passes_gymnasium_env_checker():
    check_env(RoundEnv(), skip_render_check=True)
    check_env(RoundEnv(load_instance(TINY[0])), skip_render_check=True)


def test_sim_env_passes_gymnasium_env_checker():
    wl, nodes = _small_sim()
    check_env(SimEnv(wl, nodes, round_s=100, max_jobs=10), skip_render_check=True)


def test_round_aec_env_passes_pettingzoo_api_test():
    from pettingzoo.test import api_test

    from optsched.envs import RoundAECEnv

    api_test(RoundAECEnv(), num_cycles=300)


# --- feasibility, rewards --------------------------------------------------------------------


def test_random_masked_rollouts_are_feasible_and_rewards_sum_to_the_objective():
    env = RoundEnv()
    spread = 0
    for seed in range(40):
        total, _ = _rollout(env, seed)
        report = check_schedule(env.instance, env.schedule())
        assert report.feasible, (env.instance.name, list(report))
        assert report.objective == pytest.approx(total, abs=1e-9)
        spread += sum(len(a.nodes) > 1 for a in env.schedule().jobs.values())
    assert spread > 0, "random rounds should exercise gangs that span nodes"


@pytest.mark.parametrize("path", TINY, ids=lambda p: p.name)
def test_library_rounds_running_and_fair_included(path):
    env = RoundEnv(load_instance(path))
    for seed in range(5):
        total, _ = _rollout(env, seed)
        report = check_schedule(env.instance, env.schedule())
        assert report.feasible and report.objective == pytest.approx(total, abs=1e-9)


def test_multi_agent_rollouts_are_feasible_and_rewards_sum_to_the_objective():
    from optsched.envs import RoundAECEnv

    env = RoundAECEnv()
    for seed in range(20):
        env.reset(seed=seed)
        per_agent: dict[str, float] = {}
        for agent in env.agent_iter():
            obs, r, term, trunc, _ = env.last()
            per_agent[agent] = per_agent.get(agent, 0.0) + r
            if term or trunc:
                env.step(None)
                continue
            assert obs["action_mask"].sum() > 0 and obs["observation"]["agent"].argmax() == int(agent.split("_")[1])
            env.step(env.action_space(agent).sample(mask=obs["action_mask"]))
        report = check_schedule(env.builder.instance, env.schedule())
        assert report.feasible and report.objective == pytest.approx(sum(per_agent.values()), abs=1e-9)
        for k, job in enumerate(env.builder.instance.jobs):  # each agent earned exactly its job's worth
            a = env.schedule().jobs.get(job.id)
            want = 0.0 if a is None else check_schedule(env.builder.instance, {"jobs": {job.id: a.to_dict()}}).objective
            assert per_agent[f"job_{k}"] == pytest.approx(want, abs=1e-12)


def test_a_gang_across_nodes_keeps_its_point_and_gpu_type():
    """After the first node of an 8-GPU gang, only the other V100 node at the same point is allowed."""
    sizes = EnvSizes(max_jobs=4, max_nodes=4, max_grid=(3, 2))
    b = RoundBuilder(_two_node_round(), sizes)
    mask = b.mask()
    assert mask[sizes.queue_action] == 1
    assert not any(mask[sizes.encode(a, m, 2)] for a in range(3) for m in range(2)), "big may not use the K80 node"
    # 4 cores/GPU cannot fit 4 GPUs in 16 cores on both nodes? It can (16 // 4 = 4): allowed
    assert mask[sizes.encode(2, 1, 0)] == 1
    reward, done_job = b.step(sizes.encode(2, 1, 0))
    assert reward == 0.0 and done_job is None and b.current == 0
    mask = b.mask()
    assert mask[sizes.queue_action] == 0 and np.flatnonzero(mask).tolist() == [sizes.encode(2, 1, 1)]
    reward, done_job = b.step(sizes.encode(2, 1, 1))
    assert done_job == 0 and reward == pytest.approx(2.0 / 1.5)  # two 4-GPU nodes are the fewest that hold it: no spread factor
    assert dict(b.schedule().jobs["big"].nodes) == {"a": 4, "b": 4}
    # both V100 nodes are full: "one" may only go to the K80 node (it allows every type) or queue
    allowed = {sizes.decode(int(i)) for i in np.flatnonzero(b.mask())}
    assert None in allowed and {n for (_, _, n) in allowed - {None}} == {2}


def test_gangs_that_cannot_complete_are_masked():
    """With one V100 node's cores taken, the 8-GPU gang has no completable action: only queue."""
    inst = _two_node_round()
    sizes = EnvSizes(4, 4, (3, 2))
    from dataclasses import replace

    busy = replace(inst, nodes=(inst.nodes[0], replace(inst.nodes[1], cpus=3), inst.nodes[2]))
    mask = RoundBuilder(busy, sizes).mask()
    assert np.flatnonzero(mask).tolist() == [sizes.queue_action]


def test_sim_env_schedules_are_feasible_and_jct_reward_counts_job_rounds():
    wl, nodes = _small_sim()
    R = 100.0
    env = SimEnv(wl, nodes, round_s=R, max_jobs=10)
    for seed in range(2):
        _, info = env.reset(seed=seed)
        env.action_space.seed(seed)
        total, done = 0.0, False
        for _ in range(10_000):  # a bound, so that a regression fails instead of hanging
            if done:
                break
            assert info["action_mask"].sum() > 0
            inst = env.instance
            _, r, term, trunc, info = env.step(env.action_space.sample(mask=info["action_mask"]))
            if "schedule" in info:
                assert check_schedule(inst, info["schedule"]).feasible
            total, done = total + r, term or trunc
        res = env.result
        assert res is not None and np.all(np.isfinite(res.jobs["finish_s"]))
        rounds_in_system = sum(math.ceil(f / R - 1e-9) - math.ceil(s / R - 1e-9) for s, f in zip(res.jobs["submit_s"], res.jobs["finish_s"], strict=True))
        assert total == pytest.approx(-rounds_in_system * R / 3600)
        assert info["summary"]["finished"] == len(wl)


def test_sim_env_objective_reward_and_horizon_truncation():
    wl, nodes = _small_sim()
    env = SimEnv(wl, nodes, round_s=100, max_jobs=10, reward="objective", horizon_s=300)
    _, info = env.reset(seed=0)
    total, objectives, done, trunc = 0.0, 0.0, False, False
    for _ in range(10_000):
        if done or trunc:
            break
        assert info["action_mask"].sum() > 0
        _, r, done, trunc, info = env.step(env.action_space.sample(mask=info["action_mask"]))
        total += r
        objectives += info.get("round_objective", 0.0)
    assert trunc and not done and total == pytest.approx(objectives)


# --- determinism, errors, export -------------------------------------------------------------


def _trace(env, seed: int, steps: int = 60) -> list:
    obs, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    out = [obs["jobs"].tobytes()]
    for _ in range(steps):
        obs, r, term, trunc, info = env.step(env.action_space.sample(mask=info["action_mask"]))
        out.append((obs["nodes"].tobytes(), r))
        if term or trunc:
            break
    return out


def test_same_seed_same_episode():
    assert _trace(RoundEnv(), 7) == _trace(RoundEnv(), 7)
    assert _trace(RoundEnv(), 7) != _trace(RoundEnv(), 8)
    wl, nodes = _small_sim()
    assert _trace(SimEnv(wl, nodes, round_s=100, max_jobs=10), 3) == _trace(SimEnv(wl, nodes, round_s=100, max_jobs=10), 3)


def test_masked_actions_are_no_ops_or_errors():
    env = RoundEnv(_two_node_round(), max_jobs=4, max_nodes=4, max_grid=(3, 2))
    obs, info = env.reset(seed=0)
    bad = int(np.flatnonzero(info["action_mask"] == 0)[0])
    obs2, r, term, trunc, info2 = env.step(bad)
    assert info2["invalid_action"] and r == 0.0 and not term and info2["current_job"] == "big"
    assert np.array_equal(obs2["nodes"], obs["nodes"])
    strict = RoundEnv(_two_node_round(), max_jobs=4, max_nodes=4, max_grid=(3, 2), invalid_action="raise")
    strict.reset(seed=0)
    with pytest.raises(InputError, match="masked out"):
        strict.step(bad)
    with pytest.raises(InputError):
        strict.step(10_000)


def test_rounds_larger_than_the_padding_are_refused():
    with pytest.raises(InputError, match="max_jobs"):
        RoundEnv(_two_node_round(), max_jobs=1)
    with pytest.raises(InputError, match="max_nodes"):
        RoundEnv(_two_node_round(), max_nodes=2)
    with pytest.raises(InputError, match="max_grid"):
        RoundEnv(_two_node_round(), max_grid=(2, 2))
    with pytest.raises(InputError):
        EnvSizes(max_jobs=0)


def test_exported_episode_passes_optsched_validate_and_check(tmp_path, capsys):
    from optsched.cli import main

    env = RoundEnv(load_instance(TINY[0]))
    total, _ = _rollout(env, 0)
    inst_path, dec_path = env.save_episode(tmp_path)
    doc = env.schedule_json()
    assert doc["instance"] == env.instance.name and doc["objective"] == pytest.approx(total)
    assert main(["check", str(inst_path), str(dec_path)]) == 0
    assert capsys.readouterr().out.startswith("feasible")
    assert main(["validate", str(inst_path), str(dec_path), "--time-limit", "2"]) == 0
    assert "feasible" in capsys.readouterr().out
