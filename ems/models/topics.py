"""Topics and the MySQL offset allocator's partition heads."""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, ForeignKey, Integer, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from ems.models.base import TABLE_ARGS, Base, BigId, bigint_pk, created_ts, name_str, optional_ts


class Topic(Base):
    __tablename__ = "topic"
    __table_args__ = TABLE_ARGS

    id: Mapped[bigint_pk]
    name: Mapped[name_str] = mapped_column(unique=True)
    partitions: Mapped[int] = mapped_column(Integer, nullable=False)
    retention_hours: Mapped[int] = mapped_column(Integer, nullable=False, server_default="168")
    max_body_bytes: Mapped[int] = mapped_column(Integer, nullable=False, server_default="1048576")
    #: Delete messages every cluster group has consumed, before retention ends them.
    delete_consumed: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="0")
    created_at: Mapped[created_ts]
    #: Set (database clock) when a delete of the topic began: lookups then refuse it
    #: (TopicDeleting), and the delete, run again, finishes what it started.
    deleting_at: Mapped[optional_ts]


class PartitionHead(Base):
    """Next offset per partition, for deployments that allocate offsets in MySQL; and the
    partition's fence: every producer row names the fence it was checked against, and
    message's foreign key refuses a row whose fence has moved on (ems.store.fences)."""

    __tablename__ = "partition_head"
    __table_args__ = (UniqueConstraint("topic_id", "partition_no", "fence"), TABLE_ARGS)

    topic_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("topic.id", ondelete="CASCADE"), primary_key=True
    )
    partition_no: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    next_offset: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default=text("0"))
    #: Moved on (+1) by every change a producer's rows must be checked against again: a
    #: raised low watermark, a partition change, a topic's delete.
    fence: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default=text("0"))


class PartitionLow(Base):
    """The low watermark: every offset below low_offset was purged. Readers whose cursor
    lies below it jump to it instead of filling the purged range with tombstones."""

    __tablename__ = "partition_low"
    __table_args__ = TABLE_ARGS

    topic_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("topic.id", ondelete="CASCADE"), primary_key=True
    )
    partition_no: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    low_offset: Mapped[int] = mapped_column(BigInteger, nullable=False)
    updated_at: Mapped[optional_ts]
    #: The topic's count of partitions the producers' rows must be routed by: written by
    #: every partition change on each old partition's row (ems.store.partitions) and read
    #: by the INSERT's guard; NULL (a row a purge created) stands for the topic's count.
    partitions: Mapped[int | None] = mapped_column(Integer, nullable=True)


class PartitionChange(Base):
    """Partitions added to a topic: one row per partition the topic had before the change,
    with its high watermark at the change. Every row of that partition below the watermark
    was routed by the count before; every row at or past it, by the count after (`partitions`)
    or a later one. Ordered groups hold a key's messages written after the change until its
    old partition is settled up to the watermark (ems.partitions)."""

    __tablename__ = "partition_change"
    __table_args__ = TABLE_ARGS

    topic_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("topic.id", ondelete="CASCADE"), primary_key=True
    )
    #: The topic's partition count from this change on (counts only grow: it names the change).
    partitions: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    partition_no: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    high_watermark: Mapped[int] = mapped_column(BigInteger, nullable=False)
    created_at: Mapped[created_ts]
