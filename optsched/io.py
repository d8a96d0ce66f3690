"""Reading and writing the contract's JSON files (plain or gzip-compressed)."""

from __future__ import annotations

import gzip
import json
import math
import re
import sys
import tempfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from optsched.errors import InputError
from optsched.fields import file_path, gc_paused
from optsched.limits import MAX_DEPTH
from optsched.model import Instance
from optsched.schedule import Schedule

__all__ = ["check_writable", "load_instance", "load_json", "load_schedule", "parse_json", "read_stdin", "save_instance", "write_json"]


def load_json(path: str | Path) -> Any:
    """Parse a ``.json`` or ``.json.gz`` file with :func:`parse_json`; unreadable or invalid files
    raise :class:`InputError` (field ``path``, or the JSON path of a refused value). The name
    ``"-"`` reads standard input instead (:func:`read_stdin`; a file named ``-`` is ``./-``)."""
    if isinstance(path, str) and path == "-":
        return read_stdin()
    p = file_path(path)
    try:
        raw = p.read_bytes()
        if p.suffix == ".gz":
            raw = _gunzip(raw)
    except FileNotFoundError:
        raise InputError("path", str(p), "no such file") from None
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise InputError("path", str(p), f"cannot be read: {e or type(e).__name__}") from None
    return _parse_source(raw, "path", str(p))


def _parse_source(raw: bytes, field: str, name: str) -> Any:
    """:func:`parse_json` of ``raw``, a document that cannot be parsed at all named as its
    source (``field`` ``name``: a file's path, or stdin); a refused value keeps its JSON path."""
    try:
        return parse_json(raw)
    except InputError as e:
        if e.field == "body":
            raise InputError(field, name, e.problem) from None
        raise


#: a ``.json.gz`` file that inflates beyond this is refused (a gzip bomb), as is a bigger body
MAX_JSON_BYTES = 1 << 30


def read_stdin() -> Any:
    """One JSON document from standard input (``optsched gen ... | optsched solve -``), plain or
    gzip-compressed (told by its first bytes), read as :func:`load_json` reads a file: at most
    :data:`MAX_JSON_BYTES`. A terminal is refused rather than waited on (field ``stdin``)."""
    stream = sys.stdin
    if stream is None or stream.isatty():
        raise InputError("stdin", "-", "is a terminal: pipe a JSON document into it (e.g. optsched gen ... | optsched solve -)")
    try:
        raw = stream.buffer.read(MAX_JSON_BYTES + 1)
        if len(raw) > MAX_JSON_BYTES:
            raise OSError(f"holds more than {MAX_JSON_BYTES:,} bytes")
        if raw[:2] == b"\x1f\x8b":
            raw = _gunzip(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise InputError("stdin", "-", f"cannot be read: {e or type(e).__name__}") from None
    if not raw.strip():
        raise InputError("stdin", "-", "is empty: pipe a JSON document into it")
    return _parse_source(raw, "stdin", "-")


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


def _constant(literal: str) -> _Refused:
    return _Refused(literal, f"{literal} is not a JSON number (RFC 8259 has no NaN or infinities)")


def _int(literal: str) -> int | _Refused:
    digits = len(literal.lstrip("-"))
    if digits > _MAX_INT_DIGITS:
        return _Refused(f"<an integer of {digits} digits>", f"is an integer literal of more than {_MAX_INT_DIGITS:,} digits")
    return int(literal)


def _float(literal: str) -> float | _Refused:
    x = float(literal)
    if math.isinf(x):
        return _Refused(literal if len(literal) <= 40 else literal[:37] + "...",
                        "is a number too large for a 64-bit float (it would read as infinity)")
    return x


#: longer integer literals are refused where they stand (Python converts at most this many
#: digits); shorter ones outside the contract's range are refused by optsched.limits
_MAX_INT_DIGITS = 4300


def parse_json(data: bytes | str) -> Any:
    """Parse one JSON document strictly, as every optsched input is read (files, HTTP bodies).

    Refused with an :class:`InputError`: text that is not UTF-8 (a UTF-8 byte-order mark is
    skipped), invalid JSON, a key twice in one object, nesting deeper than
    :data:`~optsched.limits.MAX_DEPTH`, the non-standard literals ``NaN``, ``Infinity`` and
    ``-Infinity``, numbers that overflow a double (``1e400``), integer literals of more than
    4,300 digits (Python's conversion limit; smaller integers outside the contract's range are
    refused by :mod:`optsched.limits`), and strings with a lone UTF-16 surrogate (``"\\ud800"``). The field is the JSON
    path of the refused value where there is one, else ``body``.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        as_bytes = bytes(data)
        raw: bytes | None = as_bytes
        try:
            text = as_bytes.decode("utf-8")
        except UnicodeDecodeError as e:
            bad = f"byte 0x{as_bytes[e.start]:02x} at offset {e.start}"
            raise InputError("body", bad, f"is not UTF-8 text ({bad})") from None
    else:
        text, raw = data, None
    text = text.removeprefix("\ufeff")
    refused: list[_Refused] = []

    def note(value: Any) -> Any:
        if isinstance(value, _Refused):
            refused.append(value)
        return value

    def loads(**hooks: Any) -> Any:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=lambda t: note(_constant(t)), **hooks)

    with gc_paused():
        try:
            try:
                doc = loads()
            except json.JSONDecodeError:
                raise
            except ValueError:  # an integer beyond Python's int-str limit: again, the hook marks where
                doc = loads(parse_int=lambda t: note(_int(t)))
        except _DuplicateKey as e:
            raise InputError("body", e.args[0], f"has the key {e.args[0]!r} twice in one JSON object") from None
        except json.JSONDecodeError as e:
            raise InputError("body", text[max(0, e.pos - 20):e.pos + 20], f"is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
        except RecursionError:
            raise InputError("body", f"deeper than {MAX_DEPTH}", f"nests arrays and objects deeper than {MAX_DEPTH} levels") from None
        surrogates = "\\u" in text and _SURROGATE.search(text) is not None
        # the text alone shows most documents shallow and free of overflowing numbers; the others
        # are walked (the same answer, slower)
        depth, overflow = (1, False) if _plain_text(text, raw) else _shape(doc)
        if overflow:  # again, with a hook that keeps the literal (rare: only when a number overflowed)
            doc = loads(parse_int=lambda t: note(_int(t)), parse_float=lambda t: note(_float(t)))
        if refused or surrogates or overflow or depth > MAX_DEPTH:
            _scan(doc, surrogates)  # the slower walk, to name where the problem is
    return doc


#: a JSON escape of a UTF-16 surrogate (paired ones decode to one character; lone ones stay)
_SURROGATE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_CONTAINERS = (dict, list)
_INF = math.inf


#: every byte but the JSON structure (brackets, braces, quotes)
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
#: braces as brackets (a document's nesting is the same)
_BRACKETS = bytes.maketrans(b"{}", b"[]")
#: digits as ``0``, ``E`` as ``e``, ``+`` kept, every other byte a space: what an overflowing number looks like
_NUMBER_SHAPE = bytes(48 if 48 <= b <= 57 else 101 if b in b"eE" else 43 if b == 43 else 32 for b in range(256))
#: a JSON float that overflows a double (above 1.8e308) has an exponent of three or more digits,
#: or, with a two-digit exponent, more than 200 digits before its point
_OVERFLOW_SIGNS = (b"e000", b"e+000", b"0" * 200)


def _plain_text(text: str, raw: bytes | None) -> bool:
    """Whether valid JSON ``text`` (its UTF-8 bytes ``raw`` when at hand) certainly nests at most
    :data:`MAX_DEPTH` deep and has no number that overflows a double, told from its characters
    alone (tens of milliseconds for 40 MB, against seconds for :func:`_shape`'s walk).

    ``False`` means "walk the tree": always when the text has a backslash (an escaped quote could
    hide a bracket in a string), a string with a bracket or a brace in it (its quotes stay apart,
    and what is left never empties), nesting deeper than :data:`MAX_DEPTH`, or a number that
    might overflow (an exponent of three digits, 200 digits in a row).
    """
    if raw is None:
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:  # a str with a lone surrogate: the walk names it
            return False
    if b"\\" in raw:
        return False
    # with no escapes, a string with no structure character in it is an adjacent quote pair
    shape = raw.translate(None, _NOT_STRUCTURE).replace(b'""', b"").translate(_BRACKETS)
    for _ in range(MAX_DEPTH):  # each pass removes the innermost level (and never a quote)
        if not shape:
            break
        shape = shape.replace(b"[]", b"")
    if shape:
        return False
    numbers = raw.translate(_NUMBER_SHAPE)
    return not any(sign in numbers for sign in _OVERFLOW_SIGNS)


def _shape(doc: Any) -> tuple[int, bool]:
    """Nesting depth of arrays and objects (counted to one level past MAX_DEPTH), and whether a
    number overflowed to an infinity (``1e400``: Python's json reads it as ``inf``)."""
    level = [doc] if type(doc) in _CONTAINERS else []
    depth, overflow = 0, type(doc) is float and abs(doc) == _INF
    while level and depth <= MAX_DEPTH:
        depth += 1
        nxt: list[Any] = []
        for node in level:
            for v in node.values() if type(node) is dict else node:
                t = type(v)
                if t is dict or t is list:
                    nxt.append(v)
                elif t is float and (v == _INF or v == -_INF):
                    overflow = True
        level = nxt
    return depth + (1 if level else 0), overflow


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
        elif isinstance(node, float) and math.isinf(node):
            raise InputError(at or "body", "a number beyond 1.8e308",
                             "is a number too large for a 64-bit float (it would read as infinity)")
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
    """An :class:`Instance` from a file path (``"-"``: standard input) or an already-parsed JSON object."""
    if isinstance(source, Mapping):
        return Instance.from_dict(source)
    return Instance.from_dict(load_json(source))


def load_schedule(source: str | Path | Mapping[str, Any]) -> Schedule:
    return Schedule.from_dict(source if isinstance(source, Mapping) else load_json(source))


def write_json(obj: Any, path: str | Path) -> None:
    """Write JSON (gzip when the name ends in ``.gz``), atomically: a crash leaves no half file."""
    p = file_path(path)
    text = json.dumps(obj, indent=1 if p.suffix != ".gz" else None, sort_keys=False) + "\n"
    data = gzip.compress(text.encode(), mtime=0) if p.suffix == ".gz" else text.encode()
    tmp = p.with_name(p.name + ".tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        tmp.replace(p)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise InputError("path", str(p), f"cannot be written: {e.strerror or e}") from None


def check_writable(path: str | Path, field: str = "-o", *, directory: bool = False) -> Path:
    """``path`` if a file (or, with ``directory``, files inside it) can be written there, else
    :class:`InputError` naming ``field``: checked before any work, so that an hour's result is
    never lost to a typo in the output path. Creates the missing parent directories."""
    p = file_path(path, field)
    try:
        if p.is_dir() and not directory:
            raise InputError(field, str(p), "is a directory; give a file name")
        if directory and p.exists() and not p.is_dir():
            raise InputError(field, str(p), "is a file; give a directory")
        where = p if directory else p.parent
        where.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=where, prefix=".optsched-", suffix=".probe"):
            pass
    except OSError as e:
        raise InputError(field, str(p), f"cannot be written: {e.strerror or e}") from None
    return p


def save_instance(instance: Instance, path: str | Path) -> None:
    write_json(instance.to_dict(), path)
