"""`ems group list` and the lag that tells the truth, through click's CliRunner against
the real database: a group with retries waiting and one with dead letters no longer show
"lag 0" alone; describe says what waits beside the stream and how old the oldest
unconsumed message is."""

from __future__ import annotations

import json

from click.testing import CliRunner, Result

from ems.cli import cli
from ems.config import Settings
from ems.store import Store
from ems.types import GroupInfo, TopicInfo
from tests.integration import seed


def run(settings: Settings, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), obj=settings)


def dead_letter(store: Store, group: GroupInfo, offset: int, *, resent: bool = False) -> None:
    seed.sql(
        store,
        "INSERT INTO dead_message (group_id, topic_id, partition_no, offset_no, message_id, "
        "body, attempts, last_error, resent_at) VALUES (%s, %s, 0, %s, %s, 'x', 3, 'boom', "
        + ("NOW(6))" if resent else "NULL)"),
        (group.id, group.topic_id, offset, seed.message_id(store, _topic(store), 0, offset)),
    )


def _topic(store: Store) -> TopicInfo:
    return store.topics.get("orders")


def caught_up(store: Store) -> tuple[TopicInfo, GroupInfo, GroupInfo]:
    """Topic "orders" (one partition, offsets 0-9, an hour old) and two groups whose
    cursors are at the end: "billing" with 2 retries waiting, "audit" with 6 dead
    letters (and one more, resent)."""
    topic = store.topics.create("orders", 1, 24, 1024)
    seed.messages(store, topic, 0, range(10), age_hours=1)
    billing = seed.group(store, "billing", topic)
    audit = seed.group(store, "audit", topic)
    for g in (billing, audit):
        seed.commit(store, g, 0, 10)
    for offset in (3, 4):
        seed.retry(store, billing, 0, offset, msg_id=seed.message_id(store, topic, 0, offset))
    for offset in range(7):
        dead_letter(store, audit, offset, resent=offset == 6)
    return topic, billing, audit


def test_group_list_counts_retries_and_dead_letters_beside_the_lag(
    settings: Settings, store: Store
) -> None:
    caught_up(store)
    listed = run(settings, "group", "list", "--json")
    assert listed.exit_code == 0, listed.output
    rows = {g["name"]: g for g in json.loads(listed.stdout)}
    assert {
        n: (g["total_lag"], g["retries_waiting"], g["dead_letters"]) for n, g in rows.items()
    } == {
        "audit": (0, 0, 6),
        "billing": (0, 2, 0),
    }
    text = run(settings, "group", "list")
    assert text.exit_code == 0
    lines = [line.split() for line in text.stdout.splitlines()]
    assert lines[0][:5] == ["group", "topic", "mode", "members", "lag"]
    assert lines[1][:7] == ["audit", "orders", "cluster", "0/0", "0", "0", "6"]
    assert lines[2][:7] == ["billing", "orders", "cluster", "0/0", "0", "2", "0"]
    assert run(settings, "group", "list", "--prefix", "bi", "--json").stdout.count('"name"') == 1
    nothing = run(settings, "group", "list", "--prefix", "zz")
    assert nothing.stdout.strip() == "no consumer groups whose name starts with 'zz'"


def test_group_describe_tells_what_waits_and_how_old_the_backlog_is(
    settings: Settings, store: Store
) -> None:
    _, billing, _ = caught_up(store)
    described = json.loads(run(settings, "group", "describe", "billing", "--json").stdout)
    (d,) = described
    assert (d["total_lag"], d["retries_waiting"], d["dead_letters"]) == (0, 2, 0)
    assert d["lag_age_seconds"] is None  # the stream is consumed
    seed.commit(store, billing, 0, 6)  # four messages of an hour ago wait now
    (d,) = json.loads(run(settings, "group", "describe", "billing", "--json").stdout)
    assert d["total_lag"] == 4
    assert 3500 < d["lag_age_seconds"] < 3700
    text = run(settings, "group", "describe", "billing").stdout
    assert "beside the lag: 2 waiting in the retry table, 0 dead letters not resent" in text
    assert "oldest unconsumed message: 36" in text
