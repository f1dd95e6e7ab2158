"""Argument checks shared by every public call: each answers a coded error, nothing is written.

One verdict per input (docs/guarantees.md, "One verdict per input"): every value a caller hands to
tenure is decided HERE, before any engine sees it, so SQLite and PostgreSQL answer the same bad
input with the same exception class and code (``TN1001`` for a value out of range, ``TN1002`` for
a wrong type), and the message names the field. The bounds are the columns' own: ``priority`` and
``generation`` are 32-bit (``INTEGER`` on PostgreSQL), durations are capped at ten years, text
refuses NUL (PostgreSQL cannot store it) and lone surrogates (not UTF-8), ids are at most 255
characters and keys at most 1024 UTF-8 bytes (a btree entry must fit a PostgreSQL page).
The table of refused inputs is tests/conformance/test_input_table.py.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import json
import math
import re
from collections.abc import Collection, Mapping
from typing import Any

from . import _sanitize
from .errors import InvalidArgument, InvalidType, PayloadTooLarge

MAX_NAME = 200
_NAME_RE = re.compile(r"^[A-Za-z0-9_.:\-/@+]+$")
MAX_PAYLOAD_BYTES = 1 << 20  # 1 MiB of JSON text
MAX_ATTEMPTS_LIMIT = 1_000_000
MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
INT4_MIN, INT4_MAX = -(2**31), 2**31 - 1  # PostgreSQL INTEGER columns (priority, generation, limits)
MAX_ID = 255  # characters of a job id, a node id or an owner
MAX_KEY_BYTES = 1024  # UTF-8 bytes of a singleton_key or group_key (indexed: must fit a btree entry)
MAX_DURATION_MS = 10 * 365 * 86_400_000  # ten years: every duration, lease and backoff
#: Zone names whose meaning depends on the host's files, not on the IANA database: a schedule in
#: one would fire at different instants on different hosts.
HOST_DEPENDENT_ZONES = frozenset({"localtime", "posixrules", "Factory"})


def name(value: Any, what: str) -> str:
    """A kind or queue name: a non-empty string of letters, digits and ``_ . : - / @ +``."""
    if not isinstance(value, str):
        raise InvalidType(f"{what} must be a string, got {type(value).__name__}")
    if not value or len(value) > MAX_NAME or not _NAME_RE.match(value):
        raise InvalidArgument(
            f"{what} {value!r} is not a valid name: use 1-{MAX_NAME} letters, digits or _ . : - / @ +")
    return value


def names(value: Any, what: str) -> list[str]:
    """One name or an iterable of names, as a non-empty list."""
    if isinstance(value, str):
        return [name(value, what)]
    try:
        items = list(value)
    except TypeError:
        raise InvalidType(f"{what} must be a string or a list of strings, got {type(value).__name__}") from None
    if not items:
        raise InvalidArgument(f"{what} must not be empty")
    return [name(v, what) for v in items]


def text(value: Any, what: str, *, max_chars: int | None = None, max_bytes: int | None = None,
         allow_empty: bool = True) -> str:
    """A string both engines store identically: no NUL (U+0000; PostgreSQL's text cannot hold
    it), no lone surrogate (not encodable as UTF-8), within ``max_chars`` characters and
    ``max_bytes`` UTF-8 bytes."""
    if not isinstance(value, str):
        raise InvalidType(f"{what} must be a string, got {type(value).__name__}")
    if not value and not allow_empty:
        raise InvalidArgument(f"{what} must not be empty")
    if "\x00" in value:
        raise InvalidArgument(f"{what} contains a NUL character (U+0000) at position {value.index(chr(0))}: "
                              "text may not contain NUL")
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"{what} contains a lone surrogate (U+{ord(value[exc.start]):04X}) at position "
                              f"{exc.start}: text must be valid Unicode") from None
    if max_chars is not None and len(value) > max_chars:
        raise InvalidArgument(f"{what} is {len(value)} characters long; the limit is {max_chars}")
    if max_bytes is not None and len(encoded) > max_bytes:
        raise InvalidArgument(f"{what} is {len(encoded)} bytes of UTF-8; the limit is {max_bytes}")
    return value


def job_id(value: Any, what: str = "job id") -> str:
    """A job id (or a run id): 1-255 characters of NUL-free, valid Unicode text."""
    if not isinstance(value, str):
        raise InvalidType(f"{what} must be a string, got {type(value).__name__}")
    if not value or len(value) > MAX_ID:
        raise InvalidArgument(f"{what} must be 1-{MAX_ID} characters, got {len(value)}")
    return text(value, what)


def key(value: Any, what: str) -> str | None:
    """A ``singleton_key``/``group_key``: None, or text of at most :data:`MAX_KEY_BYTES` bytes."""
    if value is None:
        return None
    return text(value, what, max_bytes=MAX_KEY_BYTES)


def int4(value: Any, what: str) -> int:
    """An integer that fits a PostgreSQL ``INTEGER`` column (and so SQLite's, identically)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{what} must be an integer, got {value!r}")
    if not INT4_MIN <= value <= INT4_MAX:
        raise InvalidArgument(f"{what} must be within {INT4_MIN}..{INT4_MAX}, got {value}")
    return value


def positive_int(value: Any, what: str, *, maximum: int | None = None, allow_none: bool = False) -> int | None:
    """A positive int; ``bool`` is refused (``True`` is not 1 attempt)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{what} must be a positive integer, got {value!r}")
    if value < 1:
        raise InvalidArgument(f"{what} must be a positive integer, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidArgument(f"{what} must be at most {maximum}, got {value}")
    return value


def non_negative_int(value: Any, what: str, *, allow_none: bool = True, maximum: int | None = None) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{what} must be a non-negative integer, got {value!r}")
    if value < 0:
        raise InvalidArgument(f"{what} must be >= 0, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidArgument(f"{what} must be at most {maximum}, got {value}")
    return value


def lease_ms(value: Any, what: str = "lease_ms") -> int:
    """A lease length in ms: 1 ms up to ten years."""
    return positive_int(value, what, maximum=MAX_DURATION_MS)  # type: ignore[return-value]


def backoff_ms(value: Any, what: str) -> int | None:
    """A retry backoff bound in ms (``backoff_base_ms``/``backoff_cap_ms``): None, or 0 up to ten years."""
    return non_negative_int(value, what, maximum=MAX_DURATION_MS)


def known_options(options: Mapping[str, Any], known: Collection[str], what: str) -> None:
    """:class:`InvalidArgument` (TN1001) for the first option name not in ``known``, naming the
    nearest known one ("did you mean ...")."""
    for name_ in options:
        if name_ not in known:
            near = difflib.get_close_matches(str(name_), list(known), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; known: {', '.join(sorted(known))}"
            raise InvalidArgument(f"unknown {what} option {name_!r}{hint}", option=str(name_))


def lease(value: Any, what: str) -> None:
    """The fields of a caller-held Lease are within the columns' ranges (a forged or corrupted
    one is refused here, not by one engine's integer overflow)."""
    job_id(value.job_id, f"{what}: the lease's job_id")
    text(value.token, f"{what}: the lease's token", max_chars=MAX_ID)
    for name_, field in (("generation", value.generation), ("attempt", value.attempt)):
        if isinstance(field, bool) or not isinstance(field, int):
            raise InvalidType(f"{what}: the lease's {name_} must be an integer, got {field!r}")
        if not 0 <= field <= INT4_MAX:
            raise InvalidArgument(f"{what}: the lease's {name_} must be within 0..{INT4_MAX}, got {field}")


def time_zone(value: Any) -> str:
    """A schedule's IANA time zone NAME; host-dependent names (``localtime``...) are refused:
    the same schedule must fire at the same instants on every host (TN4001)."""
    from .errors import InvalidSchedule

    if isinstance(value, str) and (value in HOST_DEPENDENT_ZONES or value.startswith(("posix/", "right/"))
                                   or value.lower() == "localtime"):
        raise InvalidSchedule(f"tz {value!r} depends on the host's files, not on the IANA database; "
                              "name the zone (e.g. 'Europe/Paris' or 'UTC')", field="tz")
    return value


def integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{what} must be an integer, got {value!r}")
    if abs(value) > 2**62:
        raise InvalidArgument(f"{what} is out of range: {value}")
    return value


def epoch_ms(value: Any, what: str) -> int:
    """A finite epoch in ms (int or integral float) or an aware/naive-UTC datetime."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        value = int(value.timestamp() * 1000)  # then the same range as an int (year 1 is refused)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidType(f"{what} must be epoch milliseconds or a datetime, got {type(value).__name__}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(f"{what} must be a finite epoch in milliseconds, got {value}")
        value = int(value)
    if value < 0 or value > MAX_EPOCH_MS:
        raise InvalidArgument(f"{what} {value} is outside 0..{MAX_EPOCH_MS} epoch ms")
    return value


#: One encoder for every payload: ``json.dumps`` with non-default arguments builds a new
#: ``JSONEncoder`` per call (~1.5 µs of a bulk enqueue's row).
_ENCODE = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False).encode
#: That encoder, unchecked (``tenure.plain_bulk`` encodes a whole batch with it, then checks each).
encode_json = _ENCODE


def dump_json(value: Any, what: str, limit: int = MAX_PAYLOAD_BYTES) -> str:
    """JSON text for a payload or result that the store can hold and a worker can decode:
    NaN/inf and non-JSON types are refused (TN1002), nesting deeper than 100 (TN1001), a lone
    surrogate (TN1004, :func:`tenure._sanitize.storable_json`)."""
    try:
        text = _ENCODE(value)
    except (TypeError, ValueError) as exc:
        raise InvalidType(f"{what} must be JSON-serialisable: {exc}") from None
    except RecursionError:
        raise InvalidArgument(f"{what} is nested too deeply to serialise") from None
    _sanitize.check_storable(text, what)
    if len(text) > limit and len(text.encode("utf-8")) > limit:
        raise PayloadTooLarge(f"{what} is {len(text.encode('utf-8'))} bytes of JSON; the limit is {limit}")
    _sanitize.check_depth(text, what)
    return text


MAX_TAGS = 20  # tags on one job
MAX_TAG_CHARS = 64  # characters of one tag
MAX_META_BYTES = 4096  # UTF-8 bytes of a job's meta object as JSON


def tags(value: Any, what: str = "tags") -> str | None:
    """A job's tags as JSON text (None for none): a list (or tuple) of at most :data:`MAX_TAGS`
    distinct non-empty strings of at most :data:`MAX_TAG_CHARS` characters, order kept,
    repeats dropped. A wrong type is TN1002, a bad value TN1001; both name the field."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise InvalidType(f"{what} must be a list of strings, got {type(value).__name__}")
    seen: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise InvalidType(f"{what}[{i}] must be a string, got {type(item).__name__}")
        text(item, f"{what}[{i}]", max_chars=MAX_TAG_CHARS, allow_empty=False)
        if item not in seen:
            seen.append(item)
    if len(seen) > MAX_TAGS:
        raise InvalidArgument(f"{what} has {len(seen)} tags; the limit is {MAX_TAGS}")
    return json.dumps(seen, ensure_ascii=False, separators=(",", ":")) if seen else None


def meta(value: Any, what: str = "meta") -> str | None:
    """A job's meta as JSON text (None for none): a JSON object with string keys, at most
    :data:`MAX_META_BYTES` bytes as JSON. A wrong type is TN1002, too large TN1001."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidType(f"{what} must be a JSON object (a dict), got {type(value).__name__}")
    for k in value:
        if not isinstance(k, str):
            raise InvalidType(f"{what} keys must be strings, got {type(k).__name__}")
    out = dump_json(value, what, limit=1 << 30)
    size = len(out.encode("utf-8"))
    if size > MAX_META_BYTES:
        raise InvalidArgument(f"{what} is {size} bytes of JSON; the limit is {MAX_META_BYTES}")
    return out if value else None


def state(value: Any) -> str | None:
    from .records import STATES

    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidType(f"state must be a string, got {type(value).__name__}")
    if value not in STATES:
        raise InvalidArgument(f"unknown state {value!r}; one of {', '.join(STATES)}")
    return value


def error_message(error: Any) -> str:
    """The failure message recorded in ``last_error``; never raises (an exception whose
    ``str()`` raises still yields a message)."""
    if isinstance(error, str):
        return error
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - the point is to survive any __str__
        text = ""
    if not text:
        return type(error).__name__
    return text
