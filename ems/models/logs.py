"""The consumption log: one row per delivered message per cluster group."""

from __future__ import annotations

from sqlalchemy import Enum, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ems.models.base import TABLE_ARGS, Base, GroupMessageRef, bigint_pk, created_ts, optional_ts


class ConsumptionLog(GroupMessageRef, Base):
    __tablename__ = "topic_group_log"
    __table_args__ = (
        UniqueConstraint("group_id", "partition_no", "offset_no"),
        Index(None, "state", "updated_at"),
        TABLE_ARGS,
    )

    id: Mapped[bigint_pk]
    client_id: Mapped[str] = mapped_column(String(255), nullable=False)
    state: Mapped[str] = mapped_column(
        Enum("start", "done", "retry", "dead", name="log_state"), nullable=False
    )
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="1")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    started_at: Mapped[created_ts]
    finished_at: Mapped[optional_ts]
    updated_at: Mapped[created_ts]
