"""Schema only: SQLAlchemy models of every ems table.

A model's module is imported when the model is first asked for (PEP 562): the statements
of `ems topic list` need the topic tables, not the thirty others, and each mapped class
costs its import. `metadata` imports them all: it is the whole schema (Alembic, the
tests, the schema page).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import MetaData

    from ems.models.accounts import AdminAudit, AdminLoginFailure, AdminPlan, AdminToken, AdminUser
    from ems.models.analytics import (
        CompactionRun,
        LagReport,
        LagReportRun,
        LogSummary,
        LogSummaryStage,
        OffsetSnapshot,
        ReadingWindow,
        StreamQueryPosition,
    )
    from ems.models.base import Base
    from ems.models.coordination import ConsumerClient, GroupLeader
    from ems.models.groups import ConsumerGroup, GroupOffset, PartitionAssignment
    from ems.models.logs import ConsumptionLog
    from ems.models.messages import (
        DeadMessage,
        Message,
        MessageTimeIndex,
        MessageWrite,
        RetryMessage,
    )
    from ems.models.operations import (
        Alarm,
        AutoscaleDecision,
        AutoscalePolicy,
        JobRun,
        SchedulerLease,
        TopicWatermark,
    )
    from ems.models.outbox import Installation, MessageOutbox, OutboxRelay
    from ems.models.topics import PartitionChange, PartitionHead, PartitionLow, Topic

    metadata: MetaData

#: Model -> the module that defines it.
_HOMES = {
    "AdminAudit": "ems.models.accounts",
    "AdminLoginFailure": "ems.models.accounts",
    "AdminPlan": "ems.models.accounts",
    "AdminToken": "ems.models.accounts",
    "AdminUser": "ems.models.accounts",
    "Alarm": "ems.models.operations",
    "AutoscaleDecision": "ems.models.operations",
    "AutoscalePolicy": "ems.models.operations",
    "Base": "ems.models.base",
    "CompactionRun": "ems.models.analytics",
    "ConsumerClient": "ems.models.coordination",
    "ConsumerGroup": "ems.models.groups",
    "ConsumptionLog": "ems.models.logs",
    "DeadMessage": "ems.models.messages",
    "GroupLeader": "ems.models.coordination",
    "GroupOffset": "ems.models.groups",
    "Installation": "ems.models.outbox",
    "JobRun": "ems.models.operations",
    "LagReport": "ems.models.analytics",
    "LagReportRun": "ems.models.analytics",
    "LogSummary": "ems.models.analytics",
    "LogSummaryStage": "ems.models.analytics",
    "Message": "ems.models.messages",
    "MessageOutbox": "ems.models.outbox",
    "MessageTimeIndex": "ems.models.messages",
    "MessageWrite": "ems.models.messages",
    "OffsetSnapshot": "ems.models.analytics",
    "ReadingWindow": "ems.models.analytics",
    "OutboxRelay": "ems.models.outbox",
    "PartitionAssignment": "ems.models.groups",
    "PartitionChange": "ems.models.topics",
    "PartitionHead": "ems.models.topics",
    "PartitionLow": "ems.models.topics",
    "RetryMessage": "ems.models.messages",
    "SchedulerLease": "ems.models.operations",
    "StreamQueryPosition": "ems.models.analytics",
    "Topic": "ems.models.topics",
    "TopicWatermark": "ems.models.operations",
}

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
    "MessageWrite",
    "OffsetSnapshot",
    "OutboxRelay",
    "PartitionAssignment",
    "PartitionChange",
    "PartitionHead",
    "PartitionLow",
    "ReadingWindow",
    "RetryMessage",
    "SchedulerLease",
    "StreamQueryPosition",
    "Topic",
    "TopicWatermark",
    "metadata",
]


def __getattr__(name: str) -> Any:
    if name == "metadata":
        for home in sorted(set(_HOMES.values())):
            importlib.import_module(home)
        value = importlib.import_module("ems.models.base").Base.metadata
    elif name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
    else:
        raise AttributeError(f"module 'ems.models' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value
