"""``python -m bench --help`` states the defaults the code runs with."""

from __future__ import annotations

import dataclasses

from bench.cli import parser
from bench.scenarios import QUICK, Config


def _text(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def test_every_size_option_names_the_configs_default_and_quicks() -> None:
    fields = {f.name for f in dataclasses.fields(Config)}
    sized = [a for a in parser()._actions if a.dest in fields]
    assert {a.dest for a in sized} >= {"jobs", "concurrency", "depths", "processes", "process_concurrency"}
    for action in sized:
        full, quick = _text(getattr(Config(), action.dest)), _text(getattr(QUICK, action.dest))
        assert f"default {full}" in (action.help or ""), (action.dest, action.help)
        if quick != full:
            assert f"--quick {quick}" in (action.help or ""), (action.dest, action.help)
