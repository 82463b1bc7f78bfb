"""`ems autoscale set` and `ems autoscale status` against the real database, through
click's runner (the exit codes are the CLI's own)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner, Result

from ems.autoscale.step import Autoscaler
from ems.cli.app import cli
from ems.config import Settings
from ems.consumer.groups import ensure_group
from ems.store import Store
from ems.topics import TopicAdmin
from ems.types import GroupInfo
from ems.values.autoscale import ScalePolicy
from tests.integration import seed

OPTIONS = seed.options(None)


@pytest.fixture
def group(settings: Settings, store: Store) -> GroupInfo:
    topic = TopicAdmin(settings, store=store).create("t", 4)
    return ensure_group(store, "g", topic, OPTIONS)


def ems(settings: Settings, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), obj=settings)


def test_set_creates_then_changes_only_the_options_given(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    result = ems(settings, "autoscale", "set", "g", "--max", "3", "--target-load", "250")
    assert result.exit_code == 0, result.output
    assert "replicas 1-3" in result.output
    assert store.autoscale.policy(group.id) == ScalePolicy(max_replicas=3, target_load=250)
    args = ("--backend", "kubernetes", "--namespace", "prod", "--deployment", "handlers")
    result = ems(settings, "autoscale", "set", "g", "--topic", "t", *args, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["deployment"] == "handlers"
    ems(settings, "autoscale", "set", "g", "--lag-threshold", "5000", "--cooldown", "60")
    expected = ScalePolicy(
        backend="kubernetes",
        namespace="prod",
        deployment="handlers",
        max_replicas=3,
        target_load=250,
        lag_threshold=5000,
        cooldown_seconds=60,
    )
    assert store.autoscale.policy(group.id) == expected
    assert ems(settings, "autoscale", "set", "g", "--lag-threshold", "off").exit_code == 0
    assert ems(settings, "autoscale", "set", "g", "--disable").exit_code == 0
    assert store.autoscale.policy(group.id) == dataclasses.replace(
        expected, lag_threshold=None, enabled=False
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("nope",), "unknown group"),
        (("g", "--topic", "missing"), "unknown topic"),
        (("g", "--min", "3", "--max", "2"), "exceed max"),
        (("g", "--min", "-1"), "min replicas"),
        (("g", "--min", "5", "--max", "9"), "exceed the 4 partitions"),
        (("g", "--tolerance", "1.5"), "tolerance"),
        (("g", "--target-load", "0"), "target load"),
        (("g", "--backend", "kubernetes"), "needs a deployment"),
        (("g", "--deployment", "Not_A_Name"), "object name"),
        (("g", "--lag-threshold", "lots"), "lag threshold"),
        (("g", "--cooldown", "-5"), "cooldown"),
        (("b",), "broadcast"),
    ],
)
def test_set_refuses_bad_input_and_changes_nothing(
    settings: Settings, store: Store, group: GroupInfo, args: tuple[str, ...], words: str
) -> None:
    broadcast = dataclasses.replace(OPTIONS, broadcast=True)
    ensure_group(store, "b", store.topics.get("t"), broadcast)
    before = ScalePolicy(max_replicas=4, target_load=50)
    store.autoscale.set_policy(group.id, before)
    result = ems(settings, "autoscale", "set", *args)
    assert result.exit_code == 2, result.output
    assert words in result.output
    assert store.autoscale.policy(group.id) == before
    assert store.autoscale.policy_groups() == [("g", "t")]


def test_a_group_on_two_topics_needs_the_topic(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    other = TopicAdmin(settings, store=store).create("u", 2)
    ensure_group(store, "g", other, OPTIONS)
    result = ems(settings, "autoscale", "set", "g", "--max", "2")
    assert result.exit_code == 2 and "consumes topics t, u: pass --topic" in result.output
    assert store.autoscale.policy_groups() == []
    assert ems(settings, "autoscale", "set", "g", "--topic", "u", "--max", "2").exit_code == 0
    assert store.autoscale.policy_groups() == [("g", "u")]


def test_status_shows_policy_members_and_decisions(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    assert "no group has an autoscaling policy" in ems(settings, "autoscale", "status").output
    store.autoscale.set_policy(group.id, ScalePolicy(target_load=100, max_replicas=3))
    store.leases.register(group.id, "c0", "h", 1, ttl=10)
    store.leases.renew("c0", 10, cpu_percent=97.5, load_rate=400.0)
    epoch = store.leases.lead(group.id, "c0", 10)
    assert epoch is not None
    Autoscaler(store, group, settings).run(("c0", epoch))

    result = ems(settings, "autoscale", "status", "g")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "group g on topic t (4 partitions)" in out
    assert "enabled, backend log, replicas 1-3" in out
    assert "c0" in out and "97.5" in out and "400.0" in out
    assert "1 -> 3" in out  # ceil(1 x 400/100) = 4, capped at max 3
    assert ems(settings, "autoscale", "status").output == out

    (status,) = json.loads(ems(settings, "autoscale", "status", "g", "--json").output)
    assert status["policy"]["max_replicas"] == 3
    assert status["replica_range"] == [1, 3]
    assert status["members"][0]["cpu_percent"] == 97.5
    (decision,) = status["decisions"]
    assert (decision["current_replicas"], decision["desired_replicas"]) == (1, 3)
    assert decision["applied"] is True


def test_status_of_a_group_without_policy_or_unknown(settings: Settings, group: GroupInfo) -> None:
    result = ems(settings, "autoscale", "status", "g")
    assert result.exit_code == 0 and "not autoscaled: no policy" in result.output
    unknown = ems(settings, "autoscale", "status", "nope")
    assert unknown.exit_code == 2 and "unknown group 'nope'" in unknown.output
    assert ems(settings, "autoscale", "status", "--topic", "t").exit_code == 2
