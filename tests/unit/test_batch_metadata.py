"""BatchMetadata: a batch's results, made when read, are what the eager loop made: each
message at its partition's first offset plus the write's messages before it there; its
slices (a group commit's share per caller) are the same slices of that list; and it reads,
compares and joins as the list it replaced did."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.producer.planning import metadata
from ems.types import BatchMetadata, Placed, Prepared, RecordMetadata


def eager(topic: str, partitions: Sequence[int], firsts: dict[int, int]) -> list[RecordMetadata]:
    seen: dict[int, int] = {}
    found = []
    for p in partitions:
        found.append(RecordMetadata(topic, p, firsts[p] + seen.get(p, 0)))
        seen[p] = seen.get(p, 0) + 1
    return found


writes = st.lists(st.integers(0, 5), min_size=2, max_size=60).flatmap(
    lambda parts: st.tuples(
        st.just(parts),
        st.fixed_dictionaries({p: st.integers(0, 2**40) for p in set(parts)}),
    )
)


@given(writes, st.integers(-70, 70), st.integers(-70, 70), st.sampled_from([None, 1, 2, -1, 3]))
def test_it_is_the_eager_list_its_slices_and_items(
    write: tuple[list[int], dict[int, int]], start: int, stop: int, step: int | None
) -> None:
    partitions, firsts = write
    expected = eager("t", partitions, firsts)
    batch = BatchMetadata("t", partitions, firsts)
    assert len(batch) == len(expected) and batch == expected and list(batch) == expected
    part = batch[start:stop:step]
    assert isinstance(part, BatchMetadata)
    assert part == expected[start:stop:step] and len(part) == len(expected[start:stop:step])
    assert list(part[1:]) == expected[start:stop:step][1:]  # a slice of a slice
    view = expected[start:stop:step]
    assert [part[i] for i in range(-len(view), len(view))] == view + view
    for outside in (len(view), -len(view) - 1):
        with pytest.raises(IndexError):
            part[outside]
    for i in (0, -1, len(expected) - 1, start % len(expected)):
        assert batch[i] == expected[i] and type(batch[i]) is RecordMetadata


def test_a_group_commits_shares_read_in_any_order_are_each_callers_own() -> None:
    partitions, firsts = [3, 1, 3, 3, 1, 0], {3: 100, 1: 7, 0: 0}
    batch = BatchMetadata("t", partitions, firsts)
    first, second = batch[0:2], batch[2:6]  # as GroupCommit hands them out
    assert second == [("t", 3, 101), ("t", 3, 102), ("t", 1, 8), ("t", 0, 0)]
    assert first == [RecordMetadata("t", 3, 100), RecordMetadata("t", 1, 7)]
    assert batch[6:] == [] and not batch[6:] and len(batch[4:2]) == 0


def test_it_compares_as_a_sequence_and_reads_back() -> None:
    batch = BatchMetadata("t", [0, 0], {0: 5})
    expected = [RecordMetadata("t", 0, 5), RecordMetadata("t", 0, 6)]
    assert batch == tuple(expected) and batch == BatchMetadata("t", [0, 0], {0: 5})
    assert batch != expected[:1] and batch != [RecordMetadata("t", 0, 6)] * 2
    assert batch != "t" and batch != 5 and (batch == object()) is False
    assert repr(batch) == f"BatchMetadata({expected!r})"
    assert RecordMetadata("t", 0, 6) in batch and batch.index(expected[1]) == 1
    assert list(reversed(batch)) == expected[::-1]
    assert batch + batch[1:] == [*expected, expected[1]] and type(batch + batch) is list
    assert expected[:1] + batch == [expected[0], *expected] and batch + [] == expected  # noqa: RUF005
    with pytest.raises(TypeError):
        batch + 1  # type: ignore[operator]
    with pytest.raises(IndexError):
        batch[2]
    with pytest.raises(TypeError):
        hash(batch)


def test_a_batchs_results_do_not_keep_its_rows() -> None:
    """The rows hold the bodies: results a caller keeps must not keep them alive."""
    rows: list[Prepared] = [(0, None, None, b"x" * 1000), (1, None, None, b"y")]
    held = sys.getrefcount(rows), sys.getrefcount(rows[0]), sys.getrefcount(rows[1])
    results = metadata("t", Placed(1, rows, {0: 0, 1: 0}))
    assert (sys.getrefcount(rows), sys.getrefcount(rows[0]), sys.getrefcount(rows[1])) == held
    assert results == [RecordMetadata("t", 0, 0), RecordMetadata("t", 1, 0)]
