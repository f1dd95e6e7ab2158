"""Values beyond JSON in task arguments, decoded by the task's annotations (docs/tasks.md#values).

A parameter annotated ``datetime``, ``date``, ``Decimal``, ``UUID`` or an ``Enum`` subclass (or
``X | None`` of one) is stored as JSON text (``isoformat()``, ``str()``; an Enum as its
``.value``) and handed back to the function as that type by the worker. A parameter annotated with
a **dataclass** is stored as a JSON object of its fields, each field encoded and decoded by its own
annotation the same way (nested dataclasses, ``list[X]``, ``dict[str, X]`` and ``X | None`` of
any of these included). :func:`register_type` plugs in any other type (an encoder to JSON, a
decoder back). Only the task's own named parameters are decoded (not ``*args``/``**kwargs``); a
value of another type is left alone, and refused at enqueue if it is not JSON (TN1002 naming the
task and the argument).
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
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


_registry_lock = threading.Lock()
#: Types plugged in by :func:`register_type` (looked up before the built-in ones).
_REGISTERED: dict[type, Codec] = {}


def register_type(cls: type, *, encode: Callable[[Any], Any], decode: Callable[[Any], Any]) -> None:
    """Let task parameters annotated ``cls`` (or ``cls | None``, or a dataclass field of that type)
    take ``cls`` values: ``encode(value)`` answers what is stored (JSON: text, numbers, lists,
    dicts), ``decode(stored)`` the value the task gets back. Register at import of the module that
    declares the tasks, in every process (the enqueuer encodes, the worker decodes). Registering
    a type again replaces its codec; a subclass instance fits its base class's codec."""
    if not isinstance(cls, type):
        raise TypeError(f"register_type takes a class, got {cls!r}")
    if not callable(encode) or not callable(decode):
        raise TypeError("register_type needs callable encode and decode")
    kind = cls
    with _registry_lock:
        _REGISTERED[cls] = Codec(lambda v: isinstance(v, kind), encode, _decoder(kind, decode))


def _strip_optional(annotation: Any) -> Any | None:
    """``X`` for ``X | None`` (and ``X`` itself); None for a union of several types."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        return rest[0] if len(rest) == 1 else None
    return annotation


def codec_for(annotation: Any) -> Codec | None:
    """The codec of a parameter's (evaluated) annotation, or None for a plain JSON parameter."""
    annotation = _strip_optional(annotation)
    if annotation is None:
        return None
    origin = typing.get_origin(annotation)
    if origin in (list, dict):
        return _container_codec(annotation)
    if not isinstance(annotation, type):
        return None
    registered = _REGISTERED.get(annotation)
    if registered is not None:
        return registered
    if issubclass(annotation, Enum):
        enum = annotation
        return Codec(lambda v: isinstance(v, enum), lambda v: v.value, _decoder(enum, enum))
    if dataclasses.is_dataclass(annotation):
        return _dataclass_codec(annotation)
    return _CODECS.get(annotation)


def _container_codec(annotation: Any) -> Codec | None:
    """``list[X]`` / ``dict[str, X]`` whose items need a codec: each item encoded and decoded."""
    origin, params = typing.get_origin(annotation), typing.get_args(annotation)
    found = codec_for(params[-1]) if params else None
    if found is None:
        return None
    item: Codec = found

    def one_in(value: Any) -> Any:
        return item.encode(value) if item.fits(value) else value

    if origin is list:
        return Codec(lambda v: isinstance(v, list | tuple), lambda v: [one_in(x) for x in v],
                     lambda v: v if v is None else [item.decode(x) for x in v])
    return Codec(lambda v: isinstance(v, dict), lambda v: {k: one_in(x) for k, x in v.items()},
                 lambda v: v if v is None else {k: item.decode(x) for k, x in v.items()})


def _dataclass_codec(cls: type) -> Codec:
    """A dataclass as a JSON object of its fields, each through its own annotation's codec."""
    fields: dict[str, Codec | None] | None = None

    def field_codecs() -> dict[str, Codec | None]:
        nonlocal fields
        if fields is None:  # resolved at first use: a field may name a class declared later
            hints = typing.get_type_hints(cls)
            fields = {f.name: codec_for(hints.get(f.name, Any)) for f in dataclasses.fields(cls)}
        return fields

    def encode(value: Any) -> dict[str, Any]:
        out = {}
        for name, codec in field_codecs().items():
            item = getattr(value, name)
            out[name] = codec.encode(item) if codec is not None and codec.fits(item) else item
        return out

    def decode(value: Any) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"{cls.__name__} is stored as a JSON object of its fields, got {type(value).__name__}")
        codecs = field_codecs()
        unknown = sorted(set(value) - set(codecs))
        if unknown:
            raise TypeError(f"{cls.__name__} has no field {unknown[0]!r}")
        decoded = {}
        for k, x in value.items():
            codec = codecs[k]
            decoded[k] = x if codec is None else codec.decode(x)
        return cls(**decoded)

    return Codec(lambda v: isinstance(v, cls), encode, _decoder(cls, decode))


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
