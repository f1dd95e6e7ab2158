"""Uniqueness that holds when inserts race: processes enqueue the same keys
at the same instant; the database's unique indexes leave exactly one job per key, and every
process is answered that job's id (never a driver error)."""

from __future__ import annotations

import tenure

from . import _procs
from ._helpers import at_once, jobs_in, raw

PROCESSES = 4
KEYS = [f"key-{i}" for i in range(25)]
#: One queue per rule: (queue, its policy, the enqueue options). All run in one set of processes
#: (starting processes is the slow part), each scenario behind its own barrier.
SCENARIOS = [
    ("short", "short", {}),
    ("exclusive", "exclusive", {}),
    ("throttled", "standard", {"singleton_for": 3600}),
    ("debounced", "standard", {"debounce": 3600}),
]


def test_processes_enqueueing_one_key_at_once_make_exactly_one_job(engine_url):
    setup = tenure.connect(engine_url)
    try:
        for queue, policy, _ in SCENARIOS:
            setup.queues.create(queue, policy=policy)
        scenarios = [(queue, options) for queue, _, options in SCENARIOS]
        results = at_once(_procs.enqueue_keys, (engine_url, scenarios, KEYS), PROCESSES)
        for queue, _, _ in SCENARIOS:
            jobs = jobs_in(setup, queue)
            by_key = {j.singleton_key: j.id for j in jobs}
            assert len(jobs) == len(KEYS) and sorted(by_key) == sorted(KEYS), (queue, len(jobs))
            for answers, _ in results:  # every process was told the surviving job's id
                assert answers[queue] == [by_key[k] for k in KEYS], queue
        assert raw(setup, "SELECT count(*) FROM tenure_jobs") == [(len(KEYS) * len(SCENARIOS),)]
    finally:
        setup.close()
