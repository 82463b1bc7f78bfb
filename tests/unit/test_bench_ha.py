"""The high-availability report's pure parts: medians over rounds, ratios taken round by
round, the machine's busy share, and the lines that say where a commit's time goes."""

from __future__ import annotations

from benchmarks.cpu import busy_share, machine_ticks
from benchmarks.ha import Pause, Rates, medians, report, round_ratios


def test_each_rate_is_its_median_over_the_rounds() -> None:
    rounds = [Rates(batch=30, raw=100), Rates(batch=10, raw=300), Rates(batch=20, raw=200)]
    assert medians(rounds) == Rates(batch=20, raw=200)
    assert medians(rounds[:2]) == Rates(batch=20, raw=200)


def test_ratios_are_taken_round_by_round() -> None:
    # The machine slowed down in the second round: both systems' rates halved.
    one = [Rates(batch=100), Rates(batch=50), Rates(batch=0)]
    ha = [Rates(batch=60), Rates(batch=30), Rates(batch=10)]
    assert round_ratios(one, ha, "batch") == [0.6, 0.6]  # no ratio where one node had none
    # A ratio within each round, not of each system's median: 45/100 here, not 0.55.
    drifting = [Rates(batch=100), Rates(batch=40), Rates(batch=100)]
    beside = [Rates(batch=55), Rates(batch=22), Rates(batch=45)]
    assert round_ratios(drifting, beside, "batch") == [0.55, 0.55, 0.45]


def test_busy_share_counts_idle_and_iowait_as_idle() -> None:
    assert busy_share((100, 400), (160, 500)) == 0.4
    assert busy_share((5, 5), (5, 5)) == 0.0
    idle, total = machine_ticks()
    assert 0 <= idle <= total


def test_the_report_gives_the_fixed_cost_of_a_commit_and_the_busy_shares() -> None:
    one = Rates(single=2000, batch=50_000, raw=60_000, consume=20_000, commits=4000, raw_busy=0.5)
    ha = Rates(single=800, batch=24_000, raw=30_000, consume=14_000, commits=1000, raw_busy=0.66)
    text = report(["- date: now"], [one], [ha], [Pause("the Redis master", 3.0, 3.5, 100, [])])
    assert (
        "| raw: one-row commits, PyMySQL (commits/s) | 4,000 | 1,000 | 0.25x | 0.25-0.25 | - |"
        in (text)
    )
    assert "takes 0.25 ms on one node and 1.00 ms on the cluster" in text
    assert "the cluster adds 0.75 ms to every commit" in text
    assert "50% busy during the raw batches on one node and 66% on the cluster" in text
    assert (
        "| publish, batch of 100 (msg/s) | 50,000 | 24,000 | 0.48x | 0.48-0.48 "
        "| >= 0.5x: **missed** |" in text
    )


def test_the_verdict_is_on_the_median_of_the_rounds_ratios() -> None:
    one = [Rates(batch=100, consume=10), Rates(batch=60, consume=10), Rates(batch=100, consume=10)]
    ha = [Rates(batch=52, consume=6), Rates(batch=36, consume=4), Rates(batch=45, consume=6)]
    text = report(["- date: now"], one, ha, [])
    # Rounds' ratios 0.52, 0.60, 0.45: median 0.52, met; the medians of the rates (100 and
    # 45) would have said 0.45.
    assert "| publish, batch of 100 (msg/s) | 100 | 45 | 0.52x | 0.45-0.60 | >= 0.5x: met |" in text
    assert "| consume, one member (msg/s) | 10 | 6 | 0.60x | 0.40-0.60 | >= 0.5x: met |" in text
    assert "3 rounds per system" in text
    missed = report(["- date: now"], one, [Rates(batch=49, consume=4)] * 3, [])
    assert "| 0.49x | 0.49-0.82 | >= 0.5x: **missed** |" in missed


def test_the_report_splits_a_batch_between_the_group_and_the_appliers() -> None:
    one, ha, lone = [Rates(raw=50_000)], [Rates(raw=25_000)], [Rates(raw=40_000)]
    text = report(["- date: now"], one, ha, [], lone)
    assert "2.00 ms on one node, 2.50 ms on one Galera node with two arbitrators" in text
    assert "4.00 ms on the 3-node cluster" in text
    assert "The group and wsrep add 0.50 ms" in text
    assert "applying each batch on the same cores add 1.50 ms" in text
    assert "does 0.80x of one node (range 0.80-0.80)" in text
    assert "arbitrators" not in report(["- date: now"], one, ha, [])
