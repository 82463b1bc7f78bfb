from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.exceptions import InvalidInput, InvalidSetting
from ems.models.groups import DEFAULT_RETRY_LADDER
from ems.retry import DEFAULT_LADDER, Dead, Retry, format_ladder, next_step, parse_ladder

delays = st.floats(min_value=0, exclude_min=True, allow_infinity=False, allow_nan=False)
ladders = st.lists(delays, min_size=1, max_size=20).map(tuple)
units = st.sampled_from(["ms", "s", "m", "h", "d"])
tokens = st.builds("{}{}".format, st.integers(1, 10**6), units)
separators = st.sampled_from([" ", ",", ", ", "\t", "\n ", " ,  "])


@st.composite
def ladder_texts(draw: st.DrawFn) -> str:
    words = draw(st.lists(tokens, min_size=1, max_size=12))
    text = words[0]
    for word in words[1:]:
        text += draw(separators) + word
    return draw(separators | st.just("")) + text + draw(separators | st.just(""))


def test_default_ladder_is_the_column_default() -> None:
    assert DEFAULT_LADDER == DEFAULT_RETRY_LADDER


def test_default_ladder_values() -> None:
    ladder = parse_ladder(DEFAULT_LADDER)
    assert ladder[:4] == (10.0, 30.0, 60.0, 120.0)
    assert ladder[-2:] == (3600.0, 7200.0)
    assert len(ladder) == 16


def test_default_ladder_formats_to_itself() -> None:
    assert format_ladder(parse_ladder(DEFAULT_LADDER)) == DEFAULT_LADDER


@given(st.integers(1, 200), st.integers(1, 200))
def test_default_ladder_delays_never_shrink(first: int, second: int) -> None:
    ladder = parse_ladder(DEFAULT_LADDER)
    early, late = sorted((first, second))
    a, b = next_step(early, ladder, 1000), next_step(late, ladder, 1000)
    assert isinstance(a, Retry) and isinstance(b, Retry)
    assert a.delay <= b.delay


def test_units_and_separators() -> None:
    assert parse_ladder("250ms, 1.5s 2m\t1h,1d") == (0.25, 1.5, 120.0, 3600.0, 86400.0)


def test_format_prefers_the_largest_exact_unit() -> None:
    assert format_ladder([0.25, 1.5, 90, 120, 7200, 86400]) == "250ms 1500ms 90s 2m 2h 1d"


@given(ladders)
def test_format_then_parse_round_trips(ladder: tuple[float, ...]) -> None:
    assert parse_ladder(format_ladder(ladder)) == ladder


@given(ladder_texts())
def test_parse_then_format_round_trips(text: str) -> None:
    ladder = parse_ladder(text)
    assert parse_ladder(format_ladder(ladder)) == ladder
    assert format_ladder(parse_ladder(format_ladder(ladder))) == format_ladder(ladder)


@given(st.text(max_size=40))
def test_any_text_parses_to_positive_delays_or_raises_invalid_setting(text: str) -> None:
    try:
        ladder = parse_ladder(text)
    except InvalidSetting:
        return
    assert ladder and all(d > 0 and math.isfinite(d) for d in ladder)


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("10s 0s", "0s"),
        ("10s -5m", "-5m"),
        ("10s 5", "'5'"),
        ("10s 5x", "5x"),
        ("10s 5S", "5S"),
        ("10s 1e999s", "1e999s"),
        ("10s, fast", "fast"),
        ("10s 1..5s", "1..5s"),
    ],
)
def test_bad_token_is_named(text: str, bad: str) -> None:
    with pytest.raises(InvalidSetting, match=bad):
        parse_ladder(text)


@pytest.mark.parametrize("text", ["", "   ", " , ,\n"])
def test_empty_ladder(text: str) -> None:
    with pytest.raises(InvalidSetting, match="empty"):
        parse_ladder(text)


@pytest.mark.parametrize("ladder", [(), (0.0,), (-1.0,), (math.inf,), (math.nan,)])
def test_format_rejects_what_parse_would(ladder: tuple[float, ...]) -> None:
    with pytest.raises(InvalidSetting):
        format_ladder(ladder)


# -- next_step ------------------------------------------------------------------------


@given(ladders, st.integers(1, 100), st.integers(1, 100))
def test_retry_uses_the_rung_of_the_attempt_clamped_to_the_last(
    ladder: tuple[float, ...], attempts: int, max_attempts: int
) -> None:
    step = next_step(attempts, ladder, max_attempts)
    if attempts >= max_attempts:
        assert step == Dead()
    else:
        assert step == Retry(delay=ladder[min(attempts, len(ladder)) - 1])


@given(ladders, st.integers(1, 100), st.integers(1, 50))
def test_past_the_ladder_waits_the_last_rung(
    ladder: tuple[float, ...], beyond: int, headroom: int
) -> None:
    attempts = len(ladder) + beyond
    assert next_step(attempts, ladder, attempts + headroom) == Retry(delay=ladder[-1])


@given(ladders, st.integers(1, 100))
def test_dead_exactly_at_max_attempts(ladder: tuple[float, ...], max_attempts: int) -> None:
    if max_attempts > 1:
        assert isinstance(next_step(max_attempts - 1, ladder, max_attempts), Retry)
    assert next_step(max_attempts, ladder, max_attempts) == Dead()
    assert next_step(max_attempts + 1, ladder, max_attempts) == Dead()


def test_default_policy_walks_the_ladder_then_dies() -> None:
    ladder = parse_ladder(DEFAULT_LADDER)
    steps = [next_step(n, ladder, 16) for n in range(1, 17)]
    assert steps[0] == Retry(delay=10.0)
    assert steps[14] == Retry(delay=3600.0)
    assert steps[15] == Dead()


@pytest.mark.parametrize("max_attempts", [0, -1])
def test_max_attempts_must_be_positive(max_attempts: int) -> None:
    with pytest.raises(InvalidSetting, match="max_attempts"):
        next_step(1, (10.0,), max_attempts)


def test_attempts_start_at_one() -> None:
    with pytest.raises(InvalidInput, match="attempts"):
        next_step(0, (10.0,), 5)


def test_empty_ladder_is_invalid() -> None:
    with pytest.raises(InvalidSetting):
        next_step(1, (), 5)
