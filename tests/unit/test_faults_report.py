"""The reliability report's table says what each run kept and what it broke."""

from __future__ import annotations

from benchmarks.faults import NEMESES, Outcome, report, table
from tests.faults.checks import Ack, Verdict


def _outcome(name: str, *, lost: int = 0, redelivered: int = 0, faults: int = 2) -> Outcome:
    verdict = Verdict(
        acknowledged=1000,
        lost=[Ack(0.0, (0, i), "x") for i in range(lost)],
        stored_twice=[],
        gaps={0: []},
        delivered_twice=redelivered,
        past_cursor=[],
        longest_stall=1.5,
    )
    return Outcome(
        name=name,
        faults=faults,
        cuts=0,
        fenced=1,
        verdict=verdict,
        bound=100,
        problems=verdict.problems(max_redelivered=100),
        no_ack=1.5,
        no_delivery=2.0,
        ack_recovery=0.25,
        delivery_recovery=None,
    )


def test_a_kept_run_and_a_broken_one() -> None:
    rows = table([_outcome("a. kept"), _outcome("b. broken", lost=3, redelivered=150)])
    kept, broken = rows.splitlines()[2:]
    assert kept.endswith("| kept |") and "| 0.2 s | never |" in kept
    assert "**BROKEN**: 3 acknowledged messages lost" in broken
    assert "150 redeliveries, more than 100" in broken and "| 150 (100) |" in broken


def test_a_run_without_faults_has_no_recovery_time() -> None:
    (row,) = table([_outcome("g. no fault", faults=0)]).splitlines()[2:]
    assert "| - | - |" in row


def test_the_report_names_every_scenario_it_ran_and_counts_the_kept_ones() -> None:
    outcomes = [_outcome(NEMESES[0].name), _outcome(NEMESES[1].name, lost=1)]
    text = report(outcomes, ["- date: today"], 60, 10)
    assert f"- {NEMESES[0].name}: {NEMESES[0].what}" in text
    assert NEMESES[2].name not in text
    assert "Every promise kept in 1 of 2 scenarios." in text
