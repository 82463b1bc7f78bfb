"""The high-availability report's pure parts: the better of two rounds, the machine's busy
share, and the lines that say where a commit's time goes."""

from __future__ import annotations

from benchmarks.cpu import busy_share, machine_ticks
from benchmarks.ha import Pause, Rates, report


def test_the_better_round_keeps_the_busy_share_of_its_raw_batches() -> None:
    first = Rates(batch=10, raw=100, commits=5, raw_busy=0.9)
    second = Rates(batch=20, raw=200, commits=4, raw_busy=0.6)
    best = first.best(second)
    assert (best.batch, best.raw, best.commits, best.raw_busy) == (20, 200, 5, 0.6)
    assert second.best(first) == best


def test_busy_share_counts_idle_and_iowait_as_idle() -> None:
    assert busy_share((100, 400), (160, 500)) == 0.4
    assert busy_share((5, 5), (5, 5)) == 0.0
    idle, total = machine_ticks()
    assert 0 <= idle <= total


def test_the_report_gives_the_fixed_cost_of_a_commit_and_the_busy_shares() -> None:
    one = Rates(single=2000, batch=50_000, raw=60_000, consume=20_000, commits=4000, raw_busy=0.5)
    ha = Rates(single=800, batch=24_000, raw=30_000, consume=14_000, commits=1000, raw_busy=0.66)
    text = report(["- date: now"], one, ha, [Pause("the Redis master", 3.0, 3.5, 100, [])])
    assert "| raw: one-row commits, PyMySQL (commits/s) | 4,000 | 1,000 | 0.25x | - |" in text
    assert "takes 0.25 ms on one node and 1.00 ms on the cluster" in text
    assert "the cluster adds 0.75 ms to every commit" in text
    assert "50% busy during the raw batches on one node and 66% on the cluster" in text
    assert (
        "| publish, batch of 100 (msg/s) | 50,000 | 24,000 | 0.48x | >= 0.5x: **missed** |" in text
    )
