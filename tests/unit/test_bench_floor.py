"""The producer suite's floor table: every publish row's ems against raw+redis, judged
against the floor targets, and split into ems's own layers and the guard; the order of
the runs behind it."""

from __future__ import annotations

import statistics

from benchmarks.harness import turns
from benchmarks.producer import rounds_lines, run_order
from benchmarks.report import SYSTEMS, Row, floor_table


def row(rates: dict[str, float], cpu: dict[str, float]) -> Row:
    """A row of one round."""
    return rounds({s: [r] for s, r in rates.items()}, {s: [c] for s, c in cpu.items()})


def rounds(rates: dict[str, list[float]], cpu: dict[str, list[float]]) -> Row:
    return Row(
        case="single",
        target=None,
        rates={s: statistics.median(r) for s, r in rates.items()},
        cpu={s: statistics.median(c) for s, c in cpu.items()},
        rounds=rates,
        cpu_rounds=cpu,
    )


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip("|").split("|")]


def test_a_row_within_both_floor_targets_is_met_and_split_into_layers_and_guard() -> None:
    r = row(
        {"ems": 960, "raw+redis+guard": 980, "raw+redis": 1000},
        {"ems": 110.0, "raw+redis+guard": 105.0, "raw+redis": 100.0},
    )
    line = cells(floor_table([r])[-1])
    assert line[1:6] == ["0.96x", "1.10x", "0.98x", "1.05x", "0.98x"]
    assert line[-1] == "yes"


def test_a_row_missing_either_target_says_which() -> None:
    slow = row({"ems": 900, "raw+redis": 1000}, {"ems": 100.0, "raw+redis": 100.0})
    costly = row({"ems": 990, "raw+redis": 1000}, {"ems": 130.0, "raw+redis": 100.0})
    unmeasured = row({"ems": 990}, {"ems": 100.0})
    lines = floor_table([slow, costly, unmeasured])
    assert cells(lines[-3])[-1] == "**NO**: msg/s 0.90x < 0.95x"
    assert cells(lines[-2])[-1] == "**NO**: client CPU 1.30x > 1.2x"
    assert cells(lines[-1])[-1] == "**NO**: not measured"
    assert cells(lines[-1])[3] == "-"  # no guard measurement: no ratio


def test_the_floor_systems_run_in_rounds_their_order_turning() -> None:
    order = run_order(3)
    assert order == [
        "ems", "raw+redis+guard", "raw+redis",
        "raw+redis+guard", "raw+redis", "ems",
        "raw+redis", "ems", "raw+redis+guard",
        "raw", "kombu",
    ]  # fmt: skip
    assert {s: order.count(s) for s in SYSTEMS} == {
        "ems": 3, "raw+redis+guard": 3, "raw+redis": 3, "raw": 1, "kombu": 1,
    }  # fmt: skip


def test_two_systems_turned_alternate_as_the_consumer_suites_drains_do() -> None:
    assert turns(("raw", "ems"), 3) == [("raw", "ems"), ("ems", "raw"), ("raw", "ems")]


def test_a_missed_row_says_what_ems_own_layers_would_need_and_when_the_guard_alone_misses() -> None:
    # The guard costs 5% of the rate and 6% of the CPU: ems's layers may cost 1.00x of
    # the rate (none) and 1.2 / 1.06 = 1.13x of the CPU.
    at_the_line = row(
        {"ems": 820, "raw+redis+guard": 950, "raw+redis": 1000},
        {"ems": 135.0, "raw+redis+guard": 106.0, "raw+redis": 100.0},
    )
    # The guard alone costs 9% of the rate and 26% of the CPU: past what any layer can do.
    beyond = row(
        {"ems": 840, "raw+redis+guard": 910, "raw+redis": 1000},
        {"ems": 171.0, "raw+redis+guard": 126.0, "raw+redis": 100.0},
    )
    met = row(
        {"ems": 960, "raw+redis+guard": 980, "raw+redis": 1000},
        {"ems": 110.0, "raw+redis+guard": 105.0, "raw+redis": 100.0},
    )
    lines = floor_table([at_the_line, beyond, met])
    assert cells(lines[-3])[6] == ("msg/s >= 1.00x (has 0.86x); client CPU <= 1.13x (has 1.27x)")
    assert cells(lines[-2])[6] == (
        "msg/s >= 1.04x (has 0.92x, beyond the guard alone); "
        "client CPU <= 0.95x (has 1.36x, beyond the guard alone)"
    )
    assert cells(lines[-1])[6] == "-"
    assert len(cells(lines[0])) == len(cells(lines[-1]))  # the head names every column


def test_a_row_is_judged_by_its_rounds_ratios_not_by_a_ratio_of_medians() -> None:
    # The host is slow in rounds 3-5, and slows down again in round 6 between the
    # floor's run and ems's: ems's median rate over the floor's median says 0.85x, the
    # rounds say 0.96x, 0.95x, 0.95x, 0.96x, 0.96x and (round 6) 0.77x.
    floor = [1000.0, 1000.0, 800.0, 800.0, 800.0, 1000.0]
    ems = [960.0, 950.0, 760.0, 768.0, 768.0, 770.0]
    guard = [990.0, 990.0, 792.0, 792.0, 792.0, 990.0]
    floor_cpu = [100.0, 104.0, 100.0, 104.0, 100.0, 104.0]
    ems_cpu = [110.0, 124.8, 110.0, 124.8, 110.0, 124.8]  # 1.10x and 1.20x
    r = rounds(
        {"ems": ems, "raw+redis+guard": guard, "raw+redis": floor},
        {"ems": ems_cpu, "raw+redis+guard": floor_cpu, "raw+redis": floor_cpu},
    )
    assert round(r.rates["ems"] / r.rates["raw+redis"], 2) == 0.85  # by medians: a miss
    line = cells(floor_table([r])[-1])
    assert line[1] == "0.95x (0.77-0.96)"
    assert line[2] == "1.15x (1.10-1.20)"
    assert line[5] == "0.99x"  # the same in every round: no range
    assert line[-1] == "yes"


def test_rounds_that_do_not_pair_are_not_measured() -> None:
    r = rounds(
        {"ems": [960.0, 950.0], "raw+redis": [1000.0]},  # a floor run failed
        {"ems": [100.0, 100.0], "raw+redis": [100.0]},
    )
    line = cells(floor_table([r])[-1])
    assert line[1] == "-"
    assert line[-1] == "**NO**: not measured"


def test_the_page_lists_each_floor_systems_rounds_in_their_order() -> None:
    r = rounds({"ems": [960.0, 1200.5], "raw+redis": [1000.0, 1250.0]}, {})
    assert rounds_lines([r, Row(case="none", target=None)]) == [
        "- single: ems 960, 1,200; raw+redis 1,000, 1,250"
    ]
