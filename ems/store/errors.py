"""The store's control-flow errors: what a statement's guard refused, for the code above it
to act on (re-seed and retry a send, drop a partition it lost, stop leading, stop a
scheduled job). The in-memory twin (ems.testing) raises them as the store does.

They are private: the SDK catches each of them itself and no caller of ems.Producer,
ems.Consumer or their asyncio twins sees one. Each is a StoreError, so a caller that
catches StoreError or EmsError (the CLI, the console) still does.
"""

from __future__ import annotations

from ems.exceptions import StoreError

__all__ = [
    "BelowLowWatermark",
    "DuplicateKey",
    "NotLeader",
    "NotScheduler",
    "ParentMissing",
    "StaleGeneration",
]


class DuplicateKey(StoreError):
    """A row with the same unique key already exists."""


class ParentMissing(StoreError):
    """A foreign key refused the row: the row it belongs to (a group, a topic) is gone."""


class BelowLowWatermark(StoreError):
    """An offset lies below its partition's low watermark (a purge removed that range and
    readers jump over it); nothing was inserted."""


class StaleGeneration(StoreError):
    """The partition was reassigned since this client got it; the cursor commit wrote
    nothing."""


class NotLeader(StoreError):
    """This client no longer holds the group's leader row at the epoch it acted under."""


class NotScheduler(StoreError):
    """This scheduler no longer holds the scheduler lease at the epoch it acted under."""
