"""Reading and writing the contract's JSON files (plain or gzip-compressed)."""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from optsched.errors import InputError
from optsched.limits import MAX_DEPTH
from optsched.model import Instance
from optsched.schedule import Schedule

__all__ = ["load_instance", "load_json", "load_schedule", "parse_json", "save_instance", "write_json"]


def load_json(path: str | Path) -> Any:
    """Parse a ``.json`` or ``.json.gz`` file with :func:`parse_json`; unreadable or invalid files
    raise :class:`InputError` (field ``path``, or the JSON path of a refused value)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
        if p.suffix == ".gz":
            raw = _gunzip(raw)
    except FileNotFoundError:
        raise InputError("path", str(p), "no such file") from None
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise InputError("path", str(p), f"cannot be read: {e or type(e).__name__}") from None
    try:
        return parse_json(raw)
    except InputError as e:
        if e.field == "body":
            raise InputError("path", str(p), e.problem) from None
        raise


#: a ``.json.gz`` file that inflates beyond this is refused (a gzip bomb), as is a bigger body
MAX_JSON_BYTES = 1 << 30


def _gunzip(raw: bytes) -> bytes:
    """Inflate every gzip member of ``raw``, refusing more than :data:`MAX_JSON_BYTES` of output."""
    out = bytearray()
    while raw:
        d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        out += d.decompress(raw, MAX_JSON_BYTES + 1 - len(out))
        if len(out) > MAX_JSON_BYTES:
            raise OSError(f"inflates to more than {MAX_JSON_BYTES:,} bytes")
        if not d.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        raw = d.unused_data.lstrip(b"\0")  # the next member, if any (gzip pads with zeros)
    return bytes(out)


class _Refused:
    """A JSON literal the contract refuses (NaN, an infinity, a huge integer), kept in the tree
    so that :func:`parse_json` can name where it stood."""

    __slots__ = ("literal", "problem")

    def __init__(self, literal: str, problem: str) -> None:
        self.literal, self.problem = literal, problem


#: integer literals longer than this are refused at parse time (Python refuses to convert
#: beyond 4,300 digits; every count of the contract is at most optsched.limits.MAX_COUNT)
_MAX_INT_DIGITS = 100


def _constant(literal: str) -> _Refused:
    return _Refused(literal, f"{literal} is not a JSON number (RFC 8259 has no NaN or infinities)")


def _int(literal: str) -> int | _Refused:
    if len(literal.lstrip("-")) > _MAX_INT_DIGITS:
        return _Refused(f"<an integer of {len(literal.lstrip('-'))} digits>",
                        f"is an integer literal of more than {_MAX_INT_DIGITS} digits")
    return int(literal)


def _float(literal: str) -> float | _Refused:
    x = float(literal)
    if not math.isfinite(x):
        return _Refused(literal if len(literal) <= 40 else literal[:37] + "...",
                        "is a number too large for a 64-bit float (it would read as infinity)")
    return x


def parse_json(data: bytes | str) -> Any:
    """Parse one JSON document strictly, as every optsched input is read (files, HTTP bodies).

    Refused with an :class:`InputError`: text that is not UTF-8 (a UTF-8 byte-order mark is
    skipped), invalid JSON, a key twice in one object, nesting deeper than
    :data:`~optsched.limits.MAX_DEPTH`, the non-standard literals ``NaN``, ``Infinity`` and
    ``-Infinity``, numbers that overflow a double (``1e400``), integer literals of more than
    100 digits, and strings with a lone UTF-16 surrogate (``"\\ud800"``). The field is the JSON
    path of the refused value where there is one, else ``body``.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            bad = f"byte 0x{bytes(data)[e.start]:02x} at offset {e.start}"
            raise InputError("body", bad, f"is not UTF-8 text ({bad})") from None
    else:
        text = data
    text = text.removeprefix("\ufeff")
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_constant, parse_int=_int,
                         parse_float=_float)
    except _DuplicateKey as e:
        raise InputError("body", e.args[0], f"has the key {e.args[0]!r} twice in one JSON object") from None
    except json.JSONDecodeError as e:
        raise InputError("body", text[max(0, e.pos - 20):e.pos + 20], f"is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise InputError("body", f"deeper than {MAX_DEPTH}", f"nests arrays and objects deeper than {MAX_DEPTH} levels") from None
    _scan(doc, surrogates="\\u" in text and _SURROGATE.search(text) is not None)
    return doc


#: a JSON escape of a UTF-16 surrogate (paired ones decode to one character; lone ones stay)
_SURROGATE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def _scan(doc: Any, surrogates: bool) -> None:
    """One walk over the parsed tree: depth, refused literals, lone surrogates (only looked for
    when the text has a surrogate escape); the first problem is raised with its JSON path."""
    stack: list[tuple[Any, str, int]] = [(doc, "", 1)]
    while stack:
        node, at, depth = stack.pop()
        if isinstance(node, dict):
            if depth > MAX_DEPTH:
                raise InputError(at or "body", f"depth {depth}", f"nests arrays and objects deeper than {MAX_DEPTH} levels")
            for k, v in node.items():
                if surrogates and not _utf8(k):
                    raise InputError(at or "body", k, "has a key with a lone UTF-16 surrogate (not Unicode text)")
                stack.append((v, f"{at}.{k}" if at else k, depth + 1))
        elif isinstance(node, list):
            if depth > MAX_DEPTH:
                raise InputError(at or "body", f"depth {depth}", f"nests arrays and objects deeper than {MAX_DEPTH} levels")
            stack.extend((v, f"{at}[{i}]", depth + 1) for i, v in enumerate(node))
        elif isinstance(node, _Refused):
            raise InputError(at or "body", node.literal, node.problem)
        elif surrogates and isinstance(node, str) and not _utf8(node):
            raise InputError(at or "body", node, "has a lone UTF-16 surrogate (not Unicode text)")


def _utf8(s: str) -> bool:
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


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
