"""``python -m tenure.cli``: the same as the ``tenure`` command."""

from . import main

main()
