"""`ems group reset-offsets` and `ems replay` through click's CliRunner against the real
servers: the dry-run table, confirmation, JSON, and exit codes of bad input."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result

from ems.cli import cli
from ems.config import Settings
from ems.store import Store
from ems.types import GroupInfo, TopicInfo
from tests import sql as db
from tests.integration.offsets_data import consumed_group, small_topic, snapshot


@pytest.fixture
def topic(settings: Settings, store: Store) -> TopicInfo:
    return small_topic(settings, store)


@pytest.fixture
def group(store: Store, topic: TopicInfo) -> GroupInfo:
    return consumed_group(store, topic)


def run(settings: Settings, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), obj=settings, input=input)


def test_a_dry_run_prints_the_change_per_partition_and_changes_nothing(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    before = snapshot(store, group.id)
    result = run(settings, "group", "reset-offsets", "g", "--to-latest", "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "group g on topic t to latest (dry run, nothing changed)"
    assert [line.split() for line in lines[1:]] == [
        ["partition", "current", "new", "change"],
        ["0", "3", "20", "+17"],
        ["1", "3", "5", "+2"],
        ["2", "3", "0", "-3"],
    ]
    as_json = run(settings, "group", "reset-offsets", "g", "--to-offset", "2", "--dry-run",
                  "--partition", "1", "--json")  # fmt: skip
    assert json.loads(as_json.stdout)["changes"] == [
        {"partition": 1, "current": 3, "new": 2, "change": -1}
    ]
    assert snapshot(store, group.id) == before


def test_a_shift_by_a_negative_count_moves_back(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    result = run(settings, "group", "reset-offsets", "g", "--shift-by", "-2", "--yes")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("reset group g on topic t to a shift of -2 messages")
    assert store.groups.offsets(group.id) == {0: 1, 1: 1, 2: 0}
    both = run(settings, "group", "reset-offsets", "g", "--shift-by", "1", "--to-latest")
    assert both.exit_code == 2 and "--shift-by" in both.stderr
    assert store.groups.offsets(group.id) == {0: 1, 1: 1, 2: 0}


def test_a_reset_asks_first_unless_told_yes(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    before = snapshot(store, group.id)
    declined = run(settings, "group", "reset-offsets", "g", "--to-earliest", input="n\n")
    assert declined.exit_code == 1
    assert "Reset the offsets of group g?" in declined.stderr
    assert "0          3        0    -3" in declined.stderr
    assert snapshot(store, group.id) == before

    agreed = run(settings, "group", "reset-offsets", "g", "--to-earliest", input="y\n")
    assert agreed.exit_code == 0, agreed.output
    assert agreed.stdout.startswith("reset group g on topic t to earliest: generation 1")
    assert store.groups.offsets(group.id) == {0: 0, 1: 0, 2: 0}

    quiet = run(settings, "group", "reset-offsets", "g", "--to-datetime", "1h", "--yes", "--json")
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr == ""
    assert json.loads(quiet.stdout)["generation"] == 2
    assert store.groups.offsets(group.id) == {0: 20, 1: 5, 2: 0}  # nothing that recent


def test_bad_input_exits_2_with_a_clear_error_and_changes_nothing(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    before = snapshot(store, group.id)
    cases = [
        (["g", "--to-offset", "100", "--yes"], "offset 100 lies outside"),
        (["g", "--to-datetime", "tomorrow", "--yes"], "not a datetime"),
        (["g", "--yes"], "choose exactly one"),
        (["g", "--to-latest", "--to-earliest", "--yes"], "choose exactly one"),
        (["g", "--to-latest", "--partition", "7", "--yes"], "no partition 7"),
        (["nope", "--to-latest", "--yes"], "unknown group"),
        (["g", "--to-latest", "--topic", "nope", "--yes"], "unknown topic"),
    ]
    for args, message in cases:
        result = run(settings, "group", "reset-offsets", *args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr, (args, result.stderr)
    assert snapshot(store, group.id) == before


def test_replay_counts_asks_and_queues(
    settings: Settings, store: Store, topic: TopicInfo, group: GroupInfo
) -> None:
    args = ["replay", "g", "--topic", "t", "--partition", "0", "--from-offset", "1"]
    dry = run(settings, *args, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.splitlines()[0].startswith("would queue 2 messages of topic t")
    declined = run(settings, *args, input="n\n")
    assert declined.exit_code == 1 and "Redeliver" in declined.stderr
    assert db.value(store, "SELECT COUNT(*) FROM retry_message") == 0
    done = run(settings, *args, "--yes", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["messages"] == 2  # offsets 1 and 2: the cursor is at 3
    assert db.values(store, "SELECT offset_no FROM retry_message ORDER BY 1") == [1, 2]
    bad = run(settings, "replay", "g", "--from-offset", "1", "--since", "1h")
    assert bad.exit_code == 2 and "not both" in bad.stderr
