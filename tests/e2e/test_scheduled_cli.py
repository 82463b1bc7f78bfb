"""`ems produce --delay` and `--deliver-at` end to end: scheduled lines wait in the outbox
(`ems topic describe` counts them), reach the topic at their time through the scheduler's
relay-outbox job, and bad schedules exit 2 having written nothing."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

from ems.config import Settings
from ems.display import json_time
from tests.e2e.test_cli import Cli, assert_clean_error, cli, tail_lines

__all__ = ["cli"]  # the fixture, imported


def described(cli: Cli, topic: str) -> dict[str, object]:
    return json.loads(cli.ok("topic", "describe", topic, "--json"))


def test_produce_delay_waits_then_the_relay_job_delivers(cli: Cli, settings: Settings) -> None:
    cli.ok("topic", "create", "jobs", "--partitions", "2")
    result = cli.run("produce", "jobs", "--key", "k", "--delay", "1500ms", "-v", input="a\nb\n")
    assert result.returncode == 0, result.stderr
    assert [line.split()[1] for line in result.stdout.splitlines()] == ["-1", "-1"]
    assert result.stderr.startswith("scheduled 2 messages to jobs")
    at = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(days=6)
    later = cli.ok("produce", "jobs", "--deliver-at", at.isoformat(), input="x\n")
    assert later == ""
    # Not yet due: the relay job leaves them, and describe counts them.
    info = described(cli, "jobs")
    scheduled = info["scheduled"]
    assert isinstance(scheduled, dict)
    assert info["totals"] == {"messages": 0, "tombstones": None} or scheduled["messages"] == 1
    assert scheduled["messages"] in (1, 3)  # 1: the slow machine let the first two come due
    deadline = time.monotonic() + 30
    while described(cli, "jobs")["totals"] != {"messages": 2, "tombstones": None}:
        assert time.monotonic() < deadline
        cli.ok("cleanup", "run", "relay-outbox")
    rows = tail_lines(cli.ok("tail", "jobs", "--from-beginning", "-n", "2", "--timeout", "30"))
    assert [(o, k, b) for _, o, k, b in rows] == [(0, "k", "a"), (1, "k", "b")]
    text = cli.ok("topic", "describe", "jobs")
    assert f"scheduled: 1 messages not yet due, the next at {json_time(at)}" in text


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--delay", "-5s"), "0 or more"),
        (("--delay", "8d"), "EMS_MAX_DELAY"),
        (("--delay", "soon"), "a delay is seconds"),
        (("--deliver-at", "2030-01-01T00:00:00"), "RFC 3339"),
        (("--delay", "5s", "--deliver-at", "2030-01-01T00:00:00Z"), "not both"),
    ],
)
def test_bad_schedules_exit_2_and_write_nothing(
    cli: Cli, settings: Settings, args: tuple[str, ...], says: str
) -> None:
    cli.ok("topic", "create", "jobs", "--partitions", "1")
    result = cli.run("produce", "jobs", *args, input="x\n")
    assert_clean_error(result, 2)
    assert says in result.stderr
    info = described(cli, "jobs")
    assert info["scheduled"] == {"messages": 0, "next_at": None}
    assert info["totals"] == {"messages": 0, "tombstones": None}


def test_a_smaller_max_delay_is_the_bound(cli: Cli, settings: Settings) -> None:
    cli.ok("topic", "create", "jobs", "--partitions", "1")
    result = cli.run("produce", "jobs", "--delay", "2m", input="x\n", env={"EMS_MAX_DELAY": "60"})
    assert_clean_error(result, 2)
    assert "60 s (EMS_MAX_DELAY)" in result.stderr
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)).isoformat()
    assert cli.run("produce", "jobs", "--deliver-at", soon, input="x\n").returncode == 0
