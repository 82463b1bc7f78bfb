"""Child processes for the concurrency tests (run with `python -m tests.procs.producer`).

modes:
  produce NAME COUNT ACKFILE [RATE]
                              send COUNT messages (singles and batches), append one line per
                              acknowledged message: "partition offset body"; at most RATE
                              messages per second when given
  stream NAME ACKFILE RATE    as produce, at RATE messages per second, until SIGTERM: then
                              it finishes the send in hand, records it and exits 0 (for a
                              test that keeps producing until it has seen what it waits for)
  aproduce NAME COUNT ACKFILE [RATE]
                              the same with ems.aio.Producer: four tasks share one producer
                              (their sends are committed together), each sending a quarter
  hang                        allocate a range, say so, then wait to be killed (a producer
                              that dies between allocation and insert)
  slow SECONDS ACKFILE        allocate one offset, insert it in a transaction held open for
                              SECONDS, commit, and record the ack
"""

from __future__ import annotations

import asyncio
import random
import signal
import sys
import threading
import time
from typing import TextIO

import pymysql

from ems import Producer, Record, RecordMetadata, Settings, aio
from ems.offsets.allocators import RedisAllocator
from ems.store import Store

TOPIC = "conc"


def _settings(url: str) -> Settings:
    return Settings(database_url=url, gap_timeout=1.0)


#: Bodies of a split batch carry this much padding after a "|": 50 of them are more
#: than one INSERT can hold, so the batch is sent as two statements in one transaction.
SPLIT_PAD = 12_000
SPLIT_BATCH = 50


def _next_records(rng: random.Random, name: str, sent: int, count: int) -> list[Record]:
    """The next send, numbered on from `sent`: one message, a batch of 5 or 20, or now
    and then a batch large enough to be split into several statements."""
    split = rng.random() < 0.1
    n = min(SPLIT_BATCH if split else rng.choice([1, 1, 5, 20]), count - sent)
    pad = "|" + "x" * SPLIT_PAD if split else ""
    return [
        Record(f"{name}-{sent + i}{pad}".encode(), key=f"project-{rng.randrange(30)}")
        for i in range(n)
    ]


def label(body: bytes) -> str:
    """A message's name, without a split batch's padding."""
    return body.split(b"|", 1)[0].decode()


def _record_acks(acks: TextIO, records: list[Record], placed: list[RecordMetadata]) -> None:
    """One line per acknowledged message: "partition offset label"."""
    for record, meta in zip(records, placed, strict=True):
        acks.write(f"{meta.partition} {meta.offset} {label(record.body)}\n")


def produce(
    settings: Settings,
    name: str,
    count: int | None,
    ackfile: str,
    rate: float | None = None,
    stop: threading.Event | None = None,
) -> None:
    """COUNT messages, or (count None) until `stop` is set."""
    rng = random.Random(name)
    started = time.monotonic()
    with Producer(settings) as producer, open(ackfile, "a", buffering=1) as acks:
        sent, limit = 0, count or sys.maxsize
        while sent < limit and not (stop and stop.is_set()):
            records = _next_records(rng, name, sent, limit)
            if len(records) == 1:
                placed = [producer.send(TOPIC, records[0].body, key=records[0].key)]
            else:
                placed = producer.send_batch(TOPIC, records)
            _record_acks(acks, records, placed)
            sent += len(records)
            if rate:
                time.sleep(max(0.0, started + sent / rate - time.monotonic()))


def stream(settings: Settings, name: str, ackfile: str, rate: float) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    produce(settings, name, None, ackfile, rate, stop)


async def aproduce(
    settings: Settings, name: str, count: int, ackfile: str, rate: float | None = None
) -> None:
    tasks = 4
    started = time.monotonic()
    async with aio.Producer(settings) as producer:
        with open(ackfile, "a", buffering=1) as acks:
            await asyncio.gather(
                *(
                    _atask(producer, f"{name}.{t}", count // tasks, acks, rate, started)
                    for t in range(tasks)
                )
            )


async def _atask(
    producer: aio.Producer,
    name: str,
    count: int,
    acks: TextIO,
    rate: float | None,
    started: float,
) -> None:
    rng = random.Random(name)
    sent = 0
    while sent < count:
        records = _next_records(rng, name, sent, count)
        if len(records) == 1:
            placed = [await producer.send(TOPIC, records[0].body, key=records[0].key)]
        else:
            placed = await producer.send_batch(TOPIC, records)
        _record_acks(acks, records, placed)
        sent += len(records)
        if rate:
            await asyncio.sleep(max(0.0, started + sent * 4 / rate - time.monotonic()))


def hang(settings: Settings) -> None:
    store = Store(settings)
    topic = store.topics.get(TOPIC)
    allocator = RedisAllocator.for_settings(settings)
    allocator.reseed(topic.id, store.messages.next_offsets(topic.id))
    allocator.allocate(topic.id, {p: 3 for p in range(topic.partitions)})
    print("allocated", flush=True)
    time.sleep(600)


def slow(settings: Settings, seconds: float, ackfile: str) -> None:
    store = Store(settings)
    topic = store.topics.get(TOPIC)
    allocator = RedisAllocator.for_settings(settings)
    allocator.reseed(topic.id, store.messages.next_offsets(topic.id))
    offset = allocator.allocate(topic.id, {0: 1})[0]
    conn = pymysql.connect(host="127.0.0.1", user="root", database=settings.database_name)
    conn.begin()
    body = f"slow-{offset}"
    try:
        with conn.cursor() as cur:
            cur.execute(
                "INSERT INTO message (topic_id, partition_no, offset_no, body) "
                "VALUES (%s, 0, %s, %s)",
                (topic.id, offset, body.encode()),
            )
        print("inserted", flush=True)
        time.sleep(seconds)
        conn.commit()
    except pymysql.err.IntegrityError:
        print("lost its offset", flush=True)  # never acknowledged: nothing to record
        return
    with open(ackfile, "a") as acks:
        acks.write(f"0 {offset} {body}\n")


def main(argv: list[str]) -> None:
    url, mode, *args = argv
    settings = _settings(url)
    if mode == "produce":
        rate = float(args[3]) if len(args) > 3 else None
        produce(settings, args[0], int(args[1]), args[2], rate)
    elif mode == "stream":
        stream(settings, args[0], args[1], float(args[2]))
    elif mode == "aproduce":
        rate = float(args[3]) if len(args) > 3 else None
        asyncio.run(aproduce(settings, args[0], int(args[1]), args[2], rate))
    elif mode == "hang":
        hang(settings)
    elif mode == "slow":
        slow(settings, float(args[0]), args[1])


if __name__ == "__main__":
    main(sys.argv[1:])
