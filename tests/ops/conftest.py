"""Fixtures for the operations tests: the stores, ``other_store`` and ``make_worker`` come from
``tests/conftest.py``; the real console script (``cli``) from the CLI tests' conftest."""

from __future__ import annotations

from tests.cli.conftest import cli  # noqa: F401
