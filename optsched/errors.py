"""The one exception type for bad input.

Every refusal of bad input (instance JSON, schedule JSON, method names, CLI options) raises
:class:`InputError`, which names the offending field as a JSON-style path and the value found.
The CLI prints it without a traceback and exits with status 2; the HTTP service turns it into
a 422 response with the same field.
"""

from __future__ import annotations

from typing import Any

__all__ = ["InputError"]


class InputError(ValueError):
    """Bad input: ``field`` is a path such as ``jobs[3].profile.throughput[1][0]``."""

    def __init__(self, field: str, value: Any, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(f"{field}: {problem} (got {_short(value)})")

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
        return {"field": self.field, "value": _jsonable(self.value), "problem": self.problem}


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)``, its middle cut out beyond ``limit`` characters: both ends stay readable
    (a long path keeps its file name)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    head = (limit - 3) // 2
    return text[:head] + "..." + text[len(text) - (limit - 3 - head):]


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return _short(value)
