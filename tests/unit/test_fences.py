"""The fences' pure parts (ems.store.fences): reading the rows, and the check a
producer's rows pass before they carry their partitions' fences."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.store.errors import BelowLowWatermark
from ems.store.fences import FenceCache, Fences, fences_of, refusal, stale
from ems.types import Placed, placed_messages

_fences = st.integers(1, 5).flatmap(
    lambda n: st.builds(
        Fences,
        st.just(n),
        st.lists(st.integers(0, 9), min_size=n, max_size=n).map(tuple),
        st.lists(st.sampled_from([0, 0, 3, 7]), min_size=n, max_size=n).map(tuple),
    )
)
#: Writes of 1 to 6 rows over partitions 0 to 6, each partition's range starting at 0-10.
_writes = st.lists(st.integers(0, 6), min_size=1, max_size=6).flatmap(
    lambda partitions: st.builds(
        Placed,
        st.just(4),
        st.just([(p, None, None, b"b") for p in partitions]),
        st.fixed_dictionaries({p: st.integers(0, 10) for p in partitions}),
    )
)


def _reference(placed: Placed, fences: Fences, routed: int | None) -> str | None:
    """The check row by row, over every row the write stores."""
    messages = placed_messages(placed)
    if routed is not None and routed != fences.partitions:
        return "partitions changed"
    if any(m.partition >= len(fences.lows) for m in messages):
        return "no partition"
    if any(m.offset < fences.lows[m.partition] for m in messages):
        return "below"
    return None


@given(_writes, _fences, st.sampled_from([None, 1, 2, 3, 4, 5]))
def test_rows_are_refused_exactly_when_routed_elsewhere_out_of_range_or_below_a_low(
    placed: Placed, fences: Fences, routed: int | None
) -> None:
    why = refusal(placed.firsts, fences, routed)
    expected = _reference(placed, fences, routed)
    assert (why is None) == (expected is None)
    if expected == "partitions changed":
        assert why is not None and "partitions changed" in why
    elif expected == "no partition":
        assert why is not None and "has no partition" in why
    elif expected == "below":
        assert why is not None and "below its partition's low watermark" in why


def test_the_rows_read_become_fences_by_partition() -> None:
    rows = [(1, 7, 0, 3), (0, 2, 40, 3), (2, 0, 5, 3)]
    assert fences_of(rows) == Fences(partitions=3, fences=(2, 7, 0), lows=(40, 0, 5))
    assert fences_of([]) is None
    # A partition without its row (never so in a consistent database) ends the partitions
    # kept: rows of it and past it are refused, never sent with a made-up fence.
    gap = fences_of([(0, 1, 0, 4), (1, 1, 0, 4), (3, 1, 0, 4)])
    assert gap == Fences(partitions=4, fences=(1, 1), lows=(0, 0))
    assert refusal({3: 0}, gap, 4) == "the topic has no partition 3"


def test_fences_read_before_are_read_again_and_fresh_ones_refuse() -> None:
    fences = Fences(partitions=2, fences=(0, 0), lows=(5, 0))
    below, above = {0: 3}, {0: 5}
    assert stale(above, fences, 2, fresh=False) is False
    assert stale(below, fences, 2, fresh=False) is True
    assert stale(above, fences, 3, fresh=False) is True  # routed by a count learned since
    with pytest.raises(BelowLowWatermark, match="below its partition's low watermark"):
        stale(below, fences, 2, fresh=True)


def test_the_cache_keeps_what_was_read_and_forgets_a_topic_gone() -> None:
    cache = FenceCache()
    kept = cache.keep(4, [(0, 3, 0, 1)])
    assert cache.get(4) == kept == Fences(partitions=1, fences=(3,), lows=(0,))
    with pytest.raises(BelowLowWatermark, match="no partitions"):
        cache.keep(4, [])
    assert cache.get(4) is None
