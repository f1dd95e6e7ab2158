"""No credential from a store URL reaches any surface.

Every place a store address can surface is read here with URLs that carry secrets in both forms
libpq accepts — ``user:password@`` and query parameters (``?password=``, ``sslpassword=``) — and
as a libpq connection string: ``repr(store)`` and ``engine.describe()``, coded errors, the worker's
log banner, the dashboard's header and ``/api/overview``, and ``/metrics``. The CLI's surfaces
(``stats --json``, ``migrate --check --json``, error lines, debug tracebacks) are in
``tests/cli/test_redaction_cli.py``. The redaction itself is ``tenure.redact``.
"""

from __future__ import annotations

import logging
import sys
import threading
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

import pytest

import tenure
from tenure.errors import InvalidURL, StoreUnavailable
from tenure.redact import MASK, credentials, is_credential_key, redact_url, scrub

# Each secret holds every character that breaks a hand-built URL or a string replace (/ @ : % ?)
# and starts and ends with a marker: a surface showing any piece of one (a parser that split it at
# an "@" or a "/") still shows "s3cret" and fails assert_clean. In a URL they are percent-encoded
# (EPW, EQPW, ESSLPW), as a URL requires; in a libpq connection string they are written raw.
PW, QPW, SSLPW = "s3cretP/@:%?pw s3cretP", "s3cretQ/@:%?q s3cretQ", "s3cretS/@:%?ssl s3cretS"
EPW, EQPW, ESSLPW = (quote(s, safe="") for s in (PW, QPW, SSLPW))
SECRETS = (PW, QPW, SSLPW)


def _with_query(url: str, query: str) -> str:
    return url + ("&" if "?" in url else "?") + query


def secret_urls(engine_url: str) -> list[str]:
    """``engine_url`` spelled with secrets: the password in the query string (every engine) and,
    on PostgreSQL, in ``user:password@`` too. Each opens the same store (the test server trusts
    local connections, so the passwords are carried and ignored)."""
    if engine_url.startswith("sqlite"):
        return [_with_query(engine_url, f"password={EQPW}&sslpassword={ESSLPW}")]
    parts = urlsplit(engine_url)
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0] or "postgres"
    with_user = urlunsplit(parts._replace(netloc=f"{user}:{EPW}@{hostport}"))
    return [
        _with_query(with_user, f"sslpassword={ESSLPW}&application_name=redaction"),
        _with_query(engine_url, f"password={EQPW}&sslpassword={ESSLPW}"),
    ]


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        for spelling in (secret, quote(secret, safe=""), quote_plus(secret)):
            assert spelling not in text, f"{secret!r} leaked in: {text}"
    assert "s3cret" not in text, f"a piece of a secret leaked in: {text}"


def masked(url: str) -> bool:
    """Whether the store's description shows the URL's parameters (masked): PostgreSQL's does,
    SQLite's is only the file's path."""
    return not url.startswith("sqlite")


# -- the parser ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("postgresql://ops:pw%40x@db:5432/app", "postgresql://ops:***@db:5432/app"),
        (
            "postgresql://ops@db/app?password=pw&sslmode=require",
            "postgresql://ops@db/app?password=***&sslmode=require",
        ),
        (
            "postgresql://db/app?sslpassword=k&application_name=a+b",
            "postgresql://db/app?sslpassword=***&application_name=a+b",
        ),
        (
            "postgresql://db/app?pass%77ord=pw",
            "postgresql://db/app?pass%77ord=***",
        ),  # an encoded key is still read
        (
            "postgresql://u:p@h1:5432,h2:5433/app?target_session_attrs=any",
            "postgresql://u:***@h1:5432,h2:5433/app?target_session_attrs=any",
        ),
        (
            "https://u@api.example/x?api-key=k&X_Auth_Token=t&page=2",
            "https://u@api.example/x?api-key=***&X_Auth_Token=***&page=2",
        ),
        ("sqlite:///jobs.db?durable=1&token=t", "sqlite:///jobs.db?durable=1&token=***"),
        ("sqlite:///jobs.db", "sqlite:///jobs.db"),
        ("sqlite:///data/a@b.db", "sqlite:///data/a@b.db"),
        # A password typed with unencoded @ / ? # is hidden whole, however a parser would split it.
        ("postgresql://app:p@ss/w0rd@db/app", "postgresql://app:***@db/app"),
        ("postgresql://app:pa?ss#x@db/app?sslmode=require", "postgresql://app:***@db/app?sslmode=require"),
        ("postgresql://app@db/app?application_name=a@b", "postgresql://app@db/app?application_name=a@b"),
        ("host=db password=pw dbname=app", "host=db password=*** dbname=app"),
        (
            "host=db password = 'p w\\' x' sslpassword=k port=5432",
            "host=db password = *** sslpassword=*** port=5432",
        ),
        ("host=db password='unterminated rest", "host=db password=***"),
        ("host=db password pw", "host=db password ***"),  # no '=': libpq refuses it; the word is still hidden
        ("just a path/jobs.db", "just a path/jobs.db"),
    ],
)
def test_redact_url_parses_urls_and_connection_strings(given, shown):
    assert redact_url(given) == shown


def test_connection_strings_without_psycopg(monkeypatch):
    """psycopg is an optional extra: without it the reader alone redacts connection strings."""
    monkeypatch.setitem(sys.modules, "psycopg.conninfo", None)  # any import of it now fails
    assert redact_url("host=db password='p w' dbname=app") == "host=db password=*** dbname=app"
    assert redact_url("sslpassword=k host=db") == "sslpassword=*** host=db"
    assert credentials("host=db password='p w'") == {"p w"}


def test_credentials_and_scrub_cover_every_spelling():
    url = "postgresql://ops:p%40ss@db/app?password=q+w&sslpassword=s%20s&application_name=x"
    assert credentials(url) >= {"p@ss", "p%40ss", "q w", "s s"}
    assert "x" not in credentials(url)
    # A driver that echoes a secret in any spelling, a URL or a conninfo pair inside free text.
    text = (
        "could not connect with p@ss (p%40ss) to postgresql://ops:p%40ss@db/app?password=q+w; "
        "conninfo was 'host=db password=hunter2 sslpassword=abc'"
    )
    out = scrub(text, credentials(url))
    for secret in ("p@ss", "p%40ss", "q+w", "hunter2", "abc"):
        assert secret not in out
    assert out.startswith("could not connect with *** (***) to postgresql://ops:***@db/app?password=***")
    assert (
        is_credential_key("sslpassword") and is_credential_key("Access-Token") and is_credential_key("apiKey")
    )
    assert not is_credential_key("dbname") and not is_credential_key("sslmode") and MASK == "***"


# -- surfaces ------------------------------------------------------------------------------------


def test_repr_and_describe_never_show_a_secret(engine_url):
    for url in secret_urls(engine_url):
        store = tenure.connect(url)
        try:
            store.jobs  # noqa: B018 - the secrets really were given to the engine
            assert_clean(repr(store))
            assert_clean(store.engine.describe())
            assert (MASK in repr(store)) is masked(url)
        finally:
            store.close()


def test_coded_errors_never_show_a_secret():
    """An unreachable server, a bad option and a connection string where a URL belongs: each
    error names the store with its secrets hidden."""
    for url in (
        f"postgresql://ops:{EPW}@127.0.0.1:1/app?sslpassword={ESSLPW}",
        f"postgresql://ops@127.0.0.1:1/app?password={EQPW}&sslpassword={ESSLPW}",
    ):
        store = tenure.connect(url, pool_timeout=1)
        with pytest.raises(StoreUnavailable) as err:
            store.jobs  # noqa: B018
        assert_clean(str(err.value))
        assert "127.0.0.1:1/app" in str(err.value) and MASK in str(err.value)
        with pytest.raises(InvalidURL) as err:
            tenure.connect(_with_query(url, "pool_min=many"))
        assert_clean(str(err.value))
    for url in (
        f"host=127.0.0.1 port=1 password='{QPW}' sslpassword='{SSLPW}'",
        f"mysql://ops:{EPW}@db/app?password={EQPW}",
    ):
        with pytest.raises(InvalidURL) as err:
            tenure.connect(url)
        assert_clean(str(err.value))
        assert MASK in str(err.value)


def test_the_worker_banner_never_shows_a_secret(engine_url, caplog):
    for url in secret_urls(engine_url):
        app = tenure.App(url)

        @app.task(name="noop")
        def noop() -> None:
            return None

        stop = threading.Event()
        stop.set()  # start, log the banner, stop at once
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="tenure"):
            app.run_worker(install_signals=False, stop_event=stop)
        banner = [r.getMessage() for r in caplog.records if "worker started" in r.getMessage()]
        assert banner and (MASK in banner[0]) is masked(url)
        assert_clean("\n".join(r.getMessage() for r in caplog.records))
        app.store.close()


def _get(app, *paths: str) -> list:
    """GET each path from the ASGI ``app`` in process, as a browser on http://localhost would."""
    import asyncio

    import httpx

    async def fetch() -> list:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return [await client.get(p) for p in paths]

    return asyncio.run(fetch())


def test_dashboard_header_and_api_overview_never_show_a_secret(engine_url):
    pytest.importorskip("starlette")
    from tenure.dashboard import create_app

    for url in secret_urls(engine_url):
        store = tenure.connect(url)
        try:
            page, overview = _get(create_app(store), "/", "/api/overview")
            assert page.status_code == 200 and overview.status_code == 200
            assert_clean(page.text)
            assert_clean(overview.text)
            assert (MASK in page.text) is masked(url)
            assert (MASK in overview.json()["store"]) is masked(url)
        finally:
            store.close()


def test_metrics_never_show_a_secret(engine_url):
    """No metric carries the store's address as a label (the store gauges are per queue and
    state): this pins that a scrape of a store opened with secrets shows none of them."""
    pytest.importorskip("prometheus_client")
    from tenure.metrics import build_registry, render

    for url in secret_urls(engine_url):
        store = tenure.connect(url)
        try:
            store.jobs.enqueue("k", None, queue="q")
            registry, _ = build_registry(store=store)
            body, _ = render(registry)
            text = body.decode() if isinstance(body, bytes) else body
            assert 'tenure_jobs{queue="q",state="pending"}' in text
            assert_clean(text)
        finally:
            store.close()


def test_pg_engine_scrubs_driver_messages():
    """A psycopg error that echoes a credential (libpq can, for a malformed option) is scrubbed of
    every secret the URL carries, not only the ``user:password@`` one."""
    pytest.importorskip("psycopg")
    from tenure.engine.postgres.engine import PostgresEngine

    engine = PostgresEngine(f"postgresql://ops:{EPW}@127.0.0.1:1/app?password={EQPW}&sslpassword={ESSLPW}")
    import psycopg

    exc = psycopg.OperationalError(f"bad: password='{QPW}' sslpassword {SSLPW} user pw {PW} url {EPW}")
    err = engine.classify(exc)
    assert isinstance(err, StoreUnavailable)
    assert_clean(str(err))
