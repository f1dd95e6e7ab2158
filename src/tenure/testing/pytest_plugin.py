"""tenure's pytest plugin (registered through the ``pytest11`` entry point).

Fixtures (docs/testing.md):
- ``tenure_store``: a fresh store on a temporary SQLite file, closed after the test.
- ``tenure_isolate``: ``tenure_isolate(app, ...)`` points apps (module-level ones included) at
  ``tenure_store`` until the test ends, and answers the store.
- ``tenure_app``: the app named by the ``tenure_app`` ini option (``myproject.tasks:app``), pointed
  at ``tenure_store`` for the test.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from ..store import Store, connect


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("tenure_app", "the tenure App the tenure_app fixture isolates (module:attribute)",
                  default="")


@pytest.fixture
def tenure_store(tmp_path: Any) -> Iterator[Store]:
    """A fresh tenure store on a temporary SQLite file."""
    store = connect(f"sqlite:///{tmp_path}/tenure-test.db")
    store.jobs  # noqa: B018 - create the tables now
    yield store
    store.close(grace=1)


@pytest.fixture
def tenure_isolate(tenure_store: Store) -> Iterator[Callable[..., Store]]:
    """``tenure_isolate(app, ...)``: those apps use ``tenure_store`` until the test ends."""
    with ExitStack() as stack:

        def isolate(*apps: Any) -> Store:
            for app in apps:
                stack.enter_context(app.use_store(tenure_store))
            return tenure_store

        yield isolate


@pytest.fixture
def tenure_app(request: pytest.FixtureRequest, tenure_isolate: Callable[..., Store]) -> Any:
    """The app named by the ``tenure_app`` ini option, pointed at ``tenure_store`` for the test."""
    from ..app import App

    spec = str(request.config.getini("tenure_app") or "")
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise pytest.UsageError("the tenure_app fixture needs the ini option tenure_app = module:attribute "
                                f"(e.g. myproject.tasks:app), got {spec!r}")
    app = getattr(importlib.import_module(module), attr)
    if not isinstance(app, App):
        raise pytest.UsageError(f"tenure_app = {spec}: that is a {type(app).__name__}, not a tenure.App")
    tenure_isolate(app)
    return app
