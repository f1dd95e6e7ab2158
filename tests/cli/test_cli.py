"""The real ``tenure`` console script against both engines ("CLI tests run the real console
script against both engines"). Each test drives several commands so the suite stays fast: every
invocation is a fresh Python process.

Spec rows exercised through the CLI: 10.2 (keyset paging), 10.7 (cancel a queued job, True
then False), 10.13 (requeue returns a job to pending), 10.17 (sweep removes settled jobs only).
"""

from __future__ import annotations

import json

import pytest

import tenure


def _store(url: str):
    return tenure.connect(url)


def test_enqueue_list_show_cancel_requeue(cli, engine_url):
    one = cli("enqueue", "email.send", "--payload", '{"to": "ops@example.com"}', "--queue", "emails",
              "--priority", "5", "--json").json()["id"]
    two = cli("enqueue", "email.send", "--payload", "[1, 2]", "--id", "fixed-id-1").out.strip()
    assert two == "fixed-id-1"
    listed = cli("jobs", "list", "--json").json()
    assert {j["id"] for j in listed["items"]} == {one, "fixed-id-1"}
    assert listed["next_after"] is None and "lease_token" not in listed["items"][0]
    assert {j["priority"] for j in listed["items"] if j["queue"] == "emails"} == {5}
    shown = cli("jobs", "show", one)
    assert "ops@example.com" in shown.out and "pending" in shown.out and "emails" in shown.out
    # 10.7: cancel a queued job; 10.13: requeue brings it back to pending.
    assert cli("jobs", "cancel", one, "--json").json() == {"id": one, "cancelled": True}
    assert cli("jobs", "requeue", one, "--json").json() == {"id": one, "requeued": True}
    assert cli("jobs", "show", one, "--json").json()["state"] == "pending"


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_paging_idempotent_ids_and_human_messages(cli):
    one = cli("enqueue", "email.send", "--queue", "emails", "--json").json()["id"]
    cli("enqueue", "email.send", "--id", "fixed-id-1")
    # Idempotent id: the same id again answers the existing job.
    assert cli("enqueue", "other.kind", "--id", "fixed-id-1", "--json").json() == {"id": "fixed-id-1"}
    assert [j["id"] for j in cli("jobs", "list", "--queue", "emails", "--json").json()["items"]] == [one]
    # 10.2: keyset paging through --after, one job per page, no gap and no duplicate.
    first = cli("jobs", "list", "--limit", "1")
    assert first.out.splitlines()[-1].startswith("more: --after ")
    after = first.out.splitlines()[-1].split()[-1]
    second = cli("jobs", "list", "--limit", "1", "--after", after, "--json").json()
    assert {after, second["items"][0]["id"]} == {one, "fixed-id-1"} and second["next_after"] is None
    # 10.7: True then False.
    assert cli("jobs", "cancel", one).out.strip() == f"cancelled {one}"
    assert "already cancelled" in cli("jobs", "cancel", one).out
    human = cli("jobs", "list", "--state", "cancelled")
    assert one in human.out and "fixed-id-1" not in human.out
    assert "already pending" in cli("jobs", "requeue", "fixed-id-1").out


def test_bulk_enqueue_from_file(cli, engine_url, tmp_path):
    path = tmp_path / "jobs.jsonl"
    lines = [json.dumps({"kind": "img.resize", "payload": {"n": i}, "queue": "images" if i % 2 else "default",
                         "priority": i % 3}) for i in range(2500)]
    lines.insert(10, "")  # blank lines are skipped
    path.write_text("\n".join(lines) + "\n")
    res = cli("enqueue", "--from-file", str(path), "--batch-size", "1000", "--json")
    assert res.json() == {"enqueued": 2500, "lines": 2500}
    store = _store(engine_url)
    try:
        assert store.jobs.counts()["pending"] == 2500
        assert store.jobs.page(queue="images", limit=2000).items.__len__() == 1250
    finally:
        store.close()

    # A default KIND for lines without one; a bad line refuses the whole file before writing.
    (tmp_path / "default.jsonl").write_text('{"payload": 1}\n{"payload": 2, "kind": "k2"}\n')
    assert cli("enqueue", "k1", "--from-file", str(tmp_path / "default.jsonl"), "--json").json()["enqueued"] == 2
    (tmp_path / "bad.jsonl").write_text('{"kind": "a"}\n{"kind": "b", "payload": }\n')
    bad = cli("enqueue", "--from-file", str(tmp_path / "bad.jsonl"), expect=2)
    assert "line 2" in bad.err and len(bad.err.strip().splitlines()) == 1
    store = _store(engine_url)
    try:
        assert store.jobs.counts()["pending"] == 2502
    finally:
        store.close()


def test_stats_queues_sweep_and_migrate(cli, engine_url):
    store = _store(engine_url)
    try:
        ids = store.jobs.enqueue_many([{"kind": "k", "queue": "q1"}, {"kind": "k", "queue": "q1"},
                                       {"kind": "k", "queue": "q2"}])
        c = store.jobs.claim("k", owner="test", queues="q1")
        store.jobs.complete(c.lease, {"ok": True})
        store.jobs.cancel(ids[2])
    finally:
        store.close()

    data = cli("stats", "--json").json()
    assert data["counts"]["done"] == 1 and data["counts"]["pending"] == 1 and data["counts"]["cancelled"] == 1
    assert data["last_hour"]["done"] == 1 and data["last_hour"]["cancelled"] == 1
    assert "password" not in json.dumps(data)
    watch = cli("stats", "--watch", "--interval", "0.1", "--iterations", "2", "--json")
    docs = [json.loads(line) for line in watch.out.splitlines() if line.strip()]
    assert len(docs) == 2 and all(d["counts"]["done"] == 1 for d in docs)
    sqlite = engine_url.startswith("sqlite")  # engine-independent output checks run once
    if sqlite:
        human = cli("stats")
        assert "q1" in human.out and "workers alive" in human.out

    queues = {q["name"]: q["counts"] for q in docs[0]["queues"]}
    assert queues["q1"]["done"] == 1 and queues["q1"]["pending"] == 1 and queues["q2"]["cancelled"] == 1

    # 10.17: sweep removes settled jobs older than the horizon, never live ones.
    if sqlite:
        assert cli("sweep", "--older-than", "1d", "--json").json()["removed"] == 0
    import time

    time.sleep(0.01)  # the horizon is "now - 0 s": the settled rows must be strictly older
    assert cli("sweep", "--older-than", "0s", "--json").json()["removed"] == 2
    assert [q["counts"]["pending"] for q in cli("queues", "list", "--json").json()] == [1, 0]

    mig = cli("migrate", "--json").json()
    assert mig["current"] is True and mig["version"] == mig["latest"]
    assert "up to date" in cli("migrate", "--check").out


def _future_schema(store, add: bool) -> None:
    """Pretend a newer tenure migrated this database (or undo it)."""
    sql = ("INSERT INTO tenure_migrations (version, name, applied_at) VALUES (999, 'future', 0)" if add
           else "DELETE FROM tenure_migrations WHERE version = 999")
    if store.dialect == "sqlite":
        import sqlite3

        conn = sqlite3.connect(store.engine.path)
        conn.execute(sql)
        conn.commit()
        conn.close()
    else:
        import psycopg

        with psycopg.connect(store.engine.conninfo, autocommit=True) as conn:
            conn.execute(sql)


def test_migrate_check_refuses_a_newer_schema(cli, engine_url):
    store = _store(engine_url)
    store.jobs  # noqa: B018 - migrate
    store.close()
    _future_schema(store, True)
    try:
        res = cli("migrate", "--check", expect=1)
        assert "[TN0006]" in res.err and len(res.err.strip().splitlines()) == 1
        assert "Traceback" not in res.err
        res = cli("jobs", "list", expect=1)
        assert "[TN0006]" in res.err
    finally:
        _future_schema(store, False)


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_migrate_check_reports_pending_migrations_without_applying(cli, tmp_path):
    fresh = f"sqlite:///{tmp_path}/fresh.db"
    import sqlite3

    sqlite3.connect(tmp_path / "fresh.db").execute("CREATE TABLE app (x)").connection.commit()
    res = cli("migrate", "--check", url=fresh, expect=1)
    assert "migrations pending" in res.err
    conn = sqlite3.connect(tmp_path / "fresh.db")
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'tenure_jobs'").fetchone() is None
    conn.close()
    assert "up to date" in cli("migrate", url=fresh).out
    cli("migrate", "--check", url=fresh, expect=0)


def test_errors_are_one_line_with_codes_and_no_secret(cli, engine_url):
    store_cases = [
        (("jobs", "show", "no-such-job"), 1, "no job"),
        (("jobs", "requeue", "no-such-job"), 1, "[TN2065]"),
    ]
    cases = store_cases if not engine_url.startswith("sqlite") else store_cases + [
        (("enqueue", "k", "--payload", "{not json"), 2, "--payload"),
        (("enqueue",), 2, "KIND"),
        (("jobs", "list", "--state", "bogus"), 2, "bogus"),
        (("sweep", "--older-than", "7 fortnights"), 2, "duration"),
        (("enqueue", "", "--payload", "1"), 2, "[TN1"),
    ]
    for args, code, needle in cases:
        res = cli(*args, expect=code)
        lines = res.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tenure: "), (args, res.err)
        assert needle in lines[0], (args, lines[0])
        assert "Traceback" not in res.err


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_unreachable_store_is_one_line_without_the_password(cli):
    res = cli("jobs", "list", url="postgresql://ops:s3cr3t-pw@127.0.0.1:1/tenure", expect=1)
    assert "[TN0005]" in res.err and "s3cr3t-pw" not in res.err + res.out
    assert len(res.err.strip().splitlines()) == 1
    # The URL may also come before the command or from $TENURE_URL.
    res = cli("--url", "postgresql://ops:s3cr3t-pw@127.0.0.1:1/tenure", "stats", url=None, expect=1)
    assert "[TN0005]" in res.err and "s3cr3t-pw" not in res.err
    res = cli("stats", url=None, env={"TENURE_URL": "postgresql://ops:s3cr3t-pw@127.0.0.1:1/t"}, expect=1)
    assert "[TN0005]" in res.err and "s3cr3t-pw" not in res.err
    res = cli("migrate", url="postgresql://ops:s3cr3t-pw@127.0.0.1:1/tenure", expect=1)
    assert "s3cr3t-pw" not in res.err


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_dashboard_refuses_a_public_bind_without_a_token(cli):
    res = cli("dashboard", "--host", "0.0.0.0", "--port", "0", expect=2)
    assert "--token" in res.err and len(res.err.strip().splitlines()) == 1


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_demo_runs_a_real_worker(cli, tmp_path):
    url = f"sqlite:///{tmp_path}/demo.db"
    data = cli("demo", "--jobs", "60", "--concurrency", "4", "--json", url=url, timeout=90).json()
    assert data["enqueued"] == 60 and data["counts"]["done"] == 60 and data["completions"] == 60


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_demo_output_is_a_summary_without_the_deliberate_failures_tracebacks(cli, tmp_path):
    """Job 13 fails once on purpose: counted in the summary, not logged as a WARNING traceback.
    Piped (not a terminal), the demo prints no carriage-return progress; a second run on the same
    file reports its own jobs, and the store's counts say they are the whole store's."""
    url = f"sqlite:///{tmp_path}/demo.db"
    cli("demo", "--jobs", "20", "--concurrency", "4", url=url, timeout=90)
    res = cli("demo", "--jobs", "20", "--concurrency", "4", url=url, timeout=90)
    assert res.err == "" and "\r" not in res.out, res.err
    assert "worked 20 completions and 1 retried failures" in res.out
    assert 'counts in the store: {"pending": 0, "leased": 0, "done": 40,' in res.out


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_dashboard_command_serves_with_a_token(cli, engine_url):
    """``tenure dashboard`` as a real process: healthz open, everything else behind the token from
    $TENURE_DASHBOARD_TOKEN, the token never printed; SIGTERM stops it."""
    import signal
    import socket
    import subprocess
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "dash-token-for-tests"
    proc = subprocess.Popen([cli.bin, "dashboard", "--url", engine_url, "--port", str(port)], cwd=cli.cwd,
                            env={**cli.env, "TENURE_DASHBOARD_TOKEN": token}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        assert httpx.get(base + "/api/overview").status_code == 401
        ok = httpx.get(base + "/api/overview", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200 and ok.json()["counts"]["pending"] == 0
        assert "tenure_store_up 1.0" in httpx.get(base + "/metrics", auth=("prom", token)).text
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert "token required" in err and token not in out + err
