"""Trace-driven, round-based cluster simulator.

Typical use::

    from optsched.sim import cluster, workload, policies, load_trace, simulate, SimConfig, SolveRoundAllocator
    trace = workload.window(load_trace(path), 0, 7 * 86400)
    nodes = cluster.homogeneous(16)
    jobs = workload.build_workload(workload.cap_sizes(trace, 128), nodes, seed=0)
    res = simulate(jobs, nodes, policies.LAS(), SolveRoundAllocator("fungible-greedy", time_limit=5))
    res.summary()

See docs/simulator.md for the semantics (rounds, restarts, what is measured).
"""

from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate
from optsched.sim.policies import FIFO, LAS, MaxMinFairness, ShortestRemaining, get_policy
from optsched.sim.result import SimResult
from optsched.sim.solving import SimulationError, SolveRoundAllocator
from optsched.sim.traces import Trace, load_trace
from optsched.sim.workload import SimJob, Workload, build_workload

__all__ = [
    "FIFO",
    "LAS",
    "MaxMinFairness",
    "ShortestRemaining",
    "SimConfig",
    "SimJob",
    "SimResult",
    "SimulationError",
    "SolveRoundAllocator",
    "Trace",
    "Workload",
    "build_workload",
    "get_policy",
    "load_trace",
    "simulate",
]
