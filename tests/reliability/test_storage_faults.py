"""SQLite under storage faults: a full disk, a read-only file system and a foreign write lock each
answer a coded error at the call, leave the file consistent, and work resumes once the fault
clears (spec 9.3). Uses a real tmpfs (needs root to mount; skipped otherwise)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import uuid

import pytest

import tenure
from tenure.errors import ReadOnlyStore, StorageFull, StoreBusy, TenureError


@pytest.fixture
def small_fs(tmp_path):
    """A 256 KiB tmpfs mounted for this test."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _remount(mnt, opts: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{opts}", str(mnt)], check=True)


def _integrity(path) -> str:
    c = sqlite3.connect(path)
    try:
        return c.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        c.close()


def test_disk_full_is_coded_nothing_half_written_and_work_resumes(small_fs):
    path = small_fs / "q.db"
    store = tenure.connect(f"sqlite:///{path}")
    jobs = store.jobs
    accepted = []
    blob = "x" * 2000
    with pytest.raises(StorageFull) as info:
        for i in range(10_000):
            accepted.append(jobs.enqueue("k", {"i": i, "blob": blob}))
    assert info.value.code == "TN0004"
    assert not isinstance(info.value, sqlite3.Error)
    # Everything acknowledged is there; the refused call wrote nothing.
    assert jobs.counts()["pending"] == len(accepted) > 0
    assert all(jobs.get(i) is not None for i in accepted[-5:])
    _remount(small_fs, "size=8m")
    more = jobs.enqueue("k", {"after": True})
    claim = jobs.claim("k", owner="w")
    jobs.complete(claim.lease, {"ok": True})
    assert jobs.counts()["pending"] == len(accepted)  # one claimed and completed, one added
    assert jobs.get(more).state == "pending"
    store.close()
    assert _integrity(path) == "ok"


def test_read_only_file_system_is_coded_and_reads_still_work(small_fs):
    _remount(small_fs, "size=2m")
    path = small_fs / "q.db"
    store = tenure.connect(f"sqlite:///{path}")
    kept = store.jobs.enqueue("k", {"n": 1})
    store.close()
    _remount(small_fs, "ro")
    try:
        ro = tenure.connect(f"sqlite:///{path}?mode=ro")
        assert ro.jobs.get(kept).payload == {"n": 1}  # tables exist: reads work
        with pytest.raises(ReadOnlyStore) as info:
            ro.jobs.enqueue("k", {"n": 2})
        assert info.value.code == "TN0002"
        ro.close()
    finally:
        _remount(small_fs, "rw")
    store = tenure.connect(f"sqlite:///{path}")
    assert store.jobs.counts()["pending"] == 1
    store.jobs.enqueue("k", {"n": 3})
    assert store.jobs.counts()["pending"] == 2
    store.close()
    assert _integrity(path) == "ok"


def test_read_only_empty_database_refused_at_first_use(tmp_path):
    """spec 9.5: store.jobs on a read-only store without tenure's tables is TN0002."""
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    store = tenure.connect(f"sqlite:///{path}?mode=ro")
    with pytest.raises(ReadOnlyStore) as info:
        store.jobs  # noqa: B018
    assert info.value.code == "TN0002"


def test_foreign_write_lock_past_busy_timeout_is_store_busy(tmp_path):
    path = tmp_path / "q.db"
    store = tenure.connect(f"sqlite:///{path}", busy_timeout="150ms")
    first = store.jobs.enqueue("k", 1)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreBusy) as info:
            store.jobs.enqueue("k", 2)
        assert info.value.code == "TN0003" and isinstance(info.value, TenureError)
        with pytest.raises(StoreBusy):
            store.jobs.claim("k", owner="w")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert store.jobs.counts()["pending"] == 1
    claim = store.jobs.claim("k", owner="w")
    assert claim.job.id == first
    store.jobs.complete(claim.lease, None)
    store.close()
    assert _integrity(path) == "ok"


def test_many_small_faults_never_corrupt(small_fs):
    """Fill the disk, free space by sweeping, fill again: the file stays consistent each time."""
    path = small_fs / "q.db"
    t = [1_000_000]
    store = tenure.connect(f"sqlite:///{path}", clock=lambda: t[0])
    jobs = store.jobs
    for _round in range(3):
        try:
            while True:
                jobs.enqueue("k", {"blob": uuid.uuid4().hex * 40})
        except StorageFull:
            pass
        assert _integrity(path) == "ok"
        _remount(small_fs, "size=4m")
        completed = 0
        while (c := jobs.claim("k", owner="w")) is not None:
            jobs.complete(c.lease, None)
            completed += 1
        t[0] += 1000
        assert completed > 0 or _round > 0
        assert jobs.sweep(settled_before=t[0]).removed == completed
        assert jobs.counts() == dict.fromkeys(jobs.counts(), 0)
        store.close()
        with sqlite3.connect(path) as c:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            c.execute("VACUUM")
        _remount(small_fs, f"size={256 * (_round + 2)}k")
        store = tenure.connect(f"sqlite:///{path}", clock=lambda: t[0])
        jobs = store.jobs
    store.close()
    assert _integrity(path) == "ok"
