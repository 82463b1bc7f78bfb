"""make bench writes the CPU steal each suite met into the results files it wrote."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from benchmarks import docs_figures, steal

STAT = "cpu  100 5 50 800 10 0 5 30 0 0\ncpu0 50 2 25 400 5 0 2 15 0 0\nintr 1\n"
HEADER = "## suite\n\n- date: 2026-11-29T01:00:00+00:00\n- nproc: 2\n- at start: load 1\n\n| a |\n"


def test_the_counters_are_the_cpu_lines_steal_and_sum() -> None:
    assert steal.cpu_times(STAT) == (30, 1000)
    assert steal.share((30, 1000), (130, 1500)) == pytest.approx(0.2)
    assert steal.share((30, 1000), (30, 1000)) is None
    with pytest.raises(ValueError, match="no 'cpu' line"):
        steal.cpu_times("intr 1\n")


def test_the_line_goes_after_the_start_line_and_replaces_an_old_one() -> None:
    once = steal.stamp(HEADER, 0.231)
    lines = once.split("\n")
    at = lines.index("- at start: load 1")
    assert lines[at + 1].startswith("- CPU steal: 23.1% (")
    twice = steal.stamp(once, 0.02)
    assert twice.count("- CPU steal:") == 1
    assert "- CPU steal: 2.0% (" in twice
    no_start = steal.stamp("# s\n\n- date: 2026-11-29T01:00:00+00:00; nproc 2\n", 0.5)
    assert no_start.split("\n")[3].startswith("- CPU steal: 50.0%")
    assert steal.stamp("| a |", 0.1).startswith("- CPU steal: 10.0%")


def test_only_files_the_suite_wrote_are_stamped(tmp_path: Path) -> None:
    old, new = tmp_path / "old-latest.md", tmp_path / "new-latest.md"
    old.write_text(HEADER)
    os.utime(old, (time.time() - 60, time.time() - 60))
    since = time.time() - 1
    new.write_text(HEADER)
    before = steal.read()
    if before is None:
        pytest.skip("this system keeps no /proc/stat")
    steal.mark([old, new], since, (before[0], before[1] - 100))
    assert "- CPU steal:" in new.read_text()
    assert old.read_text() == HEADER


def test_the_docs_run_line_carries_the_steal() -> None:
    text = steal.stamp(HEADER.replace("- nproc: 2", "- uname -m: x86_64\n- nproc: 2"), 0.05)
    assert docs_figures._run_line(text).endswith("x86_64, nproc 2, CPU steal 5.0%.")
