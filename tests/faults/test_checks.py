"""The scenarios' judge finds each broken promise it claims to find."""

from __future__ import annotations

from pathlib import Path

from tests.faults.checks import (
    Ack,
    Recorded,
    judge,
    longest_gap,
    read_records,
    worst_recovery,
)


def _recorded(*acks: tuple[int, int, str], handled: tuple[tuple[int, int], ...] = ()) -> Recorded:
    return Recorded(
        acks=[Ack(float(i), (p, o), b) for i, (p, o, b) in enumerate(acks)],
        handled=[(0.0, place, "x") for place in handled],
    )


def test_a_clean_run_has_no_problems() -> None:
    stored = {(0, 0): ("a", False), (0, 1): ("b", False), (0, 2): ("", True)}
    recorded = _recorded((0, 0, "a"), (0, 1, "b"), handled=((0, 0), (0, 1)))
    verdict = judge(recorded, stored, {}, {0: 3})
    assert verdict.problems(max_redelivered=0) == []
    assert verdict.acknowledged == 2


def test_an_ack_whose_row_holds_another_body_is_lost() -> None:
    stored = {(0, 0): ("heartbeat", False)}
    recorded = _recorded((0, 0, "heartbeat"), (0, 0, "heartbeat"))
    verdict = judge(recorded, stored, {})
    assert verdict.stored_twice == ["(0, 0) acknowledged 2 times"]
    assert judge(_recorded((0, 0, "mine")), stored, {}).lost == [Ack(0.0, (0, 0), "mine")]


def test_a_body_at_two_places_is_stored_twice_and_holes_are_gaps() -> None:
    stored = {(0, 0): ("a", False), (0, 2): ("a", False), (1, 5): ("c", False)}
    verdict = judge(_recorded((0, 0, "a"), (1, 5, "c")), stored, {1: 4})
    assert verdict.stored_twice == ["a"]
    assert verdict.gaps == {0: [1], 1: [4]}


def test_a_cursor_past_an_unhandled_message_and_redeliveries_are_counted() -> None:
    stored = {(0, 0): ("a", False), (0, 1): ("b", False)}
    recorded = _recorded((0, 0, "a"), (0, 1, "b"), handled=((0, 0), (0, 0)))
    verdict = judge(recorded, stored, {}, {0: 2})
    assert verdict.past_cursor == [(0, 1)]
    assert verdict.delivered_twice == 1
    assert len(verdict.problems(max_redelivered=0)) == 2


def test_records_are_read_whole_lines_only(tmp_path: Path) -> None:
    producer, member = tmp_path / "p", tmp_path / "m"
    producer.write_text("ack 1.5 0 3 p-1\nfail 2.0 5 DatabaseUnavailable\nack 9.0 0 4 p-")
    member.write_text("3.0 0 3 p-1\n")
    recorded = read_records([producer], [member])
    assert recorded.acks == [Ack(1.5, (0, 3), "p-1")]
    assert recorded.failed == 5
    assert recorded.handled == [(3.0, (0, 3), "p-1")]
    assert longest_gap([1.0, 1.5, 4.0, 4.1]) == 2.5


def test_worst_recovery_is_the_longest_wait_after_a_fault_ends() -> None:
    acks = [1.0, 2.0, 9.0, 10.0, 14.5, 20.0]
    assert worst_recovery(acks, [(3.0, 8.0), (11.0, 13.0)]) == 1.5
    assert worst_recovery(acks, []) == 0.0
    assert worst_recovery(acks, [(3.0, 21.0)]) is None
