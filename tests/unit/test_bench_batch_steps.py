"""The cost suite's batch steps (benchmarks.batch_steps) time what ems and raw+redis do per
message of a batch, and its table adds up what it shows."""

from __future__ import annotations

import math
import re

from benchmarks import batch_steps
from benchmarks.harness import readings


def test_every_step_of_both_systems_is_timed_and_the_api_share_is_their_sum() -> None:
    steps = batch_steps.measure(readings(300))
    assert [(s.system, s.name) for s in steps][:7] == [
        ("ems", "the caller's message (a plain tuple)"),
        ("ems", "the caller's message as an ems.Record instead (not summed)"),
        ("ems", "validation and routing (prepare_batch)"),
        ("ems", "count per partition"),
        ("ems", "statement"),
        ("ems", "results (a BatchMetadata, made when read)"),
        ("ems", "results read, every RecordMetadata made (not summed)"),
    ]
    assert {s.system for s in steps} == {"ems", "raw+redis"}
    assert all(0 < s.micros < math.inf for s in steps)
    text = "\n".join(batch_steps.render(steps))
    for s in steps:
        assert f"| {s.system} | {s.name} | {s.micros:.3f} |" in text
    api = sum(s.micros for s in steps if s.system == "ems" and s.name in batch_steps.API_STEPS)
    shown = re.search(r"Of ems's, ([0-9.]+) us per message are its API's", text)
    assert shown is not None and float(shown.group(1)) == round(api, 2)
    # The Record and read lines are shown, and left out of ems's sum.
    ems = sum(s.micros for s in steps if s.system == "ems" and s.name not in batch_steps.NOT_SUMMED)
    total = re.search(r"Steps in all: ems ([0-9.]+) us", text)
    assert total is not None and float(total.group(1)) == round(ems, 2)
