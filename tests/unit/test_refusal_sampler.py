"""The audit trail's sample of anonymous refusals: written by the minute per address and
by a cap over all of them, every refusal accounted for by a written entry or the flush."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ems.values.refusals import Admitted, RefusalSampler


def test_one_entry_per_address_per_window_standing_for_those_held_back() -> None:
    s = RefusalSampler(window=60, per_window=20)
    assert s.admit("a", 0.0) == Admitted(refusals=1, other=0)
    assert [s.admit("a", t) for t in (1.0, 30.0, 59.9)] == [None, None, None]
    assert s.admit("b", 2.0) == Admitted(refusals=1, other=0)
    assert s.admit("a", 60.0) == Admitted(refusals=4, other=0)  # itself and three held
    assert s.flush() == []


def test_past_the_cap_refusals_of_new_addresses_are_counted_as_other() -> None:
    s = RefusalSampler(window=60, per_window=2)
    assert s.admit("a", 0.0) is not None and s.admit("b", 0.0) is not None
    assert [s.admit(x, 1.0) for x in "cde"] == [None, None, None]
    assert s.admit("f", 61.0) == Admitted(refusals=1, other=3)


def test_evicted_addresses_hand_their_count_to_other_and_flush_reports_the_rest() -> None:
    s = RefusalSampler(window=60, per_window=100, tracked=2)
    for address in ("a", "a", "a", "b"):
        s.admit(address, 0.0)
    # c's entry pushes a out, with the two refusals a held back
    assert s.admit("c", 0.0) == Admitted(refusals=1, other=2)
    s.admit("b", 1.0)
    s.admit("b", 2.0)
    assert s.flush() == [("b", 2)]
    assert s.flush() == []


@given(
    st.lists(
        st.tuples(st.sampled_from("abcdef"), st.floats(min_value=0, max_value=30)),
        max_size=300,
    ),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=1, max_value=6),
)
def test_every_refusal_is_accounted_for(
    events: list[tuple[str, float]], per_window: int, tracked: int
) -> None:
    s = RefusalSampler(window=5, per_window=per_window, tracked=tracked)
    now, counted = 0.0, 0
    for address, step in events:
        now += step
        admitted = s.admit(address, now)
        if admitted is not None:
            counted += admitted.refusals + admitted.other
    counted += sum(n for _, n in s.flush())
    assert counted == len(events)


def test_a_capped_count_says_more_than_the_cap() -> None:
    from ems.values.browse import WAITING_CAP, waiting_text

    assert waiting_text(0) == "0"
    assert waiting_text(WAITING_CAP) == str(WAITING_CAP)
    assert waiting_text(WAITING_CAP + 1) == f"{WAITING_CAP}+"
