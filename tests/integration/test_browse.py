"""The admin console's read models (ems.ops.browse) on the real server: pages by name with
literal prefixes and keyset cursors, a topic's and a group's detail, statuses from lag
reports and rewinds, lag and volume series sampled from the captures; bad input refused
before anything is read, and costs that do not grow with the rows stored."""

from __future__ import annotations

import datetime as dt
import functools
import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pymysql
import pytest

from ems.consumer.groups import ensure_group
from ems.exceptions import (
    InvalidCursor,
    InvalidDatetime,
    InvalidInput,
    InvalidName,
    InvalidSetting,
    InvalidWindow,
    NotFound,
    UnknownGroup,
    UnknownTopic,
)
from ems.groups import GroupAdmin
from ems.ops.browse import Browser
from ems.ops.browse_input import buckets
from ems.store import Store
from ems.topics import TopicAdmin
from ems.types import GroupInfo, TopicInfo
from tests import sql as db
from tests.conftest import connect
from tests.integration import seed, seed_browse, seeding
from tests.integration.seed_browse import counting, handler_reads
from tests.integration.sql_seed import LEADER_EPOCH, seed_all

HOUR = dt.timedelta(hours=1)


@pytest.fixture
def browser(store: Store) -> Browser:
    return Browser(store.settings, store=store)


@pytest.fixture
def conn(store: Store) -> Iterator[pymysql.Connection]:
    connection = connect(store.settings)
    yield connection
    connection.close()


def group_on(store: Store, name: str, topic: TopicInfo, *, broadcast: bool = False) -> GroupInfo:
    return ensure_group(store, name, topic, seed.options(broadcast=broadcast))


def all_pages(fetch: Callable[[str | None], Any]) -> list[Any]:
    """Every item of a listing, page after page, checking that only the last page has no
    next_after."""
    items: list[Any] = []
    after: str | None = None
    for _ in range(100):
        page = fetch(after)
        items += page.items
        if page.next_after is None:
            return items
        assert page.items, "a page that says more follow is not empty"
        after = page.next_after
    raise AssertionError("the pages never ended")


# -- pages -------------------------------------------------------------------------------


def test_a_prefix_is_literal_its_percent_and_underscore_are_characters(
    store: Store, browser: Browser
) -> None:
    made = seed_browse.topics(store, ["a_b", "a_c", "ab", "axb", "b_a"])

    def topics(prefix: str) -> list[str]:
        return [t.name for t in browser.topics_page(prefix).items]

    assert topics("a_") == ["a_b", "a_c"]  # a wildcard _ would match ab and axb too
    assert topics("a") == ["a_b", "a_c", "ab", "axb"]
    assert topics("%") == []  # a wildcard % would match everything
    assert topics("a%") == []
    assert topics("a!") == []  # the escape character is a character too
    assert topics("") == ["a_b", "a_c", "ab", "axb", "b_a"]
    for name in ("g_1", "gx1", "g1"):
        group_on(store, name, made[0])

    def groups(prefix: str) -> list[str]:
        return [g.name for g in browser.groups_page(prefix).items]

    assert groups("g_") == ["g_1"]
    assert groups("%") == []
    assert groups("g") == ["g1", "g_1", "gx1"]


@pytest.mark.parametrize("count", [20, 23])
def test_topic_pages_cover_every_topic_exactly_once_in_name_order(
    store: Store, browser: Browser, count: int
) -> None:
    names = [f"t{i:02d}" for i in range(count)] + ["other"]
    seed_browse.topics(store, names, partitions=1)
    got = all_pages(lambda after: browser.topics_page("t", after, limit=5))
    assert [t.name for t in got] == sorted(n for n in names if n.startswith("t"))
    everything = all_pages(lambda after: browser.topics_page(after=after, limit=7))
    assert [t.name for t in everything] == sorted(names)


def test_group_pages_cover_every_group_and_topic_exactly_once(
    store: Store, browser: Browser
) -> None:
    topics = seed_browse.topics(store, ["t1", "t2", "t3"], partitions=1)
    expected = []
    for name in ("alpha", "shared", "zulu", "beta", "mid"):
        on = topics if name == "shared" else topics[:1]
        for topic in on:
            group_on(store, name, topic)
            expected.append((name, topic.id))
    expected.sort()
    for limit in (1, 2, 3, 100):
        got = all_pages(functools.partial(browser.groups_page, "", limit=limit))
        by_name = {t.name: t.id for t in topics}
        assert [(g.name, by_name[g.topic]) for g in got] == expected, limit
    # A page boundary inside a name's topics carries on with the next topic.
    first = browser.groups_page(after="beta", limit=2)
    assert [(g.name, g.topic) for g in first.items] == [("mid", "t1"), ("shared", "t1")]
    assert first.next_after == f"shared/{topics[0].id}"
    rest = browser.groups_page(after=first.next_after, limit=100)
    assert [(g.name, g.topic) for g in rest.items] == [
        ("shared", "t2"),
        ("shared", "t3"),
        ("zulu", "t1"),
    ]
    assert rest.next_after is None
    # A name alone as the cursor skips every topic of that name.
    assert [g.name for g in browser.groups_page(after="shared").items] == ["zulu"]


T1 = dt.datetime(2026, 11, 20, 12, 0)
T0 = T1 - dt.timedelta(microseconds=1)
BAD_INPUT: list[tuple[str, Callable[[Browser], Any], type[InvalidInput]]] = [
    ("limit 0", lambda b: b.topics_page(limit=0), InvalidSetting),
    ("limit 101", lambda b: b.topics_page(limit=101), InvalidSetting),
    ("limit True", lambda b: b.topics_page(limit=True), InvalidSetting),
    ("limit text", lambda b: b.groups_page(limit="5"), InvalidSetting),  # type: ignore[arg-type]
    ("limit None", lambda b: b.groups_page(limit=None), InvalidSetting),  # type: ignore[arg-type]
    ("group limit 0", lambda b: b.groups_page(limit=0), InvalidSetting),
    ("topic cursor not a name", lambda b: b.topics_page(after="no/such"), InvalidCursor),
    ("topic cursor empty", lambda b: b.topics_page(after=""), InvalidCursor),
    ("topic cursor int", lambda b: b.topics_page(after=5), InvalidCursor),  # type: ignore[arg-type]
    ("topic cursor too long", lambda b: b.topics_page(after="x" * 129), InvalidCursor),
    ("group cursor no id", lambda b: b.groups_page(after="g/"), InvalidCursor),
    ("group cursor text id", lambda b: b.groups_page(after="g/x"), InvalidCursor),
    ("group cursor no name", lambda b: b.groups_page(after="/3"), InvalidCursor),
    ("group cursor negative", lambda b: b.groups_page(after="g/-1"), InvalidCursor),
    ("group cursor two ids", lambda b: b.groups_page(after="g/1/2"), InvalidCursor),
    ("group cursor wide digit", lambda b: b.groups_page(after="g/\uff11"), InvalidCursor),
    ("group cursor huge", lambda b: b.groups_page(after="g/" + "9" * 30), InvalidCursor),
    ("prefix too long", lambda b: b.topics_page("x" * 129), InvalidName),
    ("prefix None", lambda b: b.groups_page(None), InvalidName),  # type: ignore[arg-type]
    ("prefix not text", lambda b: b.topics_page(b"t"), InvalidName),  # type: ignore[arg-type]
    ("prefix surrogate", lambda b: b.topics_page("\udcff"), InvalidName),
    ("topic name", lambda b: b.topic_detail("no such"), InvalidName),
    ("group name", lambda b: b.group_detail("no such"), InvalidName),
    ("group's topic name", lambda b: b.group_detail("g", topic="a/b"), InvalidName),
    ("series group name", lambda b: b.lag_series("a b", T0, T1), InvalidName),
    ("series topic name", lambda b: b.topic_volume_series("", T0, T1), InvalidName),
    ("empty window", lambda b: b.lag_series("g", T1, T1), InvalidWindow),
    ("reversed window", lambda b: b.topic_volume_series("t", T1, T0), InvalidWindow),
    ("32 days", lambda b: b.lag_series("g", T1 - dt.timedelta(days=32), T1), InvalidWindow),
    (
        "31 days and 1 us",
        lambda b: b.lag_series("g", T0 - dt.timedelta(days=31), T1),
        InvalidWindow,
    ),
    ("no since", lambda b: b.lag_series("g", None, T1), InvalidWindow),
    ("since a number", lambda b: b.topic_volume_series("t", 5, T1), InvalidWindow),  # type: ignore[arg-type]
    ("0 points", lambda b: b.lag_series("g", T0, T1, 0), InvalidSetting),
    ("1001 points", lambda b: b.topic_volume_series("t", T0, T1, 1001), InvalidSetting),
    ("points True", lambda b: b.lag_series("g", T0, T1, True), InvalidSetting),
]


@pytest.mark.parametrize(("what", "call", "error"), BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_its_typed_error_before_any_statement(
    store: Store,
    browser: Browser,
    what: str,
    call: Callable[[Browser], Any],
    error: type[InvalidInput],
) -> None:
    topic = TopicAdmin(store=store).create("t", 2)
    seed.messages(store, topic, 0, range(3), age_hours=0.1)
    group_on(store, "g", topic)
    before = seeding.snapshot(store.settings)
    with counting() as sent, pytest.raises(error):
        call(browser)
    assert len(sent) == 0, sent.sent
    assert seeding.snapshot(store.settings) == before


def test_a_bad_datetime_text_is_refused(store: Store, browser: Browser) -> None:
    TopicAdmin(store=store).create("t", 1)
    with pytest.raises(InvalidDatetime):
        browser.topic_volume_series("t", "yesterday-ish", "1h")
    assert browser.topic_volume_series("t", "2h", "1h") == []


def test_unknown_topics_and_groups_raise_not_found(store: Store, browser: Browser) -> None:
    seed_all(store)
    calls: list[tuple[Callable[[], Any], type[NotFound]]] = [
        (lambda: browser.topic_detail("nope"), UnknownTopic),
        (lambda: browser.group_detail("nope"), UnknownGroup),
        (lambda: browser.group_detail("billing", topic="nope"), UnknownTopic),
        # payments exists, but billing does not consume it
        (lambda: browser.group_detail("billing", topic="payments"), UnknownGroup),
        (lambda: browser.lag_series("nope", T1 - HOUR, T1), UnknownGroup),
        (lambda: browser.topic_volume_series("nope", T1 - HOUR, T1), UnknownTopic),
    ]
    for call, error in calls:
        with pytest.raises(error):
            call()


# -- costs -------------------------------------------------------------------------------


def test_a_topics_page_runs_the_same_statements_for_5_and_50_topics(
    store: Store, browser: Browser
) -> None:
    seed_browse.topics(store, [f"t{i:02d}" for i in range(5)], partitions=3)
    with counting() as sent:
        assert len(browser.topics_page(limit=100).items) == 5
    five = len(sent)
    seed_browse.topics(store, [f"t{i:02d}" for i in range(5, 50)], partitions=3)
    seed.sql(
        store,
        "INSERT INTO partition_low (topic_id, partition_no, low_offset) SELECT id, 1, 7 FROM topic",
    )
    with counting() as sent:
        page = browser.topics_page(limit=100)
    assert len(page.items) == 50
    assert {(t.low_watermark_total, t.high_watermark_total) for t in page.items} == {(7, 10)}
    assert len(sent) == five == 2  # the page, then the watermarks of its topics


def test_a_groups_page_runs_the_same_statements_for_5_and_50_groups(
    store: Store, browser: Browser
) -> None:
    topics = seed_browse.topics(store, ["t1", "t2"], partitions=3)

    def groups(names: range) -> None:
        for i in names:
            group = group_on(store, f"g{i:02d}", topics[i % 2])
            store.leases.register(group.id, f"c{i}", "host", i, 30)
            seed_browse.snapshots(store, group, [(60, {0: (5, 9)}), (30, {0: (2, 9)})])
            seed_browse.report(store, group, {0: "OK", 1: "WARN", 2: "OK"}, "WARN")

    groups(range(5))
    with counting() as sent:
        assert len(browser.groups_page(limit=100).items) == 5
    five = len(sent)
    groups(range(5, 50))
    with counting() as sent:
        page = browser.groups_page(limit=100)
    assert len(page.items) == 50
    assert {(g.members, g.live_members, g.total_lag, g.status) for g in page.items} == {
        (1, 1, 3, "REWIND")
    }
    # the page, then its members, lags and rewinds, and newest reports
    assert len(sent) == five == 5  # groups, members, lags, retries and dead letters, reports


def test_pages_read_the_index_entries_of_their_rows_not_the_table(
    store: Store, browser: Browser, conn: pymysql.Connection
) -> None:
    topics = [(f"t{i:04d}", 2) for i in range(1500)]
    db.run_many(store, "INSERT INTO topic (name, partitions) VALUES (%s, %s)", topics)
    db.run(
        store,
        "INSERT INTO partition_head (topic_id, partition_no) "
        "SELECT id, 0 FROM topic UNION ALL SELECT id, 1 FROM topic",
    )
    db.run(
        store,
        "INSERT INTO consumer_group (name, topic_id, mode) "
        "SELECT CONCAT('g', SUBSTRING(name, 2)), id, 'cluster' FROM topic",
    )
    db.run(
        store,
        "INSERT INTO group_offset (group_id, partition_no, committed_offset, generation) "
        "SELECT id, 0, 0, 0 FROM consumer_group UNION ALL "
        "SELECT id, 1, 0, 0 FROM consumer_group",
    )
    db.rows(store, "ANALYZE TABLE topic, consumer_group, group_offset, partition_head")
    for fetch in (
        lambda: browser.topics_page(after="t0700", limit=10),
        lambda: browser.topics_page("t07", limit=10),
        lambda: browser.groups_page(after="g0700/1", limit=10),
        lambda: browser.groups_page("g07", limit=10),
    ):
        with counting() as sent:
            page = fetch()
        assert len(page.items) == 10
        for statement, parameters in sent.sent:
            reads = handler_reads(conn, statement, parameters)
            # A scan would read 1,500 rows or more; a page of 10 topics or groups (20
            # partitions) costs at most 20 index reads per partition: the cursor, the first
            # and last stored offsets, the low watermark of an emptied partition, and the
            # two newest snapshots are each a dive.
            assert reads < 400, (reads, statement)


# -- topics --------------------------------------------------------------------------------


def test_topic_detail_lists_watermarks_settings_and_the_groups_consuming_it(
    store: Store, browser: Browser
) -> None:
    seeded = seed_all(store)
    seed.sql(store, "UPDATE topic SET delete_consumed = 1 WHERE name = 'orders'")
    detail = browser.topic_detail("orders")
    stats = TopicAdmin(store=store).describe("orders")
    assert [
        (p.partition, p.low_watermark, p.high_watermark, p.stored_offsets)
        for p in detail.partitions
    ] == [(s.partition, s.low_watermark, s.high_watermark, s.messages) for s in stats]
    # p0 0-9, p1 0-7, p2 2-5 (purged below 2), p3 emptied at 4
    assert [(p.low_watermark, p.high_watermark, p.stored_offsets) for p in detail.partitions] == [
        (0, 10, 10),
        (0, 8, 8),
        (2, 6, 4),
        (4, 4, 0),
    ]
    s = detail.summary
    assert (s.name, s.partitions, s.retention_hours, s.delete_consumed) == ("orders", 4, 168, True)
    assert (s.low_watermark_total, s.high_watermark_total, s.stored_offsets) == (6, 28, 22)
    assert s.created_at.tzinfo == dt.UTC
    assert [(g.name, g.mode, g.total_lag) for g in detail.groups] == [
        ("audit", "broadcast", None),
        ("billing", "cluster", 8),
    ]
    assert not detail.more_groups
    # The page reads the same totals in SQL.
    (listed,) = browser.topics_page("orders").items
    assert listed == s
    payments = browser.topic_detail("payments")
    assert payments.groups == ()
    assert [(p.low_watermark, p.high_watermark) for p in payments.partitions] == [(None, 0)] * 2
    assert seeded.payments.name == payments.summary.name


# -- groups --------------------------------------------------------------------------------


def test_group_detail_builds_on_describe_with_members_load_leader_and_lag_ages(
    store: Store, browser: Browser
) -> None:
    seed_all(store)
    assert store.leases.renew("c-live", 30, cpu_percent=150.0, load_rate=12.5)
    d = browser.group_detail("billing")
    (described,) = GroupAdmin(store=store).describe("billing")
    assert (d.name, d.topic, d.mode) == ("billing", "orders", "cluster")
    assert (d.generation, d.start_position, d.ordered) == (
        described.generation,
        described.start_position,
        described.ordered,
    )
    assert d.leader is not None
    assert (d.leader.client_id, d.leader.epoch, d.leader.live) == ("c-live", LEADER_EPOCH, True)
    members = {m.client_id: m for m in d.members}
    live, dead = members["c-live"], members["c-dead"]
    assert (live.live, live.leader, live.partitions, live.host) == (True, True, (1, 2, 3), "host-a")
    assert (live.cpu_percent, live.load_rate) == (150.0, 12.5)
    assert live.reported_at is not None and live.joined_at is not None
    assert (dead.live, dead.leader, dead.partitions, dead.cpu_percent) == (False, False, (0,), None)
    assert [
        (p.partition, p.owner, p.owner_live, p.state, p.committed_offset, p.high_watermark, p.lag)
        for p in d.partitions
    ] == [
        (p.partition, p.owner, p.owner_live, p.state, p.committed_offset, p.high_watermark, p.lag)
        for p in described.partitions
    ]
    assert [p.lag for p in d.partitions] == [3, 5, 0, 0]
    assert {p.lag_from for p in d.partitions} == {"committed"}
    assert d.total_lag == described.total_lag == 8
    ages = [p.lag_age_seconds for p in d.partitions]
    # The oldest unconsumed message of p0 is offset 7, written 93 s ago; of p1 offset 3.
    assert ages[0] is not None and 90 < ages[0] < 150
    assert ages[1] is not None and 94 < ages[1] < 150
    assert ages[2:] == [None, None]  # no lag, no age
    # No report, no snapshot: unknown, never OK.
    assert (d.status, d.report_status, d.rewound) == ("unknown", None, False)
    assert {p.status for p in d.partitions} == {"unknown"}
    (summary,) = [g for g in browser.groups_page("billing").items]
    assert (summary.total_lag, summary.members, summary.live_members) == (8, 2, 1)
    assert summary.status == "unknown"


def test_a_partition_without_a_cursor_counts_everything_stored_as_lag(
    store: Store, browser: Browser
) -> None:
    topic = TopicAdmin(store=store).create("t", 3)
    seed.messages(store, topic, 0, range(3, 10), age_hours=1)  # purged below 3
    seed.messages(store, topic, 1, range(4), age_hours=1)
    group = group_on(store, "g", topic)
    seed.commit(store, group, 1, 4)
    seed.sql(
        store,
        "DELETE FROM group_offset WHERE group_id = %s AND partition_no IN (0, 2)",
        (group.id,),
    )
    d = browser.group_detail("g")
    p0, p1, p2 = d.partitions
    assert (p0.committed_offset, p0.lag, p0.lag_from) == (None, 7, "low_watermark")
    assert p0.lag_age_seconds is not None and 3500 < p0.lag_age_seconds < 3700
    assert (p1.committed_offset, p1.lag, p1.lag_from) == (4, 0, "committed")
    # Nothing stored, nothing to consume.
    assert (p2.committed_offset, p2.lag, p2.lag_from) == (None, 0, "low_watermark")
    assert d.total_lag == 7
    (summary,) = browser.groups_page().items
    assert (summary.total_lag, summary.partitions_without_cursor) == (7, 2)
    (listed,) = browser.topic_detail("t").groups
    # Read a moment apart: the same but for the age, which grows meanwhile.
    for age in (summary.lag_age_seconds, listed.lag_age_seconds):
        assert age is not None and 3500 < age < 3700
    assert replace(listed, lag_age_seconds=summary.lag_age_seconds) == summary


def test_status_comes_from_the_newest_finished_report_and_is_unknown_without_one(
    store: Store, browser: Browser
) -> None:
    topic = TopicAdmin(store=store).create("t", 2)
    group = group_on(store, "g", topic)
    other = group_on(store, "other", topic)

    def summary() -> Any:
        return next(g for g in browser.groups_page().items if g.name == "g")

    assert (summary().status, summary().report_status, summary().total_lag) == ("unknown", None, 0)
    seed_browse.report(store, group, {0: "OK", 1: "OK"}, "OK", age_seconds=120)
    assert (summary().status, summary().report_status) == ("OK", "OK")
    seed_browse.report(store, group, {0: "STOP", 1: "OK"}, "ERR", age_seconds=60)
    # Newer, but still being written: not read.
    seed_browse.report(store, group, {0: "OK", 1: "OK"}, "OK", run_status="running", age_seconds=0)
    # Newer and done, but of another group.
    seed_browse.report(store, other, {0: "OK", 1: "OK"}, "OK", age_seconds=0)
    got = summary()
    assert (got.status, got.report_status) == ("ERR", "ERR")
    now = store.messages.now().replace(tzinfo=dt.UTC)
    assert got.report_as_of is not None
    assert dt.timedelta(seconds=55) < now - got.report_as_of < dt.timedelta(seconds=90)
    d = browser.group_detail("g")
    assert (d.status, d.report_status, d.report_as_of) == ("ERR", "ERR", got.report_as_of)
    assert [(p.report_status, p.status) for p in d.partitions] == [("STOP", "STOP"), ("OK", "OK")]


def test_a_cursor_that_went_back_between_the_two_newest_snapshots_is_a_rewind(
    store: Store, browser: Browser
) -> None:
    topic = TopicAdmin(store=store).create("t", 2)
    group = group_on(store, "g", topic)

    def state() -> tuple[str, bool, list[tuple[bool, str]]]:
        d = browser.group_detail("g")
        (s,) = browser.groups_page().items
        assert (s.status, s.rewound) == (d.status, d.rewound)
        return d.status, d.rewound, [(p.rewound, p.status) for p in d.partitions]

    seed_browse.snapshots(store, group, [(90, {0: (10, 20), 1: (5, 5)})])
    assert state() == ("unknown", False, [(False, "unknown"), (False, "unknown")])
    seed_browse.snapshots(store, group, [(60, {0: (4, 20), 1: (5, 5)})])
    assert state() == ("REWIND", True, [(True, "REWIND"), (False, "unknown")])
    seed_browse.report(store, group, {0: "OK", 1: "OK"}, "OK")
    assert state() == ("REWIND", True, [(True, "REWIND"), (False, "OK")])
    seed_browse.report(store, group, {0: "STALL", 1: "OK"}, "ERR")
    assert state() == ("ERR", True, [(True, "STALL"), (False, "OK")])
    # The next snapshot moves forward again: the rewind is behind the two newest.
    seed_browse.snapshots(store, group, [(30, {0: (6, 20), 1: (5, 5)})])
    assert state() == ("ERR", False, [(False, "STALL"), (False, "OK")])


def test_a_broadcast_group_has_no_lag_and_an_unknown_status(store: Store, browser: Browser) -> None:
    seed_all(store)
    d = browser.group_detail("audit")
    assert (d.mode, d.total_lag, d.status, d.leader) == ("broadcast", None, "unknown", None)
    assert {(p.lag, p.lag_from, p.committed_offset, p.lag_age_seconds) for p in d.partitions} == {
        (None, None, None, None)
    }
    assert [m.client_id for m in d.members] == ["c-audit"]
    (s,) = browser.groups_page("audit").items
    assert (s.total_lag, s.status, s.members) == (None, "unknown", 1)
    assert browser.lag_series("audit", T1 - HOUR, T1) == []


# -- series --------------------------------------------------------------------------------


def test_a_lag_series_keeps_at_most_max_points_each_the_last_snapshot_of_its_bucket(
    store: Store, browser: Browser, conn: pymysql.Connection
) -> None:
    topic = TopicAdmin(store=store).create("t", 3)
    group = group_on(store, "g", topic)
    now = store.messages.now()
    # 600 snapshots a minute apart; at snapshot i each partition lags i.
    seed_browse.series_snapshots(store, group, 3, 600, 60.0, now)
    captured = [now - dt.timedelta(minutes=599 - i) for i in range(600)]
    since, until = now - 10 * HOUR, now
    points = browser.lag_series("g", since, until, max_points=50)
    assert len(points) == 50
    expected = []
    for low, high in buckets(since, until, 50):
        assert low is not None
        inside = [i for i, at in enumerate(captured) if low < at <= high]
        if inside:
            expected.append((captured[inside[-1]].replace(tzinfo=dt.UTC), 3 * inside[-1], 3))
    assert [(p.at, p.lag, p.partitions) for p in points] == expected
    # Sampled, not scanned: a few reads per point and partition, not the 1,800 rows.
    with counting() as sent:
        assert len(browser.lag_series("g", since, until, max_points=10)) == 10
    (statement, parameters) = sent.sent[-1]
    assert handler_reads(conn, statement, parameters) < 10 * 3 * 6
    # Narrower buckets than the captures: every capture, once.
    every = browser.lag_series("g", since, until, max_points=1000)
    assert [p.at for p in every] == [at.replace(tzinfo=dt.UTC) for at in captured]
    assert [p.lag for p in every] == [3 * i for i in range(600)]
    # Text works as well as datetimes, and a window with no snapshot is empty.
    assert len(browser.lag_series("g", "2h", "1h", max_points=10)) == 10
    assert browser.lag_series("g", since - 5 * HOUR, since - HOUR) == []


def test_a_volume_series_counts_the_messages_between_its_points(
    store: Store, browser: Browser
) -> None:
    topic = TopicAdmin(store=store).create("t", 4)
    TopicAdmin(store=store).create("other", 1)
    now = store.messages.now()
    # 600 captures a minute apart; at capture i each partition's high watermark is 10 i.
    seed_browse.series_watermarks(store, topic, 4, 600, 60.0, now)
    since = now - 5 * HOUR
    points = browser.topic_volume_series("t", since, now, max_points=30)
    assert len(points) == 30
    assert all(since < p.at.replace(tzinfo=None) <= now for p in points)
    assert points[-1].high_watermark_total == 40 * 599
    # The first point counts from the last capture before the window.
    before = 599 - 300  # the capture exactly at `since` is not in the window
    assert points[0].messages == points[0].high_watermark_total - 40 * before
    for a, b in itertools.pairwise(points):
        assert b.messages == b.high_watermark_total - a.high_watermark_total
        assert b.span_seconds == (b.at - a.at).total_seconds()
    assert sum(p.messages or 0 for p in points) == 40 * 599 - 40 * before
    # Without a capture before the window, the first point has nothing to count from.
    first = browser.topic_volume_series("t", now - 12 * HOUR, now, max_points=5)
    assert first[0].messages is None and first[0].span_seconds is None
    assert all(p.messages is not None for p in first[1:])
    assert browser.topic_volume_series("other", since, now) == []
