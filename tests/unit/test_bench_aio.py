"""The aio suite's consume rows: a median over alternating drains, and their rates shown;
aio against sync judged by the median of the rounds' ratios."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.aio import CONSUME, CONSUME_GOAL, Row, rounds_lines, table
from benchmarks.aio_consume import Drain, median_drain, paired_ratio


def drain(rate: float, cpu: float, check: str | None = None, system: str = "aio") -> Drain:
    return Drain(
        system=system,
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


def test_aio_against_sync_is_the_median_of_the_rounds_ratios() -> None:
    # A slow phase (rounds 1-2), then a fast one (rounds 3-4).
    sync = median_drain([drain(r, 1.0, system="sync") for r in (800, 820, 1000, 1050)])
    aio = median_drain([drain(r, 1.0) for r in (760, 779, 950, 997.5)])
    assert paired_ratio([sync, aio]) == pytest.approx(0.95)  # 0.95x in every round
    # aio as fast in the fast phase as in the slow one: its median rate over sync's
    # median says 0.95x (779 / 820), the rounds say 0.95x, 0.95x, 0.78x and 0.74x.
    slow = median_drain([drain(r, 1.0) for r in (760, 779, 779, 779)])
    assert round(slow.rate / sync.rate, 2) == 0.95
    assert paired_ratio([sync, slow]) == pytest.approx((779 / 1000 + 779 / 820) / 2)
    # Unpaired: a failed system, or rounds that do not line up.
    assert paired_ratio([sync, dataclasses.replace(aio, error="boom")]) is None
    assert paired_ratio([sync, median_drain([drain(900, 1.0)])]) is None


def test_the_aio_row_is_judged_and_shown_by_its_paired_ratio() -> None:
    rows = [
        Row(kind=CONSUME, case="s", system="sync", rate=1000.0, cpu=1.0),
        Row(kind=CONSUME, case="a", system="aio", rate=950.0, cpu=1.0, goal=CONSUME_GOAL),
    ]
    met = table(rows)[-1]
    assert "| 0.95x |" in met and met.endswith("| yes |")
    missed = table([rows[0], dataclasses.replace(rows[1], paired=0.85)])[-1]
    assert "| 0.85x |" in missed and "**NO**: 0.85x < 0.9x sync" in missed
