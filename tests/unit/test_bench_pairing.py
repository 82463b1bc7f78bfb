"""Two systems compared round by round: the median of the rounds' ratios and their
range, whatever the host's speed did between rounds."""

from __future__ import annotations

import statistics

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.pairing import Ratio, paired

speeds = st.lists(st.floats(min_value=1.0, max_value=1e6), min_size=1, max_size=12)
shares = st.floats(min_value=0.1, max_value=10.0)


@given(speeds, shares)
def test_a_system_at_a_fixed_share_of_another_in_every_round_is_that_share(
    host: list[float], share: float
) -> None:
    ratio = paired([h * share for h in host], host)
    assert ratio is not None
    assert abs(ratio.median - share) <= 1e-9 * share
    assert abs(ratio.high - ratio.low) <= 1e-9 * share


@given(st.lists(st.tuples(speeds.map(min), shares), min_size=1, max_size=12))
def test_the_ratio_is_the_median_of_the_rounds_ratios_between_their_extremes(
    rounds: list[tuple[float, float]],
) -> None:
    second = [h for h, _ in rounds]
    first = [h * s for h, s in rounds]
    ratio = paired(first, second)
    assert ratio is not None
    found = [a / b for a, b in zip(first, second, strict=True)]
    assert ratio == Ratio(statistics.median(found), min(found), max(found))
    assert ratio.low <= ratio.median <= ratio.high


def test_a_slow_phase_moves_a_ratio_of_medians_but_not_the_rounds_ratio() -> None:
    floor = [1000.0, 800.0, 800.0]
    ems = [950.0, 760.0, 760.0]
    assert statistics.median(ems) / statistics.median(floor) == 0.95
    assert paired(ems, floor) == Ratio(0.95, 0.95, 0.95)
    late = [760.0, 760.0, 760.0]  # as fast in the fast round as in the slow ones
    assert statistics.median(late) / statistics.median(floor) == 0.95
    ratio = paired(late, floor)
    assert ratio is not None and ratio.low == 0.76 and ratio.median == 0.95


def test_rounds_without_both_runs_give_no_ratio() -> None:
    assert paired([], []) is None
    assert paired([1.0, 2.0], [1.0]) is None
    assert paired([1.0, None], [1.0, 2.0]) is None
    assert paired([1.0, 2.0], [1.0, 0.0]) is None


def test_a_ratio_shows_its_range_only_where_the_rounds_differ() -> None:
    assert str(Ratio(0.951, 0.9, 1.0)) == "0.95x"
    assert Ratio(0.951, 0.9, 1.0).with_range() == "0.95x (0.90-1.00)"
    assert Ratio(0.95, 0.949, 0.951).with_range() == "0.95x"
