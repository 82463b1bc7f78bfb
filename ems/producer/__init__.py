"""Producer: validation, partitioning, allocation, insert."""

from ems.producer.producer import Producer

__all__ = ["Producer"]
