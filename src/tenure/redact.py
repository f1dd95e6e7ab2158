"""Credentials out of everything tenure prints: store URLs and libpq connection strings, parsed.

One function decides what a secret is, :func:`redact_url`; every surface that can show a store
address calls it (errors, log lines, the worker's banner, ``--json`` outputs, the dashboard,
``repr(store)``). It PARSES its input, never searches it for a known password:

- a URL (``postgresql://user:pw@host/db?sslpassword=x&application_name=y``) is split into
  scheme, authority, path, query and fragment by the rules of :func:`urllib.parse.urlsplit`
  (decoding with :func:`urllib.parse.unquote_plus`); the password of ``user:pw@`` and the value
  of every credential-like query parameter become ``***`` and everything else is kept as written;
- a libpq connection string (``host=db password='p w' dbname=app``) is parsed by libpq itself
  through ``psycopg.conninfo.conninfo_to_dict`` when psycopg is installed (an optional
  extra) to check the result; the text itself is redacted by a small reader of the same grammar
  (``keyword = value``, single quotes, backslash escapes) that keeps the string as written and
  reads a broken tail (a missing ``=``, an unterminated quote) as part of the secret rather than
  as text to show. Should libpq still find a secret in the reader's output, the string is rebuilt
  from libpq's own reading (``make_conninfo``) with the secrets masked.

A parameter is credential-like when its name (case and ``-``/``_`` ignored) contains ``pass``,
``pwd``, ``secret``, ``token``, ``apikey``, ``credential``, ``privatekey``, ``accesskey``,
``signature`` or ``auth``, or is ``pw``, ``key`` or ``sig``: ``password``, ``sslpassword``,
``passfile``, ``access_token``, ``api-key``... Hiding a harmless value is cheap; showing a
secret is not.

Free text (an exception's message, a traceback) goes through :func:`scrub`: every URL and every
``password=...``-style pair in it is redacted the same way, and the secret values a store's URL
carries (:func:`credentials`) are replaced wherever they appear, in case a driver echoes one.
docs/operations.md ("Secrets in URLs") describes it for operators; the tests are
``tests/core/test_redaction_surfaces.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus, unquote, unquote_plus

__all__ = ["MASK", "credentials", "is_credential_key", "redact_url", "scrub"]

#: What a hidden value is replaced by.
MASK = "***"

_PARTS = (
    "pass",
    "pwd",
    "secret",
    "token",
    "apikey",
    "credential",
    "privatekey",
    "accesskey",
    "signature",
    "auth",
)
_EXACT = frozenset({"pw", "key", "sig"})
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
#: A URL inside free text: a scheme, ``://``, then everything up to a space or a quote.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")
#: ``keyword=value`` inside free text (a quoted value may hold spaces). No spaces around ``=``
#: here, unlike libpq: a traceback's ``token = compute()`` line is code, not a connection string.
_PAIR_IN_TEXT = re.compile(
    r"(?P<key>[A-Za-z_][A-Za-z0-9_\-]*)(?P<eq>=)"
    r"(?P<value>'(?:[^'\\]|\\.)*(?:'|$)|[^\s&'\"]+)"
)


def is_credential_key(name: str) -> bool:
    """True when a parameter called ``name`` may hold a secret (see the module docstring)."""
    norm = name.strip().lower().replace("-", "").replace("_", "")
    return norm in _EXACT or any(part in norm for part in _PARTS)


def redact_url(url: str) -> str:
    """``url`` (a store URL or a libpq connection string) with every credential replaced by
    ``***``: the password of ``user:password@``, and the value of every credential-like parameter
    (``password``, ``sslpassword``, ``token``...). Everything else is kept. Text that is neither a
    URL nor a ``key=value`` string comes back unchanged. Safe for logs, banners, errors and JSON."""
    if not isinstance(url, str):
        url = str(url)
    if _SCHEME.match(url):
        return _redact_url(url)
    if "=" in url:
        return _redact_conninfo(url)
    return url


def credentials(url: str) -> frozenset[str]:
    """The secret values ``url`` carries (a URL's password, credential-like parameters of a URL or
    a connection string), decoded and as written: what :func:`scrub` must hide wherever a driver or
    a traceback might repeat it."""
    if not isinstance(url, str):
        return frozenset()
    found: set[str] = set()
    if _SCHEME.match(url):
        _, userinfo, _, _, query, fragment = _split(url)
        if userinfo is not None and ":" in userinfo:
            raw = userinfo.split(":", 1)[1]
            found.update((raw, unquote(raw)))
        for piece in f"{query or ''}&{fragment or ''}".split("&"):
            key, eq, value = piece.partition("=")
            if eq and value and is_credential_key(unquote_plus(key)):
                found.update((value, unquote_plus(value), unquote(value)))
    elif "=" in url:
        pairs = _libpq_pairs(url)
        if pairs is not None:
            found.update(v for k, v in pairs if is_credential_key(k) and v)
        found.update(value for key, value, _, _ in _read_conninfo(url) if is_credential_key(key) and value)
    return frozenset(s for s in found if s and s != MASK)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` (a message, a log line, a traceback) with every URL in it redacted by
    :func:`redact_url`, every credential-like ``key=value`` pair hidden, and each of ``secrets``
    (with its percent-encoded spellings) replaced by ``***`` wherever it still appears."""
    text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), str(text))
    text = _PAIR_IN_TEXT.sub(_mask_pair, text)
    spellings: set[str] = set()
    for secret in secrets:
        if secret:
            spellings.update((secret, quote(secret, safe=""), quote_plus(secret)))
    for spelling in sorted(spellings, key=len, reverse=True):  # longest first: no partial leftovers
        if spelling != MASK:
            text = text.replace(spelling, MASK)
    return text


# -- URLs --------------------------------------------------------------------------------------


def _split(url: str) -> tuple[str, str | None, str | None, str, str | None, str | None]:
    """``(scheme, userinfo, hostport, path, query, fragment)``, each exactly as written (None when
    absent), so that joining them back gives ``url`` byte for byte (``urlsplit``/``urlunsplit`` do
    not round-trip: they drop the empty authority of ``sqlite:///jobs.db``).

    The parts follow :func:`urllib.parse.urlsplit`'s rules but for one thing: the user
    information runs to the LAST ``@`` of the URL whenever a ``:`` comes before it. A password
    typed with an unencoded ``@``, ``/``, ``?`` or ``#`` (``postgresql://app:p@ss/w0rd@db/app``) is
    then one secret, hidden whole, where ``urlsplit`` and libpq would each split it differently
    and either would show a piece. The price: a URL with an ``@`` in its path or query after a
    ``:`` (a port) shows less of itself than it could."""
    scheme, _, rest = url.partition(":")
    userinfo = hostport = None
    if rest.startswith("//"):
        body = rest[2:]
        at = body.rfind("@")
        if at >= 0 and ":" in body[:at]:
            userinfo, body = body[:at], body[at + 1 :]
        ends = [i for i in (body.find(c) for c in "/?#") if i >= 0]
        end = min(ends, default=len(body))
        hostport, rest = body[:end], body[end:]
        if userinfo is None and "@" in hostport:
            userinfo, _, hostport = hostport.rpartition("@")
    rest, hash_, fragment = rest.partition("#")
    path, mark, query = rest.partition("?")
    return scheme, userinfo, hostport, path, (query if mark else None), (fragment if hash_ else None)


def _redact_url(url: str) -> str:
    scheme, userinfo, hostport, path, query, fragment = _split(url)
    out = [scheme, ":"]
    if hostport is not None:
        out.append("//")
        if userinfo is not None:
            user, colon, _ = userinfo.partition(":")
            out += [user, f":{MASK}" if colon else "", "@"]
        out.append(hostport)
    out.append(path)
    if query is not None:
        out += ["?", _redact_params(query)]
    if fragment is not None:
        out += ["#", _redact_params(fragment)]
    # The safety net: a credential-like pair wherever it ended up (a host part holding "&x=y").
    return _PAIR_IN_TEXT.sub(_mask_pair, "".join(out))


def _redact_params(query: str) -> str:
    """A query string with the value of each credential-like parameter hidden; every other
    parameter is kept byte for byte (no re-encoding)."""
    if not query:
        return query
    out = []
    for piece in query.split("&"):
        key, eq, value = piece.partition("=")
        if eq and value and is_credential_key(unquote_plus(key)):
            piece = f"{key}={MASK}"
        out.append(piece)
    return "&".join(out)


# -- libpq connection strings ------------------------------------------------------------------


def _libpq_pairs(text: str) -> list[tuple[str, str]] | None:
    """The string's keywords and values as libpq reads them (through psycopg), or None when psycopg
    is not installed or libpq refuses the string."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return None
    try:
        return [(str(k), str(v)) for k, v in conninfo_to_dict(text).items() if v is not None]
    except Exception:  # noqa: BLE001 - any refusal: the fallback reader takes over
        return None


def _redact_conninfo(text: str) -> str:
    """The string as written with each credential's value hidden by the reader below; when libpq
    (through psycopg) can read the string, it checks the result: should libpq still find a secret
    in it, the string is rebuilt from libpq's own reading instead (``make_conninfo``)."""
    out = []
    pos = 0
    for key, value, start, end in _read_conninfo(text):
        if is_credential_key(key) and (value or end > start):
            out.append(text[pos:start] + MASK)
            pos = end
    out.append(text[pos:])
    redacted = "".join(out)
    pairs = _libpq_pairs(text)
    if pairs is None:
        return redacted
    check = _libpq_pairs(redacted)
    if check is not None and all(v == MASK for k, v in check if is_credential_key(k) and v):
        return redacted
    try:
        from psycopg.conninfo import make_conninfo

        return make_conninfo(**{k: (MASK if is_credential_key(k) and v else v) for k, v in pairs})
    except Exception:  # noqa: BLE001 - nothing of it can be shown safely
        return "<unparseable connection string>"


def _read_conninfo(text: str) -> list[tuple[str, str, int, int]]:
    """``(keyword, value, value_start, value_end)`` for each ``keyword = value`` of a libpq
    connection string, following libpq's grammar (whitespace-separated pairs, spaces allowed
    around ``=``, a value in single quotes may hold spaces, a backslash escapes the next
    character). It never raises: a keyword without ``=`` takes the next word as its value, and an
    unterminated quote runs to the end of the text, so a broken tail is hidden, not shown."""
    pairs: list[tuple[str, str, int, int]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        k0 = i
        while i < n and not text[i].isspace() and text[i] != "=":
            i += 1
        key = text[k0:i]
        while i < n and text[i].isspace():
            i += 1
        if i < n and text[i] == "=":
            i += 1
            while i < n and text[i].isspace():
                i += 1
        v0 = i
        chars: list[str] = []
        if i < n and text[i] == "'":
            i += 1
            while i < n and text[i] != "'":
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                chars.append(text[i])
                i += 1
            i = min(i + 1, n)
        else:
            while i < n and not text[i].isspace():
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                chars.append(text[i])
                i += 1
        pairs.append((key, "".join(chars), v0, i))
    return pairs


def _mask_pair(m: re.Match[str]) -> str:
    if not is_credential_key(m.group("key")):
        return m.group(0)
    return f"{m.group('key')}{m.group('eq')}{MASK}"
