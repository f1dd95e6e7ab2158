"""Fixtures for the operations tests: the worker tests' fixtures, reused as they are
(``engine_url`` on both engines, ``other_store``, ``make_worker``)."""

from __future__ import annotations

from tests.cli.conftest import cli, cli_url  # noqa: F401
from tests.worker.conftest import _pg_reset, engine_url, make_worker, other_store  # noqa: F401
