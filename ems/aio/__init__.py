"""The asyncio SDK: `from ems.aio import Producer`; `await producer.send(...)`."""

from ems.aio.producer import Producer

__all__ = ["Producer"]
