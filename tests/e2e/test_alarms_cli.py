"""`ems alarms` against the real server: list, scan, ack, thresholds, and bad input
that changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ems import TopicAdmin
from ems.cli.app import cli
from ems.config import Settings
from ems.consumer.groups import ensure_group
from ems.store import Store
from ems.types import GroupInfo, NewMessage, placed_of
from tests import sql as db
from tests.integration import seed


def run(settings: Settings, *args: str) -> Result:
    return CliRunner().invoke(cli, ["alarms", *args], obj=settings)


def rows(store: Store, statement: str) -> list[Any]:
    return db.rows(store, statement)


@pytest.fixture
def group(settings: Settings, store: Store) -> GroupInfo:
    topic = TopicAdmin(settings, store=store).create("t", 2)
    options = seed.options(None)
    group = ensure_group(store, "g", topic, options)
    store.messages.insert(
        placed_of([NewMessage(topic.id, 0, i, None, None, b"x") for i in range(10)])
    )
    return group


def test_thresholds_scan_list_and_ack(settings: Settings, store: Store, group: GroupInfo) -> None:
    result = run(settings, "thresholds", "g", "--lag-messages", "5", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [
        {"group": "g", "topic": "t", "lag_messages": 5, "lag_seconds": None, "stall_seconds": 300}
    ]
    assert run(settings).output.strip() == "no open alarms"

    result = run(settings, "scan", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["opened"] == 1
    assert run(settings, "scan").output.strip().startswith("opened=0 still_open=1")

    listed = json.loads(run(settings, "--json").output)
    assert [(a["kind"], a["group"], a["partition"], a["value"]) for a in listed] == [
        ("lag", "g", 0, 10.0)
    ]
    text_out = run(settings, "--kind", "lag", "--group", "g").output
    assert "lag" in text_out and "group g on t[0]: lag 10 messages" in text_out
    assert run(settings, "--kind", "stall").output.strip() == "no open alarms"

    alarm_id = listed[0]["id"]
    result = run(settings, "ack", str(alarm_id))
    assert result.exit_code == 0 and "is cleared" in result.output
    assert run(settings).output.strip() == "no open alarms"
    acknowledged = json.loads(run(settings, "--all", "--json").output)[0]
    assert acknowledged["status"] == "cleared"
    assert acknowledged["acknowledged_by"].startswith("cli:")
    assert acknowledged["acknowledged_at"] is not None
    # The lag still holds: the next scan opens a new alarm.
    assert json.loads(run(settings, "scan", "--json").output)["opened"] == 1
    assert rows(store, "SELECT status FROM alarm ORDER BY id") == [("cleared",), ("open",)]


def test_thresholds_off_and_keep(settings: Settings, group: GroupInfo) -> None:
    run(settings, "thresholds", "g", "--lag-messages", "5", "--lag-seconds", "60")
    result = run(settings, "thresholds", "g", "--lag-messages", "off", "--stall-seconds", "90")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].split() == ["g", "t", "-", "60", "90"]


@pytest.mark.parametrize(
    "args",
    [
        ("--group", "nope"),
        ("ack", "12345"),
        ("thresholds", "nope", "--lag-messages", "5"),
        ("thresholds", "g", "--topic", "nope", "--lag-messages", "5"),
        ("thresholds", "g", "--lag-messages", "0"),
        ("thresholds", "g", "--lag-seconds", "soon"),
        ("--kind", "nope"),
    ],
)
def test_bad_input_exits_2_and_changes_nothing(
    settings: Settings, store: Store, group: GroupInfo, args: tuple[str, ...]
) -> None:
    statement = (
        "SELECT lag_alarm_messages, lag_alarm_seconds, stall_alarm_seconds FROM consumer_group"
    )
    before = rows(store, statement)
    result = run(settings, *args)
    assert result.exit_code == 2, result.output
    assert rows(store, statement) == before
    assert rows(store, "SELECT COUNT(*) FROM alarm") == [(0,)]
