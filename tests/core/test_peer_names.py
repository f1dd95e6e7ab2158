"""The option names a Celery, RQ or Oban user types first (``countdown``, ``max_retries``, ``eta``)
and enqueue options passed as task arguments are refused, coded, with tenure's name for them,
and nothing is written: the same verdict on both engines."""

from __future__ import annotations

import pytest

import tenure
from tenure.errors import InvalidArgument, InvalidType


@pytest.fixture
def app(engine_url):
    app = tenure.App(engine_url)
    yield app
    app.store.close()


@pytest.mark.parametrize(("peer", "ours"), [
    ("countdown", "delay"),          # Celery: add.apply_async(countdown=5); near spelling was 'conn'
    ("eta", "run_at"),
    ("time_limit", "timeout"),
    ("routing_key", "queue"),
])
def test_a_peer_option_name_suggests_tenures_own(app, peer, ours):
    @app.task(name="peer.add")
    def add(x: int, y: int) -> int:
        return x + y

    with pytest.raises(InvalidArgument, match=rf"unknown option '{peer}' for @app.task \(did you mean '{ours}'\?"):
        add.with_options(**{peer: 5})
    with pytest.raises(InvalidArgument, match=rf"\(did you mean '{ours}'\?"):
        app.store.jobs.enqueue("peer.add", {}, **{peer: 5})
    assert sum(app.store.jobs.counts().values()) == 0


def test_max_retries_says_that_max_attempts_counts_the_first_run(app):
    with pytest.raises(InvalidArgument) as caught:
        app.task(name="peer.retries", max_retries=3)(lambda: None)
    assert "did you mean 'max_attempts'? max_attempts counts the first run too" in str(caught.value)
    assert caught.value.code == "TN1001"


def test_an_enqueue_option_given_as_an_argument_says_where_options_go(app):
    @app.task(name="peer.add")
    def add(x: int, y: int) -> int:
        return x + y

    with pytest.raises(InvalidType) as caught:
        add.enqueue(1, 2, delay=5)
    assert "has no parameter 'delay' ('delay' is an enqueue option, not an argument: " \
           "task.with_options(delay=...).enqueue(...))" in str(caught.value)
    assert caught.value.code == "TN1002" and caught.value.details["argument"] == "delay"
    with pytest.raises(InvalidType, match=r"has no parameter 'countdown' \(the enqueue option is 'delay', "):
        add.enqueue(1, 2, countdown=5)
    assert sum(app.store.jobs.counts().values()) == 0


def test_a_misspelt_argument_is_named_alone_in_the_details(app):
    @app.task(name="peer.send")
    def send(to: str) -> str:
        return to

    with pytest.raises(InvalidType) as caught:
        send.enqueue(too="a@example.com")
    assert "has no parameter 'too' (did you mean 'to'?)" in str(caught.value)
    assert caught.value.details["argument"] == "too"   # was "'too' (did you mean 'to'?)"


def test_celerys_delay_and_apply_async_name_tenures_enqueue(app):
    @app.task(name="peer.add")
    def add(x: int, y: int) -> int:
        return x + y

    with pytest.raises(AttributeError, match=r"no attribute 'delay' \(tenure's is task.enqueue\(\*args"):
        add.delay(1, 2)  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"no attribute 'apply_async' \(tenure's is task.with_options\("):
        add.apply_async((1, 2), countdown=5)  # type: ignore[attr-defined]
    assert not hasattr(add, "delay")                  # a duck-typing probe still answers False
    with pytest.raises(AttributeError, match=r"^'Task' object has no attribute 'nope'$"):
        add.nope  # type: ignore[attr-defined]  # noqa: B018
    assert sum(app.store.jobs.counts().values()) == 0
