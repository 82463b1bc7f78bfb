"""Consumers: cluster groups (shared partitions, log, retry, dead letter) and broadcast."""

from ems.consumer.consumer import Consumer, Handler

__all__ = ["Consumer", "Handler"]
