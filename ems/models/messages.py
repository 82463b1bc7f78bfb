"""The message table and its retry and dead-letter companions.

The one foreign key of the high-volume tables is message's fence (ems.store.fences): the
parent-row check InnoDB makes on an inserted row is the cheapest read a statement can
make of another table, and it is what refuses a producer's rows once a purge, a partition
change or a delete has moved their partition's fence on.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import Mapped, mapped_column

from ems.models.base import (
    TABLE_ARGS,
    Base,
    BigId,
    GroupMessageRef,
    Timestamp,
    bigint_pk,
    created_ts,
    optional_ts,
    timestamp,
)

Body = LargeBinary().with_variant(mysql.MEDIUMBLOB(), "mysql", "mariadb")
Key = LargeBinary(255).with_variant(mysql.VARBINARY(255), "mysql", "mariadb")


class Message(Base):
    """One row per offset. A tombstone fills an abandoned offset so readers can pass it.

    Clustered by (topic_id, partition_no, offset_no): a partition's rows lie next to each
    other in offset order, so draining a partition reads pages of its own rows only. The
    id is a unique AUTO_INCREMENT secondary key (created by the migrations, which render
    the AUTO_INCREMENT that SQLAlchemy keeps for primary keys).
    """

    __tablename__ = "message"
    __table_args__ = (
        # Time lookups (reset to a datetime, retention, queries by time) and key lookups,
        # ordered by (created_at, id) without a sort. Both grow at a few insertion points
        # per topic, not at random places.
        Index(None, "topic_id", "partition_no", "created_at", "id"),
        Index(None, "topic_id", "msg_key", "created_at", "id"),
        # A row carrying a fence must name its partition's current one (NULL: rows whose
        # statement guards itself, tombstones). The fence moves with the parent key's
        # checks off (ems.store.fences), so rows stored before keep their old value.
        Index(None, "topic_id", "partition_no", "fence"),
        ForeignKeyConstraint(
            ["topic_id", "partition_no", "fence"],
            ["partition_head.topic_id", "partition_head.partition_no", "partition_head.fence"],
            name="fk_message_fence",
        ),
        TABLE_ARGS,
    )

    id: Mapped[int] = mapped_column(BigId, nullable=False, unique=True, autoincrement=True)
    topic_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    partition_no: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    offset_no: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    msg_key: Mapped[bytes | None] = mapped_column(Key, nullable=True)
    headers: Mapped[dict[str, str] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    body: Mapped[bytes] = mapped_column(Body, nullable=False)
    tombstone: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="0")
    #: Published inside the caller's transaction (moved from the outbox by a relay).
    transactional: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="0")
    created_at: Mapped[created_ts]
    #: A random token the producer stores on the first row of each write (NULL on the
    #: others): after a lost reply, it tells the producer's own committed write from
    #: another producer's rows at the same offsets, however alike their contents.
    write_token: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    #: The partition's fence the producer checked the row against (see partition_head).
    fence: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class MessageWrite(Base):
    """A write whose writer named it by a token derived from the write's identity (the
    Spark sink's query, batch, task and row), committed in the write's transaction: its
    key refuses the same write a second time (ems.producer's send_once). Purged with the
    topic, and after 30 days (the purge-log job)."""

    __tablename__ = "message_write"
    __table_args__ = (Index(None, "created_at"), TABLE_ARGS)

    topic_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    write_token: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    #: How many messages the write stored.
    messages: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[created_ts]


class MessageTimeIndex(Base):
    """A partition's time index: one row per segment of SEGMENT_ROWS consecutive offsets
    [start_offset, end_offset), with the latest created_at of the segment's messages and
    of every message below end_offset (prefix_max, which only grows with the offset).

    created_at does not grow with the offset (a producer that commits late writes a lower
    offset with a later time), but prefix_max does: the first message at or after a time
    T lies in the first segment whose prefix_max reaches T, found through the index on
    prefix_max, then read within that one segment. Segments are added, never changed,
    once every offset of them holds a row (a message or a tombstone): a filled offset is
    final. Written by the time-index job; offsets past the last segment are read directly.
    """

    __tablename__ = "message_time_index"
    __table_args__ = (
        Index(
            "ix_message_time_index_prefix_max",
            "topic_id",
            "partition_no",
            "prefix_max",
            "end_offset",
        ),
        TABLE_ARGS,
    )

    topic_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    partition_no: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    end_offset: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    start_offset: Mapped[int] = mapped_column(BigInteger, nullable=False)
    #: NULL while the segment (or every segment up to it) holds tombstones only.
    segment_max: Mapped[dt.datetime | None] = mapped_column(Timestamp, nullable=True)
    prefix_max: Mapped[dt.datetime | None] = mapped_column(Timestamp, nullable=True)


class RetryMessage(GroupMessageRef, Base):
    """A message a group failed to process, waiting for its next attempt."""

    __tablename__ = "retry_message"
    __table_args__ = (
        UniqueConstraint("group_id", "partition_no", "offset_no"),
        Index(None, "group_id", "due_at"),
        TABLE_ARGS,
    )

    id: Mapped[bigint_pk]
    message_id: Mapped[int] = mapped_column(BigId, nullable=False)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False)
    due_at: Mapped[timestamp]
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[created_ts]
    #: The last failed handler's traceback, at most ems.retry.tracebacks.TRACEBACK_CHARS.
    last_traceback: Mapped[str | None] = mapped_column(Text, nullable=True)


class DeadMessage(GroupMessageRef, Base):
    """A message that exhausted its attempts. Keeps a copy of the body: retention may purge
    the original while the dead letter is still being inspected."""

    __tablename__ = "dead_message"
    __table_args__ = (
        Index(None, "group_id", "created_at"),
        # Trace and resend find a message's dead letters by its place.
        Index(None, "group_id", "partition_no", "offset_no"),
        # What waits per group (the lag exporter, ems_group_lag): dead letters not
        # resent, counted from index entries alone.
        Index(None, "group_id", "resent_at", "partition_no"),
        TABLE_ARGS,
    )

    id: Mapped[bigint_pk]
    message_id: Mapped[int] = mapped_column(BigId, nullable=False)
    msg_key: Mapped[bytes | None] = mapped_column(Key, nullable=True)
    headers: Mapped[dict[str, str] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    body: Mapped[bytes] = mapped_column(Body, nullable=False)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[created_ts]
    resent_at: Mapped[optional_ts]
    #: The last failed handler's traceback, at most ems.retry.tracebacks.TRACEBACK_CHARS.
    last_traceback: Mapped[str | None] = mapped_column(Text, nullable=True)
