"""The overview the console shows (ems.ops.overview): what it reads from the newest
published lag report, and what it says when a value is not known yet."""

from __future__ import annotations

import datetime as dt

import pytest

from ems.config import Settings
from ems.consumer.groups import ensure_group
from ems.exceptions import DatabaseUnavailable
from ems.ops.overview import (
    BROADCAST,
    EMPTY_REPORT,
    MAX_GROUPS,
    NO_REPORT,
    NOT_COVERED,
    Overview,
    OverviewReader,
    summarize,
)
from ems.store import Store
from ems.types import GroupInfo
from ems.values.rows import GroupLag, LagReportRun
from tests.integration import seed

NOW = dt.datetime(2026, 11, 22, 10, 0)


def _group(gid: int, name: str, topic_id: int, mode: str = "cluster") -> GroupInfo:
    return GroupInfo(
        id=gid,
        name=name,
        topic_id=topic_id,
        mode=mode,  # type: ignore[arg-type]
        start_position="earliest",
        ordered=False,
        retry_ladder="1s",
        max_attempts=3,
        ack_timeout_seconds=30,
        generation=0,
    )


def _run(partitions: int) -> LagReportRun:
    return LagReportRun(id=7, as_of=NOW, window_seconds=900, partitions=partitions, finished_at=NOW)


NAMES = {1: "orders", 2: "events"}
GROUPS = [_group(10, "billing", 1), _group(11, "audit", 2), _group(12, "screens", 2, "broadcast")]


def _summarize(
    run: LagReportRun | None, lags: list[GroupLag], total: int | None, open_alarms: int = 0
) -> Overview:
    by_group = {lag.group_id: lag for lag in lags}
    return summarize(
        read_at=NOW,
        topics=2,
        group_count=len(GROUPS),
        groups=[(g, NAMES[g.topic_id], by_group.get(g.id)) for g in GROUPS],
        report=run,
        total_lag=total,
        open_alarms=open_alarms,
    )


def test_before_any_lag_report_nothing_is_made_up() -> None:
    o = _summarize(None, [], None)
    assert (o.topics, o.group_count, o.open_alarms, o.lag_report) == (2, 3, 0, None)
    assert (o.total_lag, o.total_lag_reason) == (None, NO_REPORT)
    assert [(g.group, g.status, g.lag) for g in o.groups] == [
        ("billing", None, None),
        ("audit", None, None),
        ("screens", None, None),
    ]
    assert [g.reason for g in o.groups] == [NO_REPORT, NO_REPORT, BROADCAST]


def test_groups_take_their_status_and_lag_from_the_report() -> None:
    lags = [GroupLag(group_id=10, topic_id=1, status="WARN", lag=40, partitions=2)]
    o = _summarize(_run(2), lags, 40, open_alarms=3)
    billing, audit, screens = o.groups
    assert (billing.topic, billing.status, billing.lag, billing.reason) == (
        "orders",
        "WARN",
        40,
        None,
    )
    assert (audit.status, audit.lag, audit.reason) == (None, None, NOT_COVERED)
    assert (screens.status, screens.reason) == (None, BROADCAST)
    assert (o.total_lag, o.total_lag_reason, o.open_alarms) == (40, None, 3)


def test_a_report_without_rows_gives_no_total() -> None:
    o = _summarize(_run(0), [], None)
    assert (o.total_lag, o.total_lag_reason) == (None, EMPTY_REPORT)
    assert o.groups[0].reason == NOT_COVERED


def test_a_zero_lag_is_shown_as_zero() -> None:
    lags = [GroupLag(group_id=10, topic_id=1, status="OK", lag=0, partitions=2)]
    o = _summarize(_run(2), lags, 0)
    assert (o.total_lag, o.groups[0].lag, o.groups[0].status) == (0, 0, "OK")


def _report_row(
    store: Store, run: int, group: GroupInfo, partition: int, lag: int, status: str, worst: str
) -> None:
    seed.sql(
        store,
        "INSERT INTO lag_report (report_id, group_id, partition_no, topic_id, high_watermark, "
        "committed_offset, lag, snapshots, status, group_status, last_captured_at) "
        "VALUES (%s, %s, %s, %s, %s, 0, %s, 3, %s, %s, NOW(6))",
        (run, group.id, partition, group.topic_id, lag, lag, status, worst),
    )


def test_the_reader_reads_the_newest_published_report(settings: Settings, store: Store) -> None:
    orders = store.topics.create("orders", 2, 24, 1024)
    events = store.topics.create("events", 1, 24, 1024)
    billing = seed.group(store, "billing", orders)
    audit = seed.group(store, "audit", events)
    seed.group(store, "newer", events)
    screens = ensure_group(store, "screens", events, seed.options(broadcast=True))
    assert screens.mode == "broadcast"

    with OverviewReader(settings) as reader:
        empty = reader.read()
        assert (empty.topics, empty.open_alarms, empty.total_lag) == (2, 0, None)
        assert {g.reason for g in empty.groups} == {NO_REPORT, BROADCAST}
        assert isinstance(reader.ping(), dt.datetime)

    old = store.lag_reports.start(NOW, 900)
    _report_row(store, old, billing, 0, 1000, "STOP", "ERR")
    store.lag_reports.finish(old, 1)
    newest = store.lag_reports.start(NOW, 900)
    _report_row(store, newest, billing, 0, 5, "WARN", "ERR")
    _report_row(store, newest, billing, 1, 7, "STALL", "ERR")
    _report_row(store, newest, audit, 0, 0, "OK", "OK")
    store.lag_reports.finish(newest, 3)
    running = store.lag_reports.start(NOW, 900)  # not published: never read
    _report_row(store, running, audit, 0, 99, "STOP", "ERR")
    for key, status in (("lag:1", "open"), ("lag:2", "cleared"), ("stall:3", "open")):
        seed.sql(
            store,
            "INSERT INTO alarm (kind, condition_key, open_key, status, message) "
            "VALUES ('lag', %s, %s, %s, 'test')",
            (key, key if status == "open" else None, status),
        )

    with OverviewReader(settings) as reader:
        o = reader.read()
    assert o.lag_report is not None and o.lag_report.id == newest
    assert (o.lag_report.window_seconds, o.lag_report.partitions) == (900, 3)
    assert (o.total_lag, o.total_lag_reason, o.open_alarms) == (12, None, 2)
    shown = {(g.group, g.topic): (g.mode, g.status, g.lag, g.reason) for g in o.groups}
    assert shown == {
        ("audit", "events"): ("cluster", "OK", 0, None),
        ("billing", "orders"): ("cluster", "ERR", 12, None),
        ("newer", "events"): ("cluster", None, None, NOT_COVERED),
        ("screens", "events"): ("broadcast", None, None, BROADCAST),
    }
    # The worst first, then OK, then those the report does not cover, each by name.
    assert [g.group for g in o.groups] == ["billing", "audit", "newer", "screens"]
    assert o.group_count == 4


def test_the_overview_lists_the_most_urgent_groups_only(settings: Settings, store: Store) -> None:
    orders = store.topics.create("orders", 1, 24, 1024)
    groups = [seed.group(store, f"g{i:03d}", orders) for i in range(MAX_GROUPS + 5)]
    run = store.lag_reports.start(NOW, 900)
    _report_row(store, run, groups[-1], 0, 9, "STALL", "ERR")
    _report_row(store, run, groups[-2], 0, 3, "WARN", "WARN")
    _report_row(store, run, groups[0], 0, 1, "OK", "OK")
    store.lag_reports.finish(run, 3)
    with OverviewReader(settings) as reader:
        o = reader.read()
    assert (o.group_count, len(o.groups), o.total_lag) == (MAX_GROUPS + 5, MAX_GROUPS, 13)
    assert [g.group for g in o.groups[:4]] == ["g104", "g103", "g000", "g001"]


def test_ping_fails_when_the_database_does_not_answer() -> None:
    down = Settings(database_url="mysql+pymysql://root@127.0.0.1:1/ems", connect_attempts=1)
    with OverviewReader(down) as reader, pytest.raises(DatabaseUnavailable):
        reader.ping()
