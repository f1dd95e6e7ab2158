"""``tenure enqueue``'s flags are the table's ``cli`` options (src/tenure/enqueue_options.py,
docs/enqueue-options.md): each reaches the job as the API option of the same name, on both
engines; with --from-file, a one-job flag is refused instead of being silently ignored."""

from __future__ import annotations

import json

import tenure
from tenure import enqueue_options as eo


def test_every_flag_reaches_the_job(cli, engine_url):
    flags = {"--payload": '{"a": 1}', "--id": "flagged", "--queue": "q1", "--priority": "2",
             "--delay": "30s", "--max-attempts": "3", "--tag": "t1", "--meta": '{"m": 1}'}
    assert set(flags) == {o.cli.flag for o in eo.on(eo.CLI).values() if o.cli}
    argv = [part for flag, value in flags.items() for part in (flag, value)]
    assert cli("enqueue", "k", *argv, "--tag", "t2", "--json").json() == {"id": "flagged"}
    store = tenure.connect(engine_url)
    try:
        job = store.jobs.get("flagged")
        assert job is not None
        assert (job.payload, job.queue, job.priority, job.max_attempts, job.tags, job.meta) == (
            {"a": 1}, "q1", 2, 3, ["t1", "t2"], {"m": 1})
        assert job.run_at - job.created_at == 30_000
    finally:
        store.close()


def test_a_one_job_flag_with_from_file_is_refused(cli, engine_url, tmp_path):
    path = tmp_path / "jobs.jsonl"
    path.write_text(json.dumps({"kind": "k"}) + "\n")
    refused = cli("enqueue", "--from-file", str(path), "--queue", "other", "--tag", "x", expect=2)
    assert "--queue, --tag apply to one job" in refused.err
    bad_key = tmp_path / "bad.jsonl"
    bad_key.write_text(json.dumps({"kind": "k", "max_atempts": 2}) + "\n")
    typo = cli("enqueue", "--from-file", str(bad_key), expect=2)
    assert "did you mean 'max_attempts'?" in typo.err and "line 1" in typo.err
    store = tenure.connect(engine_url)
    try:
        assert store.jobs.page().items == []
    finally:
        store.close()
