"""Test without servers: an in-memory twin of ems's storage, offset counters and wake-ups
that runs the real producers (ems.Producer, ems.aio.Producer) and the real consumer,
membership and handoff code (MemoryBroker), and a clock that moves on cue (ManualClock)."""

from ems.testing.broker import MemoryBroker
from ems.testing.memory import DeadLetterRecord, LogRow, ManualClock, MemoryStore, RetryRow

__all__ = ["DeadLetterRecord", "LogRow", "ManualClock", "MemoryBroker", "MemoryStore", "RetryRow"]
