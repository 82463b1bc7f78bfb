"""Schema only: SQLAlchemy models of every ems table."""

from ems.models.accounts import AdminAudit, AdminLoginFailure, AdminPlan, AdminToken, AdminUser
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
from ems.models.messages import DeadMessage, Message, MessageTimeIndex, RetryMessage
from ems.models.operations import (
    Alarm,
    AutoscaleDecision,
    AutoscalePolicy,
    JobRun,
    SchedulerLease,
    TopicWatermark,
)
from ems.models.outbox import Installation, MessageOutbox, OutboxRelay
from ems.models.topics import PartitionHead, PartitionLow, Topic

metadata = Base.metadata

__all__ = [
    "AdminAudit",
    "AdminLoginFailure",
    "AdminPlan",
    "AdminToken",
    "AdminUser",
    "Alarm",
    "AutoscaleDecision",
    "AutoscalePolicy",
    "Base",
    "CompactionRun",
    "ConsumerClient",
    "ConsumerGroup",
    "ConsumptionLog",
    "DeadMessage",
    "GroupLeader",
    "GroupOffset",
    "Installation",
    "JobRun",
    "LagReport",
    "LagReportRun",
    "LogSummary",
    "LogSummaryStage",
    "Message",
    "MessageOutbox",
    "MessageTimeIndex",
    "OffsetSnapshot",
    "OutboxRelay",
    "PartitionAssignment",
    "PartitionHead",
    "PartitionLow",
    "RetryMessage",
    "SchedulerLease",
    "Topic",
    "TopicWatermark",
    "metadata",
]
