"""The cli bench suite's pure parts: what it reads from `-X importtime` and from its probe,
and how it judges the target."""

from __future__ import annotations

import pytest

from benchmarks import cli as suite
from benchmarks import docs_figures
from benchmarks.harness import BenchError

IMPORTTIME = """\
import time: self [us] | cumulative | imported package
import time:       100 |        100 |   _io
import time:       900 |       1000 | site
import time:      2000 |       5000 |     click.core
import time:       300 |       6000 |   click
import time:       500 |       8000 | ems.cli
"""


def test_importtime_adds_up_the_top_level_imports() -> None:
    found = suite.parse_importtime("some other line\n" + IMPORTTIME)
    assert found.top == (("site", 0.001), ("ems.cli", 0.008))
    assert found.seconds == pytest.approx(0.009)
    assert found.modules == {"_io", "site", "click.core", "click", "ems.cli"}


def test_the_probe_reports_its_last_line() -> None:
    assert suite.parse_wait("noise\n@@server-wait 0.004500 116\n") == (0.0045, 116)
    with pytest.raises(BenchError):
        suite.parse_wait("error: the database is gone\n")


def _samples(help_wall: float, list_wall: float, wait: float) -> dict[str, suite.Samples]:
    walls = {
        suite.FLOOR.label: 0.02,
        "ems --help": help_wall,
        "ems topic list": list_wall,
    }
    samples = {}
    for case in suite.CASES:
        wall = walls.get(case.label, 0.1)
        samples[case.label] = suite.Samples(walls=[wall] * 3, cpus=[wall] * 3)
        if case.server:
            samples[case.label].waits.extend([wait] * 3)
            samples[case.label].calls.extend([100] * 3)
    return samples


def test_the_target_is_the_start_up_beyond_the_floor_and_the_server_wait() -> None:
    listing = next(c for c in suite.CASES if c.label == "ems topic list")
    samples = _samples(help_wall=0.1, list_wall=0.33, wait=0.02)
    assert suite.beyond(listing, samples) == pytest.approx(0.29)
    assert suite.met(listing, samples)
    assert not suite.met(listing, _samples(help_wall=0.1, list_wall=0.35, wait=0.02))


def test_the_page_says_met_or_missed_and_renders_into_the_docs() -> None:
    imports = {case.label: suite.parse_importtime(IMPORTTIME) for case in suite.CASES}
    env = ["- date: 2026-11-27T07:00:00+00:00", "- nproc: 2"]
    met = suite.render(env, 3, _samples(0.1, 0.3, 0.01), imports)
    missed = suite.render(env, 3, _samples(0.5, 0.3, 0.01), imports)
    assert "`ems --help` 80 ms (met); `ems topic list` 270 ms (met)" in met
    assert "`ems --help` 480 ms (MISSED)" in missed
    assert "| ems --help | 3 | 500 | 500 | 500 | - | 480 | 480 | <= 300 | NO |" in missed
    block = docs_figures.render_block("cli", met)
    assert "Run of 2026-11-27 07:00 UTC" in block and "| ems topic list |" in block
