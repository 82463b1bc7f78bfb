"""The time index's segments (pure): whole segments only, up to the first hole, the
running maximum never falling, tombstones carrying no time."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from ems.store.time_index import segments

T0 = dt.datetime(2026, 11, 1)

rows_strategy = st.lists(
    st.tuples(st.integers(0, 10_000), st.booleans(), st.booleans()),  # ms, tombstone, skip
    max_size=60,
)


@given(rows_strategy, st.integers(0, 50), st.integers(1, 7))
def test_segments_are_whole_stop_at_a_hole_and_their_prefix_max_never_falls(
    raw: list[tuple[int, bool, bool]], start: int, size: int
) -> None:
    rows = []
    offset = start
    for ms, tombstone, skip in raw:
        offset += 2 if skip else 1  # skip: leave a hole before this row
        rows.append((offset - 1, T0 + dt.timedelta(milliseconds=ms), tombstone))
    found = segments(start, rows, None, size)
    filled = 0
    for o, _, _ in rows:
        if o != start + filled:
            break
        filled += 1
    assert [(s.start, s.end) for s in found] == [
        (start + i * size, start + (i + 1) * size) for i in range(filled // size)
    ]
    running = None
    for s in found:
        inside = [c for o, c, t in rows if s.start <= o < s.end and not t]
        assert s.latest == (max(inside) if inside else None)
        if s.latest is not None and (running is None or s.latest > running):
            running = s.latest
        assert s.prefix_max == running


def test_a_segment_continues_the_prefix_max_it_is_given() -> None:
    later = T0 + dt.timedelta(hours=1)
    rows = [(10, T0, False), (11, T0, True)]
    (only,) = segments(10, rows, later, 2)
    assert (only.latest, only.prefix_max) == (T0, later)
