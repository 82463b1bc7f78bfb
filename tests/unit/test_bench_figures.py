"""The benchmark figures of docs/benchmarks.md are the results files' figures, rendered,
never kept by hand there or anywhere else in the README and the docs (except the dated
benchmark notes, which keep earlier runs on purpose)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from benchmarks import docs_figures as figures
from benchmarks.__main__ import SUITES

ROOT = Path(__file__).resolve().parents[2]
_BLOCKS = re.compile(r"<!-- bench:([a-z-]+)\b.*?<!-- /bench:\1 -->", re.DOTALL)
_RATIO = re.compile(r"\b\d+\.\d+x\b")
_RATE = re.compile(r"\b\d[\d,]*(?:\.\d+)? ?(?:msg|rows|messages)/s\b")
#: Dated notes of earlier runs: their figures belong to the runs they name.
_NOTES = ROOT / "docs" / "benchmark-notes.md"


def _outside_blocks(text: str) -> str:
    return _BLOCKS.sub("", text)


def test_the_page_shows_what_the_results_files_say() -> None:
    text = figures.PAGE.read_text()
    assert figures.render(text) == text, "run `python -m benchmarks.docs_figures`"


def test_the_check_passes() -> None:
    assert figures.main(["--check"]) == 0


def test_every_suite_has_a_block() -> None:
    assert set(figures.SOURCES) == set(SUITES)


def test_no_benchmark_table_is_kept_by_hand() -> None:
    outside = _outside_blocks(figures.PAGE.read_text())
    assert [line for line in outside.splitlines() if line.startswith("|")] == []


def test_no_benchmark_figure_is_kept_by_hand() -> None:
    sources = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert figures.PAGE in sources
    for source in sources:
        if source == _NOTES:
            continue
        outside = _outside_blocks(source.read_text())
        assert _RATIO.findall(outside) == [], source.name
        assert _RATE.findall(outside) == [], source.name


def test_a_new_run_changes_the_page(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(figures.RESULTS, results)
    producer = figures.results_path("producer", results)
    text = producer.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| single publish, 1 "))
    changed_row = row.replace("| single publish, 1 producer | ", "| single publish, 1 producer | 9")
    producer.write_text(text.replace(row, changed_row))
    before = figures.PAGE.read_text()
    after = figures.render(before, results)
    assert after != before
    assert changed_row in after
    assert row not in after


def test_a_block_keeps_tables_and_checks_and_leaves_out_set_up() -> None:
    text = "\n".join(
        [
            "## ems producer benchmark",
            "",
            "- date: 2026-01-02T03:04:05+00:00",
            "- nproc: 2",
            "- MariaDB: 10.11.19-MariaDB-0+deb12u1 (innodb_flush_log_at_trx_commit=1)",
            "- rows: how the run was set up",
            "",
            "| case | msg/s |",
            "|---|---:|",
            "| one | 1,234 |",
            "",
            "Checks:",
            "- all acknowledged messages were stored",
            "",
            "### Where ems time goes",
            "",
            "| profile | 1 |",
        ]
    )
    block = figures.render_block("producer", text)
    assert "Run of 2026-01-02 03:04 UTC; nproc 2, MariaDB 10.11.19." in block
    assert "| one | 1,234 |" in block
    assert "Checks:\n\n- all acknowledged messages were stored" in block
    assert "how the run was set up" not in block
    assert "| profile | 1 |" not in block


def test_a_suite_not_run_yet_has_a_block_saying_so(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(figures.RESULTS, results)
    figures.results_path("assignor", results).unlink()
    after = figures.render(figures.PAGE.read_text(), results)
    block = re.search(r"<!-- bench:assignor\b.*?<!-- /bench:assignor -->", after, re.S)
    assert block is not None
    assert "**Assignor.** Not run yet: `make bench SUITES=assignor` writes" in block.group()
    assert "|" not in block.group()  # no figures: none were measured
    # Once it has run, its figures replace the notice.
    assert figures.render(after) == figures.PAGE.read_text()


def test_a_page_without_a_suite_block_is_refused() -> None:
    text = figures.PAGE.read_text()
    without = re.sub(r"<!-- bench:assignor\b.*?<!-- /bench:assignor -->", "", text, flags=re.S)
    with pytest.raises(figures.FiguresError, match="assignor"):
        figures.render(without)


def test_an_update_writes_the_page_given(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    text = figures.PAGE.read_text()
    stale = re.sub(
        r"(<!-- bench:assignor\b[^\n]*-->\n).*?(\n<!-- /bench:assignor -->)",
        r"\1stale\2",
        text,
        flags=re.S,
    )
    page.write_text(stale)
    assert figures.update(page) is True
    assert page.read_text() == text
    assert figures.update(page) is False
