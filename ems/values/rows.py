"""Rows that message query, trace and dead-letter operations read, as frozen values.

The store builds them (ems.store.queries, traces, dead_letters); nothing here does I/O,
so the CLI, the admin console and the operations can share them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Literal

LogState = Literal["start", "done", "retry", "dead"]


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupRow:
    """A consumer group of a topic, with what a trace needs to judge its cursor."""

    id: int
    name: str
    mode: Literal["cluster", "broadcast"]
    ordered: bool
    start_position: Literal["earliest", "latest"]
    created_at: dt.datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class LogRow:
    """A group's consumption-log row for one message. The log keeps one row per message
    and group: each delivery overwrites it, so it shows the last attempt only."""

    group_id: int
    client_id: str
    state: LogState
    attempts: int
    error: str | None
    started_at: dt.datetime
    finished_at: dt.datetime | None
    updated_at: dt.datetime
    #: The last settlement committed in the handler's own transaction (exactly once).
    exactly_once: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryRow:
    """A message waiting in the retry table for the group's next attempt."""

    group_id: int
    attempts: int
    due_at: dt.datetime
    last_error: str | None
    created_at: dt.datetime
    #: The last failed handler's traceback, bounded (None: an ack timeout, a nack(), a
    #: replay or a resend queued it).
    last_traceback: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactionCover:
    """A compaction run that has started deleting archived log rows: those in a final
    state, of the groups in scope (empty: every group), last updated before the cutoff."""

    id: int
    status: str
    cutoff: dt.datetime
    group_ids: tuple[int, ...]
    deleted_rows: int

    def covers(self, group_id: int) -> bool:
        return not self.group_ids or group_id in self.group_ids


@dataclass(frozen=True, kw_only=True, slots=True)
class Place:
    """Where a message is (or was): topic id, partition and offset."""

    topic_id: int
    partition: int
    offset: int


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionSpan:
    """What a partition holds now: its lowest and highest stored offsets (None when empty)
    and the low watermark retention left (every offset below it was purged)."""

    first: int | None
    last: int | None
    purged_below: int | None

    def ever_written(self, offset: int) -> bool:
        """Whether this offset has been stored at some time (it may be purged since)."""
        stored = self.last is not None and offset <= self.last
        return stored or (self.purged_below is not None and offset < self.purged_below)


@dataclass(frozen=True, kw_only=True, slots=True)
class DeadLetter:
    """A dead letter: a copy of the message a group gave up on, with its last error and
    traceback. In listings `body` holds only a prefix; `body_size` is the whole body's
    size."""

    id: int
    group_id: int
    group: str
    topic_id: int
    topic: str | None
    partition: int
    offset: int
    message_id: int
    key: bytes | None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes
    body_size: int
    attempts: int
    last_error: str | None
    created_at: dt.datetime
    resent_at: dt.datetime | None
    #: The last failed handler's traceback, bounded (ems.retry.tracebacks); None when the
    #: last failure had none (an ack timeout, a nack()), and in listings, which leave it out.
    last_traceback: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class DeadLetterFilter:
    """Which dead letters an operation applies to; every given condition must hold.
    None (or empty) means: any."""

    ids: tuple[int, ...] = ()
    group_ids: tuple[int, ...] | None = None
    topic_id: int | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    #: A substring of last_error.
    error: str | None = None
    #: True: only those resent before; False: only those never resent.
    resent: bool | None = None
    #: Keyset paging: only ids above this one.
    after_id: int = 0
    #: A bounded error search's window of ids (above the floor, up to the ceiling): the
    #: console's error search reads at most a fixed number of the newest dead letters.
    floor_id: int = 0
    ceiling_id: int | None = None
    #: Older dead letters than the window's may match: they were not searched.
    partial: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Orphaned:
    """A dead letter whose original message, topic or group no longer exists."""

    id: int
    message_gone: bool
    topic_gone: bool
    group_gone: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class LagReportRun:
    """A published lag report: it describes the offset snapshots in
    (as_of - window_seconds, as_of]."""

    id: int
    as_of: dt.datetime
    window_seconds: int
    #: Rows (group, partition) the report holds.
    partitions: int
    finished_at: dt.datetime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupLag:
    """One group's rows of a lag report, summed: its status and its lag over the
    partitions the report covers."""

    group_id: int
    topic_id: int
    #: OK, WARN or ERR (the worst its rows say).
    status: str
    lag: int
    partitions: int
