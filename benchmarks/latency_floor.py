"""The floor of publish->handler latency at 1,000 msg/s: the same pipeline written by
hand, measured in the same run as ems's (consumer_latency), so that the latency and CPU a
group of members shows read against what the design itself costs on this machine.

- The producer: SENDERS threads paced to the rate, each with its own autocommit PyMySQL
  connection and Redis connection (the raw+redis writer of the producer benchmark): per
  message one INCRBY, one INSERT in ems's literal encoding, and ems's wake-up write (the
  topic's and the partition's PUBLISH in one write, replies off). No guard, no group
  commit, no write token.
- Each member: subscribed to its partitions' wake-ups over ems's RESP connection; it reads
  the partitions it owns that a wake-up announced, all in one UNION ALL, hands each row
  to the "handler" (the latency is taken there; gap-free: a partition stops at the first
  offset not yet visible), then logs the rows as done and moves the cursors in one
  transaction (INSERT ... SELECT of the ranges read, one UPDATE, COMMIT) on
  a connection with autocommit off: four round trips per fetch, one commit. A member
  that hears nothing for half a second reads every partition it owns, so a lost wake-up
  only delays.

The members own fixed shares of the partitions (no leases, no leader, no rebalance) and
write the same tables as ems's members, so the server does the same durable work per
message: one message row, one log row, its share of a cursor update.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from benchmarks import consumer_latency
from benchmarks.consumer_latency import MEMBERS, PRODUCER, RATE, SECONDS, Budget, observe
from benchmarks.consumer_procs import Fleet
from benchmarks.consumer_workers import SENDERS, body, run_senders
from benchmarks.harness import PARTITIONS, BenchConfig, BenchError, mysql_connect, query
from ems import Consumer
from ems.offsets.allocators import offset_key
from ems.offsets.resp import RespConnection, pack
from ems.store.inserts import INSERT_HEAD, values
from ems.types import NewMessage
from ems.wakeups import Publisher, parse_messages, partition_channel, topic_channel

TOPIC = "latency-raw"
SYSTEM = "hand-written floor"
#: Rows per partition a fetch reads at most, as ems's default batch_size.
LIMIT = 500
#: A member that heard no wake-up for this long reads all it owns.
POLL = 0.5

_FETCH = (
    "(SELECT partition_no, offset_no, headers FROM message WHERE topic_id = %s "
    "AND partition_no = %s AND offset_no >= %s ORDER BY offset_no LIMIT %s)"
)
_LOG = (
    "INSERT INTO topic_group_log (group_id, topic_id, partition_no, offset_no, client_id, "
    "state, attempts, finished_at) SELECT %s, topic_id, partition_no, offset_no, %s, 'done', "
    "1, NOW(6) FROM message WHERE topic_id = %s AND ({ranges})"
)
_RANGE = "(partition_no = %s AND offset_no BETWEEN %s AND %s)"
_CURSORS = (
    "UPDATE group_offset SET committed_offset = CASE partition_no {cases} END, "
    "updated_at = NOW(6) WHERE group_id = %s AND partition_no IN ({places})"
)


def raw_producer(
    events: Any, index: int, cfg: BenchConfig, topic_id: int, rate: float, seconds: float
) -> None:
    """Single sends paced to `rate` for `seconds`, each tagged with its send time."""
    url = cfg.settings.redis_url
    keys = [offset_key(cfg.settings.redis_prefix, topic_id, p) for p in range(PARTITIONS)]
    senders = []
    for _ in range(SENDERS):
        counters = RespConnection.from_url(url, timeout=cfg.settings.connect_timeout, retries=0)
        if counters is None:
            raise BenchError(f"the raw floor speaks plain redis:// URLs only, not {url!r}")
        senders.append(
            (mysql_connect(cfg.settings.database_url), counters, Publisher(cfg.settings))
        )
    took: list[float] = []
    events.put(("ready", index, os.getpid()))
    start, cpu = time.perf_counter(), time.process_time()

    def sender(k: int) -> None:
        conn, counters, wakeups = senders[k]
        seq = k
        while seq / rate < seconds:
            wait = start + seq / rate - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            began = time.time()
            p = seq % PARTITIONS
            (end,) = counters.execute(pack("INCRBY", keys[p], 1), 1)
            if not isinstance(end, int):
                raise BenchError(f"Redis answered INCRBY with {end!r}")
            headers = json.dumps({"sent": repr(began)}, separators=(",", ":"))
            message = NewMessage(topic_id, p, end - 1, None, headers, body(seq))
            conn.query(INSERT_HEAD + values(message))
            wakeups.messages(topic_id, {p: end - 1})
            took.append(time.time() - began)
            seq += SENDERS

    run_senders(sender)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    for conn, counters, wakeups in senders:
        conn.close()
        counters.close()
        wakeups.close()
    took.sort()
    events.put(("sent", index, (len(took), elapsed, 0, took[len(took) // 2], cpu)))


class RawMember:
    """One member's fixed share of the partitions, its cursors and its statements."""

    def __init__(self, cfg: BenchConfig, topic_id: int, group_id: int, mine: list[int]) -> None:
        self.topic_id, self.group_id = topic_id, group_id
        self.client = f"raw-{os.getpid()}"
        self.conn = mysql_connect(cfg.settings.database_url)
        self.cursor = self.conn.cursor()
        self.cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")  # as ems
        self.cursor.execute(
            "SELECT partition_no, committed_offset FROM group_offset WHERE group_id = %s",
            (group_id,),
        )
        stored = {int(p): int(o) for p, o in self.cursor.fetchall()}
        self.position = {p: stored[p] for p in mine}
        self.conn.autocommit(False)
        self.latencies: list[float] = []
        self.fetches = self.handled = 0

    def fetch(self, partitions: list[int]) -> int:
        """Read, handle and ack what these partitions hold past their cursors; returns
        how many messages it handled."""
        args: list[object] = []
        for p in partitions:
            args += [self.topic_id, p, self.position[p], LIMIT]
        self.cursor.execute(" UNION ALL ".join([_FETCH] * len(partitions)), args)
        # Gap-free, as ems: a partition's rows are taken up to the first offset not yet
        # visible (a send that took an earlier offset has not committed yet); the rest
        # is read again once that one is announced.
        following = dict(self.position)
        taken = []
        for p, offset, headers in self.cursor.fetchall():
            if offset == following[p]:
                following[p] = offset + 1
                taken.append(headers)
        last = {p: end - 1 for p, end in following.items() if end > self.position[p]}
        if not last:
            self.conn.commit()  # the read's snapshot ends; nothing to ack
            return 0
        now = time.time()
        for headers in taken:
            self.latencies.append(now - float(json.loads(headers)["sent"]))
        ranges, log_args, cases, case_args = [], [self.group_id, self.client, self.topic_id], [], []
        for p, end in last.items():
            ranges.append(_RANGE)
            log_args += [p, self.position[p], end]
            cases.append("WHEN %s THEN %s")
            case_args += [p, end + 1]
        self.cursor.execute(_LOG.format(ranges=" OR ".join(ranges)), log_args)
        places = ",".join(["%s"] * len(last))
        self.cursor.execute(
            _CURSORS.format(cases=" ".join(cases), places=places),
            [*case_args, self.group_id, *last],
        )
        self.conn.commit()
        for p, end in last.items():
            self.position[p] = end + 1
        self.fetches += 1
        self.handled += len(taken)
        return len(taken)

    def close(self) -> None:
        self.conn.close()


def raw_member(
    events: Any,
    index: int,
    cfg: BenchConfig,
    topic_id: int,
    group_id: int,
    members: int,
    go: Any,
    stop: Any,
) -> None:
    mine = [p for p in range(PARTITIONS) if p % members == index]
    member = RawMember(cfg, topic_id, group_id, mine)
    wakeups = RespConnection.from_url(
        cfg.settings.redis_url, timeout=cfg.settings.connect_timeout, retries=0
    )
    if wakeups is None:
        raise BenchError("the raw floor speaks plain redis:// URLs only")
    channel = topic_channel(cfg.settings, topic_id)
    wakeups.subscribe([partition_channel(channel, p) for p in mine])
    events.put(("ready", index, os.getpid()))
    announced: dict[int, int] = {}
    counted = False
    fetches = 0
    try:
        while not stop.value:
            if go.value and not counted:
                counted, fetches = True, member.fetches
            pushes = wakeups.pushes(POLL)
            for push in pushes:
                match push:
                    case [b"message", bytes(), bytes(payload)]:
                        for p, o in parse_messages(payload.decode()).items():
                            if p in member.position and o >= member.position[p]:
                                announced[p] = max(o, announced.get(p, o))
            ready = mine if not pushes else [p for p in announced if p in member.position]
            if ready:
                member.fetch(sorted(ready))
                announced = {p: o for p, o in announced.items() if o >= member.position[p]}
    finally:
        wakeups.close()
        member.close()
    window = {"fetches": member.fetches - fetches, "threads": {}}
    events.put(("done", index, (member.latencies, window, member.handled)))


def ensure_topic(cfg: BenchConfig) -> int:
    """The floor's topic (created once), its Redis counters set to the stored offsets:
    the raw producer is its only writer and allocates by INCRBY alone."""
    topic_id = consumer_latency.ensure_topic(cfg, TOPIC)
    url = cfg.settings.database_url
    highs = dict(
        query(
            url,
            "SELECT partition_no, MAX(offset_no) + 1 FROM message WHERE topic_id = %s "
            "GROUP BY partition_no",
            (topic_id,),
        )
    )
    counters = RespConnection.from_url(cfg.settings.redis_url, timeout=5, retries=0)
    if counters is None:
        raise BenchError("the raw floor speaks plain redis:// URLs only")
    try:
        for p in range(PARTITIONS):
            key = offset_key(cfg.settings.redis_prefix, topic_id, p)
            counters.call("SET", key, int(highs.get(p, 0)))
    finally:
        counters.close()
    return int(topic_id)


def one(cfg: BenchConfig, topic_id: int, members: int) -> Budget:
    group = f"latency-raw-{members}-{int(time.time())}"
    # The group's rows (cursors at the end of the topic) come from ems; no member of
    # ems's ever runs in it.
    Consumer(group, TOPIC, settings=cfg.settings, start="latest").close()
    ((group_id,),) = query(
        cfg.settings.database_url, "SELECT id FROM consumer_group WHERE name = %s", (group,)
    )

    def up(fleet: Fleet, go: Any) -> list[int]:
        for i in range(members):
            fleet.spawn(i, raw_member, cfg, topic_id, group_id, members, go, fleet.stop)
        return [pid for _, pid in sorted(fleet.wait("ready", range(members), 120).items())]

    def produce(fleet: Fleet) -> None:
        fleet.spawn(PRODUCER, raw_producer, cfg, topic_id, RATE, SECONDS)

    budget = observe(cfg, members, group, TOPIC, up, produce, system=SYSTEM)
    if len(budget.latencies) != budget.sent:
        raise BenchError(f"{group}: {len(budget.latencies):,} handled of {budget.sent:,} sent")
    return budget


def measure(cfg: BenchConfig) -> list[Budget]:
    """The floor's budgets for groups of each size ems's are measured with."""
    topic_id = ensure_topic(cfg)
    return [one(cfg, topic_id, n) for n in MEMBERS]
