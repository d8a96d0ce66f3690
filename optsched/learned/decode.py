"""Coordinated decoding of the policy's scores into a feasible schedule, and its Evaluate mode.

**Decoding** (the coordination step). The network scores every job once; jobs then act one at a
time, most confident first (descending admit logit), against capacity that earlier jobs have
used. A job picks the (grid point, node) pair maximising ``point logit + node logit + fit_j x
(free GPUs left on the node after it / node GPUs)`` over the pairs that fit; the last term is a
learned per-job best-fit / worst-fit preference that changes as nodes fill, so jobs that want the
same node are resolved in confidence order and later ones see the node's new state. A gang that
fits on no single node is split greedily over the nodes of one allowed GPU type (most GPUs
available first, policy score breaking ties), trying grid points in policy order. A gang that
fits on one node only at a point the node's shape forces (no point worth more fits even the
empty node) is split too where that is worth more, spread included. Jobs that do
not fit wait. A final pass hands leftover cores and memory to co-located jobs by marginal gain
(moving a job to a better grid point when all its nodes have room). Every step checks
capacities, so the result is feasible by construction (tests check it with the independent
checker).

**Evaluate mode** (:func:`log_likelihood`). The log-probability of a given schedule under the
same factorisation: an admit/queue Bernoulli per job, and for each scheduled job, in decoding
order, a softmax over the nodes still open to it (capacity masks computed from the earlier jobs
of the given schedule) and a softmax over the grid points its nodes can still hold. It is
differentiable (behaviour cloning maximises it) and scores any external decision.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from optsched.capacity import FreeCapacity
from optsched.learned.features import NEG, RoundFeatures
from optsched.model import Instance
from optsched.schedule import Assignment, Schedule
from optsched.values import spread_multiplier

if TYPE_CHECKING:  # torch only where the policy's output is read: decoding and the repair run without it
    import torch  # lazy: torch is the train extra

    from optsched.learned.policy import PolicyOutput

__all__ = ["Scores", "decode", "decode_state", "log_likelihood", "redistribute_leftover", "scores_of", "target_arrays"]

_OPEN = NEG / 2  # logits above this are possible choices


@dataclass
class Scores:
    """One round's (unpadded) policy scores as numpy arrays."""

    admit: np.ndarray  # (J,)
    node: np.ndarray  # (J, N)
    point: np.ndarray  # (J, P)
    fit: np.ndarray  # (J,)


def scores_of(out: PolicyOutput, b: int, feats: RoundFeatures) -> Scores:
    """Round ``b`` of a batched output, cut to its real sizes."""
    J, N, P = feats.n_jobs, feats.n_nodes, feats.point.shape[1]
    f = lambda t: t.detach().float().cpu().numpy().astype(np.float64)  # noqa: E731
    return Scores(admit=f(out.admit[b, :J]), node=f(out.node[b, :J, :N]), point=f(out.point[b, :J, :P]), fit=f(out.fit[b, :J]))


# --- decoding ---------------------------------------------------------------------------------


class PlacementState(FreeCapacity):
    """Free capacity per node (:class:`optsched.capacity.FreeCapacity`), and the decision so far."""

    def __init__(self, feats: RoundFeatures) -> None:
        super().__init__(feats.node_gpus, feats.node_cpus, feats.node_mem)
        self.where: dict[int, dict[int, int]] = {}  # job -> node -> GPUs
        self.point: dict[int, int] = {}  # job -> point index
        self.timed_out = False

    def place(self, j: int, nodes: dict[int, int], p: int, c: int, m: int) -> None:
        self.reserve(nodes, c, m)
        self.where[j] = nodes
        self.point[j] = p


def place_job_on(st: PlacementState, feats: RoundFeatures, j: int, nodes: dict[int, int], p: int) -> None:
    """Place job ``j`` on ``nodes`` ({node: GPUs}) at grid point ``p``."""
    st.place(j, nodes, p, int(feats.point_c[j, p]), int(feats.point_m[j, p]))


def _gumbel(rng: np.random.Generator | None, shape: tuple[int, ...], temperature: float) -> np.ndarray | float:
    if rng is None:
        return 0.0
    return temperature * rng.gumbel(size=shape)


def decode(
    instance: Instance,
    feats: RoundFeatures,
    scores: Scores,
    *,
    rng: np.random.Generator | None = None,
    temperature: float = 1.0,
    fixed: dict[int, tuple[dict[int, int], int]] | None = None,
    leftover: bool = True,
    deadline: float | None = None,
) -> Schedule:
    """A feasible schedule from the policy's scores (greedy; sampled when ``rng`` is given); see
    :func:`decode_state` for the arguments."""
    st = decode_state(instance, feats, scores, rng=rng, temperature=temperature, fixed=fixed, leftover=leftover, deadline=deadline)
    return state_schedule(instance, feats, st)


def decode_state(
    instance: Instance,
    feats: RoundFeatures,
    scores: Scores,
    *,
    rng: np.random.Generator | None = None,
    temperature: float = 1.0,
    fixed: dict[int, tuple[dict[int, int], int]] | None = None,
    leftover: bool = True,
    deadline: float | None = None,
) -> PlacementState:
    """The decoder's state (free capacity per node, each job's nodes and grid point) for the
    policy's scores: greedy, or sampled when ``rng`` is given.

    Each job scans the nodes of its allowed types that still have room for its gang, vectorised
    over (grid point x node), so a round costs O(jobs x nodes) array work but only O(jobs)
    Python steps (about a second for 4,000 jobs on 1,024 nodes).
    ``fixed`` pre-places jobs (job index -> ({node index: GPUs}, point index)) before decoding
    the others: the decoder then completes a partial decision (used by warm starts).
    ``deadline`` (a :func:`time.perf_counter` value): past it, no further job is placed and the
    leftover pass is skipped; the partial schedule is still feasible.
    """
    J, N = feats.n_jobs, feats.n_nodes
    st = PlacementState(feats)
    if fixed:
        for j, (nodes, p) in fixed.items():
            place_job_on(st, feats, j, dict(nodes), p)
    if J == 0 or N == 0:
        return st
    admit = scores.admit + _gumbel(rng, (J,), temperature)
    order = np.argsort(-admit, kind="stable")
    node_logit = scores.node + _gumbel(rng, scores.node.shape, temperature)
    point_logit = scores.point + _gumbel(rng, scores.point.shape, temperature)
    allowed = scores.node > _OPEN
    safe_gpus = np.maximum(feats.node_gpus, 1)
    type_ids = np.unique(feats.node_type)
    all_nodes = np.arange(N)
    for step, j in enumerate(order):
        if deadline is not None and step % 64 == 0 and time.perf_counter() > deadline:
            st.timed_out = True
            break
        if j in st.where:
            continue
        g = int(feats.gpus[j])
        open_j = allowed[j] & (st.free_g > 0)
        if not open_j.any():
            continue
        pts = np.flatnonzero(point_logit[j] > _OPEN)
        if pts.size == 0:
            continue
        pc, pm = feats.point_c[j, pts] * g, feats.point_m[j, pts] * g
        pl = point_logit[j, pts]
        choice = _single_node(j, g, all_nodes[open_j], node_logit, pl, pc, pm, st, scores.fit[j], safe_gpus)
        if choice is not None:
            p, n = choice
            nodes, point = {int(n): g}, int(pts[p])
            if g > 1:  # a gang the node's shape starves may be worth more spread over several nodes
                better = _starved_split(instance, j, g, pts, pl, feats, allowed[j], node_logit[j], st, type_ids, nodes, point)
                if better is not None:
                    nodes, point = better
            place_job_on(st, feats, j, nodes, point)
            continue
        if g > 1:
            split = split_job(instance, j, g, pts, pl, feats, allowed[j], node_logit[j], st, type_ids)
            if split is not None:
                nodes, p = split
                place_job_on(st, feats, j, nodes, int(p))
    if leftover and not st.timed_out:
        redistribute_leftover(instance, feats, st)
    return st


def _single_node(
    j: int,
    g: int,
    cand: np.ndarray,
    node_logit: np.ndarray,
    pl: np.ndarray,
    pc: np.ndarray,
    pm: np.ndarray,
    st: PlacementState,
    fit: float,
    safe_gpus: np.ndarray,
) -> tuple[int, int] | None:
    """Best (point position, node) with the whole gang on one node, or ``None``."""
    cand = cand[st.free_g[cand] >= g]
    if cand.size == 0:
        return None
    ok = (st.free_c[cand][None, :] >= pc[:, None]) & (st.free_m[cand][None, :] >= pm[:, None])
    if not ok.any():
        return None
    s = node_logit[j, cand] + fit * (st.free_g[cand] - g) / safe_gpus[cand]
    total = np.where(ok, pl[:, None] + s[None, :], -np.inf)
    flat = int(np.argmax(total))
    p, i = divmod(flat, cand.size)
    return p, int(cand[i])


#: a gang's single-node choice counts as starved, and a split replaces it, where the split is worth
#: more than this many times as much (spread included)
STARVED = 2.0


def _starved_split(
    instance: Instance,
    j: int,
    g: int,
    pts: np.ndarray,
    pl: np.ndarray,
    feats: RoundFeatures,
    allowed: np.ndarray,
    node_logit: np.ndarray,
    st: PlacementState,
    type_ids: np.ndarray,
    nodes: dict[int, int],
    p: int,
) -> tuple[dict[int, int], int] | None:
    """A split of gang ``j`` (:func:`split_job`) worth more than its single-node choice
    (``nodes``, point ``p``), tried only where the node's shape starves the gang: no grid point
    worth more than ``p`` fits even the empty node with all ``g`` GPUs (then one node, however
    empty, cannot feed it, while a part of the gang on each of several nodes gets their cores and
    memory). Only points worth more are offered to the split; ``None`` when none pays for its
    spread."""
    (n, _), = nodes.items()
    value = feats.point_value[j, pts]
    better = value > feats.point_value[j, p] + 1e-12
    if not better.any():
        return None
    whole = (feats.point_c[j, pts] * g <= feats.node_cpus[n]) & (feats.point_m[j, pts] * g <= feats.node_mem[n])
    if (better & whole).any():
        return None  # room taken by other jobs, not the node's shape, keeps the gang lean
    single = float(feats.point_value[j, p]) * move_multiplier(instance, feats, j, nodes)
    split = split_job(instance, j, g, pts[better], pl[better], feats, allowed, node_logit, st, type_ids)
    if split is None or float(feats.point_value[j, split[1]]) * move_multiplier(instance, feats, j, split[0]) <= STARVED * single + 1e-12:
        return None
    return split


def split_job(
    instance: Instance,
    j: int,
    g: int,
    pts: np.ndarray,
    pl: np.ndarray,
    feats: RoundFeatures,
    allowed: np.ndarray,
    node_logit: np.ndarray,
    st: PlacementState,
    type_ids: np.ndarray,
) -> tuple[dict[int, int], int] | None:
    """Spread a gang over nodes of one GPU type: best estimated worth over (point, type)."""
    job = instance.jobs[j]
    best: tuple[float, dict[int, int], int] | None = None
    open_nodes = allowed & (st.free_g > 0)
    if int(st.free_g[open_nodes].sum()) < g:
        return None
    for pos in np.argsort(-pl, kind="stable"):
        p = int(pts[pos])
        c, m = int(feats.point_c[j, p]), int(feats.point_m[j, p])
        cap = st.free_g.copy()
        if c > 0:
            cap = np.minimum(cap, st.free_c // c)
        if m > 0:
            cap = np.minimum(cap, st.free_m // m)
        cap = np.where(open_nodes, np.maximum(cap, 0), 0)
        for t in type_ids:
            on_t = np.flatnonzero((feats.node_type == t) & (cap > 0))
            if on_t.size == 0 or int(cap[on_t].sum()) < g:
                continue
            order = on_t[np.lexsort((-node_logit[on_t], -cap[on_t]))]
            nodes: dict[int, int] = {}
            need = g
            for n in order:
                take = int(min(cap[n], need))
                nodes[int(n)] = take
                need -= take
                if need == 0:
                    break
            gpu_type = instance.nodes[int(on_t[0])].gpu_type
            speed = job.speed(gpu_type) or 0.0
            worth = feats.point_value[j, p] * speed * spread_multiplier(instance, job, gpu_type, len(nodes), g)
            if best is None or worth > best[0] + 1e-12:
                best = (worth, nodes, p)
        if best is not None:
            return best[1], best[2]  # the policy's preferred point that admits a split
    return None


def redistribute_leftover(instance: Instance, feats: RoundFeatures, st: PlacementState, passes: int = 3) -> None:
    """Give leftover cores and memory to placed jobs by marginal gain (grid-point upgrades).

    Each pass finds, for every placed job at once, the best better point its nodes' room allows
    and its gain in worth; jobs then upgrade in order of gain, each re-checked against the room
    the earlier upgrades left. Passes repeat while something changes.
    """
    if not st.where:
        return
    jobs = np.fromiter(st.where.keys(), dtype=np.int64, count=len(st.where))
    mult = np.array([move_multiplier(instance, feats, j, st.where[int(j)]) for j in jobs])
    for _ in range(passes):
        cap_c = np.empty(jobs.size)
        cap_m = np.empty(jobs.size)
        for i, j in enumerate(jobs):
            nodes = st.where[int(j)]
            cap_c[i] = min(st.free_c[n] / k for n, k in nodes.items())
            cap_m[i] = min(st.free_m[n] / k for n, k in nodes.items())
        p_old = np.array([st.point[int(j)] for j in jobs])
        val = feats.point_value[jobs]
        v_old = val[np.arange(jobs.size), p_old]
        dc = feats.point_c[jobs] - feats.point_c[jobs, p_old][:, None]
        dm = feats.point_m[jobs] - feats.point_m[jobs, p_old][:, None]
        ok = feats.point_ok[jobs] & feats.point_mask[jobs] & (val > v_old[:, None] + 1e-12)
        ok &= (dc <= cap_c[:, None]) & (dm <= cap_m[:, None])
        gain = np.where(ok, (val - v_old[:, None]) * mult[:, None], 0.0).max(axis=1)
        todo = np.flatnonzero(gain > 0)
        if todo.size == 0:
            return
        for i in todo[np.argsort(-gain[todo], kind="stable")]:
            j = int(jobs[i])
            best = _best_upgrade(feats, st, j)  # re-check: earlier upgrades used room
            if best is None:
                continue
            repoint_job(st, feats, j, best[1])


def repoint_job(st: PlacementState, feats: RoundFeatures, j: int, p: int) -> None:
    """Move placed job ``j`` to grid point ``p`` on the nodes it holds, updating their free cores
    and memory (the caller has checked that they have the room)."""
    dc = int(feats.point_c[j, p] - feats.point_c[j, st.point[j]])
    dm = int(feats.point_m[j, p] - feats.point_m[j, st.point[j]])
    for n, k in st.where[j].items():
        st.free_c[n] -= dc * k
        st.free_m[n] -= dm * k
    st.point[j] = p


def move_multiplier(instance: Instance, feats: RoundFeatures, j: int, nodes: dict[int, int]) -> float:
    """What a job's worth is, per unit of ``point_value``, where it is placed."""
    job = instance.jobs[j]
    gpu_type = instance.nodes[next(iter(nodes))].gpu_type
    speed = job.speed(gpu_type) or 0.0
    v = speed * spread_multiplier(instance, job, gpu_type, len(nodes), sum(nodes.values()))
    if job.placement is not None and dict(job.placement) != {instance.nodes[n].id: k for n, k in nodes.items()}:
        v *= 1.0 - job.restart_s / instance.round.duration_s
    return v


def _best_upgrade(feats: RoundFeatures, st: PlacementState, j: int) -> tuple[float, int] | None:
    p_old = st.point[j]
    val = feats.point_value[j]
    better = feats.point_ok[j] & feats.point_mask[j] & (val > val[p_old] + 1e-12)
    if not better.any():
        return None
    cand = np.flatnonzero(better)
    dc = feats.point_c[j, cand] - feats.point_c[j, p_old]
    dm = feats.point_m[j, cand] - feats.point_m[j, p_old]
    ok = np.ones(cand.size, dtype=bool)
    for n, k in st.where[j].items():
        ok &= (dc * k <= st.free_c[n]) & (dm * k <= st.free_m[n])
    if not ok.any():
        return None
    cand = cand[ok]
    i = int(np.argmax(val[cand]))
    return float(val[cand[i]] - val[p_old]), int(cand[i])


def state_schedule(instance: Instance, feats: RoundFeatures, st: PlacementState) -> Schedule:
    jobs = {}
    for j, nodes in st.where.items():
        p = st.point[j]
        jobs[instance.jobs[j].id] = Assignment(
            {instance.nodes[n].id: k for n, k in nodes.items()}, int(feats.point_c[j, p]), int(feats.point_m[j, p])
        )
    return Schedule(instance.name, jobs)


# --- Evaluate mode ----------------------------------------------------------------------------


def target_arrays(
    instance: Instance, feats: RoundFeatures, schedule: Schedule, *, snap_dominated: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """``(gpus (J, N), point index (J,) or -1)`` of a schedule that names this round's jobs and nodes.

    The policy only chooses undominated grid points (the leftover pass never needs others); with
    ``snap_dominated`` a dominated point of the schedule is scored as the best allowed point that
    dominates it (no more cores or memory, at least the throughput), otherwise its probability is
    zero (log-likelihood about ``-1e9``).
    """
    J, N = feats.n_jobs, feats.n_nodes
    gpus = np.zeros((J, N), dtype=np.int64)
    point = np.full(J, -1, dtype=np.int64)
    for jid, a in schedule.jobs.items():
        j = instance.job_idx(jid)
        for nid, k in a.nodes.items():
            gpus[j, instance.node_idx(nid)] = k
        hits = np.flatnonzero(feats.point_mask[j] & (feats.point_c[j] == a.cpus_per_gpu) & (feats.point_m[j] == a.mem_per_gpu_gb))
        if hits.size != 1:
            raise ValueError(f"job {jid}: ({a.cpus_per_gpu}, {a.mem_per_gpu_gb}) is not a grid point")
        p = int(hits[0])
        if snap_dominated and not feats.point_ok[j, p]:
            dom = np.flatnonzero(
                feats.point_ok[j] & (feats.point_c[j] <= feats.point_c[j, p]) & (feats.point_m[j] <= feats.point_m[j, p])
                & (feats.point_value[j] >= feats.point_value[j, p])
            )
            if dom.size:
                p = int(dom[np.argmax(feats.point_value[j, dom])])
        point[j] = p
    return gpus, point


def log_likelihood(
    out: PolicyOutput, b: int, feats: RoundFeatures, gpus: np.ndarray, point: np.ndarray
) -> dict[str, torch.Tensor]:
    """Log-likelihood terms (``admit``, ``node``, ``point``, ``total``) of a schedule for round ``b``.

    ``gpus`` and ``point`` come from :func:`target_arrays`. Differentiable in ``out``.
    """
    import torch  # lazy: torch is the train extra
    J, N, P = feats.n_jobs, feats.n_nodes, feats.point.shape[1]
    admit = out.admit[b, :J]
    node = out.node[b, :J, :N]
    plog = out.point[b, :J, :P]
    fit = out.fit[b, :J]
    dev = admit.device
    sched = point >= 0
    s_t = torch.from_numpy(sched).to(dev)
    ll_admit = torch.where(s_t, torch.nn.functional.logsigmoid(admit), torch.nn.functional.logsigmoid(-admit)).sum()
    zero = admit.sum() * 0.0
    if not sched.any():
        return {"admit": ll_admit, "node": zero, "point": zero, "total": ll_admit}
    # decoding order of the scheduled jobs, and the capacity each finds free
    sj = np.flatnonzero(sched)
    sj = sj[np.argsort(-admit.detach().cpu().numpy()[sj], kind="stable")]
    g = feats.gpus[sj]
    use_g = gpus[sj]  # (S, N)
    c = feats.point_c[sj, point[sj]]
    m = feats.point_m[sj, point[sj]]
    before = lambda u: np.cumsum(u, axis=0) - u  # noqa: E731
    free_g = feats.node_gpus[None, :] - before(use_g)
    free_c = feats.node_cpus[None, :] - before(use_g * c[:, None])
    free_m = feats.node_mem[None, :] - before(use_g * m[:, None])
    allowed = node[sj].detach().cpu().numpy() > _OPEN
    single = (use_g > 0).sum(axis=1) == 1
    ok_pts = feats.point_ok[sj] & feats.point_mask[sj]
    cmin = np.where(ok_pts, feats.point_c[sj], np.iinfo(np.int64).max).min(axis=1)
    mmin = np.where(ok_pts, feats.point_m[sj], np.iinfo(np.int64).max).min(axis=1)
    open_single = (free_g >= g[:, None]) & (free_c >= (cmin * g)[:, None]) & (free_m >= (mmin * g)[:, None])
    open_nodes = allowed & np.where(single[:, None], open_single, free_g >= 1)
    open_nodes |= use_g > 0  # the given schedule's own nodes are always open (it is feasible)
    dyn = np.clip(free_g - g[:, None], 0, None) / np.maximum(feats.node_gpus, 1)[None, :]
    s = node[sj] + fit[sj, None] * torch.from_numpy(dyn).to(node.dtype).to(dev)
    s = s.masked_fill(~torch.from_numpy(open_nodes).to(dev), NEG)
    share = torch.from_numpy(use_g / g[:, None]).to(node.dtype).to(dev)
    ll_node = (share * torch.log_softmax(s, dim=1)).sum()
    # grid points the job's nodes can still hold
    with np.errstate(divide="ignore", invalid="ignore"):
        rc = np.where(use_g > 0, free_c / np.maximum(use_g, 1), np.inf).min(axis=1)
        rm = np.where(use_g > 0, free_m / np.maximum(use_g, 1), np.inf).min(axis=1)
    fits = ok_pts & (feats.point_c[sj] <= rc[:, None]) & (feats.point_m[sj] <= rm[:, None])
    fits[np.arange(sj.size), point[sj]] = True
    pl = plog[sj].masked_fill(~torch.from_numpy(fits).to(dev), NEG)
    ll_point = torch.log_softmax(pl, dim=1)[torch.arange(sj.size, device=dev), torch.from_numpy(point[sj]).to(dev)].sum()
    return {"admit": ll_admit, "node": ll_node, "point": ll_point, "total": ll_admit + ll_node + ll_point}
