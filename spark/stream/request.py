"""What a stream job is asked for, and what it did (no Spark here)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ems.exceptions import InvalidWindow
from ems.validation import check_name


@dataclass(frozen=True, kw_only=True)
class StreamRequest:
    checkpoint: str
    topic: str = "iot.readings"
    #: Parquet root: each micro-batch's windows under batch_id=N/ (None: MySQL only).
    parquet: str | None = None
    window: dt.timedelta = dt.timedelta(minutes=1)
    #: How late a reading may come (by its own time) and still count in its window.
    watermark: dt.timedelta = dt.timedelta(minutes=2)
    max_offsets: int | None = 10_000
    trigger: dt.timedelta = dt.timedelta(seconds=5)
    #: Read what the topic holds now, write its windows and stop (Trigger.AvailableNow).
    available_now: bool = False
    #: The source's ems.query.name: its position is shown by `ems spark queries`.
    query_name: str = "reading-windows"

    def check(self) -> None:
        check_name(self.topic, "topic")
        check_name(self.query_name, "query name")
        if self.window < dt.timedelta(seconds=1):
            raise InvalidWindow("the window must be at least 1 s")
        if self.watermark < dt.timedelta(0):
            raise InvalidWindow("the watermark delay cannot be negative")
        if not self.checkpoint.strip():
            raise InvalidWindow("a checkpoint location is needed")


@dataclass(frozen=True, kw_only=True)
class StreamOutcome:
    batches: int
    windows: int


def interval(span: dt.timedelta) -> str:
    """A duration as Spark's interval text ("60 seconds")."""
    return f"{int(span.total_seconds())} seconds"
