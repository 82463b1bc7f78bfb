"""How far a query's micro-batches stay behind the partitions' high watermarks, as Kafka's
source reports it (avgOffsetsBehindLatest, maxOffsetsBehindLatest, minOffsetsBehindLatest).

PySpark's Python data sources cannot add metrics of their own to a query's progress (its
streaming reader has no counterpart of the JVM's ReportsSourceMetrics), so the source
reports its latest offsets instead (reportLatestOffset: the progress's latestOffset
beside endOffset), offsets_behind() computes Kafka's three figures from a progress
entry, and the driver logs them for every micro-batch it plans.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from spark.source.ranges import Place, Positions, from_json

log = logging.getLogger(__name__)


def behind(end: Mapping[Place, int], highs: Mapping[Place, int]) -> Positions:
    """Per partition, the offsets between a batch's end and its high watermark."""
    return {place: max(0, highs.get(place, offset) - offset) for place, offset in end.items()}


def summary(lags: Mapping[Place, int]) -> dict[str, float]:
    """Kafka's avg / max / min OffsetsBehindLatest of per-partition lags."""
    if not lags:
        return {}
    values = list(lags.values())
    return {
        "avgOffsetsBehindLatest": sum(values) / len(values),
        "maxOffsetsBehindLatest": float(max(values)),
        "minOffsetsBehindLatest": float(min(values)),
    }


def offsets_behind(source: Any) -> dict[str, float]:
    """Kafka's figures from one entry of a query's progress `sources` (a SourceProgress,
    as query.lastProgress.sources[i], or its dict): its latestOffset against its
    endOffset."""
    latest, end = _offsets(source, "latestOffset"), _offsets(source, "endOffset")
    if latest is None or end is None:
        return {}
    return summary(behind(from_json(end), from_json(latest)))


def _offsets(source: Any, name: str) -> Mapping[str, Mapping[str, int]] | None:
    given = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
    if isinstance(given, str):
        given = json.loads(given)
    return given if isinstance(given, Mapping) else None


def report_lag(lags: Mapping[Place, int], skipped: int) -> None:
    """The driver's log line for a planned micro-batch."""
    figures = summary(lags)
    if not figures:
        return
    log.info(
        "ems source: offsets behind latest: avg %.1f, max %d, min %d; purged offsets "
        "skipped so far: %d",
        figures["avgOffsetsBehindLatest"],
        figures["maxOffsetsBehindLatest"],
        figures["minOffsetsBehindLatest"],
        skipped,
    )
