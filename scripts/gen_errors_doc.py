"""Regenerate docs/errors.md from tenure.errors.ERROR_TABLE (run: python scripts/gen_errors_doc.py)."""

from __future__ import annotations

import inspect
from pathlib import Path

import tenure.errors as E

HEADER = """# Errors

Every error tenure raises on purpose is a `tenure.errors.TenureError` with a stable `.code`. The
codes keep the docs/spec.md seed's numbers under tenure's prefix (seed `JD2066` is `TN2066`), so
each traces to a row of `docs/spec.md`. Catch the class; log or compare the code.
Argument errors also subclass `ValueError`/`TypeError`, so existing `except ValueError` code works.
Storage failures are classified (never a raw `sqlite3.OperationalError` or psycopg exception); a
coded error passes through classification unchanged.

| code | class | also a | raised when |
|---|---|---|---|
"""

FOOTER = """
## Not errors

- A job's own failure is **data**: the handler's exception message goes to `last_error` and the job
  moves to `failed` (retry) or `dead`; the worker never raises it.
- A duplicate enqueue (same `id`, or a uniqueness policy) answers the existing job's id.
- Settling twice from the same attempt is a no-op (the first settlement stands).
"""


def main() -> None:
    rows = []
    for code, cls in sorted(E.ERROR_TABLE.items()):
        also = [b.__name__ for b in cls.__mro__[1:]
                if b.__name__ in ("ValueError", "TypeError", "TimeoutError", "StorageError")]
        doc = " ".join((inspect.getdoc(cls) or "").split())
        rows.append(f"| `{code}` | `{cls.__name__}` | {', '.join(also) or '—'} | {doc} |")
    out = Path(__file__).resolve().parents[1] / "docs" / "errors.md"
    out.write_text(HEADER + "\n".join(rows) + "\n" + FOOTER)


if __name__ == "__main__":
    main()
