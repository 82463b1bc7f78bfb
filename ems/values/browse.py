"""The admin console's read models: pages of topics and of consumer groups, a topic's and a
group's detail, lag and volume series. Frozen values and the pure rules that shape them;
ems.store.browse, group_facts and series read the rows, ems.ops.browse puts them together
(its input checked by ems.ops.browse_input, shaped by ems.ops.browse_shapes).

Times are aware datetimes in UTC. A status is a lag report's (a group: OK, WARN, ERR; a
partition: OK, WARN, STALL, STOP; either "unknown" when the report's window held fewer
than two snapshots of it), REWIND when a committed offset went backwards between
the two latest offset snapshots, or "unknown" when neither says anything: a group no lag
report has covered is never shown as OK.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from ems.values.groups import LeaderDescription

T = TypeVar("T")

UNKNOWN = "unknown"
REWIND = "REWIND"
#: How bad a status is: the worst of a report's status and REWIND is shown. A rewind (an
#: offset reset, or a cursor moved back by hand) redelivers messages, which is worth more
#: notice than a growing lag and less than a stuck partition.
SEVERITY = {"OK": 0, UNKNOWN: 0, "WARN": 1, REWIND: 2, "ERR": 3, "STALL": 3, "STOP": 3}

#: Where a partition's lag is counted from: the group's committed cursor, or, for a
#: partition of a cluster group that has no cursor row, the low watermark (everything
#: stored is unconsumed as far as the database can tell).
LagFrom = Literal["committed", "low_watermark"]


def status(report_status: str | None, rewound: bool) -> str:
    """The status shown: the worse of the report's and REWIND, "unknown" without either."""
    if report_status is None:
        return REWIND if rewound else UNKNOWN
    if rewound and SEVERITY[REWIND] > SEVERITY.get(report_status, 0):
        return REWIND
    return report_status


@dataclass(frozen=True, kw_only=True)
class Page(Generic[T]):
    """One page of a listing in key order. (Not slotted: Page[X](...) must work.)"""

    items: tuple[T, ...]
    #: Pass as `after` to get the next page; None on the last page.
    next_after: str | None


# -- topics ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class TopicRow:
    """A topic row as the store reads it (with its id, which the console never needs)."""

    id: int
    name: str
    partitions: int
    retention_hours: int
    delete_consumed: bool
    max_body_bytes: int
    created_at: dt.datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class WatermarkTotals:
    """A topic's watermarks summed over its partitions (index dives, never a count)."""

    #: Sum of the low watermarks: each partition's lowest stored offset, its purge low
    #: watermark when a purge emptied it, 0 when it was never written.
    low: int
    #: Sum of the high watermarks (one past the highest stored offset; an emptied
    #: partition's low watermark; 0): the messages ever written, tombstones included.
    high: int
    #: Offsets stored now: sum of high - low (tombstones included).
    stored: int


@dataclass(frozen=True, kw_only=True, slots=True)
class TopicSummary:
    name: str
    partitions: int
    retention_hours: int
    #: The delete-consumed job deletes what every cluster group consumed.
    delete_consumed: bool
    max_body_bytes: int
    created_at: dt.datetime
    low_watermark_total: int
    high_watermark_total: int
    stored_offsets: int


@dataclass(frozen=True, kw_only=True, slots=True)
class TopicPartition:
    partition: int
    #: Lowest stored offset; an emptied partition's low watermark; None: never written.
    low_watermark: int | None
    #: One past the highest stored offset (an emptied partition's low watermark; 0).
    high_watermark: int
    #: high - low: offsets stored, tombstones included (as `ems topic describe`).
    stored_offsets: int


@dataclass(frozen=True, kw_only=True, slots=True)
class TopicDetail:
    summary: TopicSummary
    partitions: tuple[TopicPartition, ...]
    #: The groups consuming the topic, by name (at most MAX_TOPIC_GROUPS of them).
    groups: tuple[GroupSummary, ...]
    #: More groups consume it than `groups` lists.
    more_groups: bool
    #: Scheduled messages not yet due (counted up to WAITING_CAP + 1), and the soonest's
    #: time (UTC).
    scheduled: int = 0
    next_scheduled_at: dt.datetime | None = None


# -- groups ------------------------------------------------------------------------------


#: Retries and dead letters a group's count reads at most (a page never counts a big
#: table): a count above it means "more than WAITING_CAP".
WAITING_CAP = 1_000


def waiting_text(count: int) -> str:
    """A retries or dead-letters count as shown: exact, or "more than WAITING_CAP"."""
    return f"{WAITING_CAP}+" if count > WAITING_CAP else str(count)


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupFacts:
    """What the store reads for one group on one topic, before it is shaped."""

    id: int
    name: str
    topic_id: int
    topic: str
    mode: Literal["cluster", "broadcast"]
    start_position: Literal["earliest", "latest"]
    #: Client rows, live or not yet reaped; and those whose lease runs.
    members: int
    live_members: int
    #: Sum of the partitions' lag; None for a broadcast group (no cursor is stored).
    total_lag: int | None
    #: Partitions of a cluster group without a cursor row (their lag is counted from
    #: the low watermark).
    partitions_without_cursor: int
    #: Partitions whose committed offset in the latest snapshot is below the one before.
    rewound_partitions: int
    #: Age of the group's oldest unconsumed message, by the database clock; None when
    #: nothing waits, or for a broadcast group.
    lag_age_seconds: float | None = None
    #: Messages waiting in the retry table, and dead letters not resent: what waits
    #: beside the stream lag.
    retries_waiting: int = 0
    dead_letters: int = 0
    #: The newest finished lag report that covered the group, its status and time.
    report_id: int | None
    report_status: str | None
    report_as_of: dt.datetime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupSummary:
    name: str
    topic: str
    mode: Literal["cluster", "broadcast"]
    start_position: Literal["earliest", "latest"]
    members: int
    live_members: int
    total_lag: int | None
    partitions_without_cursor: int
    #: Age of the oldest unconsumed message (GroupFacts.lag_age_seconds).
    lag_age_seconds: float | None
    #: Messages waiting in the retry table, and dead letters not resent.
    retries_waiting: int
    dead_letters: int
    #: The status shown (see status()).
    status: str
    #: The group status of the newest finished lag report that covered the group (OK,
    #: WARN, ERR, unknown) and the end of the window it evaluated; None: no report covered it.
    report_status: str | None
    report_as_of: dt.datetime | None
    #: A committed offset went backwards between the two latest offset snapshots.
    rewound: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionFacts:
    """Per partition of a group, what GroupAdmin.describe does not read."""

    #: Lowest stored offset (None when the partition holds nothing).
    first_offset: int | None
    #: Age of the oldest unconsumed message: the first stored at or after the cursor (or
    #: from offset 0 without one), by the database clock; None when there is none.
    lag_age_seconds: float | None
    rewound: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionRow:
    """One partition of a group's detail page, as the store reads it."""

    partition: int
    #: The group's cursor; None without a cursor row.
    committed_offset: int | None
    #: One past the highest stored offset; 0 when the partition holds nothing.
    high_watermark: int
    facts: PartitionFacts


@dataclass(frozen=True, kw_only=True, slots=True)
class MemberLoad:
    joined_at: dt.datetime
    cpu_percent: float | None
    load_rate: float | None
    reported_at: dt.datetime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupMember:
    client_id: str
    host: str
    pid: int
    joined_at: dt.datetime | None
    lease_expires_at: dt.datetime
    seconds_left: float
    live: bool
    #: Holds the group's leader row with a running lease.
    leader: bool
    partitions: tuple[int, ...]
    #: The last load report, when the member sent one: CPU in percent of one core,
    #: messages settled per second, and when.
    cpu_percent: float | None
    load_rate: float | None
    reported_at: dt.datetime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupPartition:
    partition: int
    owner: str | None
    owner_live: bool
    #: assigned, revoking or released; None for a broadcast group.
    state: str | None
    generation: int | None
    #: The group's cursor; None for a broadcast group, or a cluster partition without a
    #: cursor row, whose lag is then counted from the low watermark (lag_from).
    committed_offset: int | None
    high_watermark: int
    #: None for a broadcast group only.
    lag: int | None
    lag_from: LagFrom | None
    lag_age_seconds: float | None
    report_status: str | None
    rewound: bool
    status: str


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupHeading:
    """Which group on which topic, and its mode: what a page about a group names."""

    name: str
    topic: str
    mode: Literal["cluster", "broadcast"]


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupDetail:
    name: str
    topic: str
    mode: Literal["cluster", "broadcast"]
    start_position: Literal["earliest", "latest"]
    ordered: bool
    retry_ladder: str
    max_attempts: int
    ack_timeout_seconds: int
    generation: int
    leader: LeaderDescription | None
    #: At most MAX_GROUP_MEMBERS of the member_count members, by client id.
    members: tuple[GroupMember, ...]
    member_count: int
    #: One page of the partition_count partitions; next_after is the cursor of the next
    #: page (the last partition shown), None on the last page.
    partitions: tuple[GroupPartition, ...]
    partition_count: int
    next_after: int | None
    #: Over every partition, not only the page's (as the groups page reads them).
    total_lag: int | None
    #: Partitions of a cluster group without a cursor row (their lag is counted from
    #: the low watermark).
    partitions_without_cursor: int
    status: str
    report_status: str | None
    report_as_of: dt.datetime | None
    rewound: bool


# -- series ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class LagPoint:
    """A group's lag at the last offset snapshot of one bucket of the window."""

    at: dt.datetime
    #: Sum over the partitions captured of high watermark - committed offset (never
    #: negative per partition).
    lag: int
    partitions: int


@dataclass(frozen=True, kw_only=True, slots=True)
class VolumePoint:
    """A topic's summed high watermark at the last watermark capture of one bucket."""

    at: dt.datetime
    high_watermark_total: int
    #: Messages written since the previous point (or the capture before the window);
    #: None for a first point that has nothing before it.
    messages: int | None
    #: Seconds since that previous capture.
    span_seconds: float | None
