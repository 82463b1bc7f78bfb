"""The README's benchmark figures are the results files' figures, rendered, never hand-kept."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from benchmarks import readme
from benchmarks.__main__ import SUITES

_BLOCKS = re.compile(r"<!-- bench:([a-z-]+)\b.*?<!-- /bench:\1 -->", re.DOTALL)
_RATIO = re.compile(r"\b\d+\.\d+x\b")


def _outside_blocks(text: str) -> str:
    return _BLOCKS.sub("", text)


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_readme_shows_what_the_results_files_say() -> None:
    text = readme.README.read_text()
    assert readme.render(text) == text, "run `python -m benchmarks.readme`"


def test_every_suite_has_a_block() -> None:
    assert set(readme.SOURCES) == set(SUITES)


def test_no_benchmark_figure_is_kept_by_hand() -> None:
    outside = _outside_blocks(readme.README.read_text())
    tables = [
        line for line in _section(outside, "## Benchmarks").splitlines() if line.startswith("|")
    ]
    assert tables == []
    assert _RATIO.findall(outside) == []


def test_a_new_run_changes_the_readme(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(readme.RESULTS, results)
    producer = readme.results_path("producer", results)
    text = producer.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| single publish, 1 "))
    changed_row = row.replace("| single publish, 1 producer | ", "| single publish, 1 producer | 9")
    producer.write_text(text.replace(row, changed_row))
    before = readme.README.read_text()
    after = readme.render(before, results)
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
    block = readme.render_block("producer", text)
    assert "Run of 2026-01-02 03:04 UTC; nproc 2, MariaDB 10.11.19." in block
    assert "| one | 1,234 |" in block
    assert "- all acknowledged messages were stored" in block
    assert "how the run was set up" not in block
    assert "| profile | 1 |" not in block


def test_a_readme_without_a_suite_block_is_refused() -> None:
    text = readme.README.read_text()
    without = re.sub(r"<!-- bench:assignor\b.*?<!-- /bench:assignor -->", "", text, flags=re.S)
    with pytest.raises(readme.ReadmeError, match="assignor"):
        readme.render(without)
