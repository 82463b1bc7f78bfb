"""A failed handler's traceback, bounded for the retry row and the dead letter: never
longer than the bound, always ending with the exception line, keeping the innermost
frames and saying what was left out."""

from __future__ import annotations

import traceback

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.exceptions import InvalidSetting
from ems.retry.tracebacks import MIN_TRACEBACK_CHARS, TRACEBACK_CHARS, bounded, format_traceback


def _raised(fn: object, *args: object) -> BaseException:
    try:
        fn(*args)  # type: ignore[operator]
    except BaseException as exc:
        return exc
    raise AssertionError("nothing raised")


def throw(exc: BaseException) -> None:
    raise exc


def ping(n: int, message: str) -> None:
    # ping and pong alternate, so Python does not fold their frames as repeats.
    if n == 0:
        raise ValueError(message)
    pong(n - 1, message)


def pong(n: int, message: str) -> None:
    ping(n, message)


def test_a_short_traceback_is_kept_whole() -> None:
    exc = _raised(ping, 2, "poison")
    text = format_traceback(exc)
    assert text.startswith("Traceback (most recent call last):\n")
    assert text.endswith("ValueError: poison\n")
    assert text.count("in ping") == 3 and "left out" not in text


def test_a_deep_stack_keeps_the_innermost_frames_and_the_exception_line() -> None:
    exc = _raised(ping, 300, "poison")
    whole = "".join(traceback.format_exception(exc))
    assert len(whole) > 3 * TRACEBACK_CHARS
    text = format_traceback(exc)
    assert len(text) <= TRACEBACK_CHARS
    assert text.endswith("ValueError: poison\n")
    assert text.startswith("[") and "characters of the outer frames left out]\n" in text
    assert whole.endswith(text[text.index("\n") + 1 :])  # the tail, whole frames
    # What was left out is said exactly.
    left_out = int(text[1 : text.index(" ")])
    assert left_out == len(whole) - len(text[text.index("\n") + 1 :])


def test_a_huge_exception_message_is_cut_to_half_the_bound_and_frames_still_fit() -> None:
    exc = _raised(ping, 3, "poison " + "x" * 50_000)
    text = format_traceback(exc)
    assert len(text) <= TRACEBACK_CHARS
    tail = text[text.rindex("ValueError: poison") :]
    assert len(tail) <= TRACEBACK_CHARS // 2
    assert tail.endswith("…[50020 characters in all]\n")
    assert "in ping" in text and "in pong" in text


def test_causes_are_kept_and_the_last_exception_ends_the_text() -> None:
    def wrap() -> None:
        try:
            ping(1, "inner")
        except ValueError as exc:
            raise RuntimeError("outer") from exc

    text = format_traceback(_raised(wrap))
    assert "ValueError: inner" in text and "direct cause" in text
    assert text.endswith("RuntimeError: outer\n")


def test_an_exception_group_is_bounded_too() -> None:
    group = ExceptionGroup("many", [_raised(ping, 200, f"p{i}") for i in range(5)])
    text = format_traceback(_raised(throw, group))
    assert len(text) <= TRACEBACK_CHARS and "p4" in text


def test_an_innermost_part_longer_than_the_room_keeps_its_start() -> None:
    frames = ["Traceback (most recent call last):\n", '  File "m.py", line 1\n' + "y" * 20_000]
    text = bounded(frames, "ValueError: v\n", 1000)
    assert len(text) <= 1000 and text.endswith("…\nValueError: v\n")
    assert '  File "m.py", line 1' in text
    room = 1000 - len("ValueError: v\n") - 80  # what is left beside the ending and the note
    shown = room - 2  # the part's start, then "…\n"
    assert text.startswith(f"[{len(''.join(frames)) - shown} characters of the outer frames")


def test_a_bound_below_the_minimum_is_refused() -> None:
    with pytest.raises(InvalidSetting):
        bounded([], "x", MIN_TRACEBACK_CHARS - 1)


@given(
    frames=st.lists(st.text(min_size=1, max_size=3000), max_size=40),
    ending=st.text(max_size=20_000),
    limit=st.integers(MIN_TRACEBACK_CHARS, 20_000),
)
def test_the_bound_always_holds_and_the_exception_line_starts_where_it_did(
    frames: list[str], ending: str, limit: int
) -> None:
    text = bounded(frames, ending, limit)
    assert len(text) <= limit
    if len(ending) <= limit // 2:
        assert text.endswith(ending)
    else:
        assert ending[: limit // 2 - 40] in text
    if frames and len(frames[-1]) + len(ending) + 80 <= limit and len(ending) <= limit // 2:
        assert frames[-1] + ending in text  # the innermost part stays whole when it fits
