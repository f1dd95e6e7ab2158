"""Argument checks shared by every public call: each answers a coded error, nothing is written."""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from typing import Any

from .errors import InvalidArgument, InvalidType, PayloadTooLarge

MAX_NAME = 200
_NAME_RE = re.compile(r"^[A-Za-z0-9_.:\-/@+]+$")
MAX_PAYLOAD_BYTES = 1 << 20  # 1 MiB of JSON text
MAX_ATTEMPTS_LIMIT = 1_000_000
MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


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


def job_id(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidType(f"a job id must be a string, got {type(value).__name__}")
    if not value or len(value) > 255:
        raise InvalidArgument("a job id must be 1-255 characters")
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


def non_negative_int(value: Any, what: str, *, allow_none: bool = True) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{what} must be a non-negative integer, got {value!r}")
    if value < 0:
        raise InvalidArgument(f"{what} must be >= 0, got {value}")
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
        return int(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidType(f"{what} must be epoch milliseconds or a datetime, got {type(value).__name__}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(f"{what} must be a finite epoch in milliseconds, got {value}")
        value = int(value)
    if value < 0 or value > MAX_EPOCH_MS:
        raise InvalidArgument(f"{what} {value} is outside 0..{MAX_EPOCH_MS} epoch ms")
    return value


def duration_ms(value: Any, what: str, *, seconds: bool = False) -> int | None:
    """A non-negative duration: seconds (int/float) when ``seconds``, else ms; or a timedelta."""
    if value is None:
        return None
    if isinstance(value, _dt.timedelta):
        ms = value.total_seconds() * 1000
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidType(f"{what} must be a number{' of seconds' if seconds else ' of ms'} or a timedelta")
    else:
        ms = value * 1000 if seconds else value
    if not math.isfinite(ms) or ms < 0:
        raise InvalidArgument(f"{what} must be finite and >= 0, got {value}")
    if ms > 10 * 365 * 86_400_000:
        raise InvalidArgument(f"{what} is longer than ten years: {value}")
    return int(ms)


def dump_json(value: Any, what: str, limit: int = MAX_PAYLOAD_BYTES) -> str:
    """JSON text for a payload or result; NaN/inf and non-JSON types are refused."""
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidType(f"{what} must be JSON-serialisable: {exc}") from None
    except RecursionError:
        raise InvalidArgument(f"{what} is nested too deeply to serialise") from None
    if len(text) > limit and len(text.encode("utf-8")) > limit:
        raise PayloadTooLarge(f"{what} is {len(text.encode('utf-8'))} bytes of JSON; the limit is {limit}")
    return text


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
