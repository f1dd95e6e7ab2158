"""Store URLs: which dialect a URL names, and the same store opened read-only.

The one place that knows the URL schemes (``sqlite:``, ``postgresql:``/``postgres:``/
``postgresql+psycopg:``); :func:`tenure.engine.create_engine`, the PostgreSQL engine and the CLI
all ask here.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..errors import InvalidURL
from ..redact import redact_url

Dialect = Literal["sqlite", "postgres"]

#: The schemes that name a PostgreSQL store.
POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")


def scheme_of(url: str) -> str:
    """The URL's scheme, lower-cased (everything before the first ``:``)."""
    return url.split(":", 1)[0].lower()


def dialect_of(url: object) -> Dialect:
    """``"sqlite"`` or ``"postgres"`` for a store URL; anything else raises InvalidURL (TN1xxx),
    never echoing a credential."""
    if not isinstance(url, str) or not url:
        raise InvalidURL(f"a store URL must be a non-empty string, got {url!r}")
    scheme = scheme_of(url)
    if scheme == "sqlite":
        return "sqlite"
    if scheme in POSTGRES_SCHEMES:
        return "postgres"
    if "://" not in url and "=" in url:
        # A libpq connection string (host=... password=...): refused, and never echoed whole.
        raise InvalidURL(f"a store URL is needed, not a connection string ({redact_url(url)!r}); "
                         "use postgresql://user@host/db (libpq options go in the query string)")
    if ":" in url and re.fullmatch(r"[a-z][a-z0-9+.\-]*", scheme):
        raise InvalidURL(f"unknown store URL scheme {scheme!r} in {redact_url(url)!r}; "
                         "use sqlite:///path.db or postgresql://user@host/db")
    raise InvalidURL(f"not a store URL: {redact_url(url)!r}; use sqlite:///path.db or postgresql://user@host/db")


def read_only_url(url: str) -> str:
    """The same store, opened so it can read but never write (``tenure migrate --check``):
    SQLite's ``mode=ro``, PostgreSQL's ``default_transaction_read_only``."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    query = parse_qsl(parts.query, keep_blank_values=True)
    if scheme == "sqlite":
        query = [(k, v) for k, v in query if k != "mode"] + [("mode", "ro")]
    elif scheme in POSTGRES_SCHEMES:
        opts = [v for k, v in query if k == "options"]
        query = [(k, v) for k, v in query if k != "options"]
        query.append(("options", " ".join([*opts, "-c default_transaction_read_only=on"]).strip()))
    return url.split("?", 1)[0] + "?" + urlencode(query)
