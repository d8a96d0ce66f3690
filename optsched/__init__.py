"""optsched: integrated, fungible scheduling of deep-learning jobs on shared GPU clusters.

Each scheduling round is a mixed-integer program over job placement and per-job CPU/memory
allocation. ``solve_round`` solves it exactly (CP-SAT), heuristically, or with a learned policy;
``check_schedule`` is an independent checker of the round contract (docs/contract.md).
"""

import logging

from optsched.checker import CheckReport, Violation, check_schedule
from optsched.errors import InputError
from optsched.io import load_instance, load_schedule, save_instance
from optsched.model import CONTRACT_VERSION, Instance, Job, Node, Profile, Round
from optsched.registry import methods, register_method
from optsched.result import Result, Status
from optsched.schedule import Assignment, Schedule
from optsched.solve import SolverBug, solve_round

__version__ = "0.1.0"

# the library logs under "optsched" (module loggers such as optsched.exact.cpsat) and configures
# no output of its own: the application decides (logging.basicConfig, a handler on "optsched")
logging.getLogger("optsched").addHandler(logging.NullHandler())

__all__ = [
    "CONTRACT_VERSION",
    "Assignment",
    "CheckReport",
    "InputError",
    "Instance",
    "Job",
    "Node",
    "Profile",
    "Result",
    "Round",
    "Schedule",
    "SolverBug",
    "Status",
    "Violation",
    "check_schedule",
    "load_instance",
    "load_schedule",
    "methods",
    "register_method",
    "save_instance",
    "solve_round",
]
