"""ems: a MySQL-backed stream queue (Extend MySQL Stream).

The public names load on first use (PEP 562): `import ems` alone costs almost nothing, so
a command, a spawned worker or a script pays only for the parts it touches.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ems import exceptions
    from ems.config import Settings
    from ems.consumer import Consumer
    from ems.exceptions import EmsError
    from ems.groups import GroupAdmin, GroupDescription
    from ems.offsets.reader import Reader
    from ems.producer import Producer
    from ems.retry.requested import DeadLetter, Retry
    from ems.topics import TopicAdmin
    from ems.types import (
        BatchMetadata,
        Delivery,
        PartitionBatch,
        PartitionStats,
        Record,
        RecordMetadata,
        StoredMessage,
        TopicInfo,
    )

#: Public name -> the module that defines it.
_HOMES = {
    "BatchMetadata": "ems.types",
    "Consumer": "ems.consumer",
    "DeadLetter": "ems.retry.requested",
    "Delivery": "ems.types",
    "EmsError": "ems.exceptions",
    "GroupAdmin": "ems.groups",
    "GroupDescription": "ems.groups",
    "PartitionBatch": "ems.types",
    "PartitionStats": "ems.types",
    "Producer": "ems.producer",
    "Reader": "ems.offsets.reader",
    "Record": "ems.types",
    "RecordMetadata": "ems.types",
    "Retry": "ems.retry.requested",
    "Settings": "ems.config",
    "StoredMessage": "ems.types",
    "TopicAdmin": "ems.topics",
    "TopicInfo": "ems.types",
}

__all__ = [
    "BatchMetadata",
    "Consumer",
    "DeadLetter",
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
    "Retry",
    "Settings",
    "StoredMessage",
    "TopicAdmin",
    "TopicInfo",
    "exceptions",
]


def __getattr__(name: str) -> Any:
    if name == "exceptions":
        return importlib.import_module("ems.exceptions")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ems' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
