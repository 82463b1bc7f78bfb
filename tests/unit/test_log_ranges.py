"""The consumption log's start rows and done marks name offset ranges, not offsets: the
runs of a batch must cover exactly its (partition, offset) pairs, and be as few as can."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from ems.store.consumption import offset_ranges

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
