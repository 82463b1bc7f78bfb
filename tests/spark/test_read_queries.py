"""The SELECTs Spark's JDBC source runs, built in ems.store: the rows each job reads."""

from __future__ import annotations

import datetime as dt

import pytest

from ems.store.compaction import archive_query
from ems.store.snapshots import window_query
from ems.types import CompactionRunInfo


def compaction_run(min_id: int | None, max_id: int | None) -> CompactionRunInfo:
    return CompactionRunInfo(
        id=3,
        status="started",
        cutoff=dt.datetime(2026, 1, 2, 3, 0),
        group_ids=(4, 5),
        min_id=min_id,
        max_id=max_id,
        archive_root="/archive",
        archived_rows=0,
        summary_rows=0,
        deleted_rows=0,
        deleted_through_id=0,
    )


def test_archive_query_reads_final_rows_of_the_run_range() -> None:
    query = archive_query(compaction_run(10, 99), ("id", "state", "updated_at"))
    assert query == (
        "SELECT id, TRIM(state) AS state, updated_at FROM topic_group_log "
        "WHERE id BETWEEN 10 AND 99 AND state IN ('done', 'dead') "
        "AND updated_at < '2026-01-02 03:00:00' AND group_id IN (4, 5)"
    )


def test_archive_query_needs_an_id_range() -> None:
    with pytest.raises(ValueError, match="no rows to read"):
        archive_query(compaction_run(None, None), ("id",))


@pytest.mark.parametrize(("groups", "scope"), [([], ""), ([1, 7], " AND group_id IN (1, 7)")])
def test_window_query_reads_the_window(groups: list[int], scope: str) -> None:
    start, end = dt.datetime(2026, 1, 1, 11, 45, 0, 123), dt.datetime(2026, 1, 1, 12)
    assert window_query((5, 50), start, end, groups) == (
        "SELECT id, captured_at, group_id, topic_id, partition_no, committed_offset, "
        "high_watermark, committed_at, oldest_unconsumed_at FROM offset_snapshot "
        "WHERE id BETWEEN 5 AND 50 AND captured_at > '2026-01-01 11:45:00.000123' "
        f"AND captured_at <= '2026-01-01 12:00:00'{scope}"
    )
