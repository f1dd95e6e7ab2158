"""``Session.job_insert_plain`` on PostgreSQL: the rows of a plain bulk COPYed into tenure_jobs
as COPY text written here, one string per chunk, instead of a tuple per row for psycopg to
format. A plain row varies in four fields (id, kind, payload, priority); the other 24 columns
are the same for every job of a queue, so their text is made once per queue.

The text is exact without escaping anything but the payload: ids are minted (hex digits and
dashes), kinds and queues are checked names (letters, digits and ``_ . : - / @ +``), and a
payload's JSON holds no raw tab, newline or carriage return (the encoder escapes them), only
backslashes, which COPY's text format doubles."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

from ..rows import NewJob, PlainRow
from . import queries as Q


def _text(value: Any) -> str:
    """One column in COPY text form (only values a template holds: None, ints, names)."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _around_priority(t: NewJob, ms: int) -> tuple[str, str]:
    """The text of a job of template ``t`` between its payload and its priority, and after it:
    the columns of ``_copy_fresh``'s row, in Q.COPY_JOBS order."""
    before = ("pending", ms + t.delay_ms if t.run_at is None else t.run_at, 0, t.max_attempts, 0, ms, ms, t.queue)
    after = (t.timeout_ms, t.singleton_key, t.singleton_on, t.policy, t.group_key, t.dead_letter, t.origin_id,
             t.retry_delay_ms, None if t.retry_backoff is None else int(t.retry_backoff), t.retry_delay_max_ms,
             t.keep_until, t.delete_after_ms, t.last_error, t.headers, t.tags, t.meta)
    return ("\t" + "\t".join(map(_text, before)) + "\t", "\t" + "\t".join(map(_text, after)) + "\n")


def copy_plain(conn: psycopg.Connection, chunks: Iterable[Sequence[PlainRow]], templates: dict[str, NewJob],
               ms: int) -> None:
    """COPY every row of ``chunks`` into tenure_jobs, one write per chunk, each chunk taken from
    the iterable while the server inserts the one before."""
    around = {name: _around_priority(t, ms) for name, t in templates.items()}
    with conn.cursor() as cur, cur.copy(Q.COPY_JOBS) as copy:
        for chunk in chunks:
            parts: list[str] = []
            add = parts.append
            for jid, kind, payload, queue, priority in chunk:
                before, after = around[queue]
                if payload is None:
                    payload = "\\N"
                elif "\\" in payload:
                    payload = payload.replace("\\", "\\\\")
                add(f"{jid}\t{kind}\t{payload}{before}{priority}{after}")
            copy.write("".join(parts))
