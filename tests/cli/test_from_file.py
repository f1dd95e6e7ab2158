"""``tenure enqueue --from-file``: all of the file or none of it, every error naming its line
(docs/operations.md, "Bulk enqueue"). Runs the real console script on both
engines.

Before: lines were checked only for JSON shape, then written in ``--batch-size`` transactions, so
a line that passed the check and failed at write time (``priority`` above 2^31 on PostgreSQL, a
row the database refuses) left the earlier batches enqueued, and a rerun duplicated them; the
error counted jobs, not lines.
"""

from __future__ import annotations

import json

import pytest

import tenure

POISON_SQL = {
    "sqlite": [
        "CREATE TRIGGER tn_poison BEFORE INSERT ON tenure_jobs WHEN NEW.kind = 'poison' "
        "BEGIN SELECT RAISE(ABORT, 'poisoned row refused by a trigger'); END"
    ],
    "postgres": [
        "CREATE OR REPLACE FUNCTION tn_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.kind = 'poison' THEN RAISE EXCEPTION 'poisoned row refused by a trigger'; END IF; "
        "RETURN NEW; END $$",
        "CREATE TRIGGER tn_poison BEFORE INSERT ON tenure_jobs FOR EACH ROW EXECUTE FUNCTION tn_poison()",
    ],
}
UNPOISON_SQL = {
    "sqlite": ["DROP TRIGGER IF EXISTS tn_poison"],
    "postgres": ["DROP TRIGGER IF EXISTS tn_poison ON tenure_jobs", "DROP FUNCTION IF EXISTS tn_poison()"],
}


def _dialect(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgres"


def _run_sql(url: str, statements: list[str]) -> None:
    store = tenure.connect(url)
    try:
        with store.transaction() as tx:
            for sql in statements:
                tx.execute(sql)
    finally:
        store.close()


def _counts(url: str) -> dict[str, int]:
    store = tenure.connect(url)
    try:
        return store.jobs.counts()
    finally:
        store.close()


def _write(path, lines: list[object]) -> None:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")


@pytest.fixture
def poisoned(engine_url):
    """A database trigger that refuses any row of kind ``poison``: a write-time failure that no
    argument check can see, raised by the real database on both engines."""
    _counts(engine_url)  # creates the tables
    _run_sql(engine_url, POISON_SQL[_dialect(engine_url)])
    yield
    _run_sql(engine_url, UNPOISON_SQL[_dialect(engine_url)])


def test_a_write_failure_rolls_back_the_whole_file_and_names_its_line(cli, engine_url, tmp_path, poisoned):
    path = tmp_path / "jobs.jsonl"
    lines = [{"kind": "k", "id": f"j{i}", "payload": {"i": i}} for i in range(1, 5)]
    lines.insert(2, "")  # line 3 is blank: lines, not jobs, are counted
    lines += [{"kind": "poison", "id": "bad"}, {"kind": "k", "id": "j5"}]  # the poison is line 6
    _write(path, lines)
    res = cli("enqueue", "--from-file", str(path), "--batch-size", "2", expect=1)
    assert "line 6" in res.err and "poisoned row" in res.err, res.err
    assert len(res.err.strip().splitlines()) == 1
    assert sum(_counts(engine_url).values()) == 0  # the two batches before it were rolled back too

    # The file fixed, the same command loads it once; a rerun duplicates nothing (idempotent ids).
    lines[5] = {"kind": "k", "id": "fixed"}
    _write(path, lines)
    assert cli("enqueue", "--from-file", str(path), "--batch-size", "2", "--json").json()["enqueued"] == 6
    cli("enqueue", "--from-file", str(path), "--batch-size", "2", "--json")
    assert _counts(engine_url)["pending"] == 6


@pytest.mark.parametrize(
    "bad,field",
    [
        ({"kind": "k", "priority": 2**31}, "priority"),
        ({"kind": "k", "id": "nul\u0000id"}, "job id"),
        ('{"kind": "k", "id": "\\ud800"}', "job id"),
        ({"kind": "k", "singleton_key": "x" * 2000}, "singleton_key"),
        ({"kind": "k", "timeout": 0}, "timeout"),
        ({"kind": "k", "delay": 10**17}, "delay"),
        ({"kind": "k", "nope": 1}, "nope"),
        ('{"kind": "k", "payload": }', "not valid JSON"),
        ("[1, 2]", "JSON object"),
    ],
    ids=[
        "priority-2^31",
        "nul-id",
        "surrogate-id",
        "long-key",
        "timeout-0",
        "delay",
        "unknown-key",
        "json",
        "array",
    ],
)
def test_a_bad_line_refuses_the_file_naming_its_line(cli, engine_url, tmp_path, bad, field):
    """Checked before anything is written, with the same validation as the API, on both engines."""
    path = tmp_path / "jobs.jsonl"
    _write(path, [{"kind": "k"}, {"kind": "k"}, "", {"kind": "k"}, bad, {"kind": "k"}])
    res = cli("enqueue", "--from-file", str(path), "--batch-size", "1", expect=2)
    assert "line 5" in res.err and field in res.err, res.err
    assert len(res.err.strip().splitlines()) == 1
    assert sum(_counts(engine_url).values()) == 0


def test_queue_options_on_a_line(cli, engine_url, tmp_path):
    """A line may carry the job options ``enqueue`` takes (docs/queues.md), tags and meta,
    validated alike."""
    path = tmp_path / "jobs.jsonl"
    _write(
        path,
        [{"kind": "k", "id": "a", "retry_delay": 5, "dead_letter": "dlq", "tags": ["t1"], "meta": {"m": 1}}],
    )
    assert cli("enqueue", "--from-file", str(path), "--json").json() == {"enqueued": 1, "lines": 1}
    _write(path, [{"kind": "k", "id": "b", "debounce": 0}])
    res = cli("enqueue", "--from-file", str(path), expect=2)
    assert "line 1" in res.err and "debounce" in res.err
    assert _counts(engine_url)["pending"] == 1
    store = tenure.connect(engine_url)
    try:
        job = store.jobs.get("a")
        assert (job.tags, job.meta) == (["t1"], {"m": 1})
    finally:
        store.close()
