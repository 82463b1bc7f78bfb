"""Process bodies of the tx suite (benchmarks/tx.py). Each runs in a fresh forkserver
process steered by benchmarks.consumer_procs.Fleet, and reports (kind, index, payload)
events to the parent.

A service transaction here is what a service does around a transactional send: in a
SQLAlchemy Session on its own database (ems_bench_service, on the server of the ems
database), INSERT one order row and publish about it, then commit. The variants:

- ems: the order INSERT, `Producer.send(..., transaction=session)` (or send_batch), commit;
  the producer's relay thread, in the same process, moves the committed rows meanwhile;
- outbox: the order INSERT and the very outbox INSERT ems writes
  (ems.store.outbox.outbox_statements, same literal encoding, same driver call) into a
  plain copy of message_outbox in the service's database, commit: what "an outbox row in
  the same transaction" costs by itself, with nothing to relay it;
- dual: the order INSERT committed alone, then a plain `Producer.send` (the dual write a
  transactional send replaces).

Consuming (section 5), each run a fresh cluster group of member processes draining the
same backlog, each message's durable work one upsert of its key's counter row in the
service's database (`counts`), through a SQLAlchemy Session:

- exactly-once: `Consumer(..., transactional=sessionmaker(engine))` and run(); ems opens
  the batch's Session, the handler upserts through it, ems settles in it and commits;
- same-work (at-least-once): poll() a batch, its upserts in one Session, commit, ack();
- no-op (at-least-once): poll(), a handler that does nothing, ack().
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from typing import Any, ClassVar

import pymysql
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session, sessionmaker

from benchmarks.consumer_workers import balanced_share, stop_when
from benchmarks.harness import (
    BARRIER_TIMEOUT,
    HEADERS,
    HEADERS_JSON,
    PARTITIONS,
    BenchConfig,
    mysql_connect,
    query,
    readings,
    topic_fences,
)
from benchmarks.tx_report import (
    EXACTLY_ONCE,
    KEYS_PER_PARTITION,
    SAME_WORK,
    BatchTimes,
    MemberRun,
    Window,
)
from ems import Consumer, Producer, Record
from ems.offsets.allocators import offset_key, redis_client
from ems.producer.partitioner import partition_for_key
from ems.store.caller import quoted_schema
from ems.store.inserts import insert_statements
from ems.store.outbox import OutboxItem, outbox_statements
from ems.types import Delivery, NewMessage, placed_of

SERVICE_DB = "ems_bench_service"
EMS = "ems"
OUTBOX = "outbox"
DUAL = "dual"
VARIANTS = (EMS, OUTBOX, DUAL)
#: Service transactions before the timed window (connections, caches, the relay thread).
WARM = 20
#: Messages per send_batch of the backlog comparison.
BIG_BATCH = 1_000

ORDER = text("INSERT INTO orders (customer, total_cents) VALUES (:customer, :total)")
_PENDING = "SELECT COUNT(*) FROM message_outbox WHERE topic_id = %s"
ORDER_PYMYSQL = "INSERT INTO orders (customer, total_cents) VALUES (%s, %s)"
SERVICE_TABLES = (
    "CREATE TABLE orders (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, "
    "customer VARCHAR(64) NOT NULL, total_cents BIGINT NOT NULL, "
    "created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB",
    # The baseline's outbox: ems's own table, copied (columns, keys, engine).
    "CREATE TABLE message_outbox LIKE {ems}.message_outbox",
    # The consumers' projection: one counter row per message key.
    "CREATE TABLE counts (k VARCHAR(64) NOT NULL PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB",
)


def service_engine(url: str) -> Engine:
    """The service's own engine: a plain SQLAlchemy engine, as a service would make."""
    return create_engine(url, pool_size=2, max_overflow=0)


def baseline_items(rows: list[Any]) -> list[OutboxItem]:
    """(partition, key, headers JSON, body) of readings, as ems prepares them."""
    return [(r.partition, r.key.encode(), HEADERS_JSON, r.body) for r in rows]


# -- throughput: one variant's timed window ---------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ThroughputSpec:
    cfg: BenchConfig  # the ems database and the topic
    service_url: str
    variant: str  # EMS, OUTBOX or DUAL
    batch: int  # messages per service transaction
    seconds: float
    topic_id: int


def _steps(spec: ThroughputSpec, engine: Engine, producer: Producer | None) -> Callable[[], None]:
    """One service transaction of the variant, over the readings in turn."""
    rows = readings()
    chunks = [rows[i : i + spec.batch] for i in range(0, len(rows), spec.batch)]
    records = [[Record(r.body, r.key, HEADERS) for r in chunk] for chunk in chunks]
    items = [baseline_items(chunk) for chunk in chunks]
    schema = quoted_schema(SERVICE_DB)
    topic, single = spec.cfg.topic, spec.batch == 1
    position = 0

    def step() -> None:
        nonlocal position
        n = position % len(chunks)
        position += 1
        order = {"customer": chunks[n][0].key, "total": position}
        with Session(engine) as session:
            session.execute(ORDER, order)
            if spec.variant == OUTBOX:
                conn = session.connection()
                for sql, params in outbox_statements(schema, spec.topic_id, items[n]):
                    conn.exec_driver_sql(sql, params)
            elif spec.variant == EMS:
                assert producer is not None
                if single:
                    r = records[n][0]
                    producer.send(topic, r.body, key=r.key, headers=HEADERS, transaction=session)
                else:
                    producer.send_batch(topic, records[n], transaction=session)
            session.commit()
        if spec.variant == DUAL:
            assert producer is not None
            if single:
                producer.send(topic, records[n][0].body, key=records[n][0].key, headers=HEADERS)
            else:
                producer.send_batch(topic, records[n])

    return step


def throughput(events: Any, index: int, spec: ThroughputSpec) -> None:
    """WARM transactions, then as many as fit in spec.seconds; for ems, the relay's drain
    of what was still in the outbox when the window closed is timed and its CPU counted."""
    engine = service_engine(spec.service_url)
    producer = None if spec.variant == OUTBOX else Producer(spec.cfg.settings)
    try:
        step = _steps(spec, engine, producer)
        for _ in range(WARM):
            step()
        cpu, start = time.process_time(), time.perf_counter()
        deadline, done = start + spec.seconds, 0
        while time.perf_counter() < deadline:
            step()
            done += 1
        elapsed = time.perf_counter() - start
        backlog, drain = 0, 0.0
        if spec.variant == EMS:
            assert producer is not None
            backlog = int(query(spec.cfg.settings.database_url, _PENDING, (spec.topic_id,))[0][0])
            began = time.perf_counter()
            producer.transactions.close()  # stops the relay after a last pass
            drain = time.perf_counter() - began
        window = Window(
            calls=done,
            messages=done * spec.batch,
            warm=WARM * spec.batch,
            elapsed=elapsed,
            cpu=time.process_time() - cpu,
            backlog=backlog,
            drain=drain,
        )
        events.put(("done", index, window))
    finally:
        if producer is not None:
            producer.close()
        engine.dispose()


# -- the relay's throughput against send_batch -------------------------------------------


def relay_drain(events: Any, index: int, cfg: BenchConfig, expected: int) -> None:
    """Move a backlog of `expected` committed outbox rows with the producer's relay
    (the pass its relay thread runs), timed from the first move to the last."""
    with Producer(cfg.settings) as producer:
        producer.send(cfg.topic, b"warm", key="warm")  # connections, counters seeded
        cpu, start = time.process_time(), time.perf_counter()
        moved = 0
        while moved < expected:
            count = producer.relay()
            if count == 0:
                raise RuntimeError(f"the relay found nothing after moving {moved:,}")
            moved += count
        elapsed = time.perf_counter() - start
        window = Window(
            calls=-(-moved // BIG_BATCH),
            messages=moved,
            warm=1,
            elapsed=elapsed,
            cpu=time.process_time() - cpu,
        )
        events.put(("done", index, window))


def batch_sender(events: Any, index: int, cfg: BenchConfig, seconds: float) -> None:
    """Plain send_batch of BIG_BATCH messages, one after another, for `seconds`."""
    rows = readings()
    chunks = [
        [Record(r.body, r.key, HEADERS) for r in rows[i : i + BIG_BATCH]]
        for i in range(0, len(rows), BIG_BATCH)
    ]
    with Producer(cfg.settings) as producer:
        for chunk in chunks[:2]:
            producer.send_batch(cfg.topic, chunk)
        cpu, start = time.process_time(), time.perf_counter()
        done = 0
        while time.perf_counter() - start < seconds:
            producer.send_batch(cfg.topic, chunks[done % len(chunks)])
            done += 1
        elapsed = time.perf_counter() - start
        window = Window(
            calls=done,
            messages=done * BIG_BATCH,
            warm=2 * BIG_BATCH,
            elapsed=elapsed,
            cpu=time.process_time() - cpu,
        )
        events.put(("done", index, window))


# -- end-to-end latency ---------------------------------------------------------------------

PLAIN = "plain"
SESSION = "session"
PYMYSQL = "pymysql"
#: Messages each sender sends before the measured ones (warms it and the consumer).
WARM_MESSAGES = 5


def body(seq: int) -> bytes:
    """An order event carrying its sequence number, which the consumer reads back."""
    return json.dumps({"seq": seq, "event": "order.created", "total_cents": 1999}).encode()


def seq_of(payload: bytes) -> int:
    return int(json.loads(payload)["seq"])


@dataclass(frozen=True, kw_only=True)
class SenderSpec:
    cfg: BenchConfig  # cfg.topic: the run's own topic
    service_url: str
    kind: str  # PLAIN, SESSION or PYMYSQL
    count: int
    rate: float  # messages per second, paced


def _publisher(spec: SenderSpec, producer: Producer) -> tuple[Callable[[int], None], Any]:
    """A call that publishes one message of the kind and returns once it is committed,
    and what to close afterwards."""
    topic = spec.cfg.topic
    if spec.kind == PLAIN:

        def plain(seq: int) -> None:
            producer.send(topic, body(seq))

        return plain, None
    if spec.kind == SESSION:
        engine = service_engine(spec.service_url)

        def in_session(seq: int) -> None:
            with Session(engine) as session:
                session.execute(ORDER, {"customer": f"c{seq}", "total": seq})
                producer.send(topic, body(seq), transaction=session)
                session.commit()

        return in_session, engine
    conn = mysql_connect(spec.service_url)
    conn.autocommit(False)

    def in_pymysql(seq: int) -> None:
        with conn.cursor() as cursor:
            cursor.execute(ORDER_PYMYSQL, (f"c{seq}", seq))
        producer.send(topic, body(seq), transaction=conn)
        conn.commit()

    return in_pymysql, conn


def sender(events: Any, index: int, spec: SenderSpec, go: Any, stop: Any) -> None:
    """Warm up, say ready, wait for go, then publish spec.count messages paced at
    spec.rate, recording when each commit returned (time.time()). Stays until stop: the
    relay that moves its transactional messages lives in this process."""
    producer = Producer(spec.cfg.settings)
    publish, resource = _publisher(spec, producer)
    try:
        for seq in range(-WARM_MESSAGES, 0):
            publish(seq)
        events.put(("ready", index, None))
        while not go.value:
            time.sleep(0.002)
        committed: dict[int, float] = {}
        behind = 0
        start = time.perf_counter()
        for seq in range(spec.count):
            wait = start + seq / spec.rate - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            elif wait < -0.01:
                behind += 1
            publish(seq)
            committed[seq] = time.time()
        events.put(("sent", index, (committed, behind)))
        while not stop.value:
            time.sleep(0.01)
    finally:
        producer.close()
        if isinstance(resource, pymysql.Connection):
            resource.close()
        elif resource is not None:
            resource.dispose()


def consumer(events: Any, index: int, cfg: BenchConfig, group: str, expect: int, stop: Any) -> None:
    """A one-member group from the start of the run's topic: says "live" at its first
    delivery (a warm-up message), "got" once messages 0..expect-1 have all arrived, and
    reports when each arrived (time.time()) at stop."""
    arrived: dict[int, float] = {}
    measured = 0

    def handle(d: Delivery) -> None:
        nonlocal measured
        now = time.time()
        seq = seq_of(d.body)
        if not arrived:
            events.put(("live", index, None))
        if seq in arrived:
            return  # a redelivery: the first arrival counts
        arrived[seq] = now
        if seq < 0:
            return  # warm-up and held messages are not measured
        measured += 1
        if measured == expect:
            events.put(("got", index, None))

    member = Consumer(group, cfg.topic, handle, settings=cfg.settings, start="earliest")
    threading.Thread(target=stop_when, args=(stop, member.stop), daemon=True).start()
    member.run(handle_signals=False)
    events.put(("done", index, arrived))


# -- what holds a transaction open ---------------------------------------------------------


def outbox_holder(
    events: Any, index: int, cfg: BenchConfig, service_url: str, release: Any, stop: Any
) -> None:
    """A transactional send whose transaction stays open until release; then commits."""
    engine = service_engine(service_url)
    producer = Producer(cfg.settings)
    try:
        with Session(engine) as session:
            session.execute(ORDER, {"customer": "held", "total": 1})
            producer.send(cfg.topic, body(-100), transaction=session)
            began = time.time()
            events.put(("holding", index, began))
            while not release.value:
                time.sleep(0.005)
            session.commit()
        events.put(("released", index, time.time() - began))
        while not stop.value:
            time.sleep(0.01)
    finally:
        producer.close()
        engine.dispose()


def hole_holder(
    events: Any, index: int, cfg: BenchConfig, topic_id: int, hold: float, stop: Any
) -> None:
    """The alternative design: take the next offset of partition 0 from the producers'
    counter, INSERT the message at it inside an open transaction, hold it `hold` seconds,
    then commit. Readers of the partition wait on the hole it makes meanwhile."""
    counters = redis_client(cfg.settings)
    conn = mysql_connect(cfg.settings.database_url)
    try:
        conn.autocommit(False)
        offset = int(counters.incrby(offset_key(cfg.settings.redis_prefix, topic_id, 0), 1)) - 1
        message = NewMessage(topic_id, 0, offset, None, None, body(-200))
        fences = topic_fences(conn, topic_id).fences
        for statement in insert_statements(placed_of([message]), 1, fences) or ():
            conn.query(statement)
        began = time.time()
        events.put(("holding", index, offset))
        time.sleep(hold)  # the open transaction under study: a fixed hold is the scenario
        conn.commit()
        events.put(("released", index, time.time() - began))
        while not stop.value:
            time.sleep(0.01)
    finally:
        conn.close()
        counters.close()


# -- exactly-once consumption against at-least-once ----------------------------------------

#: A consumer's durable work per message: its key's counter row, counted up.
UPSERT = text("INSERT INTO counts (k, n) VALUES (:k, 1) ON DUPLICATE KEY UPDATE n = n + 1")
#: Messages per send_batch of the backlog.
FILL_BATCH = 1_000


def consume_keys(
    partitions: int = PARTITIONS, per_partition: int = KEYS_PER_PARTITION
) -> list[list[str]]:
    """Per partition, the first `per_partition` device keys ("dev-0000", "dev-0001", ...)
    that ems's partitioner sends there."""
    found: list[list[str]] = [[] for _ in range(partitions)]
    n = 0
    while any(len(keys) < per_partition for keys in found):
        key = f"dev-{n:04d}"
        keys = found[partition_for_key(key.encode(), partitions)]
        if len(keys) < per_partition:
            keys.append(key)
        n += 1
    return found


def backlog_records(count: int) -> list[Record]:
    """`count` readings (the suite's bodies) spread evenly over the partitions: message i
    goes to partition i % PARTITIONS, under that partition's keys in turn."""
    keys = consume_keys()
    rows = readings()
    return [
        Record(
            rows[i % len(rows)].body, keys[i % PARTITIONS][i // PARTITIONS % len(keys[0])], HEADERS
        )
        for i in range(count)
    ]


def key_counts(records: list[Record]) -> Counter[str]:
    """How many messages each key has: what exactly-once leaves in its counter row."""
    return Counter(str(r.key) for r in records)


def fill_backlog(events: Any, index: int, cfg: BenchConfig, count: int) -> None:
    """Publish the backlog with send_batch; report {partition: messages}."""
    per: Counter[int] = Counter()
    records = backlog_records(count)
    with Producer(cfg.settings) as producer:
        for first in range(0, count, FILL_BATCH):
            for meta in producer.send_batch(cfg.topic, records[first : first + FILL_BATCH]):
                per[meta.partition] += 1
    events.put(("done", index, dict(per)))


class CommitClock:
    """One member process's batches, each timed in its phases (BatchTimes): from the last
    settlement to the first handler call (the poll), through the handler calls, from the
    last handler return to the commit returning, and on to the settlement returning (the
    ack). An exactly-once batch settles with its commit (settles_on_commit)."""

    def __init__(self, *, settles_on_commit: bool = False) -> None:
        self.settles_on_commit = settles_on_commit
        self.batches: list[BatchTimes] = []
        self.first = 0.0  # wall time of the first delivery
        self.last = 0.0  # wall time the last settlement returned
        self.cpu = 0.0  # process CPU seconds then
        now = time.perf_counter()
        self._settled = now  # perf_counter() of the last settlement (or the start)
        self._began = 0.0  # of the batch's first handler call; 0: between batches
        self._returned = now  # of the last handler return
        self._committed = 0.0  # of the batch's commit returning; 0: none yet

    def start(self) -> None:
        """The drain starts now (the barrier released)."""
        self._settled = time.perf_counter()

    def delivered(self) -> None:
        if not self._began:
            self._began = time.perf_counter()
            if not self.first:
                self.first = time.time()

    def handled(self) -> None:
        self._returned = time.perf_counter()

    def committed(self) -> None:
        self._committed = time.perf_counter()
        if self.settles_on_commit:
            self.settled()

    def settled(self) -> None:
        now = time.perf_counter()
        committed = self._committed or self._returned
        self.batches.append(
            BatchTimes(
                poll=self._began - self._settled,
                handle=self._returned - self._began,
                commit=committed - self._returned,
                ack=now - committed,
            )
        )
        self._settled, self._began, self._committed = now, 0.0, 0.0
        self.last, self.cpu = time.time(), time.process_time()


class TimedSession(Session):
    """A Session whose commit() records when it returned: an exactly-once batch's commit
    (which ems makes through the Session its sessionmaker opened) seen from outside ems,
    and the at-least-once loop's the same way."""

    clock: ClassVar[CommitClock] = CommitClock()

    def commit(self) -> None:
        super().commit()
        self.clock.committed()


def count_key(d: Delivery, session: Session) -> None:
    """The handler of (a) and (b): the message's key counted up in the service's table."""
    clock = TimedSession.clock
    clock.delivered()
    session.execute(UPSERT, {"k": (d.key or b"").decode()})
    clock.handled()


def no_op(d: Delivery) -> None:
    clock = TimedSession.clock
    clock.delivered()
    clock.handled()


class KeptWarnings(logging.Handler):
    """ems's warnings in this process, kept (and still printed)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.kept: list[str] = []
        self._printer = logging.lastResort or logging.StreamHandler()

    def emit(self, record: logging.LogRecord) -> None:
        self.kept.append(record.getMessage()[:300])
        self._printer.handle(record)


@dataclass(frozen=True, kw_only=True)
class ConsumeSpec:
    cfg: BenchConfig  # the ems database and the backlog's topic
    service_url: str
    variant: str  # EXACTLY_ONCE, SAME_WORK or NO_OP
    group: str  # a fresh group
    members: int
    counts: dict[int, int]  # messages of the backlog per partition, from offset 0
    batch: int  # messages per batch


def consume_member(events: Any, index: int, spec: ConsumeSpec, barrier: Barrier) -> None:
    """One member: join, wait for its balanced share of the partitions, then behind the
    barrier drain that share with the variant's loop, and report a MemberRun."""
    exactly_once = spec.variant == EXACTLY_ONCE
    clock = TimedSession.clock = CommitClock(settles_on_commit=exactly_once)
    warnings = KeptWarnings()
    logging.getLogger("ems").addHandler(warnings)
    engine = service_engine(spec.service_url)
    sessions = sessionmaker(engine, class_=TimedSession)
    consumer = Consumer(
        spec.group,
        spec.cfg.topic,
        count_key if exactly_once else None,
        settings=spec.cfg.settings,
        start="earliest",
        batch_size=spec.batch,
        transactional=sessions if exactly_once else None,
    )
    try:
        consumer.start()
        share = balanced_share(consumer, spec.members)
        expected = sum(spec.counts.get(p, 0) for p in share)
        with engine.connect():  # the service's pool holds a connection, as ems's pools do
            pass
        events.put(("share", index, share))
        barrier.wait(BARRIER_TIMEOUT)
        cpu = time.process_time()
        clock.start()
        if exactly_once:
            handled = consumer.run(max_messages=expected, handle_signals=False)
        else:
            handled = _pull(consumer, sessions, expected, spec.variant == SAME_WORK)
        run = MemberRun(
            handled=handled,
            first=clock.first,
            last=clock.last,
            cpu=clock.cpu - cpu,
            batches=tuple(clock.batches),
            warnings=tuple(warnings.kept),
        )
        events.put(("done", index, run))
    finally:
        consumer.close()
        engine.dispose()


def _pull(
    consumer: Consumer,
    sessions: sessionmaker[TimedSession],
    expected: int,
    work: bool,
) -> int:
    """At least once, in the pull form: poll() a batch, its upserts in one transaction
    of the service's (work) or a no-op handler per message, then ack()."""
    clock = TimedSession.clock
    handled = 0
    while handled < expected:
        batch = consumer.poll(timeout=1.0)
        if not batch:
            continue
        if work:
            with sessions() as session:
                for d in batch:
                    count_key(d, session)
                session.commit()
        else:
            for d in batch:
                no_op(d)
        consumer.ack(batch)
        clock.settled()
        handled += len(batch)
    return handled
