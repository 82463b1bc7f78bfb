"""What a lag report is asked for, checked against the database before Spark starts, and
what it reports."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Literal

from ems.exceptions import InvalidWindow
from ems.store import Store
from ems.types import GroupRef
from spark.scope import scope

DEFAULT_WINDOW = dt.timedelta(minutes=15)
#: Reports kept in lag_report (older ones are pruned after each run).
DEFAULT_KEEP = 500
OutputFormat = Literal["parquet", "csv"]


@dataclass(frozen=True, kw_only=True)
class LagRequest:
    window: dt.timedelta = DEFAULT_WINDOW
    #: End of the window (UTC); None: the database clock now.
    as_of: dt.datetime | None = None
    groups: tuple[str, ...] = ()
    topic: str | None = None
    output: str | None = None
    output_format: OutputFormat = "parquet"
    chart_dir: str | None = None
    keep_reports: int = DEFAULT_KEEP
    read_partitions: int | None = None


@dataclass(frozen=True, kw_only=True)
class LagOutcome:
    report_id: int
    partitions: int
    statuses: dict[str, int] = field(default_factory=dict)
    group_statuses: dict[str, str] = field(default_factory=dict)
    output: str | None = None
    charts: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class LagPlan:
    as_of: dt.datetime
    window_seconds: int
    groups: tuple[GroupRef, ...]


def plan(store: Store, request: LagRequest) -> LagPlan:
    """Validate before Spark starts (unreachable database, unknown group, bad window)."""
    now = store.group_refs.now()
    as_of = request.as_of or now
    if as_of > now:
        raise InvalidWindow(f"report time {as_of.isoformat(sep=' ')} is in the future")
    seconds = int(request.window.total_seconds())
    if seconds < 1:
        raise InvalidWindow("the report window must be at least 1 s")
    return LagPlan(
        as_of=as_of,
        window_seconds=seconds,
        groups=tuple(scope(store, request.groups, request.topic)),
    )
