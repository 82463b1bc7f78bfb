"""The offset snapshot capture that lag reports are evaluated over."""

from __future__ import annotations

from contextlib import closing

from ems.config import Settings
from ems.store import Store


def capture_offset_snapshots(settings: Settings, *, store: Store | None = None) -> int:
    """Capture every committed offset with its partition's high watermark, once; returns
    the rows written. Meant to run every 30-60 s (cron, a scheduler, `ems offsets snapshot`)."""
    if store is not None:
        return store.snapshots.capture()
    with closing(Store(settings)) as own:
        return own.snapshots.capture()
