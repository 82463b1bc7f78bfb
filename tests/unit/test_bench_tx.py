"""The tx benchmark's pure parts: its baseline writes the very outbox rows ems writes, its
ratios are taken round by round, its page pairs each commit with its arrival and renders
into the docs block, and its consuming runs are timed, compared and rendered as the page
says (the consumed backlog spread evenly over partitions and keys)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import time
from collections import Counter
from collections.abc import Callable

import pytest

from benchmarks import docs_figures
from benchmarks.harness import HEADERS, PARTITIONS, readings
from benchmarks.tx_report import (
    EXACTLY_ONCE,
    KEYS_PER_PARTITION,
    NO_OP,
    SAME_WORK,
    BatchTimes,
    ConsumeRun,
    Hole,
    LatencyRun,
    MemberRun,
    Page,
    Window,
    commit_rows,
    consume_notes,
    consume_rows,
    delays,
    met_cell,
    phase_rows,
    ratio_cell,
    round_ratios,
    round_rows,
    throughput_rows,
    undelivered,
)
from benchmarks.tx_workers import (
    SERVICE_DB,
    CommitClock,
    backlog_records,
    baseline_items,
    consume_keys,
    key_counts,
)
from ems import Record
from ems.producer.partitioner import RoundRobin, partition_for_key
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


def member(
    first: float = 0.0,
    last: float = 1.0,
    cpu: float = 0.5,
    commits: tuple[float, ...] = (),
    acks: tuple[float, ...] = (),
    warnings: tuple[str, ...] = (),
) -> MemberRun:
    """A member whose batches took these commits (and acks, or none), nothing else."""
    batches = tuple(
        BatchTimes(poll=0.0, handle=0.0, commit=c, ack=a)
        for c, a in itertools.zip_longest(commits, acks, fillvalue=0.0)
    )
    return MemberRun(
        handled=len(batches), first=first, last=last, cpu=cpu, batches=batches, warnings=warnings
    )


def consumed(rate: float, cpu_us: float = 50.0, messages: int = 10_000) -> ConsumeRun:
    """Two members that drained `messages` at `rate`, the second starting 0.1 s later."""
    elapsed = messages / rate
    cpu = cpu_us * messages / 1e6 / 2
    members = [member(100.0, 100.0 + elapsed, cpu), member(100.1, 100.0 + elapsed / 2, cpu)]
    return ConsumeRun(messages=messages, members=members, counted=messages)


def test_a_consuming_run_spans_all_members_from_first_delivery_to_last_settlement() -> None:
    run = ConsumeRun(messages=1_000, members=[member(10.0, 10.4, 0.02), member(10.1, 10.5, 0.03)])
    assert round(run.elapsed, 6) == 0.5
    assert round(run.rate) == 2_000
    assert round(run.cpu_per_message, 6) == 50.0  # both members' CPU, per message
    assert ConsumeRun(messages=0, members=[]).rate == 0.0


def test_the_consume_table_gives_a_s_ratios_to_b_and_c_and_judges_a_b() -> None:
    runs = {
        EXACTLY_ONCE: [consumed(900, 60), consumed(450, 60)],
        SAME_WORK: [consumed(1_000, 50), consumed(500, 40)],
        NO_OP: [consumed(3_000, 20), consumed(1_500, 20)],
    }
    lines = consume_rows(runs)
    a, b, c = lines[2:]
    assert a.endswith("| 675 | 60.0 | - | - | - | - | - |")  # the server's CPU not known
    assert b.endswith("| 750 | 45.0 | - | 0.90x | 1.35x (1.20-1.50) | a/b >= 0.8x | yes |")
    assert c.endswith("| 0.30x | 3.00x | (ems's floor, for context) | - |")
    slow = {**runs, EXACTLY_ONCE: [consumed(700, 60), consumed(350, 60)]}
    assert consume_rows(slow)[3].endswith("| a/b >= 0.8x | **NO**: 0.70x < 0.8x |")
    assert met_cell([], 0.8) == "-"
    assert consume_rows({})[2].endswith("| 0 | 0.0 | - | - | - | - | - |")
    served = {EXACTLY_ONCE: [dataclasses.replace(consumed(900), server_cpu=0.35)]}
    assert "| 900 | 50.0 | 35.0 | - |" in consume_rows(served)[2]


def test_commit_latencies_are_pooled_and_their_difference_taken_by_percentile() -> None:
    a = ConsumeRun(
        messages=1, members=[member(commits=(0.005,) * 99 + (0.020,)), member(commits=(0.020,))]
    )
    b = ConsumeRun(
        messages=1,
        members=[member(commits=(0.001,) * 100, acks=(0.004,) * 100), member(commits=(0.002,))],
    )
    # The second member of (b) had a batch without an ack: pooled as a 0 ms ack.
    lines = commit_rows({EXACTLY_ONCE: [a], SAME_WORK: [b]})
    assert lines[2].endswith("| 101 | 5.0 | 5.0 | 20.0 |")
    assert lines[3].endswith("| 101 | 1.0 | 1.0 | 1.0 |")
    assert lines[4] == (
        "| what exactly-once adds to the handler's commit, (a) - (b) | - | +4.0 | +4.0 | +19.0 |"
    )
    assert lines[5].endswith("| 101 | 4.0 | 4.0 | 4.0 |")
    assert commit_rows({})[4].endswith("| - | - | - | - |")


def test_the_notes_say_how_often_each_message_was_counted_and_what_ems_logged() -> None:
    runs = {EXACTLY_ONCE: [consumed(900)], SAME_WORK: [consumed(1_000)]}
    (note,) = consume_notes(runs)
    assert "(a) counted 10,000: each message once; (b) counted 10,000: each message once" in note
    assert "ems logged no warning in any run" in note
    assert "deadlocks on the server during the runs, all rounds: (a) exactly-once 0 and 0;" in note
    assert "other processes" not in note  # not measured
    locked = dataclasses.replace(consumed(900), lock_waits=3, deadlocks=1, elsewhere=0.25)
    (note,) = consume_notes({EXACTLY_ONCE: [locked, dataclasses.replace(locked, elsewhere=0)]})
    assert "all rounds: (a) exactly-once 6 and 2." in note
    assert note.endswith("round by round: (a) exactly-once 0.25, 0.00.")
    again = dataclasses.replace(consumed(1_000), counted=10_012)
    warned = ConsumeRun(messages=5, members=[member(warnings=("consume round failed",))])
    (note,) = consume_notes({SAME_WORK: [again], EXACTLY_ONCE: [warned]})
    assert "(b) counted 10,012 for backlogs of 10,000" in note
    assert "ems logged warnings: (a) exactly-once: 1 (consume round failed)" in note


def test_the_backlog_is_spread_evenly_over_the_partitions_and_its_keys() -> None:
    keys = consume_keys()
    assert [len(k) for k in keys] == [KEYS_PER_PARTITION] * PARTITIONS
    for partition, found in enumerate(keys):
        assert {partition_for_key(k.encode(), PARTITIONS) for k in found} == {partition}
    records = backlog_records(PARTITIONS * KEYS_PER_PARTITION * 3)
    per_partition = Counter(partition_for_key(str(r.key).encode(), PARTITIONS) for r in records)
    assert set(per_partition.values()) == {KEYS_PER_PARTITION * 3}
    assert set(key_counts(records).values()) == {3}
    assert len(key_counts(records)) == PARTITIONS * KEYS_PER_PARTITION


def test_the_page_renders_the_exactly_once_section() -> None:
    runs = {
        EXACTLY_ONCE: [consumed(900)] * 2,
        SAME_WORK: [consumed(1_000)] * 2,
        NO_OP: [consumed(3_000)] * 2,
    }
    text = page(consume=runs, consume_backlog=10_000, consume_members=2, consume_batch=500).render()
    assert "### Exactly-once consumption" in text
    assert "of 2 member processes" in text and "each takes 8 partitions" in text
    assert "| a/b >= 0.8x | yes |" in text
    assert "### Exactly-once consumption" not in page().render()
    block = docs_figures.render_block("tx", text)
    assert "*Exactly-once consumption*" in block


def test_the_phases_of_a_batch_are_averaged_per_variant() -> None:
    def batches(*times: BatchTimes) -> ConsumeRun:
        members = [MemberRun(handled=500 * len(times), first=0, last=1, cpu=0, batches=times)]
        return ConsumeRun(messages=500 * len(times), members=members)

    runs = {
        EXACTLY_ONCE: [batches(BatchTimes(0.004, 0.030, 0.005, 0.0))],
        SAME_WORK: [batches(BatchTimes(0.004, 0.028, 0.001, 0.004))] * 2,
        NO_OP: [
            batches(BatchTimes(0.004, 0.001, 0.0, 0.004), BatchTimes(0.006, 0.001, 0.0, 0.006))
        ],
    }
    a, b, c = phase_rows(runs)[2:]
    assert a == "| (a) exactly-once | 1 | 500 | 4.0 | 30.0 | 5.0 | - | 39.0 | 60.0 |"
    assert b == "| (b) at-least-once, same work | 2 | 500 | 4.0 | 28.0 | 1.0 | 4.0 | 37.0 | 56.0 |"
    assert c == "| (c) at-least-once, no-op handler | 2 | 500 | 5.0 | 1.0 | - | 5.0 | 11.0 | 2.0 |"
    assert phase_rows({}) == phase_rows({})[:2]


def test_the_clock_splits_each_batch_into_its_phases(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])

    def at(t: float, *calls: Callable[[], None]) -> None:
        now[0] = 100.0 + t
        for call in calls:
            call()

    # At least once: handler calls, the service's commit, then ack() (settled).
    clock = CommitClock()
    at(0.0, clock.start)
    at(0.010, clock.delivered)
    at(0.030, clock.handled, clock.delivered)  # the first call returns, the second starts
    at(0.050, clock.handled)
    at(0.051, clock.committed)
    at(0.056, clock.settled)
    at(0.060, clock.delivered)  # the next batch: its poll ran from the ack's return
    at(0.062, clock.handled, clock.settled)  # no commit (the no-op loop): all ack
    assert [tuple(round(x, 6) for x in b) for b in clock.batches] == [
        (0.010, 0.040, 0.001, 0.005),
        (0.004, 0.002, 0.0, 0.0),
    ]
    # Exactly once: the commit is the settlement.
    clock = CommitClock(settles_on_commit=True)
    at(1.0, clock.start)
    at(1.002, clock.delivered)
    at(1.040, clock.handled)
    at(1.046, clock.committed)
    (batch,) = clock.batches
    assert tuple(round(x, 6) for x in batch) == (0.002, 0.038, 0.006, 0.0)
    assert clock.first > 0 and clock.last >= clock.first  # wall times


def test_each_round_shows_its_rates_its_a_b_and_its_cpu() -> None:
    runs = {
        EXACTLY_ONCE: [consumed(900, 60), consumed(450, 80)],
        SAME_WORK: [consumed(1_000, 55), consumed(500, 75)],
        NO_OP: [consumed(3_000, 20)],  # a round that did not run: "-"
    }
    head, rule, first, second = round_rows(runs)
    assert head == (
        "| round | order | (a) msg/s | (b) msg/s | (c) msg/s | a/b | (a) client CPU us/msg "
        "| (b) client CPU us/msg | (c) client CPU us/msg |"
    )
    assert rule == "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    assert first == "| 1 | a, b, c | 900 | 1,000 | 3,000 | 0.90x | 60.0 | 55.0 | 20.0 |"
    assert second == "| 2 | c, b, a | 450 | 500 | - | 0.90x | 80.0 | 75.0 | - |"
    assert round_rows({}) == [head, rule]
