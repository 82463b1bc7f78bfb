"""The rules of previewed changes (pure): when a reset's preview no longer holds, how a
partition list is read, the typed confirmation, and what a plan token looks like."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.admin.forms import MAX_LISTED, partition_list
from ems.admin.plans import NotConfirmed, check_confirmed
from ems.exceptions import InvalidInput, PlanExpired
from ems.ops.plans import TOKEN_CHARS, check_token
from ems.ops.reset import drift, out_of_range
from ems.ops.scope import Span


def test_consumption_since_the_preview_is_no_drift() -> None:
    assert drift({0: 5, 1: 9}, {0: 5, 1: 12, 2: 0}) == []


def test_a_cursor_moved_back_or_gone_is_drift() -> None:
    assert drift({0: 5, 1: 9}, {0: 4}) == [
        "partition 0: the committed offset went back from 5 to 4 since the preview",
        "partition 1 has no committed offset any more",
    ]


@given(
    st.dictionaries(st.integers(0, 50), st.integers(0, 10**6), max_size=20),
    st.integers(0, 10**6),
)
def test_drift_is_exactly_the_partitions_behind_or_missing(
    planned: dict[int, int], forward: int
) -> None:
    ahead = {p: o + forward for p, o in planned.items()}
    assert drift(planned, ahead) == []
    behind = {p: o - 1 for p, o in planned.items() if o > 0}
    problems = drift(planned, behind)
    assert len(problems) == len(planned)


def test_a_target_outside_the_stored_span_is_refused() -> None:
    spans = {0: Span(earliest=3, high=10), 1: Span(earliest=0, high=4)}
    assert out_of_range({0: 3, 1: 4}, spans) == []
    assert out_of_range({0: 2, 1: 5, 2: 0}, spans) == [
        "partition 0: offset 2 now lies outside [3, 10]",
        "partition 1: offset 5 now lies outside [0, 4]",
        "partition 2 no longer exists",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", None),
        ("  ", None),
        ("3", [3]),
        ("0, 2, 5-7", [0, 2, 5, 6, 7]),
        (" 7 - 7 ,1,1", [1, 7]),
    ],
)
def test_partition_lists(text: str, expected: list[int] | None) -> None:
    assert partition_list(text) == expected


@pytest.mark.parametrize(
    "text", ["a", "1;2", "-1", "3-1", "1,,2", "1-", f"0-{MAX_LISTED}", "123456", "1 2"]
)
def test_bad_partition_lists(text: str) -> None:
    with pytest.raises(InvalidInput):
        partition_list(text)


def test_the_confirmation_is_the_word_exactly() -> None:
    check_confirmed(" orders ", "orders")
    for typed in (None, "", "Orders", "order", "orders!"):
        with pytest.raises(NotConfirmed):
            check_confirmed(typed, "orders")


def test_a_token_is_what_the_console_issues() -> None:
    good = "A" * (TOKEN_CHARS - 2) + "-_"
    assert check_token(good) == good
    for bad in (None, 7, "", "A" * (TOKEN_CHARS - 1), "A" * (TOKEN_CHARS - 1) + "=", "é" * 43):
        with pytest.raises(PlanExpired):
            check_token(bad)
