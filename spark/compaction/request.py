"""What a compaction is asked to do, checked against the database before Spark starts, and
what each of its runs reports."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from ems.exceptions import InvalidCutoff
from ems.store import Store
from ems.types import GroupRef
from spark.archive import normalize_root
from spark.scope import scope

DEFAULT_ARCHIVE_ROOT = "var/archive"


@dataclass(frozen=True, kw_only=True)
class CompactRequest:
    """What to compact. Exactly one of cutoff / older_than."""

    archive_root: str = DEFAULT_ARCHIVE_ROOT
    cutoff: dt.datetime | None = None
    older_than: dt.timedelta | None = None
    groups: tuple[str, ...] = ()
    topic: str | None = None
    #: JDBC read partitions; None: from the id span and the cluster's parallelism.
    read_partitions: int | None = None
    fetchsize: int = 10_000
    #: Parallel DELETE connections; None: the cluster's default parallelism (at most 8).
    delete_workers: int | None = None
    #: Test hook: ('archive-write' | 'archive' | 'summaries' | 'delete', n).
    crash_after: tuple[str, int] | None = None


@dataclass(frozen=True, kw_only=True)
class Plan:
    """A checked request: the cutoff resolved against the database clock, groups by id."""

    cutoff: dt.datetime
    groups: tuple[GroupRef, ...]
    archive_root: str


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    run_id: int
    resumed_from: str | None
    archived: int
    summaries: int
    deleted: int
    timings: dict[str, float] = field(default_factory=dict)


def plan(store: Store, request: CompactRequest) -> Plan:
    """Validate against the database before Spark starts: unreachable database, unknown
    group and a cutoff in the future all fail here, with nothing read or deleted."""
    now = store.group_refs.now()
    if (request.cutoff is None) == (request.older_than is None):
        raise InvalidCutoff("give exactly one of a cutoff time and an age (--older-than)")
    cutoff = _cutoff(request, now)
    groups = scope(store, request.groups, request.topic)
    return Plan(
        cutoff=cutoff,
        groups=tuple(groups),
        archive_root=normalize_root(request.archive_root),
    )


def _cutoff(request: CompactRequest, now: dt.datetime) -> dt.datetime:
    """The request's cutoff, or its age back from the database clock `now`."""
    if request.cutoff is not None:
        if request.cutoff > now:
            raise InvalidCutoff(
                f"cutoff {request.cutoff.isoformat(sep=' ')} is in the future "
                f"(database time {now.isoformat(sep=' ', timespec='seconds')})"
            )
        return request.cutoff
    assert request.older_than is not None
    # Rounded down to the hour: each hour is then summarized by a single run.
    return (now - request.older_than).replace(minute=0, second=0, microsecond=0)
