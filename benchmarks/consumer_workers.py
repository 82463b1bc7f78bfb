"""Process bodies of the consumer suite: fills, paced producers, and the consumers of
each system. Every function here runs in a fresh forkserver process.

Long-lived processes talk to the parent through an events queue of (kind, index, payload)
tuples; an exception in a child becomes an ("error", index, traceback) event.
"""

from __future__ import annotations

import json
import os
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from multiprocessing.synchronize import Barrier
from typing import Any

from kombu.connection import Connection
from kombu.entity import Queue

from benchmarks.harness import (
    BARRIER_TIMEOUT,
    HEADERS,
    KOMBU_QUEUE,
    PARTITIONS,
    BenchConfig,
    Reading,
    WorkerResult,
    mysql_connect,
    timed_loop,
)
from benchmarks.writers import KombuWriter
from ems import Consumer, Producer, Record
from ems.types import AssignmentRow, Delivery

BODY_BYTES = 256
#: Sending threads of a paced producer process.
SENDERS = 8
FILL_BATCH = 1000
#: Rows per read of the raw consumer, as ems's default batch_size.
RAW_BATCH = 500


def body(seq: int) -> bytes:
    """A JSON reading padded to exactly BODY_BYTES bytes."""
    head = json.dumps({"seq": seq, "device": f"gw{seq % 400:03d}", "temp": 21.5, "pad": ""})
    return (head[:-2] + "x" * (BODY_BYTES - len(head)) + '"}').encode()


# -- fills ---------------------------------------------------------------------------------


def fill_ems(arg: tuple[BenchConfig, int]) -> None:
    """`count` unkeyed messages (round robin over the partitions) in batches."""
    cfg, count = arg
    with Producer(cfg.settings) as producer:
        for first in range(0, count, FILL_BATCH):
            n = min(FILL_BATCH, count - first)
            producer.send_batch(cfg.topic, [Record(body(first + i)) for i in range(n)])


def kombu_fill_worker(index: int, workers: int, cfg: BenchConfig, barrier: Barrier) -> WorkerResult:
    """Publish to the kombu queue for cfg.seconds (kombu has no batch API)."""
    writer = KombuWriter(cfg, index, workers)
    seq = index * 10_000_000

    def step() -> int:
        nonlocal seq
        seq += 1
        writer.send(Reading("", body(seq), 0))
        return 1

    try:
        warm = sum(step() for _ in range(5))
        return timed_loop(barrier, cfg.seconds, step, warm)
    finally:
        writer.close()


# -- drains of the reference systems -------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RawSpec:
    cfg: BenchConfig
    topic_id: int
    group_id: int
    #: partition -> (first offset, one past the last) of the backlog
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)


_RAW_FETCH = (
    "SELECT id, offset_no, msg_key, headers, body, created_at FROM message "
    "WHERE topic_id = %s AND partition_no = %s AND offset_no >= %s AND offset_no < %s "
    "ORDER BY offset_no LIMIT %s"
)
# The fastest known shape of the log's start rows: one INSERT ... SELECT of the range just
# read (the server makes the rows from the key it holds), not a VALUES tuple per message.
_RAW_LOG = (
    "INSERT INTO topic_group_log (group_id, topic_id, partition_no, offset_no, client_id, "
    "state, attempts) SELECT %s, topic_id, partition_no, offset_no, %s, 'start', 1 "
    "FROM message WHERE topic_id = %s AND partition_no = %s AND offset_no BETWEEN %s AND %s"
)
_RAW_DONE = (
    "UPDATE topic_group_log SET state = 'done', finished_at = NOW(6), updated_at = NOW(6) "
    "WHERE group_id = %s AND client_id = %s AND state = 'start' AND partition_no = %s "
    "AND offset_no BETWEEN %s AND %s"
)
_RAW_CURSOR = (
    "UPDATE group_offset SET committed_offset = %s, updated_at = NOW(6) "
    "WHERE group_id = %s AND partition_no = %s"
)


def raw_drain_worker(index: int, workers: int, spec: RawSpec, barrier: Barrier) -> WorkerResult:
    """Hand-written floor: per batch one SELECT of an offset range, one INSERT ... SELECT
    of the log's start rows for that range, then one transaction with the log UPDATE and
    the cursor UPDATE."""
    conn = mysql_connect(spec.cfg.settings.database_url)
    cursor = conn.cursor()
    cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")  # as ems
    client = f"raw-{index}"
    mine = [p for p in range(PARTITIONS) if p % workers == index]
    position = {p: spec.ranges[p][0] for p in mine}
    try:
        barrier.wait(BARRIER_TIMEOUT)
        cpu, start = time.process_time(), time.perf_counter()
        handled = 0
        while True:
            live = [p for p in mine if position[p] < spec.ranges[p][1]]
            if not live:
                break
            for p in live:
                at = position[p]
                cursor.execute(_RAW_FETCH, (spec.topic_id, p, at, at + RAW_BATCH, RAW_BATCH))
                rows = cursor.fetchall()
                if not rows:
                    raise RuntimeError(f"partition {p} has no row at offset {at}")
                last = rows[-1][1]
                cursor.execute(_RAW_LOG, (spec.group_id, client, spec.topic_id, p, at, last))
                conn.begin()
                cursor.execute(_RAW_DONE, (spec.group_id, client, p, at, last))
                cursor.execute(_RAW_CURSOR, (last + 1, spec.group_id, p))
                conn.commit()
                position[p] = last + 1
                handled += len(rows)
        elapsed = time.perf_counter() - start
        return WorkerResult(sent=handled, warm=0, elapsed=elapsed, cpu=time.process_time() - cpu)
    finally:
        conn.close()


def kombu_drain_worker(
    index: int, workers: int, cfg: BenchConfig, barrier: Barrier
) -> WorkerResult:
    """basic_get + ack until the queue is empty; the window ends at the last message."""
    conn = Connection(cfg.kombu_url)  # type: ignore[no-untyped-call]
    try:
        queue = Queue(KOMBU_QUEUE, routing_key=KOMBU_QUEUE)  # type: ignore[no-untyped-call]
        bound = queue(conn.default_channel)  # type: ignore[no-untyped-call]
        barrier.wait(BARRIER_TIMEOUT)
        cpu, start = time.process_time(), time.perf_counter()
        handled, last = 0, start
        while True:
            message = bound.get(no_ack=False)
            if message is None:
                break
            message.ack()
            handled += 1
            last = time.perf_counter()
        return WorkerResult(
            sent=handled, warm=0, elapsed=last - start, cpu=time.process_time() - cpu
        )
    finally:
        conn.release()  # type: ignore[no-untyped-call]


# -- ems ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GroupSpec:
    cfg: BenchConfig
    group: str
    workers: int
    start: str = "earliest"
    lease_ttl: float = 10.0
    renew_every: float = 3.0
    #: Messages per partition to drain behind the barrier first; None: no drain.
    counts: dict[int, int] | None = None


def child(target: Callable[..., None], events: Any, index: int, *args: object) -> None:
    """Run a long-lived process body, reporting a failure as an event."""
    try:
        target(events, index, *args)
    except BaseException:
        events.put(("error", index, traceback.format_exc()))
        raise


def ems_consumer(
    events: Any,
    index: int,
    spec: GroupSpec,
    barrier: Barrier | None,
    stop: Any,
    lasts: Any,
) -> None:
    """One member of an ems group. With spec.counts: wait for a balanced share, drain it
    behind the barrier with poll()/ack(), report, then go on like the others: run() with
    a handler until stop. The handler records publish->handler latency of messages that
    carry a `sent` header, and the time of the last message per partition in `lasts`."""
    latencies: list[float] = []
    first: list[float] = []

    def handler(d: Delivery) -> None:
        now = time.time()
        if lasts is not None:
            lasts[d.partition] = now
        if not first:
            first.append(now)
            events.put(("first", index, now))
        sent = d.headers.get("sent")
        if sent is not None:
            latencies.append(now - float(sent))

    consumer = Consumer(
        spec.group,
        spec.cfg.topic,
        handler,
        settings=spec.cfg.settings,
        start=spec.start,  # type: ignore[arg-type]
        lease_ttl=spec.lease_ttl,
        renew_every=spec.renew_every,
    )
    joined = time.time()
    consumer.start()
    events.put(("ready", index, (os.getpid(), consumer.client_id, joined)))
    if spec.counts is not None and barrier is not None:
        share = balanced_share(consumer, spec.workers)
        events.put(("share", index, share))
        barrier.wait(BARRIER_TIMEOUT)
        events.put(("drained", index, _drain(consumer, sum(spec.counts[p] for p in share))))
        first.append(0.0)  # the drain is not news
    threading.Thread(target=stop_when, args=(stop, consumer.stop), daemon=True).start()
    handled = consumer.run(handle_signals=False)
    events.put(("done", index, (latencies, handled)))


def stop_when(flag: Any, stop: Callable[[], None]) -> None:
    """Call stop once the shared flag is set. A lock-free flag, not an mp.Event: a process
    killed while it waits on an mp.Event makes every later Event.set() hang."""
    while not flag.value:
        time.sleep(0.05)
    stop()


def balanced_share(consumer: Consumer, workers: int) -> list[int]:
    """Follow the handoff (without fetching) until the whole group is balanced and this
    member's session holds its share; returns that share. Its own share alone is not
    enough: a member that holds PARTITIONS/workers partitions on its way to more (before
    the last member joined) would stop following the handoff at the barrier, never release
    a partition the leader then moves, and leave the member waiting for it short."""
    from ems.consumer.cluster import ClusterSession

    session = consumer.session
    assert isinstance(session, ClusterSession)
    store, group_id = session.store, session.group.id
    deadline = time.monotonic() + BARRIER_TIMEOUT
    while time.monotonic() < deadline:
        session.sync()
        rows = store.assignments.rows(group_id)
        live = {m.client_id for m in store.leases.members(group_id) if m.expires_in > 0}
        if group_balanced(rows, live, workers):
            share = {r.partition for r in rows if r.client_id == consumer.client_id}
            _, owned = consumer.membership.ownership()
            if set(owned) == set(session.states) == share:
                return sorted(share)
        time.sleep(0.02)
    raise TimeoutError(
        f"the group was not balanced over {workers} members within {BARRIER_TIMEOUT} s"
    )


def group_balanced(rows: Sequence[AssignmentRow], live: Set[str], workers: int) -> bool:
    """Whether `workers` live members each hold PARTITIONS/workers partitions, all assigned
    (none unowned, revoking or released): the leader's plan moves nothing from here."""
    held = Counter(r.client_id for r in rows if r.state == "assigned" and r.client_id in live)
    return (
        len(live) == workers
        and len(rows) == PARTITIONS == sum(held.values())
        and set(held) == live
        and set(held.values()) == {PARTITIONS // workers}
    )


def _drain(consumer: Consumer, expected: int) -> tuple[float, float, int, float]:
    """poll() + a no-op handler + ack() until `expected` messages are handled:
    (wall start, wall end, handled, CPU seconds)."""
    cpu, start = time.process_time(), time.time()
    handled = 0
    while handled < expected:
        batch = consumer.poll(timeout=1.0)
        for d in batch:
            _noop(d)
        consumer.ack(batch)
        handled += len(batch)
    return start, time.time(), handled, time.process_time() - cpu


def _noop(d: Delivery) -> None:
    pass


def run_senders(sender: Callable[[int], None]) -> None:
    """sender(k) for k in range(SENDERS), each on a thread of its own; returns once all
    have."""
    threads = [threading.Thread(target=sender, args=(k,)) for k in range(SENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def paced_producer(
    events: Any, index: int, cfg: BenchConfig, rate: float, seconds: float, tag: bool, stop: Any
) -> None:
    """Single unkeyed sends paced to `rate` per second for `seconds` (or until stop), from
    SENDERS threads sharing the process's Producer (its intended use), so a send that waits
    on a commit does not hold back the schedule. With tag, every message carries its send
    time (time.time()) in the `sent` header."""
    with Producer(cfg.settings) as producer:
        for seq in range(5):  # connect and seed the offset counters before timing
            producer.send(cfg.topic, body(seq), headers=HEADERS)
        events.put(("ready", index, os.getpid()))
        start, cpu = time.perf_counter(), time.process_time()
        sent = [0] * SENDERS
        behind = [0] * SENDERS
        took: list[float] = []  # seconds each send took (list.append is atomic)

        def sender(k: int) -> None:
            seq = k
            while not stop.value and seq / rate < seconds:
                wait = start + seq / rate - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                elif wait < -0.01:
                    behind[k] += 1
                began = time.time()
                headers = {"sent": repr(began)} if tag else HEADERS
                producer.send(cfg.topic, body(seq), headers=headers)
                took.append(time.time() - began)
                sent[k] += 1
                seq += SENDERS

        run_senders(sender)
        took.sort()
        p50 = took[len(took) // 2] if took else 0.0
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
        events.put(("sent", index, (sum(sent), elapsed, sum(behind), p50, cpu)))
