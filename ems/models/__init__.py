"""Schema only: SQLAlchemy models of every ems table."""

from ems.models.analytics import (
    CompactionRun,
    LagReport,
    LagReportRun,
    LogSummary,
    LogSummaryStage,
    OffsetSnapshot,
)
from ems.models.base import Base
from ems.models.coordination import ConsumerClient, GroupLeader
from ems.models.groups import ConsumerGroup, GroupOffset, PartitionAssignment
from ems.models.logs import ConsumptionLog
from ems.models.messages import DeadMessage, Message, RetryMessage
from ems.models.topics import PartitionHead, Topic

metadata = Base.metadata

__all__ = [
    "Base",
    "CompactionRun",
    "ConsumerClient",
    "ConsumerGroup",
    "ConsumptionLog",
    "DeadMessage",
    "GroupLeader",
    "GroupOffset",
    "LagReport",
    "LagReportRun",
    "LogSummary",
    "LogSummaryStage",
    "Message",
    "OffsetSnapshot",
    "PartitionAssignment",
    "PartitionHead",
    "RetryMessage",
    "Topic",
    "metadata",
]
