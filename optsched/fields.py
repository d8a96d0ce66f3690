"""The contract's vocabulary and the field readers every ``from_dict`` of :mod:`optsched.model` shares.

The versions this optsched reads and writes, the values of the round's enumerated fields, and
the small readers that decide, in one place, what a valid integer, number, string, object or list
field is (each refusal an :class:`~optsched.errors.InputError` naming the field and the value).
"""

from __future__ import annotations

import contextlib
import difflib
import gc
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from optsched.errors import InputError

__all__ = ["CONTRACT_VERSION", "CONTRACT_VERSIONS", "FAIRNESS", "PACKING", "SPREAD_FROM", "file_path", "gc_paused"]

#: the version of the rounds built in Python (``Round()`` counts spread from the fewest nodes)
CONTRACT_VERSION = 3
#: every version this optsched reads; version 2 adds the optional policy fields (job ``tenant``,
#: ``deadline_s``, ``remaining_s``, ``elastic``; round ``tenants``, ``max_moves``, ``fairness``, ``packing``: formulations/policies.md)
#: and is written exactly when one of them is present; version 3 is version 2 with the spread
#: factor paid per node beyond the fewest a gang needs (``round.spread_from = "fewest"``)
CONTRACT_VERSIONS = (1, 2, 3)
#: the values of ``round.spread_from``: the spread factor is paid per node beyond the fewest nodes
#: of the type that hold the gang (``"fewest"``, version 3) or per node beyond one (``"one"``, versions 1 and 2)
SPREAD_FROM = ("fewest", "one")
#: the values of the version-2 field ``round.fairness``: dominant resource fairness across tenants
#: (``"drf"``) and HUG-style progress fairness over the actual, elastic allocation (``"hug"``)
FAIRNESS = ("drf", "hug")
#: the values of the version-2 field ``round.packing`` (Gandiva-style consolidation: formulations/policies.md)
PACKING = ("consolidate",)


# --- small readers shared by every from_dict: one place that decides what a valid field is ----


def _get(d: Mapping[str, Any], key: str, default: Any = ...) -> Any:
    if key in d:
        return d[key]
    if default is ...:
        raise InputError(key, None, "is required")
    return default


#: keys that start with this are extension fields: read by no method, allowed anywhere in a round
EXTENSION_PREFIX = "x-"


def unknown_field(d: Mapping[str, Any], known: frozenset[str], what: str) -> InputError | None:
    """The error for the first key of ``d`` that is neither in ``known`` nor an extension field
    (:data:`EXTENSION_PREFIX`), naming the key, the closest known one and all of them; ``None``
    where every key is known (for the checker, which reports rather than raises)."""
    if known.issuperset(d):
        return None
    for key in d:
        if key in known or (isinstance(key, str) and key.startswith(EXTENSION_PREFIX)):
            continue
        close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return InputError(str(key), d[key], f"unknown field of {what}; {hint}known: {', '.join(sorted(known))} "
                                            f"(fields starting with {EXTENSION_PREFIX!r} are ignored)")
    return None


def _check_keys(d: Mapping[str, Any], known: frozenset[str], what: str) -> None:
    """Refuse a key of ``d`` that is neither in ``known`` nor an extension field
    (:func:`unknown_field`): a misspelt field would otherwise be read as absent, its default
    silently taking its place."""
    if (e := unknown_field(d, known, what)) is not None:
        raise e


def _numpy(v: Any) -> str:
    """A hint for a numpy value where a plain JSON one is due (pandas and numpy users meet this)."""
    return "; this is a numpy value: pass plain Python ones (int(x), float(x), array.tolist())" if type(v).__module__ == "numpy" else ""


def _check_int(name: str, v: Any, lo: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(name, v, "must be an integer" + _numpy(v))
    if v < lo:
        raise InputError(name, v, f"must be >= {lo}")
    return v


def _check_float(name: str, v: Any, *, positive: bool = False, nonneg: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(name, v, "must be a number" + _numpy(v))
    try:
        x = float(v)
    except OverflowError:  # an integer beyond 1.8e308
        raise InputError(name, v, "must be finite (it is too large for a 64-bit float)") from None
    if not math.isfinite(x):
        raise InputError(name, v, "must be finite")
    if positive and x <= 0:
        raise InputError(name, v, "must be > 0")
    if nonneg and x < 0:
        raise InputError(name, v, "must be >= 0")
    return x


def _check_str(name: str, v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise InputError(name, v, "must be a non-empty string")
    return v


def _check_mapping(name: str, v: Any) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise InputError(name, v, "must be an object")
    return v


def _check_list(name: str, v: Any) -> list[Any]:
    if not isinstance(v, (list, tuple)):
        raise InputError(name, v, "must be a list" + _numpy(v))
    return list(v)


def _check_version(v: Any) -> int:
    # the integer 1 exactly: true == 1 and 1.0 == 1 in Python, but neither is the JSON number 1
    if isinstance(v, bool) or not isinstance(v, int) or v not in CONTRACT_VERSIONS:
        raise InputError("version", v, f"unknown contract version (this optsched reads versions {list(CONTRACT_VERSIONS)})")
    return v


def _frozen_map(m: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return None if m is None else MappingProxyType(dict(m))


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No automatic garbage collection inside the block (restored after it, if it was on).

    Reading a large round allocates millions of objects and no reference cycles; the collector
    would walk the growing heap again and again (on a 12,500-node, 50,000-job round about half of
    the parse time and more of the construction).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def file_path(value: Any, field: str = "path") -> Path:
    """``value`` as a file path: a non-empty string or ``os.PathLike`` without a NUL character
    (which no file system allows), else :class:`InputError` naming ``field``; read and write
    functions check their paths with it before touching the file system."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):  # bytes too: os.fspath of a bytes path-like gives bytes
        raise InputError(field, value, "must be a file path (a string or os.PathLike)")
    if not value:
        raise InputError(field, value, "must be a file path, not empty")
    if "\x00" in value:
        raise InputError(field, value, "contains a NUL character, which no file name can hold")
    return Path(value)
