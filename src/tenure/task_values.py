"""Values beyond JSON in task arguments, decoded by the task's annotations (docs/tasks.md#values).

A parameter annotated ``datetime``, ``date``, ``Decimal``, ``UUID`` or an ``Enum`` subclass (or
``X | None`` of one) is stored as JSON text (``isoformat()``, ``str()``; an Enum as its
``.value``) and handed back to the function as that type by the worker. Only the task's own named
parameters are decoded (not values inside lists or dicts, not ``*args``/``**kwargs``); a value of
another type is left alone (and refused at enqueue if it is not JSON, TN1002).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID


class Codec(typing.NamedTuple):
    """How one annotated parameter is stored: ``encode`` when the value ``fits``, ``decode`` back."""

    fits: Callable[[Any], bool]
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


def _decoder(kind: type, parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def decode(value: Any) -> Any:
        return value if isinstance(value, kind) or value is None else parse(value)

    return decode


_CODECS: dict[type, Codec] = {
    datetime: Codec(
        lambda v: isinstance(v, datetime), datetime.isoformat, _decoder(datetime, datetime.fromisoformat)
    ),
    date: Codec(lambda v: type(v) is date, date.isoformat, _decoder(date, date.fromisoformat)),
    Decimal: Codec(lambda v: isinstance(v, Decimal), str, _decoder(Decimal, Decimal)),
    UUID: Codec(lambda v: isinstance(v, UUID), str, _decoder(UUID, UUID)),
}


def codec_for(annotation: Any) -> Codec | None:
    """The codec of a parameter's (evaluated) annotation, or None for a plain JSON parameter."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(rest) != 1:
            return None
        annotation = rest[0]
    if not isinstance(annotation, type):
        return None
    if issubclass(annotation, Enum):
        enum = annotation
        return Codec(lambda v: isinstance(v, enum), lambda v: v.value, _decoder(enum, enum))
    return _CODECS.get(annotation)


def codecs_of(signature: inspect.Signature) -> dict[str, Codec]:
    """``{parameter name: codec}`` for the named parameters that need one."""
    named = (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )
    found = {}
    for p in signature.parameters.values():
        codec = codec_for(p.annotation) if p.kind in named else None
        if codec is not None:
            found[p.name] = codec
    return found


def convert(
    signature: inspect.Signature,
    codecs: dict[str, Codec],
    args: list[Any],
    kwargs: dict[str, Any],
    *,
    encode: bool,
) -> tuple[list[Any], dict[str, Any]]:
    """``args``/``kwargs`` with each value of a coded parameter encoded (at enqueue) or decoded (in
    the worker); positions map to the positional parameters in order."""
    if not codecs:
        return args, kwargs
    positional = [
        p.name
        for p in signature.parameters.values()
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]

    def one(name: str | None, value: Any) -> Any:
        codec = codecs.get(name) if name is not None else None
        if codec is None:
            return value
        if encode:
            return codec.encode(value) if codec.fits(value) else value
        return codec.decode(value)

    args = [one(positional[i] if i < len(positional) else None, v) for i, v in enumerate(args)]
    kwargs = {k: one(k, v) for k, v in kwargs.items()}
    return args, kwargs
