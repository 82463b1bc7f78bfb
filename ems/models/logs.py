"""The consumption log: one row per delivered message per cluster group."""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Enum, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ems.models.base import TABLE_ARGS, Base, BigId, GroupMessageRef, created_ts, optional_ts


class ConsumptionLog(GroupMessageRef, Base):
    """Clustered by (group_id, partition_no, offset_no): each group writes at its own
    insertion points, one per partition, rather than every group at the right edge of one
    global id. The id is a unique AUTO_INCREMENT secondary key (by which compaction reads
    and deletes), created by the migrations. No index on the state: every ack would
    rewrite it; the rows in flight are found by primary-key ranges (ems.store.in_flight)."""

    __tablename__ = "topic_group_log"
    __table_args__ = TABLE_ARGS

    id: Mapped[int] = mapped_column(BigId, nullable=False, unique=True, autoincrement=True)
    group_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    partition_no: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    offset_no: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    client_id: Mapped[str] = mapped_column(String(255), nullable=False)
    state: Mapped[str] = mapped_column(
        Enum("start", "done", "retry", "dead", name="log_state"), nullable=False
    )
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="1")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: Settled in the handler's own transaction (an exactly-once consumer).
    exactly_once: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="0")
    started_at: Mapped[created_ts]
    finished_at: Mapped[optional_ts]
    updated_at: Mapped[created_ts]
