"""``tenure signals send/pending`` through the real console script, on both engines, and the
``waiting`` column of ``tenure runs show``."""

from __future__ import annotations

import time

import tenure


def test_signals_send_wakes_a_waiting_job_and_pending_counts_the_rest(cli, engine_url):
    store = tenure.connect(engine_url)

    def handler(payload, ctx):
        return ctx.wait_for_signal("deploy:42", timeout=3600)

    worker = store.jobs.create_worker({"await-deploy": handler}, poll_interval=0.05).start()
    try:
        jid = store.jobs.enqueue("await-deploy", None)
        deadline = time.monotonic() + 20
        while (job := store.jobs.get(jid)).state != "pending" or job.attempts != 1:
            assert time.monotonic() < deadline, job
            time.sleep(0.02)
        sent = cli("signals", "send", "deploy:42", "--payload", '{"ok": true}', "--json").json()
        assert sent["key"] == "deploy:42" and isinstance(sent["id"], int)
        while store.jobs.get(jid).state != "done":
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        worker.stop(2)
    assert store.jobs.get(jid).result == {"ok": True}
    assert cli("signals", "pending", "deploy:42").out.strip() == "0"
    assert "sent signal" in cli("signals", "send", "deploy:42").out
    assert cli("signals", "pending", "deploy:42", "--json").json() == {"key": "deploy:42", "pending": 1}
    refused = cli("signals", "send", "", expect=None)
    assert refused.code != 0 and "TN1001" in refused.err
    bad_json = cli("signals", "send", "k", "--payload", "{nope", expect=None)
    assert bad_json.code == 2 and "not valid JSON" in bad_json.err
    assert store.signals.pending("k") == 0
    store.close()
