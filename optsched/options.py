"""Typed option objects: one frozen dataclass per solve method, validated once.

Every method's options are a subclass of :class:`MethodOptions` (``CpsatOptions``,
``LnsOptions``, ``MipOptions``, ``MaifsOptions``, and :class:`NoOptions` for methods that take
none), each declared beside its method and named by the registry
(:attr:`optsched.registry.MethodInfo.options`). Each field is declared with :func:`option`: its
default, a one-line help text, and the :class:`Check` that refuses a bad value and normalises a
good one. Construction validates every field, so an options object is always valid;
:meth:`MethodOptions.from_mapping` also refuses unknown names, listing the known ones. The Python
API (``solve_round``), the CLI (``optsched solve --option KEY=VALUE``) and the HTTP service
(``"options"`` of ``POST /v1/solve``) all go through ``from_mapping``, so they accept and refuse
the same options with the same message.

Example
-------
>>> from optsched.options import MethodOptions, Check, option
>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class ToyOptions(MethodOptions):
...     method = "toy"
...     rounds: int = option(3, "how many rounds", Check.integer(ge=1))
>>> ToyOptions.from_mapping({"rounds": 5}).to_dict()
{'rounds': 5}
>>> ToyOptions.from_mapping({"round": 5})
Traceback (most recent call last):
...
optsched.errors.InputError: options.round: unknown option of toy; known: rounds (got 5)
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from optsched.errors import InputError
from optsched.limits import MAX_COUNT

__all__ = ["Check", "MethodOptions", "NoOptions", "OptionInfo", "option"]

_T = TypeVar("_T", bound="MethodOptions")


@dataclass(frozen=True)
class Check:
    """A field's validation: ``fn(field, value)`` returns the normalised value or raises
    :class:`~optsched.errors.InputError` naming ``field``; ``text`` says what it accepts."""

    text: str
    fn: Callable[[str, Any], Any]

    def __call__(self, name: str, value: Any) -> Any:
        return self.fn(name, value)

    def or_none(self, meaning: str = "") -> Check:
        """This check, or ``None`` (``meaning``: what ``None`` stands for, shown in the type)."""
        def fn(name: str, value: Any) -> Any:
            return None if value is None else self.fn(name, value)

        return Check(f"{self.text} | null" + (f" ({meaning})" if meaning else ""), fn)

    @staticmethod
    def boolean() -> Check:
        """``True`` or ``False`` (not 0/1, not a string)."""
        def fn(name: str, value: Any) -> bool:
            if not isinstance(value, bool):
                raise InputError(name, value, "must be true or false")
            return value

        return Check("bool", fn)

    @staticmethod
    def integer(*, ge: int, le: int = MAX_COUNT) -> Check:
        """An integer (not a boolean) in ``[ge, le]`` (``le``: by default the largest count
        optsched computes with, :data:`optsched.limits.MAX_COUNT`)."""
        def fn(name: str, value: Any) -> int:
            if isinstance(value, bool) or not isinstance(value, int) or value < ge:
                raise InputError(name, value, "must be a positive integer" if ge == 1 else f"must be an integer >= {ge}")
            if value > le:
                raise InputError(name, value, f"must be <= {le:,}")
            return int(value)

        return Check(f"int >= {ge}" if le == MAX_COUNT else f"int in [{ge}, {le}]", fn)

    @staticmethod
    def number(*, gt: float | None = None, ge: float | None = None, lt: float | None = None, le: float | None = None,
               problem: str | None = None) -> Check:
        """A finite real number (not a boolean) within the given bounds, as a ``float``."""
        lo = f"({gt}" if gt is not None else f"[{ge}" if ge is not None else "(-inf"
        hi = f"{lt})" if lt is not None else f"{le}]" if le is not None else "inf)"
        text = f"number > {gt}" if gt is not None and lt is None and le is None else f"number in {lo}, {hi}"

        def fn(name: str, value: Any) -> float:
            ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
            ok = ok and (gt is None or value > gt) and (ge is None or value >= ge)
            ok = ok and (lt is None or value < lt) and (le is None or value <= le)
            if not ok:
                raise InputError(name, value, problem or f"must be a {text}")
            return float(value)

        return Check(text, fn)

    @staticmethod
    def one_of(choices: tuple[Any, ...]) -> Check:
        """One of ``choices`` (compared by equality, booleans only with booleans)."""
        def fn(name: str, value: Any) -> Any:
            for c in choices:
                if type(c) is type(value) and c == value:
                    return c
            raise InputError(name, value, f"must be one of {list(choices)}")

        return Check(" | ".join(repr(c) if isinstance(c, str) else str(c).lower() for c in choices), fn)

    @staticmethod
    def path() -> Check:
        """A file path (a string or ``os.PathLike``), kept as a string."""
        def fn(name: str, value: Any) -> str:
            if not isinstance(value, (str, os.PathLike)) or not str(value):
                raise InputError(name, value, "must be a file path")
            return os.fspath(value) if isinstance(value, os.PathLike) else value

        return Check("path", fn)


def option(default: Any, help: str, check: Check, *, remote: bool = True) -> Any:
    """Declare an options field: its ``default``, a one-line ``help``, its ``check``.

    ``remote=False`` marks a field for Python and CLI callers only (a path on the server's disk,
    the server's own output, an in-process object): the HTTP service refuses it by name.
    """
    return field(default=default, metadata={"help": help, "check": check, "remote": remote})


@dataclass(frozen=True)
class OptionInfo:
    """One field of an options class, for listings (``optsched methods --options``, ``GET /v1/methods``)."""

    name: str
    type: str
    default: Any
    help: str
    remote: bool

    def to_dict(self) -> dict[str, Any]:
        default = self.default if self.default is None or isinstance(self.default, (bool, int, float, str)) else repr(self.default)
        return {"name": self.name, "type": self.type, "default": default, "help": self.help, "remote": self.remote}


@dataclass(frozen=True)
class MethodOptions:
    """Base of the per-method options: a frozen dataclass whose fields are declared with
    :func:`option`. Subclasses set ``method`` (the name used in messages)."""

    method: ClassVar[str] = "this method"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = f.metadata["check"](f"options.{f.name}", getattr(self, f.name))
            object.__setattr__(self, f.name, value)  # the normalised value (frozen dataclass)

    @classmethod
    def from_mapping(cls: type[_T], mapping: Mapping[str, Any] | None = None, *, method: str | None = None) -> _T:
        """The options of ``mapping`` (``None``: all defaults), validated.

        Raises
        ------
        InputError
            ``options.NAME`` for an unknown name (the message lists the known ones, for
            ``method`` or the class's own method name) or a bad value (the message says what
            the field accepts); ``options`` when ``mapping`` is not a mapping.
        """
        if mapping is None:
            mapping = {}
        if not isinstance(mapping, Mapping):
            raise InputError("options", mapping, "must be a mapping of option names to values")
        known = cls.names()
        for key, value in mapping.items():
            if key not in known:
                name = method or cls.method
                problem = f"unknown option of {name}; known: {', '.join(known)}" if known else f"unknown option: {name} takes none"
                raise InputError(f"options.{key}", value, problem)
        return cls(**mapping)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names, in declaration order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def describe(cls) -> list[OptionInfo]:
        """Every field: name, accepted type, default, one-line help, whether HTTP accepts it."""
        return [OptionInfo(f.name, f.metadata["check"].text, f.default, f.metadata["help"], f.metadata["remote"])
                for f in fields(cls)]

    def to_dict(self) -> dict[str, Any]:
        """Every field's value (defaults included), keyed by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def replace(self: _T, **changes: Any) -> _T:
        """A validated copy with ``changes`` (unknown names refused as by :meth:`from_mapping`)."""
        return type(self).from_mapping({**self.to_dict(), **changes})


@dataclass(frozen=True)
class NoOptions(MethodOptions):
    """The options of a method that takes none: every name is refused."""

    method: ClassVar[str] = "this method"
