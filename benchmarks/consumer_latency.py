"""Where publish->handler latency goes at 1,000 msg/s.

The consumer suite's paced producer (8 threads sharing one Producer, each message tagged
with its send time) against a group of 1 and then of 4 member processes on a topic of its
own. Besides the latencies it reports what a latency on a small machine is made of: how
busy the machine's cores were, the CPU each part spent per message (the database server,
Redis, the producer, the members by thread), and how many messages a member's fetch
carried (each fetch costs a read, and its acks one transaction, whatever it carries).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from benchmarks.consumer_procs import Fleet
from benchmarks.consumer_workers import paced_producer
from benchmarks.cpu import cpu_seconds, local_server_pid, machine_ticks
from benchmarks.harness import BenchConfig, BenchError, bench_topic, query
from ems import Consumer
from ems.types import Delivery

TOPIC = "latency"
PARTITIONS = 16
RATE = 1000.0
SECONDS = 10.0
MEMBERS = (1, 4)
PRODUCER = 100
#: The member threads reported apart; the rest (heartbeat, membership) count as other.
THREADS = {"MainThread": "main", "ems-wakeups": "wake-ups", "ems-acks": "ack writer"}


@dataclass(kw_only=True)
class Budget:
    members: int
    #: ems, or the hand-written floor (latency_floor).
    system: str = "ems"
    sent: int = 0
    latencies: list[float] = field(default_factory=list)
    send_p50: float = 0.0
    #: Non-empty fetches of all members while the stream ran.
    fetches: int = 0
    handled: int = 0
    #: Share of the machine's cores busy while the stream ran (0..1).
    busy: float = 0.0
    #: CPU seconds while the stream ran: per process kind, and per member thread kind.
    cpu: dict[str, float] = field(default_factory=dict)
    threads: dict[str, float] = field(default_factory=dict)


def thread_cpu() -> dict[str, float]:
    """CPU seconds each thread of this process has used, by thread name."""
    found: dict[str, float] = {}
    for t in threading.enumerate():
        if t.ident is None:
            continue
        try:
            seconds = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
        except OSError:  # it ended while we looked
            continue
        kind = THREADS.get(t.name, "other")
        found[kind] = found.get(kind, 0.0) + seconds
    return found


def member(
    events: Any, index: int, cfg: BenchConfig, group: str, share: int, go: Any, stop: Any
) -> None:
    """A member that reports once it holds `share` partitions, then, between `go` and
    `stop`, its non-empty fetches and its threads' CPU, and the latency of every tagged
    message it handled."""
    latencies: list[float] = []

    def handler(d: Delivery) -> None:
        sent = d.headers.get("sent")
        if sent is not None:
            latencies.append(time.time() - float(sent))

    consumer = Consumer(group, cfg.topic, handler, settings=cfg.settings, start="latest")
    fetch = consumer.session.fetch
    fetches = [0]

    def counted(limit: int, max_bytes: int) -> list[Delivery]:
        batch = fetch(limit, max_bytes)
        if batch:
            fetches[0] += 1
        return batch

    consumer.session.fetch = counted  # type: ignore[method-assign]
    consumer.start()
    events.put(("ready", index, os.getpid()))
    window: dict[str, Any] = {}

    def control() -> None:
        session: Any = consumer.session
        while len(session.states) != share and not stop.value:
            time.sleep(0.01)  # observed: the loop's sync takes the partitions
        events.put(("holding", index, share))
        while not go.value and not stop.value:
            time.sleep(0.005)
        before, count = thread_cpu(), fetches[0]
        while not stop.value:
            time.sleep(0.01)
        after = thread_cpu()
        window["threads"] = {k: after[k] - before.get(k, 0.0) for k in after}
        window["fetches"] = fetches[0] - count
        consumer.stop()

    threading.Thread(target=control, daemon=True).start()
    handled = consumer.run(handle_signals=False)
    events.put(("done", index, (latencies, window, handled)))


def redis_pid(cfg: BenchConfig) -> int | None:
    """The pid of the Redis server cfg uses, when it runs on this machine."""
    client = redis.Redis.from_url(cfg.settings.redis_url)
    try:
        pid = int(client.info("server")["process_id"])
    finally:
        client.close()
    return pid if os.path.exists(f"/proc/{pid}") else None


def ensure_topic(cfg: BenchConfig, topic: str = TOPIC) -> int:
    """The topic's id, made if missing."""
    return bench_topic(cfg.settings, topic, PARTITIONS)


def unacked(cfg: BenchConfig, group: str, topic: str = TOPIC) -> int:
    """Messages of the topic the group's committed cursors have not passed yet."""
    ((behind,),) = query(
        cfg.settings.database_url,
        "SELECT COALESCE(SUM(h.high - o.committed_offset), 0) FROM group_offset o "
        "JOIN consumer_group g ON g.id = o.group_id JOIN ("
        "SELECT partition_no, MAX(offset_no) + 1 AS high FROM message "
        "WHERE topic_id = (SELECT id FROM topic WHERE name = %s) GROUP BY partition_no) h "
        "ON h.partition_no = o.partition_no WHERE g.name = %s",
        (topic, group),
    )
    return int(behind)


#: Starts the members in a fleet, given the flag that opens their window; returns their
#: pids once each is ready to take messages.
MembersUp = Callable[[Fleet, Any], list[int]]
#: Starts the paced producer in a fleet as process PRODUCER.
ProducerUp = Callable[[Fleet], None]


def observe(
    cfg: BenchConfig,
    members: int,
    group: str,
    topic: str,
    up: MembersUp,
    produce: ProducerUp,
    system: str = "ems",
) -> Budget:
    """A budget of one run: members up, then the paced producer; CPU and the machine's
    idle time from the first send until the group has acked every message."""
    budget = Budget(members=members, system=system)
    fleet = Fleet()
    go = fleet.ctx.RawValue("b", 0)
    try:
        pids = up(fleet, go)
        produce(fleet)
        fleet.wait("ready", [PRODUCER], 60)
        kinds = {"server": local_server_pid(), "Redis": redis_pid(cfg)}
        start = {k: cpu_seconds(p) for k, p in kinds.items() if p is not None}
        start |= {f"member {i}": cpu_seconds(p) for i, p in enumerate(pids)}
        idle0, total0 = machine_ticks()
        go.value = 1
        sent, _, _, budget.send_p50, producer = fleet.wait("sent", [PRODUCER], SECONDS + 60)[
            PRODUCER
        ]
        budget.sent = sent
        deadline = time.monotonic() + 60
        while unacked(cfg, group, topic) > 0:
            if time.monotonic() > deadline:
                raise BenchError(f"{group}: {unacked(cfg, group, topic)} messages not acked")
            time.sleep(0.05)
        idle1, total1 = machine_ticks()
        end = {k: cpu_seconds(p) for k, p in kinds.items() if p is not None}
        end |= {f"member {i}": cpu_seconds(p) for i, p in enumerate(pids)}
        fleet.stop.value = 1
        done = fleet.wait("done", range(members), 60)
    finally:
        fleet.close()
    budget.busy = 1 - (idle1 - idle0) / max(1, total1 - total0)
    spent = {k: end[k] - start[k] for k in start}
    budget.cpu = {k: v for k, v in spent.items() if not k.startswith("member ")}
    budget.cpu["members"] = sum(v for k, v in spent.items() if k.startswith("member "))
    budget.cpu["producer"] = producer
    for latencies, window, handled in done.values():
        budget.latencies += latencies
        budget.fetches += window.get("fetches", 0)
        budget.handled += handled
        for kind, seconds in window.get("threads", {}).items():
            budget.threads[kind] = budget.threads.get(kind, 0.0) + seconds
    return budget


def one(cfg: BenchConfig, members: int) -> Budget:
    group = f"latency-{members}-{int(time.time())}"
    share = PARTITIONS // members

    def up(fleet: Fleet, go: Any) -> list[int]:
        for i in range(members):
            fleet.spawn(i, member, cfg, group, share, go, fleet.stop)
        pids = [pid for _, pid in sorted(fleet.wait("ready", range(members), 120).items())]
        fleet.wait("holding", range(members), 120)
        return pids

    def produce(fleet: Fleet) -> None:
        fleet.spawn(PRODUCER, paced_producer, cfg, RATE, SECONDS, True, fleet.stop_producers)

    return observe(cfg, members, group, TOPIC, up, produce)


def measure(cfg: BenchConfig) -> list[Budget]:
    cfg = dataclasses.replace(cfg, topic=TOPIC)
    ensure_topic(cfg)
    return [one(cfg, n) for n in MEMBERS]
