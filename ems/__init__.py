"""ems: a MySQL-backed stream queue (Extend MySQL Stream)."""

from ems import exceptions
from ems.config import Settings
from ems.consumer import Consumer
from ems.exceptions import EmsError
from ems.groups import GroupAdmin, GroupDescription
from ems.offsets.reader import Reader
from ems.producer import Producer
from ems.topics import TopicAdmin
from ems.types import (
    Delivery,
    PartitionBatch,
    PartitionStats,
    Record,
    RecordMetadata,
    StoredMessage,
    TopicInfo,
)

__all__ = [
    "Consumer",
    "Delivery",
    "EmsError",
    "GroupAdmin",
    "GroupDescription",
    "PartitionBatch",
    "PartitionStats",
    "Producer",
    "Reader",
    "Record",
    "RecordMetadata",
    "Settings",
    "StoredMessage",
    "TopicAdmin",
    "TopicInfo",
    "exceptions",
]
