"""The cost model's instruction counts: cachegrind's totals read from its output file,
and a message's share of what a run executed beyond its baseline."""

from __future__ import annotations

import pytest

from benchmarks.harness import BenchError
from benchmarks.instructions import l1_misses, per_message, render, totals

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


def test_a_message_costs_what_the_run_counted_beyond_its_baseline() -> None:
    base = {"Ir": 6_000_000, "I1mr": 9_000, "D1mr": 4_000, "D1mw": 1_000, "Dr": 7}
    run = {"Ir": 6_340_000, "I1mr": 9_400, "D1mr": 4_200, "D1mw": 1_100, "Dr": 9}
    assert per_message(base, run, 2_000) == {"Ir": 170.0, "I1mr": 0.2, "D1mr": 0.1, "D1mw": 0.05}


def _cost(instructions: float, misses: float) -> dict[str, float]:
    """A message's counts: `misses` of the first-level caches, half of them instructions'."""
    return {"Ir": instructions, "I1mr": misses / 2, "D1mr": misses / 4, "D1mw": misses / 4}


def test_the_table_sets_each_system_beside_both_floors_of_its_build() -> None:
    counts = {
        op: {
            "ems": _cost(150.0, 30.0),
            "raw+redis+guard": _cost(120.0, 20.0),
            "raw+redis": _cost(100.0, 12.0),
        }
        for op in ("single", "batch")
    }
    fast = {
        op: {system: _cost(c["Ir"] / 2, l1_misses(c)) for system, c in found.items()}
        for op, found in counts.items()
    }
    fast["single"]["ems"] = _cost(80.0, 24.0)
    lines = render({"interpreted": counts, "compiled": fast})
    assert "| single send | interpreted | ems | 150 | 1.500x | 1.250x | 15 | 15 | 2.50x |" in lines
    batch = "| batch send (100 per call) |"
    assert f"{batch} interpreted | raw+redis | 100 | 1.000x | 0.833x | 6 | 6 | 1.00x |" in lines
    # A compiled ems is set beside the compiled floors, not the interpreted ones.
    assert "| single send | compiled | ems | 80 | 1.600x | 1.333x | 12 | 12 | 2.00x |" in lines
    assert f"{batch} compiled | ems | 75 | 1.500x | 1.250x | 15 | 15 | 2.50x |" in lines
