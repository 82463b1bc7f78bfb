"""The purge chunk rule (pure): chunked purging ends exactly where one big purge would,
never past a young row, a hole before it, or a limit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ems.maintenance.purge import chunk_end, round_quota, transactions
from ems.store.purge import Window

# A partition as offset -> young?, with holes where offsets are missing.
partitions = st.dictionaries(st.integers(0, 60), st.booleans(), max_size=40)


def window(rows: dict[int, bool], start: int, size: int) -> tuple[Window, int | None]:
    ahead = sorted(o for o in rows if o >= start)[:size]
    young = [o for o in ahead if rows[o]]
    first_young = young[0] if young else None
    last_old = None
    if first_young is not None:
        below = [o for o in rows if start <= o < first_young]
        last_old = max(below) if below else None
    w = Window(rows=len(ahead), last=ahead[-1] if ahead else None, first_young=first_young)
    return w, last_old


def purge(rows: dict[int, bool], size: int, limit: int | None) -> int:
    """The low watermark chunked purging ends at (0: nothing purged)."""
    start = 0
    while True:
        w, last_old = window(rows, start, size)
        end = chunk_end(start, w, last_old, (limit,))
        if end is None:
            return start
        assert end > start
        assert not any(rows[o] for o in rows if start <= o < end), "a young row was purged"
        start = end


def reference(rows: dict[int, bool], limit: int | None) -> int:
    ordered = sorted(rows)
    young = [o for o in ordered if rows[o]]
    if young:
        old = [o for o in ordered if o < young[0]]
        bound = old[-1] + 1 if old else 0
    else:
        bound = ordered[-1] + 1 if ordered else 0
    return max(0, min(bound, limit)) if limit is not None else bound


@given(partitions, st.integers(1, 7), st.none() | st.integers(0, 70))
def test_chunked_purging_ends_where_one_purge_would(
    rows: dict[int, bool], size: int, limit: int | None
) -> None:
    assert purge(rows, size, limit) == reference(rows, limit)


@given(partitions, st.integers(1, 7))
def test_a_chunk_deletes_at_most_its_window_of_rows(rows: dict[int, bool], size: int) -> None:
    start = 0
    while True:
        w, last_old = window(rows, start, size)
        end = chunk_end(start, w, last_old, ())
        if end is None:
            return
        assert sum(1 for o in rows if start <= o < end) <= size
        start = end


def test_a_hole_before_the_first_young_row_is_kept() -> None:
    w = Window(rows=3, last=21, first_young=21)
    assert chunk_end(0, w, last_old=19, limits=()) == 20


def test_nothing_when_the_first_row_is_young_or_a_limit_is_at_the_start() -> None:
    assert chunk_end(5, Window(rows=1, last=5, first_young=5), None, ()) is None
    assert chunk_end(5, Window(rows=2, last=9, first_young=None), None, (5,)) is None
    assert chunk_end(5, Window(rows=0, last=None, first_young=None), None, ()) is None


def test_a_round_shares_the_chunk_but_each_delete_takes_a_useful_range() -> None:
    assert round_quota(1000, 8) == 125
    assert round_quota(1000, 256) == 50  # an even share would be 4 rows per DELETE
    assert round_quota(10, 5) == 10  # never more than the chunk itself
    assert round_quota(1, 3) == 1
    ranges = [(p, 0, 50) for p in range(5)]
    assert transactions(ranges, 100, 50) == [ranges[0:2], ranges[2:4], ranges[4:]]
    assert transactions(ranges, 1000, 125) == [ranges]
    assert transactions(ranges, 10, 50) == [[r] for r in ranges]
