"""How a task's arguments travel: checked against the function's signature at enqueue, stored as
``{"args": [...], "kwargs": {...}}``, and handed back to the function by the worker (with the job
context where the function asks for it). See docs/tasks.md.

The rules, in one place:

- **Checked at the call.** ``task.enqueue(...)`` binds its arguments to the function's signature
  (:meth:`inspect.Signature.bind`) before anything is written; a call the function could not
  accept raises :class:`tenure.errors.InvalidType` (TN1002, a ``TypeError``) naming the task and
  the argument.
- **The job context is asked for by annotation.** The parameter annotated
  :class:`tenure.JobContext` (any name) receives the context. For code written before that rule, a
  parameter named ``ctx`` *without* an annotation receives it too; ``ctx`` with another annotation
  is an ordinary argument. The context parameter is never an argument: passing it raises TN1002.
- **Stored payloads.** An object whose only keys are ``args`` and/or ``kwargs`` is that call; any
  other JSON object is the keyword arguments (what ``tenure enqueue KIND --payload '{...}'``
  writes); any other value is the one positional argument (``null``: no argument).
"""

from __future__ import annotations

import difflib
import inspect
import json
from collections.abc import Callable
from typing import Any

from . import enqueue_options as eo
from .errors import InvalidType
from .task_values import codecs_of, convert

#: The keys of the stored call envelope.
ENVELOPE_KEYS = frozenset({"args", "kwargs"})


def _is_context_annotation(annotation: Any) -> bool:
    if annotation is inspect.Parameter.empty:
        return False
    if isinstance(annotation, str):  # unevaluated (``from __future__ import annotations``)
        return annotation.rsplit(".", 1)[-1] == "JobContext"
    from .worker import JobContext

    return isinstance(annotation, type) and issubclass(annotation, JobContext)


def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    try:
        return inspect.signature(fn, eval_str=True)
    except Exception:  # noqa: BLE001 - an annotation that cannot be evaluated here: keep it a string
        return inspect.signature(fn)


class TaskSignature:
    """A task function's signature, read once: which parameter takes the job context, and the
    signature its callers must match (the function's, without that parameter)."""

    def __init__(self, task_name: str, fn: Callable[..., Any]) -> None:
        self.task_name = task_name
        self.full = _signature(fn)
        params = list(self.full.parameters.values())
        plain = (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        )
        typed = [p for p in params if p.kind in plain and _is_context_annotation(p.annotation)]
        if len(typed) > 1:
            raise InvalidType(
                f"task {task_name!r}: only one parameter can take the job context, got "
                f"{', '.join(p.name for p in typed)}",
                task=task_name,
            )
        legacy = [
            p
            for p in params
            if p.name == "ctx" and p.kind in plain and p.annotation is inspect.Parameter.empty
        ]
        #: The parameter the worker fills with the job context (None: the function takes none).
        candidates = typed or legacy
        self.context: inspect.Parameter | None = candidates[0] if candidates else None
        #: What callers must match: the function's signature without the context parameter.
        self.callers = (
            self.full
            if self.context is None
            else self.full.replace(parameters=[p for p in params if p is not self.context])
        )
        #: Parameters whose values are stored as JSON text and decoded back (datetime, Decimal, ...).
        self.codecs = codecs_of(self.callers)

    def payload(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The stored call for ``task.enqueue(*args, **kwargs)``, or :class:`InvalidType` (TN1002)
        naming the task and the argument when the function could not accept it."""
        if self.context is not None and self.context.name in kwargs:
            raise InvalidType(
                f"task {self.task_name!r}: {self.context.name!r} is the job context, filled "
                "in by the worker; it cannot be passed at enqueue",
                task=self.task_name,
                argument=self.context.name,
            )
        unknown, hint = self._unknown_keyword(kwargs)
        if unknown is not None:
            raise InvalidType(
                f"task {self.task_name!r} has no parameter {unknown!r}{hint} (its signature: {self.callers})",
                task=self.task_name,
                argument=unknown,
            )
        try:
            self.callers.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidType(
                f"task {self.task_name!r} cannot take these arguments: {exc} (its signature: {self.callers})",
                task=self.task_name,
            ) from None
        stored_args, stored_kwargs = convert(self.callers, self.codecs, list(args), dict(kwargs), encode=True)
        self._check_storable(stored_args, stored_kwargs)
        return {"args": stored_args, "kwargs": stored_kwargs}

    def _check_storable(self, args: list[Any], kwargs: dict[str, Any]) -> None:
        """TN1002 naming the task and the argument whose value JSON cannot hold (nothing written)."""
        positional = [p.name for p in self.callers.parameters.values()
                      if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        named = [(positional[i] if i < len(positional) else f"#{i}", v) for i, v in enumerate(args)]
        for name, value in [*named, *kwargs.items()]:
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise InvalidType(
                    f"task {self.task_name!r}: argument {name!r} cannot be stored: {exc}; pass JSON values, "
                    "annotate the parameter with a type tenure encodes (datetime, Decimal, UUID, an Enum, "
                    "a dataclass), or register one with tenure.task_values.register_type",
                    task=self.task_name, argument=name,
                ) from None

    def _unknown_keyword(self, kwargs: dict[str, Any]) -> tuple[str | None, str]:
        """The first keyword no parameter takes, and a hint: the nearest parameter name (a typo
        is named before the required argument it leaves missing), else, for an enqueue option
        (``delay``, Celery's ``countdown``), where options go. ``(None, "")`` when every keyword fits."""
        params = self.callers.parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return None, ""
        names = [
            p.name
            for p in params
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        ]
        for key in kwargs:
            if key not in names:
                near = difflib.get_close_matches(key, names, n=1)
                if near:
                    return key, f" (did you mean {near[0]!r}?)"
                option = key if key in eo.on(eo.TASK) else eo.PEER_NAMES.get(key)
                if option is not None and option in eo.on(eo.TASK):
                    what = f"{option!r} is an enqueue option" if option == key else f"the enqueue option is {option!r}"
                    return key, f" ({what}, not an argument: task.with_options({option}=...).enqueue(...))"
                return key, ""
        return None, ""

    def call(self, payload: Any, ctx: Any) -> tuple[list[Any], dict[str, Any]]:
        """``(args, kwargs)`` to call the function with for a stored ``payload`` (module rules
        above), the job context ``ctx`` put in its parameter."""
        args, kwargs = convert(self.callers, self.codecs, *split_payload(payload), encode=False)
        if self.context is None:
            return args, kwargs
        bound = self.callers.bind(*args, **kwargs)  # a TypeError here fails the attempt, as a call would
        arguments = {}
        for name, param in self.full.parameters.items():
            if param is self.context:
                arguments[name] = ctx
            elif name in bound.arguments:
                arguments[name] = bound.arguments[name]
        full = inspect.BoundArguments(self.full, arguments)
        return list(full.args), full.kwargs


def split_payload(payload: Any) -> tuple[list[Any], dict[str, Any]]:
    """A stored payload as ``(args, kwargs)``: the ``{"args", "kwargs"}`` envelope as itself, any
    other JSON object as keyword arguments, ``None`` as no argument, anything else as the one
    positional argument."""
    if isinstance(payload, dict):
        if payload and payload.keys() <= ENVELOPE_KEYS:
            args, kwargs = payload.get("args") or [], payload.get("kwargs") or {}
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise InvalidType(
                    'a task payload {"args": ..., "kwargs": ...} takes a JSON array and a JSON '
                    f"object, got {type(args).__name__} and {type(kwargs).__name__}"
                )
            return list(args), dict(kwargs)
        return [], dict(payload)
    return ([] if payload is None else [payload]), {}


def checked_payload(app: Any, kind: str, payload: Any) -> dict[str, Any]:
    """``tenure enqueue KIND --payload JSON --app MODULE:APP``: ``payload`` read as the stored-payload
    rules above, checked against the signature of ``app``'s task ``kind``, and answered in the
    envelope form. :class:`InvalidType` (TN1002) when the task could not take it, or when ``app`` has
    no task ``kind`` (or is not an App)."""
    tasks = getattr(app, "tasks", None)
    if not isinstance(tasks, dict):
        raise InvalidType(f"--app must name a tenure.App, got {type(app).__name__}")
    task = tasks.get(kind)
    if task is None:
        near = difflib.get_close_matches(kind, list(tasks), n=1)
        raise InvalidType(
            f"the app has no task {kind!r}"
            + (f" (did you mean {near[0]!r}?)" if near else "")
            + f"; its tasks: {', '.join(sorted(tasks)) or 'none'}",
            task=kind,
        )
    args, kwargs = split_payload(payload)
    stored = task.signature.payload(tuple(args), kwargs)
    try:  # a datetime/Decimal/UUID/Enum/dataclass parameter given as JSON must decode (task_values)
        convert(task.signature.callers, task.signature.codecs, stored["args"], stored["kwargs"], encode=False)
    except (ValueError, ArithmeticError, TypeError, KeyError) as exc:
        raise InvalidType(
            f"task {kind!r}: an argument does not parse as its annotated type: {exc}", task=kind
        ) from None
    return stored
