"""The tx benchmark's pure parts: its baseline writes the very outbox rows ems writes, its
ratios are taken round by round, and its page pairs each commit with its arrival and
renders into the docs block."""

from __future__ import annotations

import datetime as dt

from benchmarks import docs_figures
from benchmarks.harness import HEADERS, PARTITIONS, readings
from benchmarks.tx_report import (
    Hole,
    LatencyRun,
    Page,
    Window,
    delays,
    ratio_cell,
    round_ratios,
    throughput_rows,
    undelivered,
)
from benchmarks.tx_workers import SERVICE_DB, baseline_items
from ems import Record
from ems.producer.partitioner import RoundRobin
from ems.producer.planning import prepare_batch
from ems.store.caller import quoted_schema
from ems.store.outbox import outbox_statements
from ems.types import TopicInfo

TOPIC = TopicInfo(
    id=7,
    name="bench.tx.orders",
    partitions=PARTITIONS,
    retention_hours=168,
    max_body_bytes=1 << 20,
    created_at=dt.datetime(2026, 11, 27),
)


def test_the_baseline_writes_the_outbox_rows_ems_writes() -> None:
    rows = readings(300)
    ems = prepare_batch(TOPIC, [Record(r.body, r.key, HEADERS) for r in rows], RoundRobin())
    assert baseline_items(rows) == ems  # same partitions, keys, headers JSON, bodies
    theirs = outbox_statements(quoted_schema("ems_bench_tx"), TOPIC.id, ems)
    mine = outbox_statements(quoted_schema(SERVICE_DB), TOPIC.id, baseline_items(rows))
    # The same statements, but for the database they write into.
    assert mine == [
        (sql.replace("`ems_bench_tx`", f"`{SERVICE_DB}`"), params) for sql, params in theirs
    ]
    assert len(mine) == 1 and mine[0][0].count("X'") == 3 * len(rows)  # key, headers, body


def window(rate: float, cpu_us: float = 100.0, backlog: int = 0, drain: float = 0.0) -> Window:
    """A window of one second at `rate` transactions of one message."""
    calls = round(rate)
    cpu = cpu_us * calls / 1e6
    return Window(
        calls=calls, messages=calls, warm=0, elapsed=1.0, cpu=cpu, backlog=backlog, drain=drain
    )


def test_ratios_are_taken_round_by_round() -> None:
    # The machine slowed down in the second round: every variant's rate halved.
    ems = [window(600), window(300), window(500)]
    outbox = [window(1000), window(500), window(0)]
    assert round_ratios(ems, outbox, "rate") == [0.6, 0.6]  # no ratio where outbox had none
    assert ratio_cell([0.5, 0.6, 0.7]) == "0.60x (0.50-0.70)"
    assert ratio_cell([0.6]) == ratio_cell([0.6, 0.601]) == "0.60x"
    assert ratio_cell([]) == "-"


def test_the_throughput_table_gives_rates_cpu_and_the_ratios_a_b_and_a_c() -> None:
    rounds = {
        "ems": [window(400, 500), window(200, 600)],
        "outbox": [window(800, 100), window(400, 100)],
        "dual": [window(500, 200), window(200, 200)],
    }
    lines = throughput_rows({"one order + 1 message": rounds})
    assert "| one order + 1 message (transactions/s) | 300 | 600 | 350 | 0.50x " in (
        "\n".join(lines)
    )
    rate_row = next(line for line in lines if "(transactions/s)" in line)
    assert rate_row.endswith("| 0.50x | 0.90x (0.80-1.00) |")
    cpu_row = next(line for line in lines if "CPU" in line)
    assert cpu_row == (
        "| one order + 1 message (client CPU us/transaction) | 550 | 100 | 200 "
        "| 5.50x (5.00-6.00) | 2.75x (2.50-3.00) |"
    )


def test_each_commit_is_paired_with_its_own_arrival() -> None:
    run = LatencyRun(
        committed={0: 10.0, 1: 11.0, 2: 12.0},
        delivered={-1: 9.0, 0: 10.005, 1: 11.02},
        stored={0: 10.001, 1: 11.002, 2: 12.003},
    )
    assert [round(d, 3) for d in delays([run], "delivered")] == [0.005, 0.02]
    assert [round(d, 3) for d in delays([run], "stored")] == [0.001, 0.002, 0.003]
    assert undelivered([run]) == 1  # message 2 never came; the warm-up -1 is not counted


def page(**changes: object) -> Page:
    lone = LatencyRun(committed={0: 1.0, 1: 2.0}, delivered={0: 1.002, 1: 2.004})
    held = LatencyRun(committed={0: 1.0, 1: 2.0}, delivered={0: 1.003, 1: 2.004}, held=3.5)
    hole = LatencyRun(committed={0: 1.0, 1: 2.0}, delivered={0: 3.9, 1: 3.91}, stored={}, held=3.0)
    fields: dict[str, object] = {
        "header": ["- date: 2026-11-27T05:06:07+00:00", "- nproc: 2"],
        "rounds": 2,
        "window": 2.5,
        "relay_interval": 0.2,
        "latency_rate": 50.0,
        "workloads": {
            "one order + 1 message": {
                "ems": [window(400, backlog=3, drain=0.004)] * 2,
                "outbox": [window(800)] * 2,
                "dual": [window(500)] * 2,
            }
        },
        "latencies": {
            "session": [lone] * 2,
            "pymysql": [lone] * 2,
            "plain": [lone] * 2,
            "plain-held": [held] * 2,
            "session-held": [held] * 2,
        },
        "hole_run": hole,
        "hole": Hole(offset=5, tombstone=False, tombstones=0, lock_wait=1.95),
        "hole_seconds": 3.0,
        "hole_gap_timeout": 1.0,
        "backlog": 100_000,
        "relay": [Window(calls=100, messages=100_000, warm=1, elapsed=4.0, cpu=2.0)] * 2,
        "batches": [Window(calls=50, messages=50_000, warm=0, elapsed=1.0, cpu=0.5)] * 2,
    }
    fields.update(changes)
    return Page(**fields)  # type: ignore[arg-type]


def test_the_page_says_what_an_open_transaction_costs_and_what_a_hole_would() -> None:
    text = page().render()
    assert "| 0.50x | 0.80x |" in text
    assert "3 messages not yet relayed, moved within 4 ms" in text
    assert "p99 held / alone, round by round: plain sends 1.00x" in text
    assert "(3.5 s)" in text  # how long the other transaction stayed open
    assert "the longest a plain send waited behind it was 2.90 s" in text
    assert "waiting on the open row's lock for 1.95 s" in text
    assert "the held offset holds the held message, not a tombstone" in text
    assert "| relay moving a backlog of committed outbox rows (1,000 per move) | 100,000 " in text
    assert "| 25,000 | 20.0 | 0.50x |" in text  # msg/s, CPU us/msg, vs send_batch
    assert "- every transaction's order stored" in text
    assert "Of 20 paced sends, 0 started more than 10 ms late." in text
    lost = LatencyRun(committed={0: 1.0, 1: 2.0}, delivered={0: 1.002}, behind=1)
    alone = page(latencies={"plain": [lost]}).render()
    assert "Of 2 paced sends, 1 started more than 10 ms late; 1 never delivered." in alone
    assert "plain sends -, transactional sends -." in alone
    failed = page(problems=["dual, 1 per transaction: 10 sent, 9 stored"]).render()
    assert "- dual, 1 per transaction: 10 sent, 9 stored" in failed
    assert "every transaction's order stored" not in failed


def test_the_page_renders_into_its_docs_block() -> None:
    block = docs_figures.render_block("tx", page().render())
    assert "**Transactional publishing.** Run of 2026-11-27 05:06 UTC; nproc 2." in block
    for section in ("End-to-end latency", "An open transaction and other producers' messages"):
        assert f"*{section}*" in block
    assert "*The relay's throughput*" in block
    assert "- (a) ems:" not in block  # the set-up is the page's prose, not the block's
