"""The pure parts of offset reset and replay: the leader's plan while a group is paused,
the offsets a partition holds, target offsets, and the choice of options."""

from __future__ import annotations

import datetime as dt
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.coordination.handoff import plan
from ems.exceptions import (
    ConflictingOptions,
    InvalidDatetime,
    InvalidOffset,
    OffsetOutOfRange,
)
from ems.ops.replay import ReplayRange, checked_offsets
from ems.ops.reset import PartitionChange, ResetTarget, changes, target_offsets
from ems.ops.scope import Span, spans
from ems.types import AssignmentRow

State = Literal["assigned", "revoking", "released"]
NOW = dt.datetime(2026, 11, 22, 12, 0, 0)


def row(p: int, owner: str | None, state: State = "assigned") -> AssignmentRow:
    return AssignmentRow(partition=p, client_id=owner, generation=1, state=state)


def now() -> dt.datetime:
    return NOW


# -- the leader's plan while paused ----------------------------------------------------


def test_a_paused_group_revokes_what_live_members_hold_and_grants_nothing() -> None:
    rows = [
        row(0, "a"),
        row(1, "b"),
        row(2, "a", "revoking"),
        row(3, None, "released"),
        row(4, "b", "released"),
        row(5, "dead"),
    ]
    step = plan(rows, ["a", "b"], paused=True)
    assert step.grants == {}
    assert sorted(step.revokes) == [0, 1]  # 2 already revokes; 3, 4 free; 5's owner is gone
    assert plan(rows, ["a", "b"]).grants  # unpaused, the free partitions are granted


def test_a_paused_group_whose_partitions_are_all_released_has_nothing_to_do() -> None:
    rows = [row(0, "a", "released"), row(1, None, "released"), row(2, "dead")]
    assert not plan(rows, ["a"], paused=True)


@given(
    owners=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "gone", None]),
            st.sampled_from(["assigned", "revoking", "released"]),
        ),
        min_size=1,
        max_size=30,
    ),
    live=st.sets(st.sampled_from(["a", "b", "c"])),
)
def test_while_paused_members_end_up_holding_nothing(
    owners: list[tuple[str | None, State]], live: set[str]
) -> None:
    rows = [row(p, o, s) for p, (o, s) in enumerate(owners)]
    for _ in range(2):  # plan, members release what was revoked, plan again
        step = plan(rows, live, paused=True)
        assert step.grants == {}
        revoked = set(step.revokes)
        rows = [
            row(r.partition, r.client_id, "revoking") if r.partition in revoked else r for r in rows
        ]
        rows = [
            row(r.partition, r.client_id, "released") if r.state == "revoking" else r for r in rows
        ]
    assert not any(r.client_id in live and r.state != "released" for r in rows)


# -- spans and targets -----------------------------------------------------------------


def test_spans_run_from_the_log_start_to_past_the_highest_stored_offset() -> None:
    bounds = {0: (9, None), 1: (9, 5), 2: (-1, 40), 3: (20, 30)}
    found = spans(bounds, range(5))
    # From 0 when nothing was purged, wherever the lowest stored row is: rows below it
    # may be in flight.
    assert found[0] == Span(earliest=0, high=10)
    assert found[1] == Span(earliest=5, high=10)  # rows below the low watermark are purged
    assert found[2] == Span(earliest=40, high=40)  # everything purged
    assert found[3] == Span(earliest=30, high=30)  # a low watermark past the rows left
    assert found[4] == Span(earliest=0, high=0)  # never written


SPANS = {0: Span(earliest=0, high=10), 1: Span(earliest=5, high=8)}


def target(kind: str, **kw: object) -> ResetTarget:
    return ResetTarget(kind=kind, **kw)  # type: ignore[arg-type]


def test_targets_earliest_latest_and_an_offset_inside_every_partition() -> None:
    assert target_offsets(target("earliest"), SPANS, {}) == {0: 0, 1: 5}
    assert target_offsets(target("latest"), SPANS, {}) == {0: 10, 1: 8}
    assert target_offsets(target("offset", offset=8), SPANS, {}) == {0: 8, 1: 8}
    assert target_offsets(target("offset", offset=5), {1: SPANS[1]}, {}) == {1: 5}


@pytest.mark.parametrize("offset", [4, 9, 11])
def test_an_offset_outside_a_partition_is_refused(offset: int) -> None:
    with pytest.raises(OffsetOutOfRange, match=r"partitions .*1 \[5, 8\]"):
        target_offsets(target("offset", offset=offset), SPANS, {})


def test_datetime_targets_take_the_first_offset_found_or_the_high_watermark() -> None:
    at = target("datetime", at=NOW)
    assert target_offsets(at, SPANS, {0: 4, 1: None}) == {0: 4, 1: 8}
    assert target_offsets(at, SPANS, {0: 0, 1: 2}) == {0: 0, 1: 5}  # purged since: earliest


def test_a_shift_moves_each_cursor_within_its_stored_offsets() -> None:
    current = {0: 4, 1: 6}
    assert target_offsets(target("shift", shift=3), SPANS, {}, current) == {0: 7, 1: 8}
    assert target_offsets(target("shift", shift=-5), SPANS, {}, current) == {0: 0, 1: 5}
    assert target_offsets(target("shift", shift=0), SPANS, {}, current) == current
    # no committed cursor yet: from the earliest stored offset
    assert target_offsets(target("shift", shift=2), SPANS, {}, {}) == {0: 2, 1: 7}


def test_changes_pair_current_and_new_cursors() -> None:
    assert changes({0: 7, 1: 2}, {1: 5, 0: 0}) == (
        PartitionChange(partition=0, current=7, new=0, change=-7),
        PartitionChange(partition=1, current=2, new=5, change=3),
    )


# -- options ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [
        {},
        {"earliest": True, "latest": True},
        {"latest": True, "offset": 3},
        {"earliest": True, "when": "2h"},
    ],
)
def test_exactly_one_reset_target(given: dict[str, object]) -> None:
    options = {"earliest": False, "latest": False, "offset": None, **given}
    with pytest.raises(ConflictingOptions):
        ResetTarget.choose(now=now, **options)  # type: ignore[arg-type]


def test_reset_targets_parse_offsets_and_times() -> None:
    none = {"earliest": False, "latest": False, "offset": None}
    assert ResetTarget.choose(now=now, **{**none, "offset": 0}).offset == 0  # type: ignore[arg-type]
    two_hours = ResetTarget.choose(now=now, when="2h", **none)  # type: ignore[arg-type]
    assert two_hours.at == NOW - dt.timedelta(hours=2)
    zoned = ResetTarget.choose(now=now, when="2026-11-22T10:00:00+02:00", **none)  # type: ignore[arg-type]
    assert zoned.at == dt.datetime(2026, 11, 22, 8, 0)
    with pytest.raises(InvalidOffset):
        ResetTarget.choose(now=now, **{**none, "offset": -1})  # type: ignore[arg-type]
    with pytest.raises(InvalidDatetime):
        ResetTarget.choose(now=now, when="yesterday-ish", **none)  # type: ignore[arg-type]
    back = ResetTarget.choose(now=now, shift=-100, **none)  # type: ignore[arg-type]
    assert (back.kind, back.shift, back.describe()) == ("shift", -100, "a shift of -100 messages")
    for bad in (1.5, "3", True):
        with pytest.raises(InvalidOffset, match="shift must be an integer"):
            ResetTarget.choose(now=now, shift=bad, **none)  # type: ignore[arg-type]
    with pytest.raises(ConflictingOptions, match="--shift-by"):
        ResetTarget.choose(now=now, shift=1, **{**none, "latest": True})  # type: ignore[arg-type]


def replay_range(**kw: object) -> ReplayRange:
    options = {"from_offset": None, "to_offset": None, "since": None, "until": None, **kw}
    return ReplayRange.choose(now=now, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "given",
    [
        {},
        {"from_offset": 1, "since": "1h"},
        {"to_offset": 5},
        {"until": "1h"},
        {"from_offset": 5, "to_offset": 4},
        {"since": "1h", "until": "2h"},
    ],
)
def test_a_replay_range_is_offsets_or_times(given: dict[str, object]) -> None:
    with pytest.raises(ConflictingOptions):
        replay_range(**given)


def test_replay_ranges() -> None:
    assert replay_range(from_offset=3) == ReplayRange(first=3)
    assert replay_range(from_offset=3, to_offset=3) == ReplayRange(first=3, last=3)
    hour = replay_range(since="1h")
    assert (hour.since, hour.until) == (NOW - dt.timedelta(hours=1), NOW)
    with pytest.raises(InvalidOffset):
        replay_range(from_offset=-2)
    with pytest.raises(InvalidDatetime):
        replay_range(since="soon")


def test_replayed_offsets_must_be_stored() -> None:
    span = Span(earliest=5, high=10)
    assert checked_offsets(span, 5, 9) == (5, 9)
    assert checked_offsets(span, 6, None) == (6, 9)
    assert checked_offsets(span, 9, None) == (9, 9)
    for first, last in [(4, 9), (5, 10), (10, None)]:
        with pytest.raises(OffsetOutOfRange):
            checked_offsets(span, first, last)
    with pytest.raises(OffsetOutOfRange):
        checked_offsets(Span(earliest=0, high=0), 0, None)  # nothing stored
