"""Consumer groups (subscriptions), their committed cursors and partition assignment."""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Enum, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ems.models.base import TABLE_ARGS, Base, BigId, bigint_pk, created_ts, name_str, optional_ts

DEFAULT_RETRY_LADDER = "10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


class ConsumerGroup(Base):
    """A group's subscription to one topic: mode, start position and retry policy."""

    __tablename__ = "consumer_group"
    __table_args__ = (UniqueConstraint("name", "topic_id"), TABLE_ARGS)

    id: Mapped[bigint_pk]
    name: Mapped[name_str]
    topic_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("topic.id", ondelete="CASCADE"), nullable=False
    )
    mode: Mapped[str] = mapped_column(
        Enum("cluster", "broadcast", name="group_mode"), nullable=False, server_default="cluster"
    )
    start_position: Mapped[str] = mapped_column(
        Enum("earliest", "latest", name="start_position"), nullable=False, server_default="latest"
    )
    ordered: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="0")
    retry_ladder: Mapped[str] = mapped_column(
        String(512), nullable=False, server_default=DEFAULT_RETRY_LADDER
    )
    max_attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="16")
    ack_timeout_seconds: Mapped[int] = mapped_column(Integer, nullable=False, server_default="300")
    #: Bumped by every assignment write; cursor commits carry it and fail when stale.
    generation: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    #: While in the future (database clock) the leader revokes every partition and grants
    #: none: an offset reset pauses a live group this way. A lease, so a crashed reset
    #: resumes the group by itself.
    paused_until: Mapped[optional_ts]
    #: Alarm thresholds; NULL turns the alarm off.
    lag_alarm_messages: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    lag_alarm_seconds: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: A partition whose cursor has not moved for this long while it lags is stalled.
    stall_alarm_seconds: Mapped[int] = mapped_column(Integer, nullable=False, server_default="300")
    created_at: Mapped[created_ts]
    #: Set (database clock) when a delete of the group began: consumers then cannot join
    #: it (GroupDeleting), and the delete, run again, finishes what it started.
    deleting_at: Mapped[optional_ts]


class GroupOffset(Base):
    """The committed cursor: the next offset the group will consume in a partition."""

    __tablename__ = "group_offset"
    __table_args__ = TABLE_ARGS

    group_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("consumer_group.id", ondelete="CASCADE"), primary_key=True
    )
    partition_no: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    committed_offset: Mapped[int] = mapped_column(BigInteger, nullable=False)
    generation: Mapped[int] = mapped_column(BigInteger, nullable=False)
    updated_at: Mapped[created_ts]


class PartitionAssignment(Base):
    """Who owns a partition of a group, in which generation, and where the handoff stands."""

    __tablename__ = "partition_assignment"
    __table_args__ = TABLE_ARGS

    group_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("consumer_group.id", ondelete="CASCADE"), primary_key=True
    )
    partition_no: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    client_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    generation: Mapped[int] = mapped_column(BigInteger, nullable=False)
    state: Mapped[str] = mapped_column(
        Enum("assigned", "revoking", "released", name="assignment_state"),
        nullable=False,
        server_default="assigned",
    )
    updated_at: Mapped[optional_ts]
