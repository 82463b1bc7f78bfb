"""Schema only: SQLAlchemy models of every ems table."""

from ems.models.base import Base
from ems.models.coordination import ConsumerClient, GroupLeader
from ems.models.groups import ConsumerGroup, GroupOffset, PartitionAssignment
from ems.models.logs import ConsumptionLog
from ems.models.messages import DeadMessage, Message, RetryMessage
from ems.models.topics import PartitionHead, Topic

metadata = Base.metadata

__all__ = [
    "Base",
    "ConsumerClient",
    "ConsumerGroup",
    "ConsumptionLog",
    "DeadMessage",
    "GroupLeader",
    "GroupOffset",
    "Message",
    "PartitionAssignment",
    "PartitionHead",
    "RetryMessage",
    "Topic",
    "metadata",
]
