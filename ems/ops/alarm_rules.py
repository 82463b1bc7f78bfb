"""Alarm conditions, as pure functions: observations in, the set of firing conditions out,
and the plan that turns firing conditions and open alarms into opens, refreshes, clears.

No I/O here. The store observes (every age is computed by the database clock) and the
scan in ems.ops.alarms applies the plan.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

AlarmKind = Literal["consumption_timeout", "lag", "lag_age", "dead_letter", "stall"]
KINDS: tuple[AlarmKind, ...] = ("consumption_timeout", "lag", "lag_age", "dead_letter", "stall")
#: Dead letters are counted up to this many per group: the count stays cheap however many
#: pile up, and the alarm says "at least".
DEAD_LETTER_COUNT_CAP = 10_000


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionObservation:
    """One partition of a cluster group: its cursor, the partition's high watermark, and
    the group's thresholds (None turns an alarm off)."""

    group_id: int
    group: str
    topic_id: int
    topic: str
    partition: int
    committed_offset: int
    high_watermark: int
    #: Seconds since the cursor was last committed (group_offset.updated_at).
    since_commit: float
    #: Seconds since the oldest unconsumed message was written; None when unknown.
    oldest_unconsumed_age: float | None
    lag_alarm_messages: int | None
    lag_alarm_seconds: int | None
    stall_alarm_seconds: int

    @property
    def lag(self) -> int:
        return max(0, self.high_watermark - self.committed_offset)


@dataclass(frozen=True, kw_only=True, slots=True)
class InFlightObservation:
    """Consumption-log rows of one group and partition still in state 'start'."""

    group_id: int
    group: str
    topic_id: int
    topic: str
    partition: int
    in_flight: int
    #: Of those, the rows started longer than ack_timeout_seconds ago.
    overdue: int
    #: Seconds since the oldest of them started.
    oldest_age: float
    ack_timeout_seconds: int


@dataclass(frozen=True, kw_only=True, slots=True)
class DeadLetterObservation:
    """Dead letters of one group not resent, written after the group's last dead-letter
    alarm was seen (see ems.ops.alarms for why)."""

    group_id: int
    group: str
    topic_id: int
    topic: str
    #: Counted up to DEAD_LETTER_COUNT_CAP.
    unhandled: int
    #: Seconds since the newest of them was written.
    newest_age: float | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Observations:
    partitions: Sequence[PartitionObservation] = ()
    in_flight: Sequence[InFlightObservation] = ()
    dead_letters: Sequence[DeadLetterObservation] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Condition:
    """A firing condition: what an open alarm says."""

    kind: AlarmKind
    key: str
    group_id: int
    topic_id: int
    partition: int | None
    value: float
    threshold: float
    message: str


@dataclass(frozen=True, kw_only=True, slots=True)
class AlarmRecord:
    """One stored alarm, with the names of its group and topic when they still exist."""

    id: int
    kind: str
    condition_key: str
    status: str
    group_id: int | None
    group: str | None
    topic_id: int | None
    topic: str | None
    partition: int | None
    value: float | None
    threshold: float | None
    message: str
    opened_at: dt.datetime
    last_seen_at: dt.datetime
    cleared_at: dt.datetime | None
    notified_at: dt.datetime | None
    notify_attempts: int
    notify_error: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """What a scan writes: conditions to open, conditions whose open alarm stays open
    (refreshed), and open alarms whose condition stopped firing (cleared)."""

    open: tuple[Condition, ...]
    refresh: tuple[Condition, ...]
    clear: tuple[AlarmRecord, ...]


def condition_key(kind: str, group_id: int, partition: int | None = None) -> str:
    """The key one open alarm per condition is unique on, e.g. "lag:12:3"."""
    return f"{kind}:{group_id}" if partition is None else f"{kind}:{group_id}:{partition}"


def evaluate(observations: Observations) -> list[Condition]:
    """Every condition that fires now, at most one per key."""
    found: dict[str, Condition] = {}
    for p in observations.partitions:
        for condition in partition_conditions(p):
            found[condition.key] = condition
    for f in observations.in_flight:
        timeout = consumption_timeout(f)
        if timeout is not None:
            found[timeout.key] = timeout
    for d in observations.dead_letters:
        dead = dead_letters(d)
        if dead is not None:
            found[dead.key] = dead
    return list(found.values())


def partition_conditions(p: PartitionObservation) -> list[Condition]:
    """Lag, lag age and stall of one partition."""
    out = []
    where = f"group {p.group} on {p.topic}[{p.partition}]"
    lag = p.lag
    if p.lag_alarm_messages is not None and lag > p.lag_alarm_messages:
        out.append(_partition(p, "lag", lag, p.lag_alarm_messages, f"{where}: lag {lag} messages"))
    age = p.oldest_unconsumed_age
    limit = p.lag_alarm_seconds
    if limit is not None and lag > 0 and age is not None and age > limit:
        text = f"{where}: oldest unconsumed message is {age:.0f}s old"
        out.append(_partition(p, "lag_age", age, limit, text))
    if stalled(p):
        text = f"{where}: cursor has not moved for {p.since_commit:.0f}s with lag {lag}"
        out.append(_partition(p, "stall", p.since_commit, p.stall_alarm_seconds, text))
    return out


def stalled(p: PartitionObservation) -> bool:
    """The cursor has not moved for stall_alarm_seconds while the partition lagged all
    that time. An old last commit alone is not enough: a partition idle for an hour that
    got a message a second ago has an old commit and lag, but is not stalled. The oldest
    unconsumed message being that old proves the lag lasted (unknown age: the message at
    the cursor is a hole or was purged, so only the commit age is left to go by)."""
    limit = p.stall_alarm_seconds
    if p.lag == 0 or p.since_commit <= limit:
        return False
    return p.oldest_unconsumed_age is None or p.oldest_unconsumed_age > limit


def consumption_timeout(f: InFlightObservation) -> Condition | None:
    """Messages in flight (logged 'start', never finished) longer than the ack timeout."""
    if f.overdue <= 0 or f.oldest_age <= f.ack_timeout_seconds:
        return None
    text = (
        f"group {f.group} on {f.topic}[{f.partition}]: {f.overdue} messages in flight "
        f"longer than {f.ack_timeout_seconds}s (oldest {f.oldest_age:.0f}s)"
    )
    return Condition(
        kind="consumption_timeout",
        key=condition_key("consumption_timeout", f.group_id, f.partition),
        group_id=f.group_id,
        topic_id=f.topic_id,
        partition=f.partition,
        value=f.oldest_age,
        threshold=float(f.ack_timeout_seconds),
        message=text,
    )


def dead_letters(d: DeadLetterObservation) -> Condition | None:
    """Dead letters arrived and are neither resent, purged nor acknowledged."""
    if d.unhandled <= 0:
        return None
    count = f"{d.unhandled}+" if d.unhandled >= DEAD_LETTER_COUNT_CAP else str(d.unhandled)
    return Condition(
        kind="dead_letter",
        key=condition_key("dead_letter", d.group_id),
        group_id=d.group_id,
        topic_id=d.topic_id,
        partition=None,
        value=float(d.unhandled),
        threshold=0.0,
        message=f"group {d.group} on {d.topic}: {count} dead letters",
    )


def plan(firing: Iterable[Condition], open_alarms: Mapping[str, AlarmRecord]) -> Plan:
    """Open what fires without an open alarm, refresh what fires with one, clear the open
    alarms whose condition no longer fires."""
    now = {c.key: c for c in firing}
    return Plan(
        open=tuple(c for k, c in now.items() if k not in open_alarms),
        refresh=tuple(c for k, c in now.items() if k in open_alarms),
        clear=tuple(a for k, a in open_alarms.items() if k not in now),
    )


def _partition(
    p: PartitionObservation, kind: AlarmKind, value: float, threshold: float, text: str
) -> Condition:
    return Condition(
        kind=kind,
        key=condition_key(kind, p.group_id, p.partition),
        group_id=p.group_id,
        topic_id=p.topic_id,
        partition=p.partition,
        value=float(value),
        threshold=float(threshold),
        message=text,
    )
