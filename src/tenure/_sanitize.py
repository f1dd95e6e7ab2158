"""What reaches the store can be stored and read back (docs/guarantees.md, "Liveness: every
outcome settles").

- :func:`error_text`: a failure message made storable on every engine: NUL and lone surrogates
  escaped as literal text, the length capped (head and tail kept). Never raises.
- :func:`storable_json`: JSON text the store can hold and a worker can decode: no lone
  surrogate, nesting no deeper than :data:`MAX_JSON_DEPTH` (well below the decoder's recursion
  limit, whatever the claiming thread's stack depth).
- :func:`decode_column`: a stored JSON column, or an :class:`~tenure.records.Undecodable`
  marker when it cannot be decoded (listings show such a row instead of failing).
"""

from __future__ import annotations

import json
import re
from typing import Any

from .engine.rows import NOT_UTF8
from .errors import InvalidArgument, UnstorableValue
from .records import Undecodable

#: The longest ``last_error`` stored, in characters; a longer message keeps its head and tail.
MAX_ERROR_CHARS = 16_384
#: The deepest nesting of arrays and objects a payload or result may have. Python's decoder
#: fails near its recursion limit (1 000 frames, fewer on a deep stack): 100 leaves room.
MAX_JSON_DEPTH = 100

_SURROGATE = re.compile("[\ud800-\udfff]")
_UNSAFE = re.compile("[\x00\ud800-\udfff]")
#: A JSON string literal (as ``json.dumps`` writes it) or one bracket.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_MARKER = "\n... [{} characters cut by tenure] ...\n"


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    return "\\x00" if ch == "\x00" else f"\\u{ord(ch):04x}"


def storable_text(text: str) -> str:
    """``text`` with NUL written as the four characters ``\\x00`` and each lone surrogate as
    ``\\udXXX``: valid UTF-8 that PostgreSQL's ``text`` accepts. Unchanged when already safe."""
    if text.isascii() and "\x00" not in text:
        return text
    return _UNSAFE.sub(_escape, text)


def cap(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters, keeping its head and its tail (where a
    traceback says what failed) around a marker that says how many characters were cut."""
    if len(text) <= limit:
        return text
    # The marker's count has at most as many digits as len(text): reserve that much.
    keep = max(limit - len(_MARKER.format(len(text))), 0)
    head = keep * 3 // 4
    tail = keep - head
    return text[:head] + _MARKER.format(len(text) - head - tail) + text[len(text) - tail :]


def message(error: Any) -> str:
    """The failure message of ``error`` (a string, or any exception; an exception whose
    ``str()`` raises still yields its class name). Never raises."""
    if isinstance(error, str):
        return error
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - the point is to survive any __str__
        text = ""
    if not isinstance(text, str) or not text:
        return type(error).__name__
    return text


def error_text(error: Any, limit: int = MAX_ERROR_CHARS) -> str:
    """What ``last_error`` stores for ``error``: its message, NUL and lone surrogates escaped,
    at most ``limit`` characters. Never raises; the result is storable on every engine."""
    try:
        # cap first (bounded work on a huge message), then escape (which may lengthen it), then
        # cap again: a message of escapes grows at most 6x, so the second cap is cheap.
        return cap(storable_text(cap(message(error), limit)), limit)
    except Exception:  # noqa: BLE001 - a failure message must always be storable
        return type(error).__name__


def check_depth(text: str, what: str) -> None:
    """Refuse JSON ``text`` nested deeper than :data:`MAX_JSON_DEPTH` (TN1001). Cheap when the
    text has few brackets (the common case: counted in C); otherwise one scan of its tokens."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return
    depth = 0
    for tok in _TOKEN.findall(text):
        c = tok[0]
        if c == "[" or c == "{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise InvalidArgument(
                    f"{what} is nested more than {MAX_JSON_DEPTH} levels deep; a worker could not "
                    "reliably decode it",
                    depth_limit=MAX_JSON_DEPTH,
                )
        elif c == "]" or c == "}":
            depth -= 1


def check_storable(text: str, what: str) -> None:
    """Refuse JSON ``text`` holding a lone surrogate (TN1004): it is not UTF-8, so no engine can
    store it faithfully (PostgreSQL refuses it; SQLite would keep bytes no reader can decode)."""
    if not text.isascii():
        m = _SURROGATE.search(text)
        if m is not None:
            raise UnstorableValue(
                f"{what} holds a lone surrogate ({ascii(m.group())} at position {m.start()}); a "
                "string must be valid Unicode to be stored (decode bytes with errors='replace', or "
                "encode them as base64)"
            )


def storable_json(text: str, what: str) -> str:
    """``text`` (JSON a caller produced) when the store can hold it and a worker can decode it;
    else a coded refusal: a lone surrogate or NUL outside a JSON escape (TN1004), nesting deeper
    than :data:`MAX_JSON_DEPTH` (TN1001)."""
    check_storable(text, what)
    if "\x00" in text:
        raise UnstorableValue(f"{what} holds a raw NUL character, which PostgreSQL cannot store")
    check_depth(text, what)
    return text


def plain_entry(entry: str | None, message: str) -> str | None:
    """An error-history entry (JSON text) rewritten in plain ASCII with ``message`` in place of its
    own and no traceback: what is stored when the database refused the entry as it was."""
    if entry is None:
        return None
    try:
        data = json.loads(entry)
        data.update(message=message, traceback=None)
        return json.dumps(data, ensure_ascii=True, default=str)
    except Exception:  # noqa: BLE001 - no history entry rather than no settlement
        return None


def decode_column(text: str | None) -> Any:
    """A stored JSON column decoded, or an :class:`Undecodable` marker (never raises)."""
    if text is None:
        return None
    if text.startswith(NOT_UTF8):
        return Undecodable(text[len(NOT_UTF8) : len(NOT_UTF8) + 200], "the stored text is not UTF-8")
    try:
        return json.loads(text)
    except Exception as exc:  # noqa: BLE001 - RecursionError, ValueError, whatever the text holds
        return Undecodable(text[:200], f"{type(exc).__name__}: {message(exc)}"[:200])
