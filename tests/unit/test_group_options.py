"""Consumer options: validation and matching an existing group."""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
import typing
from typing import Any

import pytest

import ems
import ems.aio
from ems.consumer.groups import ConsumerOptions, GroupOptions, conflicts, new_group
from ems.exceptions import InvalidSetting
from ems.types import TopicInfo

TOPIC = TopicInfo(
    id=3, name="t", partitions=4, retention_hours=1, max_body_bytes=1, created_at=dt.datetime.now()
)
BASE: dict[str, Any] = dict(
    broadcast=False,
    start=None,
    ordered=None,
    retry_ladder=None,
    max_attempts=None,
    ack_timeout=None,
    batch_size=500,
    lease_ttl=10.0,
    renew_every=3.0,
)


def options(**changes: Any) -> GroupOptions:
    return GroupOptions.checked(**{**BASE, **changes})


def test_new_group_gets_the_documented_defaults() -> None:
    group = new_group("g", TOPIC, options())
    assert (group.mode, group.start_position, group.ordered) == ("cluster", "latest", False)
    assert group.max_attempts == 16 and group.ack_timeout_seconds == 300
    assert group.retry_ladder.startswith("10s 30s 1m") and group.retry_ladder.endswith("1h 2h")


@pytest.mark.parametrize(
    "changes",
    [
        {"start": "middle"},
        {"ordered": "yes"},
        {"retry_ladder": "10s 0s"},
        {"max_attempts": 0},
        {"ack_timeout": -1},
        {"batch_size": 0},
        {"batch_size": 10_001},
        {"max_batch_bytes": 0},
        {"max_batch_bytes": 1024**3 + 1},
        {"max_batch_bytes": "4MiB"},
        {"max_batch_bytes": 4.0},
        {"lease_ttl": 0},
        {"renew_every": 10.0},
        {"lease_ttl": True},
    ],
)
def test_bad_options_raise_invalid_setting(changes: dict[str, Any]) -> None:
    with pytest.raises(InvalidSetting):
        options(**changes)


def test_the_byte_budget_defaults_to_4_mib_and_is_the_member_s_own() -> None:
    assert options().max_batch_bytes == 4 * 1024 * 1024
    group = new_group("g", TOPIC, options())
    assert conflicts(group, options(max_batch_bytes=1)) == []


def test_only_explicit_options_that_differ_conflict() -> None:
    group = new_group("g", TOPIC, options(ordered=True, retry_ladder="1s,2s"))
    assert conflicts(group, options()) == []
    assert conflicts(group, options(retry_ladder="1s 2s", start="earliest")) == []
    found = conflicts(group, options(broadcast=True, ordered=False, max_attempts=3))
    assert [c.split()[0] for c in found] == ["mode", "ordered", "max_attempts"]


def test_the_typed_keywords_are_the_declared_options() -> None:
    """ConsumerOptions (what type checkers see in `**options`) and GroupOptions (the
    declaration the consumers check and default by) name the same options, typed alike."""
    declared = [f.name for f in dataclasses.fields(GroupOptions)]
    assert list(ConsumerOptions.__annotations__) == declared
    assert typing.get_type_hints(ConsumerOptions) == typing.get_type_hints(GroupOptions)


@pytest.mark.parametrize("cls", [ems.Consumer, ems.aio.Consumer])
def test_both_consumers_show_every_option_at_its_declared_default(cls: type) -> None:
    parameters = inspect.signature(cls).parameters
    for f in dataclasses.fields(GroupOptions):
        assert parameters[f.name].kind is inspect.Parameter.KEYWORD_ONLY
        assert parameters[f.name].default == f.default


def test_omitted_options_take_their_defaults_and_unknown_ones_are_refused() -> None:
    assert GroupOptions.checked() == GroupOptions()
    assert GroupOptions.checked(lease_ttl=4, renew_every=1).lease_ttl == 4.0
    with pytest.raises(TypeError, match="'batchsize'"):
        GroupOptions.checked(batchsize=5)  # type: ignore[call-arg]
