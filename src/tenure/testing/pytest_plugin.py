"""tenure's pytest plugin (registered through the ``pytest11`` entry point).

Fixtures:
- ``tenure_store``: a fresh store on a temporary SQLite file, closed after the test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..store import Store, connect


@pytest.fixture
def tenure_store(tmp_path) -> Iterator[Store]:
    """A fresh tenure store on a temporary SQLite file."""
    store = connect(f"sqlite:///{tmp_path}/tenure-test.db")
    store.jobs  # noqa: B018 - create the tables now
    yield store
    store.close(grace=1)
