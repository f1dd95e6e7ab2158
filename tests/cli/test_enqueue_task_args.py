"""``tenure enqueue KIND --payload JSON`` for a task: a plain JSON object is the task's
keyword arguments (it used to be dropped), the ``{"args", "kwargs"}`` form stays, and with
``--app MODULE:APP`` the arguments are checked against the task's signature before anything is
written (TN1002, exit status 2)."""

from __future__ import annotations

import json

import pytest

APP_MODULE = """
import os
from datetime import datetime

import tenure

app = tenure.App(os.environ["APP_URL"])


@app.task(name="mail.send")
def send_email(to: str, subject: str = "") -> list:
    return [to, subject]


@app.task(name="mail.later")
def send_later(to: str, at: datetime) -> str:
    return at.isoformat()
"""


@pytest.fixture
def app_cli(cli, engine_url):
    (cli.cwd / "mailapp.py").write_text(APP_MODULE, encoding="utf-8")
    cli.env["APP_URL"] = engine_url
    return cli


def test_a_plain_object_is_checked_and_stored_as_keyword_arguments(app_cli, engine_url):
    import tenure
    from tenure.app import App

    plain = app_cli("enqueue", "mail.send", "--app", "mailapp:app", "--payload", '{"to": "a@b"}', "--json")
    envelope = app_cli("enqueue", "mail.send", "--app", "mailapp:app", "--payload", '{"args": ["c@d", "hi"]}')
    unchecked = app_cli("enqueue", "mail.send", "--payload", '{"to": "e@f", "subject": "yo"}')  # no --app
    store = tenure.connect(engine_url)
    try:
        ids = [plain.json()["id"], envelope.out.strip(), unchecked.out.strip()]
        assert store.jobs.get(ids[0]).payload == {"args": [], "kwargs": {"to": "a@b"}}
        assert store.jobs.get(ids[1]).payload == {"args": ["c@d", "hi"], "kwargs": {}}
        assert store.jobs.get(ids[2]).payload == {"to": "e@f", "subject": "yo"}  # stored as given
        app = App(store=store)

        @app.task(name="mail.send")
        def send_email(to: str, subject: str = "") -> list:
            return [to, subject]

        app.run_worker(max_jobs=3, install_signals=False, poll_interval=0.02, grace=1)
        assert [store.jobs.get(i).result for i in ids] == [["a@b", ""], ["c@d", "hi"], ["e@f", "yo"]]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("kind", "payload", "says"),
    [
        ("mail.send", '{"too": "a@b"}', "no parameter 'too' (did you mean 'to'?)"),
        ("mail.send", '{"subject": "hi"}', "missing a required argument: 'to'"),
        ("mail.send", '{"args": ["a", "b", "c"]}', "too many positional"),
        ("mail.send", '{"args": "a@b"}', "takes a JSON array"),
        ("mail.sned", '{"to": "a@b"}', "no task 'mail.sned' (did you mean 'mail.send'?)"),
        ("mail.later", '{"to": "a@b", "at": "soon"}', "does not parse as its annotated type"),
    ],
)
def test_a_mismatch_is_refused_with_the_code_and_nothing_is_written(app_cli, kind, payload, says):
    bad = app_cli("enqueue", kind, "--app", "mailapp:app", "--payload", payload, expect=2)
    assert "TN1002" in bad.err and says in bad.err and "Traceback" not in bad.err
    assert app_cli("jobs", "list", "--json").json()["items"] == []


def test_app_does_not_apply_to_from_file(app_cli, tmp_path):
    lines = tmp_path / "jobs.jsonl"
    lines.write_text(json.dumps({"kind": "mail.send", "payload": {"to": "a@b"}}) + "\n", encoding="utf-8")
    refused = app_cli("enqueue", "--app", "mailapp:app", "--from-file", str(lines), expect=2)
    assert "it does not apply to --from-file" in refused.err
