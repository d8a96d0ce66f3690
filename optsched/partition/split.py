"""Drawing a partition of a round: node parts, the jobs each part is offered, and the rest.

A partition is drawn from the seed alone (``random.Random(seed)``), so the same round, options
and seed always give the same parts. Nodes move in *groups*: the nodes a running job holds now
are glued together (transitively), so every running job can stay where it is inside one part,
and a pinned job (``preemptible=False``) is always offered to the part that holds its nodes.

Three ways to cut the nodes (``by``):

``"random"`` (POP-style)
    node groups, shuffled, each dealt to the part that holds the fewest GPUs of its GPU type so
    far: every part gets about ``1/k`` of each type, as POP's random partitions do in expectation.
``"rack"``
    whole racks (nodes without a rack are groups of their own) dealt the same way.
``"type"``
    one part per GPU type.

Jobs are then dealt, largest gang first and in seeded order within a size, to the part with the
lowest load (GPUs offered / GPUs of the job's allowed types there) among the parts whose allowed
nodes can hold the gang; a gang that no part can hold waits for the final repair across parts
(:attr:`Partition.rest`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from optsched.errors import InputError
from optsched.model import Instance, Job

__all__ = ["BY", "Partition", "draw_partition"]

#: the ways to cut a round's nodes into parts
BY = ("random", "rack", "type")


@dataclass(frozen=True)
class Partition:
    """Node ids and job ids per part (in round order), and the jobs no part can hold (``rest``)."""

    nodes: tuple[tuple[str, ...], ...]
    jobs: tuple[tuple[str, ...], ...]
    rest: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.nodes) != len(self.jobs):
            raise InputError("jobs", len(self.jobs), f"must list the jobs of each of the {len(self.nodes)} parts")

    @property
    def parts(self) -> int:
        return len(self.nodes)


def _node_groups(instance: Instance) -> list[list[int]]:
    """Node indices glued by running jobs' placements (union-find), each group in round order."""
    parent = list(range(len(instance.nodes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for j in instance.jobs:
        idx = [instance.node_idx(n) for n in (j.placement or {})]
        for a in idx[1:]:
            ra, rb = root(idx[0]), root(a)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for i in range(len(instance.nodes)):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def _rack_groups(instance: Instance, groups: list[list[int]]) -> list[list[int]]:
    """The node groups merged by rack (a group spanning racks merges them)."""
    key: dict[str, int] = {}
    parent = list(range(len(groups)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for gi, g in enumerate(groups):
        for i in g:
            rack = instance.nodes[i].rack
            if rack is None:
                continue
            if rack in key:
                ra, rb = root(key[rack]), root(gi)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
            else:
                key[rack] = gi
    merged: dict[int, list[int]] = {}
    for gi, g in enumerate(groups):
        merged.setdefault(root(gi), []).extend(g)
    return [sorted(g) for g in merged.values()]


def _deal_nodes(instance: Instance, groups: list[list[int]], parts: int, rng: random.Random) -> list[int]:
    """Part of each node: groups in seeded order, each to the part with the fewest GPUs of its main type."""
    order = list(range(len(groups)))
    rng.shuffle(order)
    # big groups first so that the small ones even the parts out afterwards
    order.sort(key=lambda gi: -sum(instance.nodes[i].gpus for i in groups[gi]))
    held: dict[str, list[int]] = {}
    part_of = [0] * len(instance.nodes)
    for gi in order:
        g = groups[gi]
        gpus_by_type: dict[str, int] = {}
        for i in g:
            gpus_by_type[instance.nodes[i].gpu_type] = gpus_by_type.get(instance.nodes[i].gpu_type, 0) + instance.nodes[i].gpus
        main = max(sorted(gpus_by_type), key=lambda t: gpus_by_type[t])
        load = held.setdefault(main, [0] * parts)
        total = [sum(h[q] for h in held.values()) for q in range(parts)]
        q = min(range(parts), key=lambda p: (load[p], total[p], p))
        for t, k in gpus_by_type.items():
            held.setdefault(t, [0] * parts)[q] += k
        for i in g:
            part_of[i] = q
    return part_of


def draw_partition(instance: Instance, parts: int | None, *, by: str = "random", seed: int = 0) -> Partition:
    """Cut ``instance`` into ``parts`` parts (``by="type"``: one per GPU type, ``parts`` must be
    ``None`` or that number). Deterministic for a seed; see the module text."""
    if by not in BY:
        raise InputError("by", by, f"unknown partition; known: {list(BY)}")
    types = instance.gpu_types
    if by == "type":
        if parts is not None and parts != len(types):
            raise InputError("parts", parts, f"by='type' makes one part per GPU type ({len(types)} here)")
        parts = max(1, len(types))
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise InputError("parts", parts, "must be a positive integer")
    rng = random.Random(seed)
    groups = _node_groups(instance)
    if by == "type":
        part_of = [types.index(n.gpu_type) for n in instance.nodes]
        # a running job on one type only (model invariant): its group stays within the type
    else:
        if by == "rack":
            groups = _rack_groups(instance, groups)
        part_of = _deal_nodes(instance, groups, parts, rng)

    # GPUs per (type, part)
    capacity: dict[str, list[int]] = {t: [0] * parts for t in types}
    for i, n in enumerate(instance.nodes):
        capacity[n.gpu_type][part_of[i]] += n.gpus
    offered = [0] * parts
    job_part: dict[str, int] = {}
    rest: list[str] = []
    for j in instance.jobs:
        if j.placement:  # running jobs go with their nodes (all in one part: glued above)
            job_part[j.id] = part_of[instance.node_idx(next(iter(j.placement)))]
            offered[job_part[j.id]] += j.gpus
    waiting = [j for j in instance.jobs if not j.placement]
    rng.shuffle(waiting)
    waiting.sort(key=lambda j: -j.gpus)
    # capacity does not change while jobs are dealt: room and largest room per set of allowed types
    rooms: dict[tuple[str, ...], tuple[list[int], list[int]]] = {}
    for j in waiting:
        allowed = tuple(t for t in types if j.speed(t) is not None)
        if allowed not in rooms:
            rooms[allowed] = ([sum(capacity[t][q] for t in allowed) for q in range(parts)],
                              [_largest_type_room(j, capacity, q) for q in range(parts)])
        room, largest = rooms[allowed]
        able = [q for q in range(parts) if largest[q] >= j.gpus]
        if not able:
            rest.append(j.id)
            continue
        q = min(able, key=lambda p: ((offered[p] + j.gpus) / max(room[p], 1), p))
        job_part[j.id] = q
        offered[q] += j.gpus
    node_lists: list[list[str]] = [[] for _ in range(parts)]
    for i, n in enumerate(instance.nodes):
        node_lists[part_of[i]].append(n.id)
    job_lists: list[list[str]] = [[] for _ in range(parts)]
    for j in instance.jobs:
        if j.id in job_part:
            job_lists[job_part[j.id]].append(j.id)
    rest_ids = set(rest)
    return Partition(tuple(map(tuple, node_lists)), tuple(map(tuple, job_lists)), tuple(j.id for j in instance.jobs if j.id in rest_ids))


def _largest_type_room(job: Job, capacity: dict[str, list[int]], q: int) -> int:
    """The most GPUs part ``q`` has of one GPU type the job may use (a gang runs on one type)."""
    return max((capacity[t][q] for t in capacity if job.speed(t) is not None), default=0)
