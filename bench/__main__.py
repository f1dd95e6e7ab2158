"""``python -m bench``: run the benchmark suite (see :mod:`bench.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":  # guarded: spawned child processes import this module as __mp_main__
    sys.exit(main())
