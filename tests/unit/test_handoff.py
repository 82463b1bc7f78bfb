"""The leader's cooperative handoff plan."""

from __future__ import annotations

from typing import Literal

from hypothesis import given
from hypothesis import strategies as st

from ems.coordination.handoff import plan
from ems.types import AssignmentRow

State = Literal["assigned", "revoking", "released"]


def row(p: int, owner: str | None, state: State = "assigned", gen: int = 1) -> AssignmentRow:
    return AssignmentRow(partition=p, client_id=owner, generation=gen, state=state)


def test_unowned_partitions_are_granted_at_once() -> None:
    rows = [row(p, None, "released") for p in range(4)]
    result = plan(rows, ["a", "b"])
    assert result.revokes == []
    assert sorted(result.grants.values()) == ["a", "a", "b", "b"]


def test_a_live_owner_is_asked_to_revoke_before_anyone_gets_its_partition() -> None:
    rows = [row(p, "a") for p in range(4)]
    result = plan(rows, ["a", "b"])
    assert len(result.revokes) == 2 and result.grants == {}


def test_a_revoking_partition_waits_for_release_then_goes_to_the_new_owner() -> None:
    rows = [row(0, "a"), row(1, "a"), row(2, "a", "revoking"), row(3, "a", "revoking")]
    assert not plan(rows, ["a", "b"])
    released = [*rows[:2], row(2, "a", "released"), row(3, "a", "released")]
    assert plan(released, ["a", "b"]).grants == {2: "b", 3: "b"}


def test_a_dead_owners_partitions_skip_the_release() -> None:
    rows = [row(0, "a"), row(1, "dead"), row(2, "b"), row(3, "dead")]
    result = plan(rows, ["a", "b"])
    assert result.revokes == []
    assert set(result.grants) == {1, 3} and set(result.grants.values()) <= {"a", "b"}


def test_nothing_to_do_when_balanced_and_nothing_without_members() -> None:
    rows = [row(0, "a"), row(1, "b")]
    assert not plan(rows, ["a", "b"])
    assert not plan(rows, [])


@given(
    owners=st.lists(st.sampled_from(["a", "b", "c", "d", None]), min_size=1, max_size=40),
    live=st.sets(st.sampled_from(["a", "b", "c", "d"]), min_size=1),
)
def test_after_all_releases_every_partition_ends_balanced(
    owners: list[str | None], live: set[str]
) -> None:
    rows = [row(p, o) for p, o in enumerate(owners)]
    for _ in range(3):  # plan, release the revoked, plan again: converges
        step = plan(rows, live)
        rows = [
            row(r.partition, step.grants[r.partition])
            if r.partition in step.grants
            else row(r.partition, r.client_id, "released")
            if r.partition in step.revokes
            else r
            for r in rows
        ]
    counts = {m: sum(r.client_id == m for r in rows) for m in live}
    assert all(r.client_id in live and r.state == "assigned" for r in rows)
    assert max(counts.values()) - min(counts.values()) <= 1
