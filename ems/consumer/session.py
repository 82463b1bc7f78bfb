"""The one interface the consume loop drives: a cluster session (shared partitions, log,
retries, committed cursors) or a broadcast session (every partition, in memory)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from ems.consumer.state import Outcome, Settled
from ems.types import Delivery, TopicInfo


class Session(Protocol):
    #: The topic as the session last learned it (partitions may have been added).
    topic: TopicInfo

    def sync(self) -> None:
        """Follow ownership changes (take, drop, release partitions)."""

    def expire(self) -> list[Outcome]:
        """Deliveries whose ack timeout passed, as failures to settle."""

    def interest(self) -> frozenset[int] | None:
        """The partitions whose wake-ups are news to this session (None: every one)."""

    def mark(self, news: Mapping[int, int] | None = None) -> None:
        """Partitions worth reading now: those with news ({partition: last offset
        announced}) not read yet, or all when None."""

    def fetch(self, limit: int, max_bytes: int) -> list[Delivery]:
        """The next batch: at most `limit` deliveries, whose bodies total at most
        max_bytes unless the batch is a single larger message."""

    def settle(self, outcomes: Settled, *, wait: bool = True) -> None:
        """Apply acks and failures (or a batch of successes, Acks): written at once
        (wait) or while the next batch is fetched."""

    def lag(self, known_high: Mapping[int, int]) -> dict[int, int] | None:
        """Lag per owned partition from the high watermarks known from wake-ups (or the
        read position), without a statement; None where a session keeps no cursor."""

    def close(self) -> None:
        """On leaving: write what is pending and commit what moved."""
