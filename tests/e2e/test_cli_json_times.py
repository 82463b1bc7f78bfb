"""Every time in the CLI's JSON has one form (ems.display.json_time, docs/cli.md#json):
'2026-11-22T10:00:00.123456Z'. One group's whole life is seeded (messages, a consumer's
log, dead letters, an alarm, an autoscaling decision, a capture, accounts), then every
command that prints times with --json is run and its output swept: each string that
starts as a date does, and each value under a time key, is null or of that form."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from ems import TopicAdmin
from ems.autoscale.step import Autoscaler
from ems.cli.app import cli
from ems.config import Settings
from ems.store import Store
from ems.values.autoscale import ScalePolicy
from tests.integration.seeding import dead_letters_of, publish
from tests.json_times import is_json_time, times_in

PASSWORD = "a long enough secret"
BAD = (b"bad-0", b"bad-1")


def ems(settings: Settings, *args: str, input: str | None = None) -> str:
    result = CliRunner().invoke(cli, list(args), obj=settings, input=input)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout


def ems_json(settings: Settings, *args: str, input: str | None = None) -> Any:
    return json.loads(ems(settings, *args, "--json", input=input))


@pytest.fixture
def seeded(settings: Settings, store: Store) -> Iterator[dict[str, Any]]:
    """Topic t, group g with its log and two dead letters, a live member and leader with
    an autoscaling decision, an open dead-letter alarm, a watermark capture, a user and
    a token (and their audit entries)."""
    TopicAdmin(settings, store=store).create("t", 2)
    publish(settings, "t", [(f"k{i}", f"ok-{i}") for i in range(3)])
    publish(settings, "t", [(f"k-{b.decode()}", b.decode()) for b in BAD])
    dead_letters_of(settings, "g", "t", lambda d: d.body in BAD, 2)
    group = store.groups.get("g", store.topics.get("t").id)
    assert group is not None
    store.autoscale.set_policy(group.id, ScalePolicy(target_load=100, max_replicas=3))
    store.leases.register(group.id, "c0", "h", 1, ttl=60)
    store.leases.renew("c0", 60, cpu_percent=50.0, load_rate=400.0)
    epoch = store.leases.lead(group.id, "c0", 60)
    assert epoch is not None
    Autoscaler(store, group, settings).run(("c0", epoch))
    assert ems_json(settings, "alarms", "scan")["opened"] >= 1
    ems(settings, "cleanup", "run", "snapshots", "--yes")
    ems(settings, "admin", "user", "add", "ada", "--role", "admin", "--password-stdin",
        input=PASSWORD + "\n")  # fmt: skip
    ems(settings, "admin", "token", "create", "ci", "--role", "viewer")
    letters = ems_json(settings, "dlq", "list")["dead_letters"]
    yield {"dead": letters[0], "alarm": ems_json(settings, "alarms")[0]}


def _commands(seeded: dict[str, Any]) -> list[tuple[str, ...]]:
    place = ("t", str(seeded["dead"]["partition"]), str(seeded["dead"]["offset"]))
    return [
        ("topic", "list"),
        ("topic", "describe", "t"),
        ("topic", "rank"),
        ("msg", "get", *place),
        ("msg", "find", "t"),
        ("trace", *place),
        ("dlq", "list"),
        ("dlq", "show", str(seeded["dead"]["id"])),
        ("group", "describe", "g"),
        ("group", "reset-offsets", "g", "--to-datetime", "2026-01-01T00:00:00Z", "--dry-run"),
        ("replay", "g", "--since", "1h", "--dry-run"),
        ("alarms", "--all"),
        ("alarms", "ack", str(seeded["alarm"]["id"])),
        ("autoscale", "status", "g"),
        ("cleanup", "list"),
        ("admin", "user", "list"),
        ("admin", "token", "list"),
        ("admin", "audit"),
    ]


def test_every_time_in_the_json_output_has_one_form(
    settings: Settings, seeded: dict[str, Any]
) -> None:
    outputs = {args: ems_json(settings, *args) for args in _commands(seeded)}
    consumed = ems(
        settings, "consume", "t", "--group", "h", "--from-beginning", "-n", "1", "--json"
    )
    outputs["consume", "t"] = [json.loads(line) for line in consumed.splitlines()]
    for args, output in outputs.items():
        found = list(times_in(output))
        assert any(is_json_time(value) for _, value in found), (args, output)
        wrong = [(path, value) for path, value in found if not _one_form(value)]
        assert wrong == [], args


def _one_form(value: object) -> bool:
    return value is None or is_json_time(value)


def test_the_sweep_sees_other_forms() -> None:
    naive = {"created_at": "2026-11-22T10:00:00.123456", "n": 1}
    zoned = [{"lease": {"expires": "2026-11-22T10:00:00+00:00"}}]
    seconds = {"timestamp": "2026-11-22T10:00:00Z"}
    number = {"decided_at": 1763805600}
    for document in (naive, zoned, seconds, number):
        assert not all(_one_form(v) for _, v in times_in(document)), document
    assert all(_one_form(v) for _, v in times_in({"at": "2026-11-22T10:00:00.000000Z"}))
