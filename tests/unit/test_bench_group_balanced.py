"""benchmarks.consumer_workers.group_balanced: the line-up's view of a settled group."""

from __future__ import annotations

import pytest

from benchmarks.consumer_workers import group_balanced
from benchmarks.harness import PARTITIONS
from ems.types import AssignmentRow

MEMBERS = ("a", "b", "c", "d")


def rows(owners: list[str | None], state: str = "assigned") -> list[AssignmentRow]:
    return [
        AssignmentRow(partition=p, client_id=c, generation=1, state=state)
        for p, c in enumerate(owners)
    ]


BALANCED: list[str | None] = [MEMBERS[p % 4] for p in range(PARTITIONS)]


def test_four_members_of_four_partitions_each_are_balanced() -> None:
    assert group_balanced(rows(BALANCED), set(MEMBERS), 4)


@pytest.mark.parametrize(
    ("owners", "live", "state"),
    [
        (BALANCED, {"a", "b", "c"}, "assigned"),  # "d" is not live
        (BALANCED, {*MEMBERS, "e"}, "assigned"),  # a fifth member holds nothing yet
        (["a"] * 4 + ["b"] * 12, {"a", "b"}, "assigned"),  # "a" has 4 on its way to 8
        ([*BALANCED[:-1], None], set(MEMBERS), "assigned"),  # one partition unowned
        (BALANCED, set(MEMBERS), "revoking"),  # handoffs still running
        (["a"] * 5 + ["b"] * 3 + ["c"] * 4 + ["d"] * 4, set(MEMBERS), "assigned"),
    ],
)
def test_a_group_still_moving_is_not_balanced(
    owners: list[str | None], live: set[str], state: str
) -> None:
    assert not group_balanced(rows(owners, state), live, 4)
