"""Reading and writing the contract's JSON files (plain or gzip-compressed)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from optsched.errors import InputError
from optsched.model import Instance
from optsched.schedule import Schedule

__all__ = ["load_instance", "load_json", "load_schedule", "save_instance", "write_json"]


def load_json(path: str | Path) -> Any:
    """Parse a ``.json`` or ``.json.gz`` file; unreadable or invalid files raise :class:`InputError`."""
    p = Path(path)
    try:
        raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
        return json.loads(raw, object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKey as e:
        raise InputError("path", str(p), f"has the key {e.args[0]!r} twice in one JSON object") from None
    except FileNotFoundError:
        raise InputError("path", str(p), "no such file") from None
    except (OSError, gzip.BadGzipFile) as e:
        raise InputError("path", str(p), f"cannot be read: {e}") from None
    except json.JSONDecodeError as e:
        raise InputError("path", str(p), f"is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except UnicodeDecodeError:
        raise InputError("path", str(p), "is not UTF-8 text") from None


class _DuplicateKey(Exception):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of repeated keys silently; a repeated job id or field is bad input
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return out


def load_instance(source: str | Path | Mapping[str, Any]) -> Instance:
    """An :class:`Instance` from a file path or an already-parsed JSON object."""
    if isinstance(source, Mapping):
        return Instance.from_dict(source)
    return Instance.from_dict(load_json(source))


def load_schedule(source: str | Path | Mapping[str, Any]) -> Schedule:
    return Schedule.from_dict(source if isinstance(source, Mapping) else load_json(source))


def write_json(obj: Any, path: str | Path) -> None:
    """Write JSON (gzip when the name ends in ``.gz``), atomically: a crash leaves no half file."""
    p = Path(path)
    text = json.dumps(obj, indent=1 if p.suffix != ".gz" else None, sort_keys=False) + "\n"
    data = gzip.compress(text.encode(), mtime=0) if p.suffix == ".gz" else text.encode()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(p)


def save_instance(instance: Instance, path: str | Path) -> None:
    write_json(instance.to_dict(), path)
