"""The consumption log's start rows and done marks name offset ranges, not offsets: the
runs of a batch must cover exactly its (partition, offset) pairs, and be as few as can."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from ems.store.consumption import offset_ranges, settled_at_start
from ems.types import Settlement
from tests.unit.test_consumer_state import delivery

PAIRS = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40)), max_size=60)


@given(PAIRS)
def test_runs_cover_exactly_the_pairs(pairs: list[tuple[int, int]]) -> None:
    runs = offset_ranges(pairs)
    assert {(p, o) for p, a, b in runs for o in range(a, b + 1)} == set(pairs)
    assert runs == sorted(runs) and all(a <= b for _, a, b in runs)


@given(PAIRS)
def test_runs_of_distinct_pairs_are_maximal(pairs: list[tuple[int, int]]) -> None:
    runs = offset_ranges(list(set(pairs)))
    for (p, _, b), (q, c, _) in itertools.pairwise(runs):
        assert p != q or c > b + 1


@given(PAIRS, PAIRS)
def test_start_rows_in_their_settlement_split_into_acked_and_still_in_flight(
    started_pairs: list[tuple[int, int]], done: list[tuple[int, int]]
) -> None:
    started = [delivery(p, o) for p, o in dict.fromkeys(started_pairs)]
    settlement = Settlement(done=done, cursors={0: (5, 1)})
    settled, rest, left = settled_at_start(started, settlement)
    places = {(d.partition, d.offset) for d in settled}
    # Every start row is written once: as done if the settlement acks it, else started.
    assert sorted(settled + rest, key=started.index) == started
    assert places == {(d.partition, d.offset) for d in started} & set(done)
    # The UPDATE to done is left with the acks of earlier batches only.
    assert left.done == [x for x in done if x not in places]
    assert left.cursors == settlement.cursors
