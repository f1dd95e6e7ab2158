"""A chain step or chord callback given too many arguments says that it receives the previous
result(s) first. `chain(fetch.s("x"), measure.s("extra"))` answered "too many positional
arguments" for a one-parameter function given one argument; nothing is written (both engines)."""

from __future__ import annotations

import pytest

import tenure
from tenure.errors import InvalidType


def test_a_step_with_too_many_arguments_says_it_receives_the_previous_result(engine_url):
    app = tenure.App(engine_url)

    @app.task(name="hint.fetch")
    def fetch(url: str) -> str:
        return url

    @app.task(name="hint.measure")
    def measure(page: str) -> int:
        return len(page)

    @app.task(name="hint.total")
    def total(results: list) -> int:
        return len(results)

    try:
        with pytest.raises(InvalidType) as caught:
            tenure.chain(fetch.s("x"), measure.s("extra")).enqueue()
        assert str(caught.value).endswith(
            "too many positional arguments (its signature: (page: str) -> int); a step after another "
            "receives the previous step's result as its first argument, before the 1 given to .s()")
        with pytest.raises(InvalidType, match=r"receives the list of its parents' results as its first argument"):
            tenure.chord([fetch.s("a"), fetch.s("b")], total.s(1)).enqueue()
        with pytest.raises(InvalidType) as typo:                # a misspelt keyword: only the typo is named
            tenure.chain(fetch.s("x"), measure.s(pag=1)).enqueue()
        assert "did you mean 'page'?" in str(typo.value) and "a step after another" not in str(typo.value)
        assert sum(app.store.jobs.counts().values()) == 0
    finally:
        app.store.close()
