"""``enqueue_many``'s plain path: a bulk whose every item holds only ``kind``, ``payload``,
``queue`` and ``priority`` (the usual bulk), with no trace current, is checked and handed to the
engine as bare rows, ``(id, kind, payload JSON, queue, priority)``; every other column is the
same for all jobs of a queue and is resolved once per queue (``Queues.insert_plain``), not once
per job. The checks and the stored text are exactly the general path's (``_build_plain`` and
:func:`tenure._validate.dump_json`), and so is the first refusal of a bad bulk.

The payloads are encoded by ONE call of the payload encoder over the whole batch (one C loop
instead of one call per item): a separator string the encoder cannot produce from a payload
without the result showing it is put between them, and the text is cut back at it. Whenever
that is not exact (a payload fails to encode, or holds the separator), every payload is encoded
on its own, as the general path does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from . import _validate as v
from ._sanitize import MAX_JSON_DEPTH
from .engine.rows import PlainRow
from .enqueue_options import VALID_NAMES, checked_name

#: The keys of a plain item (a subset of ``enqueue_many``'s options; ``_build_plain``'s).
PLAIN_KEYS = frozenset({"kind", "payload", "queue", "priority"})
#: Rows checked per chunk handed to the engine (PostgreSQL copies one while the next is checked).
CHUNK_ROWS = 1000

_SEP = "\x00tenure\x1fplain\x00"
_SEP_JSON = ',"\\u0000tenure\\u001fplain\\u0000",'


def plain_queues(specs: Sequence[Any]) -> set[str] | None:
    """The queues of ``specs`` when every item is a plain dict (see the module docstring) naming
    its queue by a string or not at all; None otherwise."""
    keys = PLAIN_KEYS
    queues: set[str] = set()
    add = queues.add
    for spec in specs:
        if type(spec) is not dict or "kind" not in spec or not keys.issuperset(spec):
            return None
        q = spec.get("queue", "default")
        if type(q) is not str:
            return None
        add(q)
    return queues


def payload_texts(specs: Sequence[dict[str, Any]]) -> list[str | None] | None:
    """Each item's payload as JSON text from one encoder call (None for no payload), unchecked;
    None when the batch cannot be encoded in one go (then each is encoded on its own)."""
    n = len(specs)
    if not n:
        return []
    batch: list[Any] = [_SEP] * (2 * n - 1)
    batch[::2] = [spec.get("payload") for spec in specs]
    try:
        text = v.encode_json(batch)
    except (TypeError, ValueError, RecursionError):
        return None  # the item's own encoding raises its coded error, in order
    pieces = text[1:-1].split(_SEP_JSON)
    if len(pieces) != n:
        return None  # a payload holds the separator
    return [None if piece == "null" else piece for piece in pieces]


def plain_rows(specs: Sequence[dict[str, Any]], texts: Sequence[str | None] | None, ids: Sequence[str],
               limit: int) -> list[PlainRow]:
    """The rows of plain ``specs`` (ids from ``ids``, payload texts from :func:`payload_texts`
    or None), each checked as ``_build_plain`` checks it, in order: the first bad item raises
    its coded error."""
    rows: list[PlainRow] = []
    append = rows.append
    names = VALID_NAMES
    dump = v.dump_json
    lo, hi = v.INT4_MIN, v.INT4_MAX
    deep = MAX_JSON_DEPTH
    for spec, text, jid in zip(specs, texts or [None] * len(specs), ids, strict=True):
        kind = spec["kind"]
        queue = spec.get("queue", "default")
        priority = spec.get("priority", 0)
        if type(kind) is not str or kind not in names:
            checked_name(kind, "kind")
        if type(queue) is not str or queue not in names:
            checked_name(queue, "queue")
        if texts is None:
            payload = spec.get("payload")
            text = None if payload is None else dump(payload, "payload", limit)
        elif text is not None and (len(text) > limit or not text.isascii()
                                   or text.count("[") + text.count("{") > deep):
            text = dump(spec["payload"], "payload", limit)  # the full checks, and their errors
        if type(priority) is not int or not lo <= priority <= hi:
            v.int4(priority, "priority")
        append((jid, kind, text, queue, priority))
    return rows


def plain_chunks(specs: Sequence[dict[str, Any]], ids: Sequence[str], limit: int) -> Iterator[list[PlainRow]]:
    """:func:`plain_rows` of ``specs`` in chunks of :data:`CHUNK_ROWS`, each checked when it is
    asked for (an engine writes one chunk while the next is being checked)."""
    for start in range(0, len(specs), CHUNK_ROWS):
        part = specs[start:start + CHUNK_ROWS]
        yield plain_rows(part, payload_texts(part), ids[start:start + CHUNK_ROWS], limit)
