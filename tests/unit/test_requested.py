"""What a handler asks for by raising: ems.Retry(delay) and ems.DeadLetter(reason), checked
when raised, and how any handler exception becomes its message's failure (pure)."""

from __future__ import annotations

import math
import pickle

import pytest

import ems
from ems.exceptions import InvalidSetting
from ems.retry.requested import ERROR_CHARS, MAX_DELAY, DeadLetter, Retry, check_delay, verdict


def test_they_are_exported_from_ems() -> None:
    assert ems.Retry is Retry and ems.DeadLetter is DeadLetter
    assert not issubclass(Retry, ems.EmsError)  # the handler raises them, not ems


@pytest.mark.parametrize("delay", [-1, -0.001, math.nan, math.inf, -math.inf, MAX_DELAY + 1])
def test_a_bad_delay_is_refused_when_the_retry_is_made(delay: float) -> None:
    with pytest.raises(InvalidSetting, match="retry delay"):
        Retry(delay=delay)


@pytest.mark.parametrize("delay", ["30", True, [1], b"1"])
def test_a_delay_that_is_not_a_number_is_refused(delay: object) -> None:
    with pytest.raises(InvalidSetting, match="number of seconds"):
        Retry(delay=delay)  # type: ignore[arg-type]


def test_good_delays_are_kept_as_seconds() -> None:
    assert Retry().delay is None
    assert Retry(0).delay == 0.0 and Retry(delay=30).delay == 30.0
    assert check_delay(MAX_DELAY) == MAX_DELAY and check_delay(0.25) == 0.25


def test_a_retry_is_an_attempt_named_as_requested() -> None:
    assert verdict(Retry(delay=30)) == (
        "Retry: requested by the handler, after 30s",
        30.0,
        False,
    )
    assert verdict(Retry()) == (
        "Retry: requested by the handler, by the group's ladder",
        None,
        False,
    )


def test_a_dead_letter_is_dead_with_its_reason() -> None:
    assert verdict(DeadLetter("unknown device 7")) == ("DeadLetter: unknown device 7", None, True)


def test_what_a_requested_outcome_was_raised_from_is_named() -> None:
    try:
        try:
            raise TimeoutError("upstream slow")
        except TimeoutError as exc:
            raise Retry(delay=5) from exc
    except Retry as raised:
        found = verdict(raised)
    assert found.error == (
        "Retry: requested by the handler, after 5s (after TimeoutError: upstream slow)"
    )


def test_any_other_exception_is_a_retry_by_the_ladder_its_text_cut() -> None:
    assert verdict(ValueError("poison")) == ("ValueError: poison", None, False)
    long = verdict(KeyError("k" * 5000))
    assert len(long.error) == ERROR_CHARS and long.error.startswith("KeyError: 'kkk")


def test_an_exception_whose_text_fails_is_still_a_failure() -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    assert verdict(Broken()) == ("Broken: <str() failed>", None, False)


def test_they_survive_pickling() -> None:
    again = pickle.loads(pickle.dumps(Retry(delay=2.5)))
    assert isinstance(again, Retry) and again.delay == 2.5
    dead = pickle.loads(pickle.dumps(DeadLetter("why")))
    assert isinstance(dead, DeadLetter) and dead.reason == "why"
