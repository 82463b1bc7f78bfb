"""The asyncio SDK: `from ems.aio import Producer, Consumer`; `await producer.send(...)`,
`await consumer.run()`."""

from ems.aio.consumer import Consumer
from ems.aio.producer import Producer

__all__ = ["Consumer", "Producer"]
