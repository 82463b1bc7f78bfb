"""A message's trace as a timeline (pure): when it was produced, then per consumer group
what the database remembers of it in time order (deliveries, failed attempts with their
errors, retries due, dead letters and their resends, the end of processing), and last the
state the group's message is in now, with why.

The consumption log keeps the last attempt only (see ems.ops.trace), so a timeline shows
the deliveries the database still holds, not every one that happened.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ems.ops.trace import (
    ARCHIVED,
    CONSUMED,
    DEAD,
    DONE,
    IN_FLIGHT,
    NOT_DELIVERED,
    NOT_TRACKED,
    PENDING,
    PURGED_UNDELIVERED,
    RETRYING,
    GroupTrace,
    MessageTrace,
)
from ems.values.rows import LogRow, RetryRow

#: A short word for each state, for the current-state line of a group.
STATE_KINDS = {
    PENDING: "pending",
    IN_FLIGHT: "in-flight",
    DONE: "done",
    RETRYING: "retrying",
    DEAD: "dead",
    ARCHIVED: "archived",
    CONSUMED: "consumed",
    NOT_DELIVERED: "not-delivered",
    PURGED_UNDELIVERED: "purged",
    NOT_TRACKED: "not-tracked",
}
NO_ERROR_TEXT = "no error text"


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """One line of a timeline. `group` is None for the message's own events; `at` is None
    for what has no time (a group's current state, a purged message's production)."""

    at: dt.datetime | None
    group: str | None
    #: produced, purged, delivered, error, retry, dead, resent, done; for the current
    #: state line, a STATE_KINDS word.
    kind: str
    text: str
    #: The line that says where the message stands now in the group.
    current: bool = False
    #: A failure's kept traceback (a retry row's or a dead letter's), bounded.
    traceback: str | None = None
    #: The error text a failure's line ends with (its handler's words, which may quote
    #: the message).
    error: str | None = None
    #: The dead letter the line is about.
    dead_id: int | None = None


def timeline(trace: MessageTrace) -> tuple[Event, ...]:
    """The message's production, then each group's events oldest first, each group
    ending with its current state."""
    events = [_produced(trace)]
    for group in trace.groups:
        events += _group_events(group)
    return tuple(events)


def without_errors(events: Sequence[Event], hidden: str) -> tuple[Event, ...]:
    """The timeline with each error text (which ends its line) replaced by `hidden`, and
    no tracebacks: for a reader who may not see message data, which errors often quote."""
    return tuple(
        e
        if e.error is None and e.traceback is None
        else replace(
            e,
            text=e.text if e.error is None else e.text[: len(e.text) - len(e.error)] + hidden,
            error=None,
            traceback=None,
        )
        for e in events
    )


def _produced(trace: MessageTrace) -> Event:
    place = f"partition {trace.partition}, offset {trace.offset}"
    if trace.message is None:
        text = f"{place}: purged by retention since (its time is not kept)"
        return Event(at=None, group=None, kind="purged", text=text)
    return Event(at=trace.message.created_at, group=None, kind="produced", text=f"to {place}")


def _group_events(g: GroupTrace) -> list[Event]:
    timed: list[Event] = []
    if g.log is not None:
        # The retry row keeps the traceback of the attempt the log row says failed.
        same = g.retry is not None and g.retry.attempts == g.log.attempts
        traceback = g.retry.last_traceback if same and g.retry is not None else None
        timed += _log_events(g.group, g.log, dead_letters=bool(g.dead), traceback=traceback)
    if g.retry is not None:
        timed += _retry_events(g.group, g.retry, g.log)
    for d in g.dead:
        error = d.last_error or NO_ERROR_TEXT
        text = f"dead letter {d.id} after {d.attempts} attempt(s): {error}"
        dead = Event(
            at=d.created_at,
            group=g.group,
            kind="dead",
            text=text,
            traceback=d.last_traceback,
            error=error,
            dead_id=d.id,
        )
        timed.append(dead)
        if d.resent_at is not None:
            text = f"dead letter {d.id} resent"
            resent = Event(at=d.resent_at, group=g.group, kind="resent", text=text, dead_id=d.id)
            timed.append(resent)
    timed.sort(key=lambda e: e.at or dt.datetime.min)
    kind = STATE_KINDS.get(g.state, "state")
    now = Event(at=None, group=g.group, kind=kind, text=f"{g.state}: {g.note}", current=True)
    return [*timed, now]


def _log_events(
    group: str, log: LogRow, *, dead_letters: bool, traceback: str | None
) -> list[Event]:
    text = f"delivered to {log.client_id} (attempt {log.attempts})"
    events = [Event(at=log.started_at, group=group, kind="delivered", text=text)]
    end = log.finished_at or log.updated_at
    error = log.error or NO_ERROR_TEXT
    if log.state == "done":
        events.append(Event(at=end, group=group, kind="done", text=f"handled by {log.client_id}"))
    elif log.state == "retry":
        text = f"attempt {log.attempts} failed: {error}"
        failed = Event(
            at=end, group=group, kind="error", text=text, traceback=traceback, error=error
        )
        events.append(failed)
    elif log.state == "dead" and not dead_letters:  # a dead letter says it with its id
        text = f"gave up after {log.attempts} attempt(s): {error}"
        events.append(Event(at=end, group=group, kind="dead", text=text, error=error))
    return events


def _retry_events(group: str, r: RetryRow, log: LogRow | None) -> list[Event]:
    events = []
    if r.last_error is not None and r.attempts > 0 and (log is None or log.state != "retry"):
        text = f"attempt {r.attempts} failed: {r.last_error}"
        error = Event(
            at=r.created_at,
            group=group,
            kind="error",
            text=text,
            traceback=r.last_traceback,
            error=r.last_error,
        )
        events.append(error)
    if r.last_error is None:
        why = "queued by a replay"
    elif r.attempts == 0:
        why = "queued again by a resend"
    else:
        why = f"attempt {r.attempts + 1}"
    events.append(Event(at=r.due_at, group=group, kind="retry", text=f"next delivery due ({why})"))
    return events
