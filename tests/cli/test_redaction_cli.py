"""The CLI never prints a credential from the store URL: ``stats`` and
``migrate --check`` (text and ``--json``), error lines and the ``TENURE_DEBUG=1`` traceback, with
the password in ``user:password@``, in ``?password=`` / ``?sslpassword=``, or in a libpq
connection string given where a URL belongs. The library's surfaces are in
``tests/core/test_redaction_surfaces.py``."""

from __future__ import annotations

import json

import pytest

from ..core.test_redaction_surfaces import (
    EPW,
    EQPW,
    ESSLPW,
    MASK,
    QPW,
    SSLPW,
    assert_clean,
    masked,
    secret_urls,
)

UNREACHABLE = (
    f"postgresql://ops:{EPW}@127.0.0.1:1/tenure?sslpassword={ESSLPW}",
    f"postgresql://ops@127.0.0.1:1/tenure?password={EQPW}&sslpassword={ESSLPW}",
)


def test_stats_and_migrate_check_show_the_store_redacted(cli, engine_url):
    for url in secret_urls(engine_url):
        for args in (("stats", "--json"), ("migrate", "--check", "--json")):
            res = cli(*args, url=url)
            assert_clean(res.out + res.err)
            store = json.loads(res.out)["store"]
            assert (MASK in store) is (masked(url) or args[0] == "migrate"), store
        for args in (("stats",), ("migrate", "--check")):
            res = cli(*args, url=url)
            assert_clean(res.out + res.err)


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_errors_and_debug_tracebacks_never_show_a_secret(cli):
    for url in UNREACHABLE:
        res = cli("jobs", "list", url=url, expect=1)
        assert "[TN0005]" in res.err and len(res.err.strip().splitlines()) == 1
        assert_clean(res.out + res.err)
        # The same from $TENURE_URL, and with the debug traceback.
        res = cli("stats", "--json", url=None, env={"TENURE_URL": url, "TENURE_DEBUG": "1"}, expect=1)
        assert "Traceback" in res.err and "[TN0005]" in res.err
        assert_clean(res.out + res.err)
        res = cli("migrate", "--check", "--json", url=url, env={"TENURE_DEBUG": "1"}, expect=1)
        assert_clean(res.out + res.err)


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_a_connection_string_as_the_url_is_refused_without_echoing_it(cli):
    conninfo = f"host=127.0.0.1 port=1 dbname=tenure password='{QPW}' sslpassword='{SSLPW} x'"
    res = cli("jobs", "list", url=conninfo, expect=2)
    assert "[TN0007]" in res.err and "connection string" in res.err and MASK in res.err
    assert_clean(res.out + res.err)
    res = cli("stats", url=None, env={"TENURE_URL": conninfo, "TENURE_DEBUG": "1"}, expect=2)
    assert "Traceback" in res.err
    assert_clean(res.out + res.err)
