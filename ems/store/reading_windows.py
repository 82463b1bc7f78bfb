"""The stream job's windows (reading_window): upserted by each micro-batch that emits
them, so a batch Spark runs again after a crash leaves the same rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from ems.store.database import Database

_UPSERT = (
    "INSERT INTO reading_window (project_id, window_start, window_end, readings, "
    "avg_temperature, min_temperature, max_temperature, batch_id, updated_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, NOW(6)) ON DUPLICATE KEY UPDATE "
    "window_end = VALUES(window_end), readings = VALUES(readings), "
    "avg_temperature = VALUES(avg_temperature), min_temperature = VALUES(min_temperature), "
    "max_temperature = VALUES(max_temperature), batch_id = VALUES(batch_id), "
    "updated_at = NOW(6)"
)
_ALL = (
    "SELECT project_id, window_start, window_end, readings, avg_temperature, "
    "min_temperature, max_temperature FROM reading_window ORDER BY window_start, project_id"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadingWindow:
    project_id: int
    #: UTC, without tzinfo.
    start: dt.datetime
    end: dt.datetime
    readings: int
    avg_temperature: float
    min_temperature: float
    max_temperature: float


class ReadingWindowStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def upsert(self, windows: Sequence[ReadingWindow], batch_id: int) -> None:
        """All the windows of one micro-batch in one transaction."""
        if not windows:
            return
        params = [
            (
                w.project_id,
                w.start,
                w.end,
                w.readings,
                w.avg_temperature,
                w.min_temperature,
                w.max_temperature,
                batch_id,
            )
            for w in windows
        ]
        with self.db.transaction() as cursor:
            cursor.executemany(_UPSERT, params)

    def all(self) -> list[ReadingWindow]:
        return [
            ReadingWindow(
                project_id=int(r[0]),
                start=r[1],
                end=r[2],
                readings=int(r[3]),
                avg_temperature=float(r[4]),
                min_temperature=float(r[5]),
                max_temperature=float(r[6]),
            )
            for r in self.db.select(_ALL, ())
        ]
