"""Tables of operations: volume counters, alarms, the scheduler lease and job runs,
autoscaling policy and decisions. None of them is on the publish or consume path."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Double,
    Enum,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from ems.models.base import (
    TABLE_ARGS,
    Base,
    BigId,
    bigint_pk,
    created_ts,
    optional_ts,
    timestamp,
)

ALARM_KINDS = ("consumption_timeout", "lag", "lag_age", "dead_letter", "stall")
JOB_STATES = ("running", "done", "failed")
SCALE_BACKENDS = ("log", "kubernetes")


class TopicWatermark(Base):
    """A periodic capture of each partition's high watermark: the cheap counter topic
    volume is ranked by (the difference between two captures), never COUNT(*)."""

    __tablename__ = "topic_watermark"
    __table_args__ = (
        UniqueConstraint("topic_id", "partition_no", "captured_at"),
        Index(None, "captured_at"),
        TABLE_ARGS,
    )

    id: Mapped[bigint_pk]
    captured_at: Mapped[timestamp]
    topic_id: Mapped[int] = mapped_column(BigId, nullable=False)
    partition_no: Mapped[int] = mapped_column(Integer, nullable=False)
    high_watermark: Mapped[int] = mapped_column(BigInteger, nullable=False)


class Alarm(Base):
    """One alarm. While it is open, open_key holds its condition key, and the unique index
    on it keeps one open alarm per condition; clearing sets it to NULL."""

    __tablename__ = "alarm"
    __table_args__ = (
        UniqueConstraint("open_key"),
        Index(None, "status", "opened_at"),
        Index(None, "condition_key", "opened_at"),
        TABLE_ARGS,
    )

    id: Mapped[bigint_pk]
    kind: Mapped[str] = mapped_column(Enum(*ALARM_KINDS, name="alarm_kind"), nullable=False)
    #: What the alarm is about, e.g. "lag:12:3" (kind, group id, partition).
    condition_key: Mapped[str] = mapped_column(String(255), nullable=False)
    open_key: Mapped[str | None] = mapped_column(String(255), nullable=True)
    status: Mapped[str] = mapped_column(
        Enum("open", "cleared", name="alarm_status"), nullable=False, server_default="open"
    )
    group_id: Mapped[int | None] = mapped_column(BigId, nullable=True)
    topic_id: Mapped[int | None] = mapped_column(BigId, nullable=True)
    partition_no: Mapped[int | None] = mapped_column(Integer, nullable=True)
    value: Mapped[float | None] = mapped_column(Double, nullable=True)
    threshold: Mapped[float | None] = mapped_column(Double, nullable=True)
    message: Mapped[str] = mapped_column(Text, nullable=False)
    opened_at: Mapped[created_ts]
    last_seen_at: Mapped[created_ts]
    cleared_at: Mapped[optional_ts]
    #: Webhook delivery of the opening (and clearing) notice.
    notified_at: Mapped[optional_ts]
    notify_attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    notify_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: Who cleared the alarm by hand (a console user, "token:<name>", ...) and when;
    #: NULL for an alarm cleared by the scan, or acknowledged before these were kept.
    acknowledged_by: Mapped[str | None] = mapped_column(String(64), nullable=True)
    acknowledged_at: Mapped[optional_ts]


class SchedulerLease(Base):
    """One row per scheduler name; its holder is the one active scheduler. The epoch grows
    on takeover, and job runs are fenced by it."""

    __tablename__ = "scheduler_lease"
    __table_args__ = TABLE_ARGS

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(255), nullable=True)
    epoch: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    lease_expires_at: Mapped[timestamp]
    #: Fenced job starts (each moves it on): the fence writes the row, so a scheduler
    #: stalled inside one is ended by the server's idle write bound.
    fences: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")


class JobRun(Base):
    """One run of a cleanup job, with the counts it logged."""

    __tablename__ = "job_run"
    __table_args__ = (Index(None, "job", "started_at"), TABLE_ARGS)

    id: Mapped[bigint_pk]
    job: Mapped[str] = mapped_column(String(64), nullable=False)
    #: The scheduler holder, or "cli" for `ems cleanup run`.
    runner: Mapped[str] = mapped_column(String(255), nullable=False)
    status: Mapped[str] = mapped_column(
        Enum(*JOB_STATES, name="job_status"), nullable=False, server_default="running"
    )
    counts: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    started_at: Mapped[created_ts]
    finished_at: Mapped[optional_ts]


class AutoscalePolicy(Base):
    """How the leader of a group scales its consumers (HPA rule, bounds, damping)."""

    __tablename__ = "autoscale_policy"
    __table_args__ = TABLE_ARGS

    group_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("consumer_group.id", ondelete="CASCADE"), primary_key=True
    )
    enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="1")
    backend: Mapped[str] = mapped_column(
        Enum(*SCALE_BACKENDS, name="scale_backend"), nullable=False, server_default="log"
    )
    namespace: Mapped[str | None] = mapped_column(String(253), nullable=True)
    deployment: Mapped[str | None] = mapped_column(String(253), nullable=True)
    min_replicas: Mapped[int] = mapped_column(Integer, nullable=False, server_default="1")
    max_replicas: Mapped[int] = mapped_column(Integer, nullable=False, server_default="10")
    #: Messages per second one consumer should handle.
    target_load: Mapped[float] = mapped_column(Double, nullable=False, server_default="1000")
    tolerance: Mapped[float] = mapped_column(Double, nullable=False, server_default="0.1")
    cpu_threshold: Mapped[float] = mapped_column(Double, nullable=False, server_default="90")
    #: Lag (messages) above which the group scales up; NULL ignores lag.
    lag_threshold: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    scale_down_window_seconds: Mapped[int] = mapped_column(
        Integer, nullable=False, server_default="300"
    )
    cooldown_seconds: Mapped[int] = mapped_column(Integer, nullable=False, server_default="600")
    updated_at: Mapped[optional_ts]


class AutoscaleDecision(Base):
    """Every decision the leader took, applied or not (the `log` backend only records)."""

    __tablename__ = "autoscale_decision"
    __table_args__ = (Index(None, "group_id", "decided_at"), TABLE_ARGS)

    id: Mapped[bigint_pk]
    group_id: Mapped[int] = mapped_column(BigId, nullable=False)
    leader_epoch: Mapped[int] = mapped_column(BigInteger, nullable=False)
    decided_at: Mapped[created_ts]
    current_replicas: Mapped[int] = mapped_column(Integer, nullable=False)
    desired_replicas: Mapped[int] = mapped_column(Integer, nullable=False)
    #: Whether the backend changed the replica count.
    applied: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="0")
    backend: Mapped[str] = mapped_column(
        Enum(*SCALE_BACKENDS, name="scale_backend"), nullable=False
    )
    reason: Mapped[str] = mapped_column(Text, nullable=False)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
