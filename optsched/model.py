"""The round instance: immutable, validated-once types for nodes, jobs, profiles and rounds.

Each type validates itself at construction and refuses bad values with an
:class:`~optsched.errors.InputError` naming the field. ``from_dict`` parses the contract's JSON
(``docs/contract.md``) and prefixes errors with the JSON path (``jobs[3].demand``); ``to_dict``
writes it back. Use :func:`dataclasses.replace` to derive a modified, re-validated copy.

The types live in :mod:`optsched.fields` (versions, enumerations, field readers),
:mod:`optsched.job` (``Profile``, ``Elastic``, ``Job``) and :mod:`optsched.instance` (``Node``,
``Round``, ``Instance``); this module is where callers import them from.
"""

from __future__ import annotations

from optsched.fields import CONTRACT_VERSION, CONTRACT_VERSIONS, FAIRNESS, PACKING, SPREAD_FROM
from optsched.instance import Instance, Node, Round
from optsched.job import Elastic, Job, Profile, cheapest_point, fair_floor

__all__ = ["CONTRACT_VERSION", "CONTRACT_VERSIONS", "FAIRNESS", "PACKING", "SPREAD_FROM", "Elastic", "cheapest_point", "fair_floor", "Instance", "Job", "Node", "Profile",
           "Round"]
