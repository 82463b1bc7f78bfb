"""Message trace: when a message was produced and, per consumer group of its topic, who
got it when, how its attempts went, and where it stands now.

What the database keeps, and so what a trace can show: the consumption log holds one row
per (group, message), overwritten by each delivery, so it names the client, times,
attempt count and error of the LAST attempt only; a retry row holds the next due time and
the last error; each dead letter holds the attempts and last error when it died. Earlier
attempts' errors are not kept. Broadcast groups keep nothing per message.

group_state() derives the state from those rows (pure); MessageTracer reads them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from ems.config import Settings
from ems.exceptions import UnknownMessage
from ems.ops.query import check_id, check_offset, check_partition, tombstone_error
from ems.store import Store
from ems.store.client import StoreClient
from ems.store.queries import EARLIEST
from ems.types import StoredMessage, TopicInfo
from ems.validation import check_name
from ems.values.rows import CompactionCover, DeadLetter, GroupRow, LogRow, RetryRow

PENDING = "pending"
IN_FLIGHT = "in flight"
DONE = "done"
RETRYING = "retrying"
DEAD = "dead"
ARCHIVED = "archived by compaction"
CONSUMED = "consumed (log compacted or purged)"
NOT_DELIVERED = "not delivered (before the group's start)"
PURGED_UNDELIVERED = "purged before delivery"
NOT_TRACKED = "not tracked (broadcast)"
STATES = (
    PENDING,
    IN_FLIGHT,
    DONE,
    RETRYING,
    DEAD,
    ARCHIVED,
    CONSUMED,
    NOT_DELIVERED,
    PURGED_UNDELIVERED,
    NOT_TRACKED,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Evidence:
    """What the database says about one message for one group."""

    mode: str
    ordered: bool = False
    offset: int
    #: The group's committed cursor: the next offset it will consume (None: no cursor).
    cursor: int | None
    log: LogRow | None = None
    retry: RetryRow | None = None
    #: Dead letters of the message in this group, oldest first.
    dead: tuple[DeadLetter, ...] = ()
    #: The message row is gone (retention).
    purged: bool = False
    #: A compaction run that may have deleted this group's log row of the message.
    compaction: CompactionCover | None = None
    #: The group was created after the message, starting at the latest offset.
    before_start: bool = False


def _at(value: dt.datetime | None) -> str:
    return "-" if value is None else value.isoformat(sep=" ", timespec="milliseconds")


def group_state(e: Evidence) -> tuple[str, str]:
    """The state of the message in one group, and why, in words."""
    if e.mode == "broadcast":
        return NOT_TRACKED, "broadcast groups keep no log, cursor or retries per message"
    if e.log is not None and e.log.state == "start":
        log = e.log
        return IN_FLIGHT, (
            f"delivered to {log.client_id} at {_at(log.started_at)} (attempt {log.attempts}), "
            "not settled yet"
        )
    if e.retry is not None:
        return RETRYING, _retry_note(e.retry) + _resent_note(e.dead)
    if e.log is not None:
        return _from_log(e, e.log)
    if e.dead:
        return DEAD, _dead_note(e.dead) + "; its log row was compacted"
    return _untracked(e)


def _from_log(e: Evidence, log: LogRow) -> tuple[str, str]:
    state, note = _log_state(e, log)
    if log.exactly_once:
        note += "; settled exactly once, in the handler's own transaction"
    return state, note


def _log_state(e: Evidence, log: LogRow) -> tuple[str, str]:
    if log.state == "dead":
        return DEAD, _dead_note(e.dead) if e.dead else f"gave up after {log.attempts} attempts"
    if log.state == "retry":
        how = "retried in place (ordered group)" if e.ordered else "waiting for its retry"
        return RETRYING, f"attempt {log.attempts} failed ({log.error}); {how}"
    if e.cursor is not None and e.offset >= e.cursor:
        return PENDING, (
            f"handled at {_at(log.finished_at)}, but the cursor was moved back to {e.cursor}: "
            "it will be delivered again"
        )
    return DONE, (
        f"handled by {log.client_id} at {_at(log.finished_at)} after {log.attempts} "
        f"attempt(s)" + _resent_note(e.dead)
    )


def _retry_note(r: RetryRow) -> str:
    due = _at(r.due_at)
    if r.last_error is None:  # queued by a replay, not by a failure
        return f"queued for redelivery (replay), due at {due}"
    if r.attempts == 0:  # put back by a resend of its dead letter
        return f"queued again ({r.last_error}), due at {due}"
    return f"attempt {r.attempts} failed ({r.last_error}); next attempt due at {due}"


def _dead_note(dead: Sequence[DeadLetter]) -> str:
    last = dead[-1]
    note = f"dead letter {last.id} since {_at(last.created_at)} after {last.attempts} attempts"
    if last.resent_at is not None:
        note += f"; resent at {_at(last.resent_at)}"
    return note


def _resent_note(dead: Sequence[DeadLetter]) -> str:
    resent = [d for d in dead if d.resent_at is not None]
    return f" (dead letter {resent[-1].id} was resent)" if resent else ""


def _untracked(e: Evidence) -> tuple[str, str]:
    """No log, retry or dead row: the cursor alone tells."""
    if e.cursor is None or e.offset >= e.cursor:
        if e.purged:
            return PURGED_UNDELIVERED, "retention purged it before the group consumed it"
        return PENDING, f"not delivered yet (the group's cursor is at {e.cursor})"
    if e.before_start:
        return NOT_DELIVERED, "the group was created after it, starting at the latest offset"
    if e.compaction is not None:
        c = e.compaction
        return ARCHIVED, (
            f"the cursor ({e.cursor}) is past it and compaction run {c.id} archived and "
            f"deleted this group's final log rows last updated before {_at(c.cutoff)}"
        )
    return CONSUMED, (
        f"the cursor ({e.cursor}) is past it but no log row remains: a log cleanup deleted "
        "it, or an offset reset skipped it; neither is recorded per message"
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupTrace:
    group: str
    mode: str
    ordered: bool
    state: str
    note: str
    cursor: int | None
    log: LogRow | None
    retry: RetryRow | None
    dead: tuple[DeadLetter, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class MessageTrace:
    topic: str
    partition: int
    offset: int
    #: The message as stored; None when retention purged it.
    message: StoredMessage | None
    groups: tuple[GroupTrace, ...]

    @property
    def purged(self) -> bool:
        return self.message is None


class MessageTracer(StoreClient):
    """Traces one message through every consumer group of its topic (read-only)."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)

    def trace(self, topic: str, partition: int, offset: int) -> MessageTrace:
        """Trace by place. A purged message is still traced from what the log, retry and
        dead tables remember; UnknownMessage when the offset was never written (or is a
        tombstone)."""
        info = self.store.topics.get(check_name(topic, "topic"))
        check_partition(info, partition)
        check_offset(offset)
        message = self.store.queries.at(info.id, partition, offset)
        if message is not None and message.tombstone:
            raise tombstone_error(message, info.name)
        if message is None and not self.store.queries.span(info.id, partition).ever_written(offset):
            raise UnknownMessage(
                f"offset {offset} of {info.name} partition {partition} was never written"
            )
        return self._trace(info, partition, offset, message)

    def trace_id(self, message_id: int) -> MessageTrace:
        """Trace by message id; a purged message is found through its dead letters or
        retry rows, if any remain."""
        check_id(message_id, "message")
        message = self.store.queries.by_id(message_id)
        place = self.store.traces.locate(message_id) if message is None else message
        if place is None:
            raise UnknownMessage(f"no message with id {message_id} (it may have been purged)")
        topics = self.store.topics.by_ids([place.topic_id])
        if place.topic_id not in topics:
            raise UnknownMessage(f"message {message_id} belonged to a deleted topic")
        info = topics[place.topic_id]
        if message is not None and message.tombstone:
            raise tombstone_error(message, info.name)
        partition = place.partition
        return self._trace(info, partition, place.offset, message)

    def _trace(
        self, info: TopicInfo, partition: int, offset: int, message: StoredMessage | None
    ) -> MessageTrace:
        t = self.store.traces
        groups = t.groups(info.id)
        ids = [g.id for g in groups]
        logs = {r.group_id: r for r in t.logs(ids, partition, offset)}
        retries = {r.group_id: r for r in t.retries(ids, partition, offset)}
        written = message.created_at if message is not None else None
        dead = t.dead(ids, partition, offset)
        cursors = t.cursors(ids, partition)
        covers = t.compactions_after(written or EARLIEST)
        traced = []
        for g in groups:
            evidence = Evidence(
                mode=g.mode,
                ordered=g.ordered,
                offset=offset,
                cursor=cursors.get(g.id),
                log=logs.get(g.id),
                retry=retries.get(g.id),
                dead=tuple(d for d in dead if d.group_id == g.id),
                purged=message is None,
                compaction=next((c for c in covers if c.covers(g.id)), None),
                before_start=_before_start(g, message),
            )
            traced.append(_group_trace(g, evidence))
        return MessageTrace(
            topic=info.name,
            partition=partition,
            offset=offset,
            message=message,
            groups=tuple(traced),
        )


def _before_start(group: GroupRow, message: StoredMessage | None) -> bool:
    return (
        message is not None
        and group.start_position == "latest"
        and group.created_at > message.created_at
    )


def _group_trace(g: GroupRow, e: Evidence) -> GroupTrace:
    state, note = group_state(e)
    return GroupTrace(
        group=g.name,
        mode=g.mode,
        ordered=g.ordered,
        state=state,
        note=note,
        cursor=e.cursor,
        log=e.log,
        retry=e.retry,
        dead=e.dead,
    )
