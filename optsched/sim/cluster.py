"""Clusters to simulate: homogeneous, heterogeneous mixes, and the real Alibaba PAI 2020 inventory.

Every function returns a tuple of contract :class:`~optsched.model.Node` s with ids ``n0, n1, ...``
and racks of ``rack_size`` nodes. :func:`parse_cluster` reads the command line's short forms.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from optsched.errors import InputError
from optsched.fields import file_path
from optsched.limits import MAX_NODES, check_at_most, check_count
from optsched.model import Node

__all__ = ["MIXES", "NodeShape", "alibaba_v2023", "heterogeneous", "homogeneous", "pai_2020", "parse_cluster", "summary"]

#: ``(count, gpu_type, gpus, cpus, mem_gb)``
NodeShape = tuple[int, str, int, int, int]

#: Named heterogeneous mixes (Gavel-style generations; shares of nodes, 8 GPUs each).
MIXES: dict[str, tuple[tuple[float, str, int, int, int], ...]] = {
    # one third each of three GPU generations, as in Gavel's simulated cluster
    "v100-p100-k80": ((1 / 3, "V100", 8, 64, 512), (1 / 3, "P100", 8, 64, 512), (1 / 3, "K80", 8, 48, 384)),
    # a newer cluster: half A100, half V100 with less host memory
    "a100-v100": ((0.5, "A100", 8, 96, 1024), (0.5, "V100", 8, 64, 512)),
}

_SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
ALIBABA_V2023_NODES = _SHARED / "alibaba-gpu-v2023" / "openb_node_list_gpu_node.csv"

#: The Alibaba PAI 2020 machine inventory (NSDI'22), summarized: machines per (gpu_type, GPUs,
#: cores, GB), from ``pai_machine_spec.csv`` of cluster-trace-gpu-v2020 in
#: github.com/alibaba/clusterdata, licensed CC BY 4.0 (Weng et al., "MLaaS in the Wild", NSDI
#: 2022). ``MISC`` stands for its older K40m, K80 and M60 machines.
PAI_2020_SHAPES: tuple[tuple[str, int, int, int, int], ...] = (
    ("MISC", 8, 96, 512, 280), ("V100", 8, 96, 384, 45), ("V100", 8, 96, 512, 59), ("V100M32", 8, 96, 384, 135),
    ("P100", 2, 64, 512, 798), ("T4", 2, 96, 512, 497), ("CPU", 0, 96, 512, 83),
)


def _nodes(shapes: Sequence[NodeShape], rack_size: int | None) -> tuple[Node, ...]:
    # sizes first, before any node is built: at most MAX_NODES nodes, and counts a round may hold
    check_at_most("cluster", sum(shape[0] for shape in shapes), MAX_NODES, "nodes")
    for _, _, gpus, cpus, mem_gb in shapes:
        check_count("cluster", gpus)
        check_count("cpus", cpus)
        check_count("mem_gb", mem_gb)
    out: list[Node] = []
    for count, gpu_type, gpus, cpus, mem_gb in shapes:
        for _ in range(count):
            i = len(out)
            rack = None if not rack_size else f"r{i // rack_size}"
            out.append(Node(id=f"n{i}", gpu_type=gpu_type, gpus=gpus, cpus=cpus, mem_gb=mem_gb, rack=rack))
    if not out:
        raise InputError("cluster", list(shapes), "has no nodes")
    return tuple(out)


def homogeneous(
    n_nodes: int, *, gpus: int = 8, cpus: int = 64, mem_gb: int = 512, gpu_type: str = "V100", rack_size: int | None = 16
) -> tuple[Node, ...]:
    """``n_nodes`` identical servers (default 8 GPUs, 64 cores, 512 GB, V100)."""
    if n_nodes < 1 or gpus < 1:
        raise InputError("cluster", f"{n_nodes}x{gpus}", "needs at least one node of at least one GPU")
    if cpus < 1:  # a node without a core or a GB runs no job: every replay would stall
        raise InputError("cpus", cpus, "must be >= 1 core per node")
    if mem_gb < 1:
        raise InputError("mem_gb", mem_gb, "must be >= 1 GB per node")
    return _nodes([(n_nodes, gpu_type, gpus, cpus, mem_gb)], rack_size)


def heterogeneous(shapes: Sequence[NodeShape], *, rack_size: int | None = 16) -> tuple[Node, ...]:
    """Nodes of several shapes, ``(count, gpu_type, gpus, cpus, mem_gb)`` each, in the given order."""
    return _nodes(shapes, rack_size)


def mix(name: str, n_nodes: int, *, rack_size: int | None = 16) -> tuple[Node, ...]:
    """``n_nodes`` nodes split over a named :data:`MIXES` entry (largest-remainder rounding)."""
    if name not in MIXES:
        raise InputError("cluster.mix", name, f"unknown mix; known: {sorted(MIXES)}")
    parts = MIXES[name]
    counts = _apportion([p[0] for p in parts], n_nodes)
    return _nodes([(c, *p[1:]) for c, p in zip(counts, parts, strict=True) if c], rack_size)


def _apportion(shares: Sequence[float], total: int) -> list[int]:
    raw = [s * total / sum(shares) for s in shares]
    counts = [math.floor(x) for x in raw]
    for i in sorted(range(len(raw)), key=lambda i: (counts[i] - raw[i], i))[: total - sum(counts)]:
        counts[i] += 1
    return counts


def pai_2020(
    path: str | Path | None = None, *, fraction: float = 1.0, include_cpu_only: bool = False, rack_size: int | None = 16
) -> tuple[Node, ...]:
    """The Alibaba PAI 2020 machine inventory (NSDI'22) as nodes: ``gpu_type`` P100, T4, V100,
    V100M32 or MISC (older K40m/K80/M60), with their real cores, memory and GPUs: the bundled
    summary :data:`PAI_2020_SHAPES`, or the spec file at ``path`` (``pai_machine_spec.csv``).

    ``fraction`` < 1 keeps that share of every machine shape (at least one each, rounded), a
    deterministic down-scaled cluster with the same mix. CPU-only machines are left out unless
    ``include_cpu_only``.
    """
    if not 0 < fraction <= 1:
        raise InputError("cluster.fraction", fraction, "must be in (0, 1]")
    shapes: Counter[tuple[str, int, int, int]] = Counter()
    if path is None:  # the bundled summary of the published spec
        for gpu_type, gpus, cpus, mem, count in PAI_2020_SHAPES:
            if gpus or include_cpu_only:
                shapes[(gpu_type, gpus, cpus, mem)] += count
        rows: list[list[str]] = []
    else:
        p = file_path(path)
        try:
            with p.open(newline="") as fh:
                rows = list(csv.reader(fh))
        except FileNotFoundError:
            raise InputError("path", str(p), "no such file (the PAI 2020 machine spec)") from None
    for i, r in enumerate(rows):
        if len(r) != 5:
            raise InputError(f"{Path(str(path)).name}[row {i}]", r, "must have 5 fields: machine, gpu_type, cap_cpu, cap_mem, cap_gpu")
        try:
            gpu_type, cpus, mem, gpus = r[1], int(r[2]), int(r[3]), int(r[4])
        except ValueError:
            raise InputError(f"{Path(str(path)).name}[row {i}]", r, "cap_cpu, cap_mem and cap_gpu must be integers") from None
        if gpus == 0 and not include_cpu_only:
            continue
        shapes[(gpu_type, gpus, cpus, mem)] += 1
    ordered = sorted(shapes.items(), key=lambda kv: (-kv[0][1], kv[0]))
    out = [(max(1, round(c * fraction)), t, g, cpu, m) for (t, g, cpu, m), c in ordered]
    return _nodes(out, rack_size)


def alibaba_v2023(path: str | Path | None = None, *, fraction: float = 1.0, rack_size: int | None = 16) -> tuple[Node, ...]:
    """The GPU nodes of the Alibaba GPU v2023 cluster (``openb_node_list_gpu_node.csv`` of
    cluster-trace-gpu-v2023 in github.com/alibaba/clusterdata; not bundled: its terms are research
    use with citation, so pass its path). Its GPU types G1-G3 are undisclosed; the catalogue
    gives them a V100's speeds (docs/catalogue.md)."""
    p = file_path(path) if path is not None else ALIBABA_V2023_NODES
    if not 0 < fraction <= 1:
        raise InputError("cluster.fraction", fraction, "must be in (0, 1]")
    try:
        with p.open(newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError:
        raise InputError("path", str(p), "no such file: the v2023 node list is not bundled; download openb_node_list_gpu_node.csv "
                                         "(cluster-trace-gpu-v2023, github.com/alibaba/clusterdata) and pass "
                                         "--cluster alibaba2023:PATH[:FRACTION]") from None
    except (OSError, UnicodeDecodeError, csv.Error) as e:  # a directory, a binary file, a broken CSV
        raise InputError("path", str(p), f"is not a readable CSV node list ({type(e).__name__}: {e})") from None
    shapes: Counter[tuple[str, int, int, int]] = Counter()
    for i, r in enumerate(rows):
        try:
            gpus = int(r["gpu"])
            cpus = int(r["cpu_milli"]) // 1000
            mem = int(r["memory_mib"]) // 1024
        except (KeyError, TypeError, ValueError):  # TypeError: a short row's missing cells
            raise InputError(f"{p.name}[line {i + 2}]", r, "needs integer gpu, cpu_milli and memory_mib") from None
        if gpus < 0 or (gpus and (cpus < 1 or mem < 1)):
            raise InputError(f"{p.name}[line {i + 2}]", r, "a GPU node needs gpu >= 0, at least 1,000 cpu_milli and 1,024 memory_mib")
        if gpus:
            shapes[(r.get("model") or "GPU", gpus, cpus, mem)] += 1
    ordered = sorted(shapes.items(), key=lambda kv: (-kv[0][1], kv[0]))
    return _nodes([(max(1, round(c * fraction)), t, g, cpu, m) for (t, g, cpu, m), c in ordered], rack_size)


def parse_cluster(spec: str, *, cpus: int = 64, mem_gb: int = 512) -> tuple[Node, ...]:
    """Short forms: ``64x8`` (64 nodes x 8 GPUs, ``cpus`` cores, ``mem_gb`` GB, V100),
    ``64x8:A100``, ``mix:v100-p100-k80:48``, ``pai2020`` or ``pai2020:0.05`` (a share of it),
    ``alibaba2023[:PATH][:FRACTION]`` (the v2023 node list at ``PATH``)."""
    kind, _, rest = spec.partition(":")
    try:
        if kind == "pai2020":
            return pai_2020(fraction=float(rest) if rest else 1.0)
        if kind == "alibaba2023":  # alibaba2023[:PATH][:FRACTION]
            where, _, frac = rest.rpartition(":") if _is_number(rest.rpartition(":")[2]) else (rest, "", "")
            return alibaba_v2023(where or None, fraction=float(frac) if frac else 1.0)
        if kind == "mix":
            name, _, n = rest.rpartition(":")
            return mix(name, int(n))
        n, x, g = kind.partition("x")
        if x:
            return homogeneous(int(n), gpus=int(g), cpus=cpus, mem_gb=mem_gb, gpu_type=rest or "V100")
    except InputError:
        raise  # a well-formed spec with a bad value: say which
    except ValueError:
        pass
    raise InputError("cluster", spec, "use NxG[:TYPE] (e.g. 64x8), mix:NAME:N, pai2020[:FRACTION] or alibaba2023[:PATH][:FRACTION]")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def summary(nodes: Sequence[Node]) -> str:
    """One line: nodes, GPUs by type, cores and memory."""
    by_type: Counter[str] = Counter()
    for nd in nodes:
        by_type[nd.gpu_type] += nd.gpus
    types = ", ".join(f"{t} {g}" for t, g in by_type.most_common())
    return f"{len(nodes)} nodes, {sum(by_type.values())} GPUs ({types}), {sum(n.cpus for n in nodes)} cores, {sum(n.mem_gb for n in nodes)} GB"
