"""Alarm values: what the store observes, the conditions the rules find, the alarms it keeps."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
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
    alarm was seen (see ems.alarms.scan for why)."""

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
    #: Who acknowledged it ("alice", "token:ci", ...) and when; None when it was not
    #: acknowledged, or (acknowledged_by) when the acknowledgement named nobody.
    acknowledged_by: str | None = None
    acknowledged_at: dt.datetime | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """What a scan writes: conditions to open, conditions whose open alarm stays open
    (refreshed), and open alarms whose condition stopped firing (cleared)."""

    open: tuple[Condition, ...]
    refresh: tuple[Condition, ...]
    clear: tuple[AlarmRecord, ...]


# -- the console's alarm desk -----------------------------------------------------------

AlarmState = Literal["open", "closed", "all"]
#: The states a listing filters by ("closed": cleared by the scan or acknowledged).
ALARM_STATES: tuple[AlarmState, ...] = ("open", "closed", "all")
#: Alarms one acknowledgement names at most.
MAX_ACK_IDS = 100

AckOutcome = Literal["acknowledged", "already_acknowledged", "already_closed", "unknown"]


@dataclass(frozen=True, kw_only=True, slots=True)
class AlarmPage:
    """Alarms newest first; pass next_before as `before` for the next page (None: the
    last page)."""

    items: tuple[AlarmRecord, ...]
    next_before: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class AckResult:
    """What acknowledging one alarm did: its outcome, said for people in `message`
    ("acknowledged", "already acknowledged by alice at ...", "unknown alarm id 42"),
    and the alarm before and after (None for an unknown id)."""

    id: int
    outcome: AckOutcome
    message: str
    before: AlarmRecord | None
    after: AlarmRecord | None

    @property
    def ok(self) -> bool:
        return self.outcome == "acknowledged"
