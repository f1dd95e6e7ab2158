"""The maintenance service (placeholder until the cron/maintenance work lands: it does nothing yet)."""

from __future__ import annotations

from typing import Any


class Maintainer:
    def __init__(self, store: Any) -> None:
        self.store = store

    def acquire(self, worker: Any) -> None:
        return None

    def release(self, worker: Any) -> None:
        return None
