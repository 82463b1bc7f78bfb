"""The cost model's instruction counts: cachegrind's totals read from its output file,
and a message's share of what a run executed beyond its baseline."""

from __future__ import annotations

import pytest

from benchmarks.harness import BenchError
from benchmarks.instructions import per_message, render, totals

OUTPUT = """desc: I1 cache: 32768 B, 64 B, 8-way associative
cmd: python -m benchmarks.instructions
events: Ir
fl=/usr/bin/python3.11
fn=main
12 7
summary: 6067829614
"""


def test_the_totals_are_the_summary_line_under_its_events() -> None:
    assert totals(OUTPUT) == {"Ir": 6_067_829_614}
    two = "events: Ir Dr\nsummary: 10 4\n"
    assert totals(two) == {"Ir": 10, "Dr": 4}


@pytest.mark.parametrize("text", ["events: Ir\n", "summary: 5\n", "events: Ir Dr\nsummary: 5\n"])
def test_an_output_without_matching_lines_is_refused(text: str) -> None:
    with pytest.raises(BenchError):
        totals(text)


def test_a_message_costs_what_the_run_executed_beyond_its_baseline() -> None:
    base, run = {"Ir": 6_000_000}, {"Ir": 6_340_000}
    assert per_message(base, run, 2_000) == 170.0


def test_the_table_sets_each_system_beside_both_floors_of_its_build() -> None:
    counts = {
        op: {"ems": 150.0, "raw+redis+guard": 120.0, "raw+redis": 100.0}
        for op in ("single", "batch")
    }
    fast = {op: {system: n / 2 for system, n in found.items()} for op, found in counts.items()}
    fast["single"]["ems"] = 80.0
    lines = render({"interpreted": counts, "compiled": fast})
    assert "| single send | interpreted | ems | 150 | 1.500x | 1.250x |" in lines
    batch = "| batch send (100 per call) |"
    assert f"{batch} interpreted | raw+redis | 100 | 1.000x | 0.833x |" in lines
    # A compiled ems is set beside the compiled floors, not the interpreted ones.
    assert "| single send | compiled | ems | 80 | 1.600x | 1.333x |" in lines
    assert f"{batch} compiled | ems | 75 | 1.500x | 1.250x |" in lines
