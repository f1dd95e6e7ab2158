"""Task implementations and the versions their hosts declare for them.

A *task* is the code a workflow node runs: ``fn(ctx)`` (sync or ``async``) that receives a
:class:`tenure.flow.TaskContext` and returns a JSON value. Every task carries a **declared
version**: the host's statement of which implementation this is. The version is what lets a
resumed run tell "the code that wrote these checkpoints" from "a redeployed implementation" even
when the workflow document did not change (spec §7). Bump it whenever a change to the code
would make previously recorded values wrong to reuse.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArgument, InvalidType

#: Node and task names starting with this prefix are reserved for tenure's own records.
RESERVED_PREFIX = "__tenure"

Version = int | str


def check_name(name: Any, what: str) -> str:
    """A node or task name: a non-empty string of at most 200 characters, not reserved."""
    if not isinstance(name, str):
        raise InvalidType(f"{what} must be a string, got {type(name).__name__}")
    if not name or len(name) > 200:
        raise InvalidArgument(f"{what} must be 1 to 200 characters, got {name!r}")
    if name.startswith(RESERVED_PREFIX):
        raise InvalidArgument(f"{what} {name!r} is reserved: names starting with {RESERVED_PREFIX!r} "
                              "belong to tenure's own run records")
    return name


def check_version(version: Any, what: str) -> Version:
    """A declared version: a non-negative int (not bool) or a non-empty string."""
    if isinstance(version, bool) or not isinstance(version, int | str):
        raise InvalidType(f"{what} must be an int or a string, got {version!r}")
    if isinstance(version, int) and version < 0:
        raise InvalidArgument(f"{what} must not be negative, got {version!r}")
    if isinstance(version, str) and not version:
        raise InvalidArgument(f"{what} must not be empty")
    return version


def _is_async(fn: Callable[..., Any]) -> bool:
    target = fn if inspect.isroutine(fn) else type(fn).__call__
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target)


@dataclass(frozen=True, slots=True)
class TaskImpl:
    """One registered implementation: its name, the callable, and its declared version."""

    name: str
    fn: Callable[..., Any] = field(repr=False)
    version: Version
    is_async: bool


class Registry:
    """Task implementations by name, each with its declared version.

    ```python
    tasks = Registry()

    @tasks.task(version=2)
    def draft(ctx): ...

    tasks.add("publish", publish_fn, version=1)
    ```
    A name is registered once; registering it again is refused (two implementations under one
    name would make the declared version meaningless).
    """

    def __init__(self) -> None:
        self._tasks: dict[str, TaskImpl] = {}

    def add(self, name: str, fn: Callable[..., Any], *, version: Version) -> TaskImpl:
        """Register ``fn`` as task ``name`` at ``version``; answers the registration."""
        check_name(name, "task name")
        check_version(version, f"the version of task {name!r}")
        if not callable(fn):
            raise InvalidType(f"task {name!r} is not callable: {fn!r}")
        if name in self._tasks:
            raise InvalidArgument(f"task {name!r} is already registered (version "
                                  f"{self._tasks[name].version!r})")
        impl = TaskImpl(name, fn, version, _is_async(fn))
        self._tasks[name] = impl
        return impl

    def task(self, name: str | None = None, *, version: Version) -> Callable[[Callable], Callable]:
        """Decorator form of :meth:`add`; the name defaults to the function's ``__name__``."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.add(name or fn.__name__, fn, version=version)
            return fn

        return register

    def get(self, name: str) -> TaskImpl | None:
        """The registration for ``name``, or None."""
        return self._tasks.get(name)

    def versions(self) -> dict[str, Version]:
        """``{task name: declared version}`` for every registered task."""
        return {name: t.version for name, t in self._tasks.items()}

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    def __iter__(self) -> Iterator[TaskImpl]:
        return iter(self._tasks.values())

    def __len__(self) -> int:
        return len(self._tasks)
