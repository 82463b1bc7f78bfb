"""Lease rows: consumer clients and the leader of each group."""

from __future__ import annotations

from sqlalchemy import BigInteger, Double, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from ems.models.base import TABLE_ARGS, Base, BigId, created_ts, optional_ts, timestamp


class ConsumerClient(Base):
    """A live consumer; it renews lease_expires_at (database clock) or is presumed dead.

    lease_expires_at is in no index: a renewal that rewrote an entry of the index the
    foreign key uses would check the key again, and wait for any transaction holding the
    group row (migration 0011)."""

    __tablename__ = "consumer_client"
    __table_args__ = (Index(None, "group_id"), TABLE_ARGS)

    client_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    group_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("consumer_group.id", ondelete="CASCADE"), nullable=False
    )
    host: Mapped[str] = mapped_column(String(255), nullable=False)
    pid: Mapped[int] = mapped_column(Integer, nullable=False)
    lease_expires_at: Mapped[timestamp]
    #: Load the member reports with its renewals, for the leader's scaling decision.
    cpu_percent: Mapped[float | None] = mapped_column(Double, nullable=True)
    #: Messages handled per second since the previous report.
    load_rate: Mapped[float | None] = mapped_column(Double, nullable=True)
    reported_at: Mapped[optional_ts]
    created_at: Mapped[created_ts]


class GroupLeader(Base):
    """One row per group; the holder is leader while its lease runs. The epoch grows on
    every takeover, and every leader write is conditioned on it."""

    __tablename__ = "group_leader"
    __table_args__ = TABLE_ARGS

    group_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("consumer_group.id", ondelete="CASCADE"), primary_key=True
    )
    client_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    epoch: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    lease_expires_at: Mapped[timestamp]
    #: Leader transactions begun (each one's fence moves it on): the fence writes the
    #: row, so a leader stalled inside one is ended by the server's idle write bound.
    fences: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
