"""Wake one worker, not all (docs/performance.md, "Wake one worker"): the watchers of one store
that claim the same kinds from the same queues elect a *waiter*, the only one woken by changes."""

from __future__ import annotations

import hashlib

from .base import Watcher


class LeadingWatcher(Watcher):
    """A :class:`Watcher` that takes part in electing the waiter of a key. The waiter holds a lock
    that dies with its process or connection, so another watcher takes it on its next ``lead``."""

    def lead(self, key: str) -> bool:
        """Become, or stay, the waiter for ``key`` if no other watcher is; True while this one is
        (then ``wait`` hears every change). False: another is, and ``wait`` hears nothing until a
        later ``lead`` succeeds. A watcher that cannot take part answers True (it waits, as every
        watcher did before waiters). Cheap while held: no database call."""
        return True

    def follow(self) -> None:
        """Give up the waiter role (if held) so that another watcher can take it; ``wait`` hears
        nothing until a later ``lead`` succeeds."""
        return None  # a watcher that never leads has nothing to give up


def lead_digest(key: str) -> bytes:
    """Eight bytes naming a waiter key, the same in every process."""
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
