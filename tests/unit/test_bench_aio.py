"""The aio suite's consume rows: a median over alternating drains, and their rates shown."""

from __future__ import annotations

from benchmarks.aio import CONSUME, Row, rounds_lines
from benchmarks.aio_consume import Drain, median_drain


def drain(rate: float, cpu: float, check: str | None = None) -> Drain:
    return Drain(
        system="aio",
        handled=1000,
        seconds=1000 / rate,
        cpu_micros=cpu,
        checks=[] if check is None else [check],
    )


def test_the_median_drain_is_the_middle_round_with_the_median_cpu() -> None:
    got = median_drain([drain(900, 12.0), drain(1100, 10.0, "CHECK late"), drain(1000, 14.0)])
    assert round(got.rate) == 1000
    assert got.cpu_micros == 12.0
    assert got.checks == ["CHECK late"]
    assert [round(r) for r in got.rounds] == [900, 1100, 1000]  # the order run


def test_two_rounds_take_the_slower_and_one_round_is_itself() -> None:
    assert round(median_drain([drain(1200, 1.0), drain(800, 3.0)]).rate) == 800
    assert round(median_drain([drain(1200, 1.0)]).rate) == 1200


def test_the_report_lists_each_drain_rate_by_system() -> None:
    rows = [
        Row(kind=CONSUME, case="s", system="sync", rate=1.0, cpu=1.0, rounds=(1000.0, 1200.0)),
        Row(kind=CONSUME, case="a", system="aio", rate=1.0, cpu=1.0, rounds=(900.0, 950.5)),
        Row(kind=CONSUME, case="r", system="raw", rate=1.0, cpu=1.0),
    ]
    (line, blank) = rounds_lines(rows)
    assert line.endswith("in the order run: sync 1,000, 1,200; aio 900, 950.")
    assert blank == ""
    assert rounds_lines(rows[2:]) == []
