"""An attempt's lifecycle, as one explicit state.

``RUNNING`` (the handler runs; nothing has taken its settlement) -> ``SETTLING`` (one path took
it: the handler's return, its timeout, its handler transaction, or a cancel request) ->
``SETTLED`` (written, or refused by the fence, and counted). ``DETACHED``: ``stop()`` or
``abandon()`` gave up on the attempt; it writes nothing any more. A ``SETTLING`` attempt goes back
to ``RUNNING`` only when its settling call failed for a storage reason (the handler's return then
settles it). The moves to and from ``SETTLING`` are made under the attempt's ``settle_lock``; the
keeper renews only a ``RUNNING`` attempt, under that same lock, so a settlement always uses the
attempt's final lease.

Why an attempt ends is kept beside its state (:class:`tenure.worker.attempt.Attempt`): ``lost``
(the fence's refusal), ``operator_cancelled``, ``timed_out``.
"""

from __future__ import annotations

import enum


class AttemptState(enum.Enum):
    """Where an attempt is in its life (see the module docstring)."""

    RUNNING = "running"
    SETTLING = "settling"
    SETTLED = "settled"
    DETACHED = "detached"


RUNNING = AttemptState.RUNNING
SETTLING = AttemptState.SETTLING
SETTLED = AttemptState.SETTLED
DETACHED = AttemptState.DETACHED
