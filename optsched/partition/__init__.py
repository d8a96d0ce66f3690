"""Decomposition of large rounds: POP-style partitions solved in parallel, coordinated by prices.

:class:`~optsched.partition.solver.PartitionedSolver` is registered as the ``partitioned``
heuristic (``solve_round(inst, solver="partitioned", backend="local" | "ray")``); the math is in
``formulations/partitioned.md``.
"""

from optsched.partition.solver import PartitionedSolver
from optsched.partition.split import Partition, draw_partition

__all__ = ["Partition", "PartitionedSolver", "draw_partition"]
