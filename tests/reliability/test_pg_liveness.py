"""A PostgreSQL server that stops answering. A TCP proxy in front of the server
silences every open connection without closing it (a stalled PgBouncer, a partition, a failover
with a query in flight): the worker's calls are cut at their deadline instead of hanging, the
worker resumes once the network is back, and ``stop()`` returns within its grace while the server
is silent."""

from __future__ import annotations

import threading
import time

import pytest

import tenure
from tenure.errors import InvalidURL, StoreUnavailable
from tenure.limits import call_timeout_for_lease

from ..conftest import PG_URL, empty_pg, require_pg
from .tcp_proxy import TcpProxy


def wait_until(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def pg():
    require_pg()
    empty_pg()
    store = tenure.connect(PG_URL)
    yield store
    store.close(grace=1)


def stop_in_thread(worker, grace: float) -> tuple[threading.Thread, list]:
    out: list = []

    def run() -> None:
        t0 = time.monotonic()
        result = worker.stop(grace=grace)
        out.append((result, time.monotonic() - t0))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


@pytest.mark.timeout(120)
def test_a_silenced_server_the_worker_resumes_after_the_network_and_stops_within_grace(pg):
    with TcpProxy.for_url(PG_URL) as proxy:
        remote = tenure.connect(proxy.url(PG_URL))
        ran: list[str] = []
        holding = threading.Event()

        def work(payload, ctx):
            if payload == "hold":  # runs until the worker stops it
                holding.set()
                ctx.cancelled.wait(30)
            ran.append(ctx.job.id)

        worker = remote.jobs.create_worker({"k": work}, concurrency=4, lease=3, poll_interval=0.05)
        assert worker.call_timeout == 1.0  # a third of the lease
        worker.start()
        try:
            pg.jobs.enqueue("k", id="before")
            wait_until(lambda: pg.jobs.get("before").state == "done", 10, "a job before the fault")

            proxy.silence()  # every open connection, and every new one, stops answering
            for i in range(5):
                pg.jobs.enqueue("k", id=f"during-{i}")  # not through the proxy
            time.sleep(2.5)  # several call deadlines: each cut, none hangs the worker
            # Nothing runs while the network is silent. A claim already on the wire when the
            # silence began may still commit on the server (it is one round trip: its BEGIN,
            # statement and COMMIT go out together), leasing jobs enqueued a moment later; only
            # its answer is lost, and the worker gives those jobs back once the network is back
            # (or their lease expires). So each job is pending, or leased by that lost claim.
            states = [pg.jobs.get(f"during-{i}").state for i in range(5)]
            assert set(states) <= {"pending", "leased"}, states
            assert not [j for j in ran if j.startswith("during-")], ran
            assert worker.running and worker.stats()["claim_errors"] >= 1

            proxy.restore()
            wait_until(
                lambda: all(pg.jobs.get(f"during-{i}").state == "done" for i in range(5)),
                20,
                "the jobs enqueued during the silence, done once the network is back",
            )

            pg.jobs.enqueue("k", "hold", id="held")
            assert holding.wait(10), "the held job never started"
            proxy.silence()
            grace = 2.0
            thread, out = stop_in_thread(worker, grace)
            thread.join(grace + 10)
            assert not thread.is_alive(), "stop() hung on the silent server"
            result, took = out[0]
            # The held handler returns at once, but its settlement cannot reach the server: stop()
            # gives it the grace, then cuts what is in flight, bounded by its call deadlines. A
            # hang would be the TCP timeout (minutes); the bound leaves a loaded host room (it
            # took 3.04 s once at load 10, where it usually takes under grace + 1 s).
            assert took < grace + 3 * worker.call_timeout + 2.0, f"stop() took {took:.2f} s with a grace of {grace} s"
            assert result.in_flight == 1 and not result.drained
        finally:
            proxy.restore()
            worker.stop(grace=1)
            remote.close()
    assert sorted(ran) == sorted(["before", "held", *(f"during-{i}" for i in range(5))])


def test_a_call_on_a_silent_connection_fails_at_its_deadline_with_a_coded_error(pg):
    with TcpProxy.for_url(PG_URL) as proxy:
        remote = tenure.connect(proxy.url(PG_URL) + "?call_timeout=0.5")
        try:
            assert remote.engine.call_timeout == 0.5
            remote.jobs.counts()
            proxy.silence()
            t0 = time.monotonic()
            with pytest.raises(StoreUnavailable) as err:
                remote.jobs.counts()  # a root call: bounded by ?call_timeout=
            assert 0.4 <= time.monotonic() - t0 < 8.0  # cut at its deadline, not at the TCP timeout
            assert "no answer within 0.5 s" in str(err.value) and err.value.code == "TN0005"
            with remote.engine.deadline(0.3), pytest.raises(StoreUnavailable):
                remote.jobs.get("x")  # an explicit deadline, capped by call_timeout
            proxy.restore()

            def answers() -> bool:  # fresh connections (the pool may still be backing off)
                try:
                    return remote.jobs.counts()["pending"] == 0
                except StoreUnavailable:
                    return False

            wait_until(answers, 15, "the store answering again once the network is back")
        finally:
            proxy.restore()
            remote.close()


def test_pool_connections_carry_keepalives_and_a_tcp_user_timeout_and_call_timeout_is_validated(pg):
    conn_params = pg.engine.conninfo
    for part in ("keepalives=1", "keepalives_idle=10", "tcp_user_timeout=30000"):
        assert part in conn_params
    with pg._session() as s:
        params = s.connection.info.get_parameters()
    assert params.get("keepalives") == "1" and params.get("tcp_user_timeout") == "30000"
    own = tenure.connect(PG_URL + "?keepalives_idle=3&call_timeout=2")
    try:
        assert "keepalives_idle=3" in own.engine.conninfo and own.engine.call_timeout == 2.0
        worker = own.jobs.create_worker({"k": lambda p, ctx: None}, lease=30)
        assert worker.call_timeout == 2.0 == call_timeout_for_lease(30_000, 2.0)
    finally:
        own.close()
    for bad in ("0", "-1", "soon", "inf"):
        with pytest.raises(InvalidURL):
            tenure.connect(PG_URL + f"?call_timeout={bad}")
    # Durations in the URL are seconds or the text form (tenure.durations), like every other one.
    for text, seconds in (("1500ms", 1.5), ("2s", 2.0), ("1m", 60.0), ("0.25", 0.25)):
        timed = tenure.connect(PG_URL + f"?call_timeout={text}&pool_timeout={text}")
        try:
            assert timed.engine.call_timeout == seconds == timed.engine.pool_timeout
        finally:
            timed.close()


def test_a_watchers_lead_and_follow_on_a_silent_connection_end_at_their_deadline(pg):
    """A worker that is not the waiter tries to lead every 0.2 s; lead() and follow() ran their
    statements with no deadline, so on a silent network the watch thread blocked for good (and
    a stopping worker joined it for good). Now each is cut at the thread's deadline, else at the
    store's call_timeout: lead answers False, the watcher reconnects once the network is back."""
    with TcpProxy.for_url(PG_URL) as proxy:
        remote = tenure.connect(proxy.url(PG_URL) + "?call_timeout=0.5")
        remote.jobs.counts()  # opens the store
        pg.jobs.counts()
        holder = pg.engine.watcher()  # leads "k" on a direct connection
        trying, leading = remote.engine.watcher(), remote.engine.watcher()
        try:
            assert holder.lead("k") and not trying.lead("k") and leading.lead("k2")
            proxy.silence()
            out: list = []
            t = threading.Thread(target=lambda: out.append((trying.lead("k"), leading.follow())), daemon=True)
            t.start()
            t.join(10)
            assert not t.is_alive(), "lead()/follow() hung on the silent connection"
            assert out == [(False, None)]
            proxy.restore()
            assert trying.wait(10) and leading.wait(10)  # reconnected (a wait after one answers True)
            holder.follow()
            assert trying.lead("k")
        finally:
            proxy.restore()
            for w in (holder, trying, leading):
                w.close()
            remote.close()


def test_a_stopping_worker_cuts_its_watch_threads_lead_on_a_silent_network(pg):
    """Two workers on the same kinds: the second is not the waiter and tries to lead every
    TAKEOVER_S. The network goes silent under it: its tries go on (each cut at the worker's call
    deadline), and its stop() returns within the grace and the call deadlines."""
    with TcpProxy.for_url(PG_URL) as proxy:
        remote = tenure.connect(proxy.url(PG_URL))  # no call_timeout: the worker's own bounds it
        a = pg.jobs.create_worker({"k": lambda payload, ctx: None}, concurrency=1, lease=3)
        b = remote.jobs.create_worker({"k": lambda payload, ctx: None}, concurrency=1, lease=3)
        a.start()
        try:
            wait_until(lambda: a._leading, 10, "a leading")
            b.start()
            wait_until(lambda: b._lead_tries >= 2, 10, "b trying to lead")
            proxy.silence()
            # Its watch thread goes on trying to lead: each try cut at its deadline, none hangs.
            tries = b._lead_tries
            wait_until(lambda: b._lead_tries >= tries + 2, 20, "b's lead tries going on during the silence")
            grace = 1.0
            thread, out = stop_in_thread(b, grace)
            thread.join(grace + 3 * b.call_timeout + 10)
            assert not thread.is_alive(), "stop() hung on the watch thread's lead on the silent network"
        finally:
            proxy.restore()
            b.stop(grace=1)
            a.stop(grace=1)
            remote.close()
