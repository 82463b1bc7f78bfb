"""What the write token costs: ems's own INSERT statements with and without it, side by side.

The producer stores a random token on the first row of every write, so that a write whose
reply was lost is recognised exactly. Its cost is the column in each statement (a NULL per
row, a number on the first) and in each row stored. This part of the producer suite sends
the very statements ems builds (guard included) for the same rows, once as they are and
once with the token column taken out, alternating in short rounds on one autocommit
connection, so both see the same server state; the ratio is with / without.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.harness import (
    HEADERS_JSON,
    BenchConfig,
    Reading,
    bench_topic,
    mysql_connect,
    readings,
    topic_fences,
)
from ems.store.inserts import TOKENED_HEAD, insert_statements
from ems.types import NewMessage, placed_of

#: The topic the rows go to (made if missing; its rows are removed after the run).
TOPIC = "token-cost"
ROUNDS = 10
CASES = (("single publish (1 row per statement)", 1), ("batch publish (100 rows)", 100))


@dataclass(frozen=True)
class TokenCost:
    case: str
    with_token: float  # rows/s, median of the rounds
    without: float
    ratio: float  # median of the rounds' with / without


def without_token(statement: bytes, token: int) -> bytes:
    """The same statement as ems would send it without the write token column."""
    plain = statement.replace(b",%d)" % token, b")").replace(b",NULL)", b")")
    return plain.replace(TOKENED_HEAD, TOKENED_HEAD.replace(b", write_token", b""))


_offsets: dict[int, int] = {}


def _place(topic_id: int, batch: list[Reading]) -> list[NewMessage]:
    """The rows with the next offsets of their partitions."""
    messages = []
    for r in batch:
        offset = _offsets.get(r.partition, 0)
        _offsets[r.partition] = offset + 1
        key = r.key.encode()
        messages.append(NewMessage(topic_id, r.partition, offset, key, HEADERS_JSON, r.body))
    return messages


def _timed(
    cursor: Any,
    topic: tuple[int, tuple[int, ...]],
    rows: list[Reading],
    size: int,
    tokened: bool,
    seconds: float,
) -> float:
    """Rows/s of ems's statements (with the token or without) sent for `seconds`."""
    rng = random.Random()
    started = time.perf_counter()
    count = 0
    while time.perf_counter() - started < seconds:
        messages = _place(topic[0], [rows[rng.randrange(len(rows))] for _ in range(size)])
        token = rng.getrandbits(63)
        for statement in insert_statements(placed_of(messages), token, topic[1]) or []:
            cursor.execute(statement if tokened else without_token(statement, token))
        count += size
    return count / (time.perf_counter() - started)


def measure(cfg: BenchConfig) -> list[TokenCost]:
    """Per case, ROUNDS pairs of short windows, one with and one without the token, in
    alternating order; the medians of each side and of the pairs' ratios (a pair shares
    the machine's state, so its ratio drifts less than the rates do)."""
    rows = readings()
    per_window = cfg.seconds / ROUNDS / 2
    results = []
    conn = mysql_connect(cfg.settings.database_url)
    try:
        topic_id = bench_topic(cfg.settings, TOPIC)
        topic = (topic_id, topic_fences(conn, topic_id).fences)
        with conn.cursor() as cursor:
            cursor.execute("DELETE FROM message WHERE topic_id = %s", (topic_id,))
            for case, size in CASES:
                pairs = []
                for round_no in range(ROUNDS):
                    order = (True, False) if round_no % 2 == 0 else (False, True)
                    rates = {t: _timed(cursor, topic, rows, size, t, per_window) for t in order}
                    pairs.append((rates[True], rates[False]))
                with_token = statistics.median(a for a, _ in pairs)
                without = statistics.median(b for _, b in pairs)
                ratio = statistics.median(a / b for a, b in pairs)
                results.append(TokenCost(case, with_token, without, ratio))
            cursor.execute("DELETE FROM message WHERE topic_id = %s", (topic_id,))
    finally:
        conn.close()
    return results


def render(costs: list[TokenCost]) -> list[str]:
    lines = [
        "### What the write token costs",
        "",
        "ems's own INSERT statements for the same rows, with and without the write token "
        f"column, in {ROUNDS} rounds of one window each, in alternating order, on one "
        "connection; medians of the rounds:",
        "",
        "| case | with token rows/s | without rows/s | with / without | target | met? |",
        "|---|---:|---:|---:|---|---|",
    ]
    for c in costs:
        met = "yes" if c.ratio >= 0.95 else f"**NO**: {c.ratio:.3f} < 0.95"
        lines.append(
            f"| {c.case} | {c.with_token:,.0f} | {c.without:,.0f} | {c.ratio:.3f}x "
            f"| >= 0.95x (at most 5% cost) | {met} |"
        )
    return lines
