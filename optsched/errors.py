"""The exception types: :class:`InputError` for bad input, :class:`SolverBug` for a method's bug.

Every refusal of bad input (instance JSON, schedule JSON, method names, CLI options) raises
:class:`InputError`, which names the offending field as a JSON-style path and the value found.
The CLI prints it without a traceback and exits with status 2; the HTTP service turns it into
a 422 response with the same field.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["InputError", "SolverBug", "jsonable", "safe_text"]


class InputError(ValueError):
    """Bad input: ``field`` is a path such as ``jobs[3].profile.throughput[1][0]``."""

    def __init__(self, field: str, value: Any, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(f"{safe_text(field)}: {safe_text(problem)} (got {_short(value)})")

    def within(self, prefix: str) -> InputError:
        """The same error with ``prefix`` put in front of its field path."""
        if not self.field:
            field = prefix
        elif self.field.startswith("["):
            field = prefix + self.field
        else:
            field = f"{prefix}.{self.field}"
        return InputError(field, self.value, self.problem)

    def to_dict(self) -> dict[str, Any]:
        """``field``, ``value`` and ``problem`` as strict JSON: the value is echoed only when JSON
        can carry it (a NaN, an infinity, a lone surrogate, a huge integer or a container is
        echoed as its short ``repr``), so an error body always serialises."""
        return {"field": safe_text(self.field), "value": jsonable(self.value), "problem": safe_text(self.problem)}


class SolverBug(RuntimeError):
    """A method returned a schedule the independent checker refuses: a bug, never bad input."""


#: an echoed string or repr is cut to this many characters
_ECHO_LIMIT = 80
#: integers with more digits are echoed by their size (``repr`` refuses beyond Python's
#: int-str digit limit, and no client needs the digits)
_ECHO_DIGITS = 40


def safe_text(text: str) -> str:
    """``text`` with lone surrogates (which UTF-8 cannot encode) escaped as ``\\udXXX``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _repr(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        digits = _int_digits(value)
        if digits > _ECHO_DIGITS:
            return f"<an integer of {digits} digits>"
    try:
        return safe_text(repr(value))
    except (ValueError, RecursionError):  # repr of a too-deep container or a huge integer inside one
        return f"<a {type(value).__name__} too large to print>"


def _int_digits(value: int) -> int:
    """Decimal digits of ``value`` without converting it to a string (which is refused beyond
    Python's int-str digit limit)."""
    n = abs(value)
    if n < 10:
        return 1
    digits = int(n.bit_length() * 0.30102999566398120)  # log10(2): exact or one short
    return digits + (n >= 10**digits)


def _short(value: Any, limit: int = _ECHO_LIMIT) -> str:
    """``repr(value)``, its middle cut out beyond ``limit`` characters: both ends stay readable
    (a long path keeps its file name)."""
    text = _repr(value)
    if len(text) <= limit:
        return text
    head = (limit - 3) // 2
    return text[:head] + "..." + text[len(text) - (limit - 3 - head):]


def jsonable(value: Any) -> Any:
    """``value`` as strict JSON can carry it in an error body: ``None``, booleans, finite floats,
    integers of at most ``_ECHO_DIGITS`` digits and short UTF-8 strings as they are; anything
    else (NaN, infinities, huge integers, containers, lone surrogates) as its short ``repr``."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and _int_digits(value) <= _ECHO_DIGITS:
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, str) and len(value) <= _ECHO_LIMIT:
        return safe_text(value)
    return _short(value)
