"""The alarm scan against the real server: each condition opens one alarm, repeated scans
keep exactly one open per condition, an alarm clears when its condition goes away and a
new row opens when it fires again."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ems import TopicAdmin
from ems.alarms.scan import acknowledge, list_alarms, scan_alarms, set_thresholds
from ems.config import Settings
from ems.consumer.groups import ensure_group
from ems.exceptions import InvalidInput, InvalidPolicy, UnknownAlarm, UnknownGroup
from ems.store import Store
from ems.types import GroupInfo, NewMessage, TopicInfo, placed_of
from tests import sql as db
from tests.integration import seed

OPTIONS = seed.options(60)


@pytest.fixture
def topic(settings: Settings, store: Store) -> TopicInfo:
    return TopicAdmin(settings, store=store).create("t", 2)


@pytest.fixture
def group(store: Store, topic: TopicInfo) -> GroupInfo:
    return ensure_group(store, "g", topic, OPTIONS)


def sql(store: Store, statement: str, **params: Any) -> list[Any]:
    return db.rows(store, statement, params or None)


def publish(store: Store, topic: TopicInfo, partition: int, count: int, age: int = 0) -> None:
    """count messages after the partition's last, written `age` seconds ago."""
    first = store.messages.next_offsets(topic.id).get(partition, 0)
    rows = [NewMessage(topic.id, partition, first + i, None, None, b"x") for i in range(count)]
    store.messages.insert(placed_of(rows))
    if age:
        sql(
            store,
            "UPDATE message SET created_at = NOW(6) - INTERVAL :age SECOND "
            "WHERE topic_id = :t AND partition_no = :p AND offset_no >= :first",
            age=age,
            t=topic.id,
            p=partition,
            first=first,
        )


def commit(store: Store, group: GroupInfo, partition: int, offset: int, age: int = 0) -> None:
    """Move the cursor as a commit would, `age` seconds ago."""
    sql(
        store,
        "UPDATE group_offset SET committed_offset = :o, "
        "updated_at = NOW(6) - INTERVAL :age SECOND WHERE group_id = :g AND partition_no = :p",
        o=offset,
        age=age,
        g=group.id,
        p=partition,
    )


def alarm_rows(store: Store, key: str) -> list[Any]:
    return sql(
        store,
        "SELECT id, status, open_key, value, threshold FROM alarm "
        "WHERE condition_key = :k ORDER BY id",
        k=key,
    )


def scan(store: Store, settings: Settings) -> dict[str, int]:
    return scan_alarms(store, settings)


def test_nothing_fires_on_a_quiet_group(store: Store, settings: Settings, group: GroupInfo) -> None:
    assert scan(store, settings) == {
        "opened": 0,
        "still_open": 0,
        "cleared": 0,
        "notified": 0,
        "failed": 0,
    }
    assert sql(store, "SELECT COUNT(*) FROM alarm")[0][0] == 0


def test_lag_opens_once_clears_and_reopens_as_a_new_row(
    store: Store, settings: Settings, topic: TopicInfo, group: GroupInfo
) -> None:
    set_thresholds(store, "g", lag_messages=5)
    publish(store, topic, 0, 10)
    key = f"lag:{group.id}:0"
    assert scan(store, settings)["opened"] == 1
    for _ in range(3):
        counts = scan(store, settings)
        assert (counts["opened"], counts["still_open"]) == (0, 1)
    ((first, status, open_key, value, threshold),) = alarm_rows(store, key)
    assert (status, open_key, value, threshold) == ("open", key, 10.0, 5.0)

    commit(store, group, 0, 8)  # lag 2: below the threshold
    assert scan(store, settings)["cleared"] == 1
    assert alarm_rows(store, key) == [(first, "cleared", None, 10.0, 5.0)]

    publish(store, topic, 0, 10)  # lag 12
    assert scan(store, settings)["opened"] == 1
    rows = alarm_rows(store, key)
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (first, "cleared", None, 10.0),
        (rows[1][0], "open", key, 12.0),
    ]
    assert rows[1][0] > first


def test_lag_is_off_without_a_threshold(
    store: Store, settings: Settings, topic: TopicInfo, group: GroupInfo
) -> None:
    publish(store, topic, 0, 1000)
    assert scan(store, settings)["opened"] == 0


def test_lag_age_fires_on_an_old_unconsumed_message(
    store: Store, settings: Settings, topic: TopicInfo, group: GroupInfo
) -> None:
    set_thresholds(store, "g", lag_seconds=60)
    publish(store, topic, 1, 3, age=120)
    assert scan(store, settings)["opened"] == 1
    ((_, status, _, value, threshold),) = alarm_rows(store, f"lag_age:{group.id}:1")
    assert status == "open" and 119 < value < 130 and threshold == 60
    commit(store, group, 1, 3)
    assert scan(store, settings)["cleared"] == 1


def test_stall_needs_an_old_commit_and_an_old_backlog(
    store: Store, settings: Settings, topic: TopicInfo, group: GroupInfo
) -> None:
    set_thresholds(store, "g", stall_seconds=60)
    key = f"stall:{group.id}:0"
    publish(store, topic, 0, 5)  # fresh messages on a partition idle for long: no stall
    commit(store, group, 0, 0, age=600)
    assert scan(store, settings)["opened"] == 0
    sql(store, "UPDATE message SET created_at = NOW(6) - INTERVAL 300 SECOND")
    assert scan(store, settings)["opened"] == 1
    assert alarm_rows(store, key)[0][1] == "open"
    commit(store, group, 0, 2)  # the cursor moved
    assert scan(store, settings)["cleared"] == 1
    assert alarm_rows(store, key)[0][1] == "cleared"


def test_stall_of_a_cursor_below_purged_messages_goes_by_the_next_stored_one(
    store: Store, settings: Settings, topic: TopicInfo, group: GroupInfo
) -> None:
    set_thresholds(store, "g", stall_seconds=60)
    publish(store, topic, 0, 5, age=300)
    sql(store, "DELETE FROM message WHERE offset_no < 2")  # retention purged 0 and 1
    commit(store, group, 0, 0, age=600)
    assert scan(store, settings)["opened"] == 1
    sql(store, "UPDATE message SET created_at = NOW(6)")
    sql(store, "UPDATE alarm SET status = 'cleared', open_key = NULL")
    assert scan(store, settings)["opened"] == 0


def test_consumption_timeout_per_partition(
    store: Store, settings: Settings, topic: TopicInfo, group: GroupInfo
) -> None:
    publish(store, topic, 0, 4)
    for offset, age in ((0, 600), (1, 400), (2, 5)):
        sql(
            store,
            "INSERT INTO topic_group_log (group_id, topic_id, partition_no, offset_no, "
            "client_id, state, started_at, updated_at) VALUES (:g, :t, 0, :o, 'c', 'start', "
            "NOW(6) - INTERVAL :age SECOND, NOW(6) - INTERVAL :age SECOND)",
            g=group.id,
            t=topic.id,
            o=offset,
            age=age,
        )
    key = f"consumption_timeout:{group.id}:0"
    assert scan(store, settings)["opened"] == 1
    assert scan(store, settings)["still_open"] == 1
    ((_, status, _, value, threshold),) = alarm_rows(store, key)
    assert status == "open" and 599 < value < 610 and threshold == 60
    (message,) = sql(store, "SELECT message FROM alarm")[0]
    assert "2 messages in flight longer than 60s" in message
    sql(store, "UPDATE topic_group_log SET state = 'done' WHERE offset_no < 2")
    assert scan(store, settings)["cleared"] == 1


def dead_letter(store: Store, group: GroupInfo, topic: TopicInfo, offset: int) -> None:
    sql(
        store,
        "INSERT INTO dead_message (group_id, topic_id, partition_no, offset_no, message_id, "
        "body, attempts) VALUES (:g, :t, 0, :o, 1, 'x', 16)",
        g=group.id,
        t=topic.id,
        o=offset,
    )


def test_dead_letters_open_and_clear_when_resent_or_purged(
    store: Store, settings: Settings, topic: TopicInfo, group: GroupInfo
) -> None:
    key = f"dead_letter:{group.id}"
    dead_letter(store, group, topic, 0)
    dead_letter(store, group, topic, 1)
    assert scan(store, settings)["opened"] == 1
    assert alarm_rows(store, key)[0][3] == 2.0
    sql(store, "UPDATE dead_message SET resent_at = NOW(6) WHERE offset_no = 0")
    assert scan(store, settings)["still_open"] == 1
    sql(store, "DELETE FROM dead_message WHERE offset_no = 1")  # purged
    assert scan(store, settings)["cleared"] == 1
    assert scan(store, settings)["opened"] == 0
    dead_letter(store, group, topic, 2)  # a new arrival
    assert scan(store, settings)["opened"] == 1
    assert [r[1] for r in alarm_rows(store, key)] == ["cleared", "open"]


def test_an_acknowledged_dead_letter_alarm_stays_clear_until_new_ones_arrive(
    store: Store, settings: Settings, topic: TopicInfo, group: GroupInfo
) -> None:
    key = f"dead_letter:{group.id}"
    dead_letter(store, group, topic, 0)
    scan(store, settings)
    ((alarm_id, *_),) = alarm_rows(store, key)
    acked = acknowledge(store, alarm_id)
    assert acked.status == "cleared" and acked.message.endswith("[acknowledged]")
    assert scan(store, settings)["opened"] == 0  # the dead letter still waits, acknowledged
    dead_letter(store, group, topic, 1)
    assert scan(store, settings)["opened"] == 1
    assert alarm_rows(store, key)[-1][3] == 1.0  # counts only the new one


def test_concurrent_scans_keep_one_open_alarm_per_condition(
    store: Store, settings: Settings, topic: TopicInfo, group: GroupInfo
) -> None:
    import threading

    set_thresholds(store, "g", lag_messages=1)
    publish(store, topic, 0, 5)
    publish(store, topic, 1, 5)
    errors: list[BaseException] = []

    def run() -> None:
        own = Store(settings)
        try:
            for _ in range(5):
                scan_alarms(own, settings)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    assert sql(store, "SELECT condition_key, COUNT(*) FROM alarm GROUP BY condition_key") == [
        (f"lag:{group.id}:0", 1),
        (f"lag:{group.id}:1", 1),
    ]


def test_listing_filters_and_bad_input(
    store: Store, settings: Settings, topic: TopicInfo, group: GroupInfo
) -> None:
    set_thresholds(store, "g", lag_messages=1)
    publish(store, topic, 0, 5)
    dead_letter(store, group, topic, 0)
    scan(store, settings)
    assert {a.kind for a in list_alarms(store)} == {"lag", "dead_letter"}
    (lag,) = list_alarms(store, kind="lag", group="g")
    assert (lag.group, lag.topic, lag.partition) == ("g", "t", 0)
    before = sql(store, "SELECT * FROM alarm ORDER BY id")
    with pytest.raises(UnknownGroup):
        list_alarms(store, group="nope")
    with pytest.raises(InvalidInput):
        list_alarms(store, kind="nope")
    with pytest.raises(UnknownAlarm):
        acknowledge(store, 999_999)
    assert sql(store, "SELECT * FROM alarm ORDER BY id") == before


def test_thresholds_are_checked_before_anything_changes(
    store: Store, topic: TopicInfo, group: GroupInfo
) -> None:
    (t,) = set_thresholds(store, "g", lag_messages=7)
    assert (t.lag_messages, t.lag_seconds, t.stall_seconds) == (7, None, 300)
    with pytest.raises(InvalidPolicy):
        set_thresholds(store, "g", lag_messages=10, stall_seconds=0)
    with pytest.raises(UnknownGroup):
        set_thresholds(store, "nope", lag_messages=10)
    (t,) = set_thresholds(store, "g", lag_seconds=30)
    assert (t.lag_messages, t.lag_seconds, t.stall_seconds) == (7, 30, 300)
    (t,) = set_thresholds(store, "g", lag_messages=None)
    assert t.lag_messages is None


def test_the_scan_reads_watermarks_by_index_dives_not_counts(
    store: Store, settings: Settings, topic: TopicInfo, group: GroupInfo
) -> None:
    from ems.store.watermarks import ALL_HIGH_WATERMARKS

    sql(
        store,
        "INSERT INTO message (topic_id, partition_no, offset_no, body) "
        "SELECT :t, seq % 2, seq DIV 2, 'x' FROM seq_0_to_19999",
        t=topic.id,
    )
    sql(store, "ANALYZE TABLE message")
    extra = " ".join(str(r["Extra"]) for r in db.dicts(store, "EXPLAIN " + ALL_HIGH_WATERMARKS))
    assert "Using index for group-by" in extra
    set_thresholds(store, "g", lag_messages=9_999)
    assert scan(store, settings)["opened"] == 2
    assert {a.value for a in list_alarms(store)} == {10_000.0}


def test_every_open_and_clear_is_logged(
    store: Store,
    settings: Settings,
    topic: TopicInfo,
    group: GroupInfo,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ems.alarms.scan")
    set_thresholds(store, "g", lag_messages=5)
    publish(store, topic, 0, 10)
    scan(store, settings)
    scan(store, settings)
    commit(store, group, 0, 10)
    scan(store, settings)
    lines = [r.getMessage() for r in caplog.records if r.name == "ems.alarms.scan"]
    assert len(lines) == 2
    assert lines[0].endswith("opened: group g on t[0]: lag 10 messages (value 10, threshold 5)")
    assert f"cleared: lag:{group.id}:0 (was: group g on t[0]: lag 10 messages)" in lines[1]


def test_the_scheduler_job_runs_the_scan_and_records_its_counts(
    store: Store, settings: Settings, topic: TopicInfo, group: GroupInfo
) -> None:
    from ems.maintenance.jobs import run_job

    set_thresholds(store, "g", lag_messages=5)
    publish(store, topic, 0, 10)
    result = run_job(store, settings, "alarms", holder="cron")
    assert result.counts["opened"] == 1
    assert len(alarm_rows(store, f"lag:{group.id}:0")) == 1
    ((job, status, counts),) = sql(store, "SELECT job, status, counts FROM job_run")
    assert (job, status) == ("alarms", "done")
    assert '"opened": 1' in counts
