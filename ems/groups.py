"""Consumer group inspection: who is in a group, who leads it, who owns which partition,
and how far behind each partition's committed cursor is.

GroupAdmin reads the rows through the store; describe_group() and lag() shape them into a
GroupDescription without I/O.
"""

from __future__ import annotations

import builtins
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ems.config import Settings
from ems.exceptions import GroupInUse, UnknownGroup
from ems.store import Store
from ems.store.client import StoreClient
from ems.types import (
    AssignmentRow,
    GroupInfo,
    GroupMode,
    LeaderInfo,
    MemberInfo,
    StartPosition,
    TopicInfo,
)
from ems.validation import check_name
from ems.values.groups import LeaderDescription as LeaderDescription  # re-exported
from ems.values.lifecycle import Deleted, chunk_rows, merge


@dataclass(frozen=True, kw_only=True, slots=True)
class MemberDescription:
    client_id: str
    host: str
    pid: int
    lease_expires_at: dt.datetime
    seconds_left: float
    #: False once the lease expired: the leader reaps the row in its next round.
    live: bool
    #: Partitions this client holds (assigned or revoking).
    partitions: tuple[int, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionDescription:
    """One partition of the group's topic. Broadcast groups keep no cursor or owner, so
    everything but the high watermark is None for them."""

    partition: int
    #: The client holding the partition; None when it is unowned or released.
    owner: str | None
    #: Whether the owner is a member with a live lease.
    owner_live: bool
    state: str | None
    generation: int | None
    #: The next offset the group will consume.
    committed_offset: int | None
    #: One past the highest stored offset.
    high_watermark: int
    lag: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupDescription:
    """A consumer group's subscription to one topic, as it stands now."""

    group: str
    topic: str
    mode: GroupMode
    start_position: StartPosition
    ordered: bool
    retry_ladder: str
    max_attempts: int
    ack_timeout_seconds: int
    generation: int
    leader: LeaderDescription | None
    members: tuple[MemberDescription, ...]
    partitions: tuple[PartitionDescription, ...]
    #: Sum of the partitions' lag (None for broadcast groups).
    total_lag: int | None
    #: What waits beside the stream lag: messages in the retry table, and dead letters
    #: not resent (0 for broadcast groups, which keep neither).
    retries_waiting: int = 0
    dead_letters: int = 0
    #: Age of the oldest unconsumed message of any partition (database clock); None when
    #: nothing waits, and for broadcast groups.
    lag_age_seconds: float | None = None


class GroupAdmin(StoreClient):
    """Inspection of consumer groups, and their delete (for the CLI and the console)."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)

    def describe(self, name: str) -> builtins.list[GroupDescription]:
        """One description per topic the group subscribes to, by topic name. Raises
        InvalidName, or UnknownGroup when no group has this name."""
        check_name(name, "group")
        groups = self.store.groups.by_name(name)
        topics = self.store.topics.by_ids(g.topic_id for g in groups)
        found = [
            self.describe_subscription(g, topics[g.topic_id])
            for g in groups
            if g.topic_id in topics
        ]
        if not found:
            raise UnknownGroup(f"unknown group {name!r}")
        return sorted(found, key=lambda d: d.topic)

    def describe_subscription(self, group: GroupInfo, topic: TopicInfo) -> GroupDescription:
        """The description of one group row (one name on one topic), already looked up."""
        s = self.store
        # Cursors are read before the watermarks: watermarks only grow, so a cursor that
        # moves in between cannot show up as a negative lag.
        committed = s.groups.offsets(group.id)
        described = describe_group(
            group=group,
            topic=topic,
            leader=s.leases.leader(group.id),
            members=s.leases.members(group.id),
            assignments=s.assignments.rows(group.id),
            committed=committed,
            high_watermarks=s.messages.high_watermarks(topic),
        )
        if group.mode != "cluster":
            return described
        retries, dead = s.browse.waiting(group.id)
        rows = s.browse.partition_page(group.id, topic, None, max(topic.partitions, 1))
        ages = [r.facts.lag_age_seconds for r in rows if r.facts.lag_age_seconds is not None]
        return replace(
            described,
            retries_waiting=retries,
            dead_letters=dead,
            lag_age_seconds=max(ages) if ages else None,
        )

    def delete(self, name: str) -> Deleted:
        """Delete an inactive group (on every topic it consumes): its cursors, assignment,
        consumption log, retries, dead letters, leader and lease rows, autoscaling policy
        and captures, in chunks of EMS_PURGE_CHUNK_ROWS, then its rows. InvalidName,
        UnknownGroup, GroupInUse (nothing changed) while it has members with live
        leases. The group is marked first, so no consumer joins it meanwhile
        (GroupDeleting); a delete cut off half-way is finished by deleting again."""
        check_name(name, "group")
        lifecycle = self.store.lifecycle
        rows = lifecycle.groups(name)
        if not rows:
            raise UnknownGroup(f"unknown group {name!r}")
        fresh = [r.id for r in rows if not r.deleting]
        if fresh:
            self._refuse_live(name, [r.id for r in rows])
            for group_id in fresh:
                lifecycle.mark_group(group_id)
            try:
                # A member that joined between the check and the mark is seen now.
                self._refuse_live(name, [r.id for r in rows])
            except GroupInUse:
                for group_id in fresh:
                    lifecycle.unmark_group(group_id)
                raise
        done = Deleted(name=name, resumed=not fresh)
        chunk, pause = chunk_rows(self.settings.purge_chunk_rows), self.settings.purge_pause
        for row in rows:
            drained = lifecycle.delete_group(row.id, chunk, pause)
            merge(done.rows, drained.rows)
            merge(done.statements, drained.statements)
        return done

    def _refuse_live(self, name: str, group_ids: Sequence[int]) -> None:
        live = sum(self.store.lifecycle.live_members(g) for g in group_ids)
        if live:
            raise GroupInUse(
                f"group {name!r} has {live} live member{'s' if live != 1 else ''}; nothing "
                "was deleted (stop them, or wait for their leases to expire)"
            )


# -- pure shaping ---------------------------------------------------------------------


def lag(high_watermark: int, committed_offset: int) -> int:
    """Messages stored and not yet consumed. Never negative: retention may delete a
    partition's newest rows, and its watermark then falls below the cursor."""
    return max(0, high_watermark - committed_offset)


def describe_group(
    *,
    group: GroupInfo,
    topic: TopicInfo,
    leader: LeaderInfo | None,
    members: Sequence[MemberInfo],
    assignments: Sequence[AssignmentRow],
    committed: Mapping[int, int],
    high_watermarks: Mapping[int, int],
) -> GroupDescription:
    """Join the rows read for one group into its description."""
    live = {m.client_id for m in members if m.expires_in > 0}
    owners = {r.partition: r for r in assignments}
    partitions = tuple(
        _partition(p, owners.get(p), committed.get(p), high_watermarks.get(p, 0), live)
        for p in sorted({*range(topic.partitions), *high_watermarks})
    )
    lags = [p.lag for p in partitions if p.lag is not None]
    return GroupDescription(
        group=group.name,
        topic=topic.name,
        mode=group.mode,
        start_position=group.start_position,
        ordered=group.ordered,
        retry_ladder=group.retry_ladder,
        max_attempts=group.max_attempts,
        ack_timeout_seconds=group.ack_timeout_seconds,
        generation=group.generation,
        leader=describe_leader(leader),
        members=tuple(_member(m, partitions) for m in members),
        partitions=partitions,
        total_lag=sum(lags) if group.mode == "cluster" else None,
    )


def _partition(
    partition: int,
    row: AssignmentRow | None,
    committed: int | None,
    high_watermark: int,
    live: set[str],
) -> PartitionDescription:
    owner = row.client_id if row is not None and row.state != "released" else None
    return PartitionDescription(
        partition=partition,
        owner=owner,
        owner_live=owner in live,
        state=None if row is None else row.state,
        generation=None if row is None else row.generation,
        committed_offset=committed,
        high_watermark=high_watermark,
        lag=None if committed is None else lag(high_watermark, committed),
    )


def _member(m: MemberInfo, partitions: Sequence[PartitionDescription]) -> MemberDescription:
    return describe_member(m, tuple(p.partition for p in partitions if p.owner == m.client_id))


def describe_member(m: MemberInfo, partitions: tuple[int, ...]) -> MemberDescription:
    """A member row with the partitions it holds."""
    return MemberDescription(
        client_id=m.client_id,
        host=m.host,
        pid=m.pid,
        lease_expires_at=utc(m.lease_expires_at),
        seconds_left=round(m.expires_in, 3),
        live=m.expires_in > 0,
        partitions=partitions,
    )


def describe_leader(info: LeaderInfo | None) -> LeaderDescription | None:
    """The leader row as shown; None when nobody ever led (a new group, or a broadcast
    group)."""
    if info is None or info.client_id is None:
        return None
    return LeaderDescription(
        client_id=info.client_id,
        epoch=info.epoch,
        lease_expires_at=utc(info.lease_expires_at),
        seconds_left=round(info.expires_in, 3),
        live=info.expires_in > 0,
    )


def utc(value: dt.datetime) -> dt.datetime:
    """Database times are UTC (every session runs with time_zone = '+00:00'); say so."""
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
