"""Regenerate docs/enqueue-options.md from tenure.enqueue_options.OPTIONS
(run: PYTHONPATH=$PWD/src python scripts/gen_options_doc.py; tests/core/test_enqueue_options.py
fails while the page differs from what this writes)."""

from __future__ import annotations

from pathlib import Path

from tenure import enqueue_options as eo

PAGE = Path(__file__).resolve().parents[1] / "docs" / "enqueue-options.md"

HEADER = """# Enqueue options

Every option a job (or its queue) can be given, in one table: `src/tenure/enqueue_options.py`.
Each surface below accepts exactly the options marked for it, and checks each with the same
verdict; this page is generated from that table (`scripts/gen_options_doc.py`), and a test fails
when the two differ. Durations are **seconds** (an int, a float, a `timedelta` or text such as
`"250ms"`, `"10s"`, `"5m"`, `"1h"`, read by the one parser `tenure.durations`, as a worker's
`lease` is) everywhere and milliseconds in the stored column. A name a surface does not take is refused before anything is
written, with the same coded error on both engines: `InvalidArgument` (TN1001) naming the option
and the nearest name it does take, or, for an option of another surface, where it belongs.

```python
import os
import tempfile

import tenure
from tenure.errors import InvalidArgument

store = tenure.connect(f"sqlite:///{os.path.join(tempfile.mkdtemp(), 'options.db')}")
try:
    store.jobs.enqueue("email.send", {"to": "ada@example.com"}, singelton_key="ada")
    raise AssertionError("a misspelt option is refused")
except InvalidArgument as exc:
    assert exc.code == "TN1001" and "did you mean 'singleton_key'?" in str(exc)
assert store.jobs.page().items == []  # nothing was written
```

## The options

| option | type | stored as | rule | what it does |
|---|---|---|---|---|
"""

SURFACES = """
## Where each is accepted

{legend}

| option | {heads} |
|{rule}
"""

LEGEND = {
    eo.ENQUEUE: "`jobs.enqueue(kind, payload, **options)` and `tx.jobs.enqueue` (plus `conn=`)",
    eo.MANY: "a key of an `enqueue_many` item",
    eo.TASK: "`@app.task(...)` defaults and `task.with_options(...)`",
    eo.SIGNATURE: "`task.s(...).set(...)` in a chain, group or chord",
    eo.QUEUE: "`store.queues.create/update`: the queue's default for its jobs, or its own setting",
    eo.PUBLISH: "`store.queues.publish(event, payload, **options)`",
    eo.SCHEDULE: "`store.schedules.add(..., options={...})` and `@app.periodic(...)`",
    eo.DJANGO: "read by the Django `TenureBackend` from the task's attribute",
    eo.CLI: "a flag of `tenure enqueue`",
    eo.FILE: "a key of a `tenure enqueue --from-file` line",
}


def _cell(option: eo.Option, surface: str) -> str:
    if surface not in option.surfaces:
        return ""
    if surface == eo.CLI:
        return f"`{option.cli.flag}`" if option.cli else "`KIND`"
    if surface == eo.DJANGO:
        return f"`{option.django}`"
    return "yes"


def render() -> str:
    """The page, as the table says it."""
    rows = [f"| `{o.name}` | {o.type} | {f'`{o.column}`' if o.column else '—'} | {o.spec} | {o.doc} |"
            for o in eo.OPTIONS.values()]
    legend = "\n".join(f"- **{s}**: {LEGEND[s]}" for s in eo.SURFACES)
    matrix = [f"| `{o.name}` | " + " | ".join(_cell(o, s) for s in eo.SURFACES) + " |"
              for o in eo.OPTIONS.values()]
    surfaces = SURFACES.format(legend=legend, heads=" | ".join(eo.SURFACES),
                               rule="---|" * (len(eo.SURFACES) + 1))
    return HEADER + "\n".join(rows) + "\n" + surfaces + "\n".join(matrix) + "\n"


def main() -> None:
    PAGE.write_text(render())


if __name__ == "__main__":
    main()
