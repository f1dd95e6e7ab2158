"""Helpers shared by the conformance tests: the injected clock and random, the database target,
and small assertion helpers. Imported by ``conftest.py`` and the test modules."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Clock as Clock  # the suite's one injected clock, re-exported
from tests.conftest import Rand as _Rand

T0 = 1_700_000_000_000  # the injected clock's start: an arbitrary, realistic epoch-ms instant
APP_TABLE = "tn_conf_orders"  # the app table the outbox tests create (empty_pg drops it)

FENCE_CODES = {"TN2065", "TN2066", "TN2067"}


class Rand(_Rand):
    """The suite's random source (``tests.conftest.Rand``), answering 0.5 unless told otherwise."""

    def __init__(self, value: float = 0.5) -> None:
        super().__init__(value)


@dataclass
class Target:
    """Where the store under test lives: engine name, URL, and (sqlite) the file path."""

    engine: str
    url: str
    path: Path | None = None

    def raw(self):
        """A raw DB-API connection to the same database (for app-table checks only)."""
        if self.engine == "sqlite":
            return sqlite3.connect(str(self.path), timeout=10)
        import psycopg

        return psycopg.connect(self.url, autocommit=True)

    def app_count(self, table: str = APP_TABLE) -> int:
        conn = self.raw()
        try:
            cur = conn.execute(f"select count(*) from {table}")
            return cur.fetchone()[0]
        finally:
            conn.close()

    def tables(self) -> set[str]:
        """The table names in the database (sqlite_master / the current PostgreSQL schema)."""
        conn = self.raw()
        try:
            if self.engine == "sqlite":
                rows = conn.execute("select name from sqlite_master where type = 'table'").fetchall()
            else:
                rows = conn.execute(
                    "select table_name from information_schema.tables where table_schema = current_schema()"
                ).fetchall()
            return {r[0] for r in rows}
        finally:
            conn.close()

    def tenure_tables(self) -> set[str]:
        """tenure's own (namespaced) tables."""
        return {t for t in self.tables() if t.lower().lstrip("_").startswith("tenure")}

    def checkpoint_rows(self, run_id: str) -> list[tuple[str, int]]:
        """``(node_id, generation)`` of the checkpoint rows stored for ``run_id``, read with raw SQL
        over the columns 2.13 names. The only way to observe a settled job's checkpoints."""
        (table,) = [t for t in self.tenure_tables() if "checkpoint" in t.lower()]
        mark = "?" if self.engine == "sqlite" else "%s"
        conn = self.raw()
        try:
            rows = conn.execute(
                f"select node_id, generation from {table} where run_id = {mark} order by node_id, generation",
                (run_id,),
            ).fetchall()
            return [tuple(r) for r in rows]
        finally:
            conn.close()


def ph(store) -> str:
    """The app-SQL placeholder for the store's dialect."""
    return "?" if store.dialect == "sqlite" else "%s"


def code_of(exc_info) -> str | None:
    """The ``.code`` of the exception a ``pytest.raises`` block caught."""
    return getattr(exc_info.value, "code", None)


@contextmanager
def refused(*codes: str):
    """Expect a coded refusal: the block raises an exception whose ``.code`` is one of ``codes``."""
    with pytest.raises(Exception) as ei:  # the code is checked below
        yield ei
    got = getattr(ei.value, "code", None)
    assert got in codes, (
        f"expected a refusal coded {' or '.join(codes)}, got {type(ei.value).__name__}({got}): {ei.value!r}"
    )


def claim1(jobs, kinds=("k",), owner="w", **kwargs):
    """Claim and insist that something was claimed."""
    c = jobs.claim(list(kinds), owner=owner, **kwargs)
    assert c is not None, f"expected a claim for {kinds}, got None"
    return c


def snapshot(jobs, *ids):
    """The records of ``ids`` (to show that a refused call wrote nothing)."""
    return [jobs.get(i) for i in ids]
