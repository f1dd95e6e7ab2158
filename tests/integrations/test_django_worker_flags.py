"""``manage.py tenure_worker`` takes the worker's settings from the same WorkerConfig table as
``tenure worker``: a flag per option with a text form, read as that table reads text, a bad
value refused (CommandError naming the flag) before any worker starts. Running the command end
to end: tests/integrations/test_django.py and django_upstream/tenure_semantics.py."""

from __future__ import annotations

import datetime as dt

import pytest

pytest.importorskip("django")

from django.core.management.base import CommandError

from tenure import WorkerConfig
from tenure.contrib.django.management.commands import tenure_worker
from tenure.worker.config import text_options


def _parse(*argv: str) -> dict:
    parser = tenure_worker.Command().create_parser("manage.py", "tenure_worker")
    return vars(parser.parse_args(list(argv)))


def test_every_worker_option_with_a_text_form_has_a_flag() -> None:
    assert set(tenure_worker.WORKER_FLAGS) == set(text_options()) - {"concurrency", "queues", "max_jobs"}
    assert {"lease", "poll_interval", "timeout", "stop_grace", "zombie_grace"} <= set(tenure_worker.WORKER_FLAGS)
    assert _parse()["lease"] is None  # not given: the table's default


def test_the_flags_are_read_as_the_table_reads_text() -> None:
    options = _parse("--lease", "10s", "--poll-interval", "250ms", "--stop-grace", "2", "--timeout", "1m",
                     "--zombie-grace", "30s", "--backoff-cap", "5m", "--claim-batch", "8", "--concurrency", "3")
    config = tenure_worker.worker_config(options)
    assert config == WorkerConfig(lease=10, poll_interval=0.25, stop_grace=dt.timedelta(seconds=2), timeout=60,
                                  zombie_grace=30, backoff_cap=300, claim_batch=8)
    assert options["concurrency"] == 3  # its own flag, given to create_worker as a keyword
    assert tenure_worker.worker_config(_parse()) == WorkerConfig()


@pytest.mark.parametrize("argv, flag", [
    (("--lease", "soon"), "--lease"),
    (("--poll-interval", "-1s"), "--poll-interval"),
    (("--timeout", "0"), "--timeout"),
    (("--claim-batch", "0"), "--claim-batch"),
])
def test_a_bad_value_is_a_command_error_naming_the_flag(argv, flag) -> None:
    with pytest.raises(CommandError, match=flag):
        tenure_worker.worker_config(_parse(*argv))
