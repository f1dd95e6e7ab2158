"""tenure's benchmark suite: ``python -m bench --engine sqlite|postgres`` (see ``--help``).

A runnable suite, not timed tests. Every scenario verifies its own run in the store (every job
done exactly once, none duplicated, none left leased) and the JSON report says so; a failed
verification makes the command exit non-zero. ``docs/performance.md`` holds one run's numbers.
"""
