"""Storage verdicts at the edges (docs/operations.md, "Storage verdicts").

- A store on read-only media is READABLE, and every write answers ReadOnlyStore (TN0002), on both
  engines: a SQLite file on a read-only mount (opened with a plain URL, no ``?mode=ro``), and a
  PostgreSQL session in a read-only transaction mode. Before, SQLite answered even reads with
  StoreUnavailable (TN0005).
- A SQLite file with a corrupt page is refused at open (StoreCorrupt, TN0010) instead of
  accepting writes; ``?quick_check=0`` skips the check, and a corrupt page met later is still
  TN0010, never a raw driver error.
- A value over the database's own limit (PostgreSQL SQLSTATE class 54, SQLite ``SQLITE_TOOBIG``)
  is StoreLimitExceeded (TN0009): permanent, never TN0005 "could not reach".
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

import tenure
from tenure.errors import InvalidURL, ReadOnlyStore, StoreCorrupt, StoreLimitExceeded, StoreUnavailable


@dataclass
class Media:
    path: Path
    make_read_only: Callable[[], None]


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory that becomes read-only media when ``make_read_only()`` is called: a tmpfs
    remounted ``ro`` as root (root ignores file modes), else ``chmod a-w`` on the directory and
    its files."""
    root = os.geteuid() == 0
    mnt = tmp_path / "media"
    mnt.mkdir()
    mounted = False
    if root:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"running as root, and cannot mount a tmpfs here: {r.stderr.decode().strip()}")
        mounted = True

    def make_read_only() -> None:
        if mounted:
            subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        else:
            for p in mnt.iterdir():
                p.chmod(0o444)
            mnt.chmod(0o555)

    yield Media(mnt, make_read_only)
    if mounted:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
    else:
        mnt.chmod(0o755)


def _read_only_pg_url(url: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-c%20default_transaction_read_only%3Don"


def test_read_only_media_is_readable_and_writes_are_read_only_store(engine_url, request):
    if engine_url.startswith("sqlite"):
        media = request.getfixturevalue("read_only_dir")
        path = media.path / "q.db"
        url = f"sqlite:///{path}"
    else:
        url = engine_url
    writer = tenure.connect(url)
    kept = writer.jobs.enqueue("k", {"n": 1}, id="kept")
    writer.close()
    if engine_url.startswith("sqlite"):
        assert sorted(p.name for p in media.path.iterdir()) == ["q.db"]  # a clean close: no -wal/-shm
        media.make_read_only()
        before = path.read_bytes()
    else:
        url = _read_only_pg_url(url)
    ro = tenure.connect(url)
    try:
        assert ro.jobs.get(kept).payload == {"n": 1}  # the tables exist: reads work
        assert ro.jobs.counts()["pending"] == 1
        assert [j.id for j in ro.jobs.page().items] == [kept]
        for write in (
            lambda: ro.jobs.enqueue("k"),
            lambda: ro.jobs.claim("k", owner="w"),
            lambda: ro.jobs.cancel(kept),
        ):
            with pytest.raises(ReadOnlyStore) as info:
                write()
            assert info.value.code == "TN0002" and not isinstance(info.value, StoreUnavailable)
        assert ro.jobs.counts()["pending"] == 1
    finally:
        ro.close()
    if engine_url.startswith("sqlite"):
        assert path.read_bytes() == before


def _corrupt_copy(tmp_path: Path) -> tuple[Path, Path]:
    """A healthy store file with a few hundred jobs, and a copy with one page overwritten."""
    good = tmp_path / "good.db"
    store = tenure.connect(f"sqlite:///{good}")
    store.jobs.enqueue_many([{"kind": "k", "payload": {"n": i, "pad": "x" * 200}} for i in range(300)])
    store.close()
    conn = sqlite3.connect(good)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    # The jobs table's root page: every read of a job row goes through it, whatever index a
    # listing walks (a page "in the middle of the file" moved into an index no listing reads once
    # later migrations added indexes).
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = 'tenure_jobs'").fetchone()
    conn.close()
    assert root > 1
    bad = tmp_path / "bad.db"
    shutil.copy(good, bad)
    with open(bad, "r+b") as fh:  # the jobs table's root page: its header overwritten
        fh.seek(page_size * (root - 1))
        fh.write(b"\xff" * 64)
    return good, bad


def test_a_corrupt_page_is_refused_at_open(engine_url, tmp_path):
    if not engine_url.startswith("sqlite"):
        pytest.skip("page checksums are PostgreSQL's own (data_checksums); a SQLite file is checked at open")
    good, bad = _corrupt_copy(tmp_path)
    healthy = tenure.connect(f"sqlite:///{good}")
    assert healthy.jobs.counts()["pending"] == 300  # the check passes a healthy file
    healthy.close()
    before = bad.read_bytes()
    store = tenure.connect(f"sqlite:///{bad}")
    for call in (lambda: store.jobs.counts(), lambda: store.jobs.enqueue("k")):
        with pytest.raises(StoreCorrupt) as info:
            call()
        assert info.value.code == "TN0010" and "integrity check" in str(info.value)
    store.close()
    assert bad.read_bytes() == before  # nothing was written to the corrupt file

    # ?quick_check=0 skips the check; the corrupt page, once read, is still TN0010 (not TN0001).
    unchecked = tenure.connect(f"sqlite:///{bad}?quick_check=0")
    try:
        with pytest.raises(StoreCorrupt) as info:
            unchecked.jobs.page(limit=1000)
        assert info.value.code == "TN0010"
    finally:
        unchecked.close()


def test_a_value_over_the_database_limit_is_store_limit_exceeded(any_store, engine_url):
    """The database's own hard limit is a permanent verdict (TN0009), never TN0005; nothing lands."""
    if engine_url.startswith("sqlite"):
        over = ["SELECT zeroblob(2000000000)"]  # past SQLITE_MAX_LENGTH: SQLITE_TOOBIG
    else:  # an index entry larger than a page: SQLSTATE 54000
        over = [
            "CREATE TEMP TABLE tn_limit_probe (k text PRIMARY KEY)",
            "INSERT INTO tn_limit_probe SELECT string_agg(md5(i::text), '') FROM generate_series(1, 1000) i",
        ]
    with pytest.raises(StoreLimitExceeded) as info:
        with any_store.transaction() as tx:
            tx.jobs.enqueue("k", id="inside")
            for sql in over:
                tx.execute(sql).fetchall() if sql.startswith("SELECT") else tx.execute(sql)
    assert info.value.code == "TN0009" and not isinstance(info.value, StoreUnavailable)
    assert any_store.jobs.get("inside") is None  # the transaction rolled back


@pytest.mark.parametrize(
    "query", ["busy_timeout=abc", "busy_timeout=-1", "busy_timeout=2h", "busy_timeout=nan", "busy_timeout_ms=abc",
              "busy_timeout_ms=-1"]
)
def test_a_bad_sqlite_url_option_is_invalid_url(tmp_path, query):
    """A SQLite URL option that cannot be used is TN0007 at connect, not a raw ValueError later."""
    with pytest.raises(InvalidURL) as info:
        tenure.connect(f"sqlite:///{tmp_path / 't.db'}?{query}")
    assert info.value.code == "TN0007" and query.split("=")[0] in str(info.value)


@pytest.mark.parametrize("query,keyword,ms", [("busy_timeout=2", None, 2000), ("busy_timeout=250ms", None, 250),
                                              ("busy_timeout=1m", None, 60_000), ("", 1.5, 1500),
                                              ("", timedelta(seconds=3), 3000), ("", "40ms", 40),
                                              ("busy_timeout=9", "40ms", 40), ("", None, 5000)])
def test_the_busy_timeout_is_a_duration_in_the_url_or_as_a_keyword(tmp_path, query, keyword, ms):
    """``?busy_timeout=`` and ``connect(busy_timeout=)`` read seconds, a timedelta or the text form
    (the keyword wins); 5 s by default."""
    options = {} if keyword is None else {"busy_timeout": keyword}
    store = tenure.connect(f"sqlite:///{tmp_path / 't.db'}?{query}", **options)
    try:
        assert store.engine.busy_timeout_ms == ms
    finally:
        store.close()


def test_the_busy_timeout_ms_spellings_warn_and_still_work(tmp_path):
    """The ``_ms`` spellings of earlier releases (URL and keyword) warn, naming the replacement."""
    for url, options in ((f"sqlite:///{tmp_path / 'a.db'}?busy_timeout_ms=250", {}),
                         (f"sqlite:///{tmp_path / 'b.db'}", {"busy_timeout_ms": 250})):
        with pytest.warns(DeprecationWarning, match="busy_timeout_ms= is deprecated: use busy_timeout="):
            store = tenure.connect(url, **options)
        try:
            assert store.engine.busy_timeout_ms == 250
        finally:
            store.close()
