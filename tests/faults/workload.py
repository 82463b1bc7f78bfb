"""Child processes of the fault scenarios (`python -m tests.faults.workload MODE ...`).

Each reads its servers from EMS_DATABASE_URL and EMS_REDIS_URL, so a scenario can put a
fault proxy or a private server between them and the real ones.

  produce NAME OUTFILE RATE [identical]
      send messages until SIGTERM, singles and batches (now and then one split into
      several INSERTs, its bodies padded after a "|"), at about RATE msg/s; append one
      line per acknowledged message, "ack TIME PARTITION OFFSET LABEL" (the body without
      its padding), and one per failed call, "fail TIME COUNT ERROR" (the messages of a
      failed call are never acknowledged, and may or may not be stored). With
      `identical`, every message has the same body, key and headers (a heartbeat), so
      only the place tells two apart.
  aproduce NAME OUTFILE RATE [identical]
      the same with one ems.aio.Producer shared by four tasks
  consume GROUP OUTFILE TTL RENEW BATCH
      a cluster member until SIGTERM; one line per handled message, "TIME PARTITION
      OFFSET LABEL", written and flushed by the handler, so a kill -9 loses no line of a
      message it finished.

Lines are written whole with one write() on an unbuffered file, so a reader never sees
half a line from a live process.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import os
import random
import signal
import sys
import threading
import time

from ems import Consumer, Delivery, Producer, Record, RecordMetadata, Settings, aio
from ems.exceptions import EmsError
from ems.signals import relayed
from tests.faults.checks import label

TOPIC = "faults"
HEARTBEAT = b"heartbeat"


_RELAYS: list[contextlib.AbstractContextManager[None]] = []


def _stop_on_term() -> threading.Event:
    """An event SIGTERM sets. (A handler that raised instead could land inside a __del__,
    where Python prints the exception and drops it: the producer would never stop.) The
    event is set on ems.signals' relay thread: a handler runs on the main thread between
    any two bytecodes, also inside that event's wait() while it holds the event's lock,
    and a set() there waited on that lock for ever (a CI run saw the producer hang so on
    SIGTERM)."""
    stopping = threading.Event()
    relay = relayed((signal.SIGTERM,), lambda signum: stopping.set())
    relay.__enter__()
    _RELAYS.append(relay)  # for the life of the process: freed, it would put SIG_DFL back
    return stopping


def _writer(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


#: A split batch: this many messages whose bodies carry this much padding after a "|",
#: more than one INSERT holds, so it is sent as several statements in one transaction.
SPLIT_BATCH = 40
SPLIT_PAD = 12_000


class Sends:
    """The messages one producer (or one task of an asyncio producer) sends next, and the
    lines it records: "ack TIME PARTITION OFFSET LABEL" per acknowledged message, "fail
    TIME COUNT ERROR" per failed call."""

    def __init__(self, name: str, out: int, rate: float, identical: bool) -> None:
        self.name, self.out, self.rate, self.identical = name, out, rate, identical
        self.rng = random.Random(name)
        self.started, self.sent, self.attempted = time.monotonic(), 0, 0

    def next(self) -> list[Record]:
        if self.identical:
            n = self.rng.choice([1, 1, 1, 5, 20])
            return [Record(HEARTBEAT, key="gw-1", headers={"v": "1"})] * n
        split = self.rng.random() < 0.05
        n = SPLIT_BATCH if split else self.rng.choice([1, 1, 1, 5, 20])
        pad = "|" + "x" * SPLIT_PAD if split else ""
        first, self.attempted = self.attempted, self.attempted + n
        return [
            Record(f"{self.name}-{first + i}{pad}", key=f"project-{self.rng.randrange(30)}")
            for i in range(n)
        ]

    def failed(self, n: int, exc: EmsError) -> None:
        os.write(self.out, f"fail {time.time():.6f} {n} {type(exc).__name__}\n".encode())
        # The whole error goes to stderr, which a failed scenario shows (stderr_tails).
        print(f"send of {n} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    def acked(self, records: list[Record], placed: list[RecordMetadata]) -> float:
        """Record the acks; the seconds to wait before the next send to keep the rate."""
        now = time.time()
        os.write(
            self.out,
            "".join(
                f"ack {now:.6f} {m.partition} {m.offset} {label(r.body)}\n"
                for r, m in zip(records, placed, strict=True)
            ).encode(),
        )
        self.sent += len(records)
        return max(0.0, self.started + self.sent / self.rate - time.monotonic())


def produce(name: str, outfile: str, rate: float, identical: bool) -> None:
    out = _writer(outfile)
    sends = Sends(name, out, rate, identical)
    settings = Settings.from_env()
    stopping = _stop_on_term()
    try:
        with Producer(settings) as producer:
            print("ready", flush=True)
            while not stopping.is_set():
                records = sends.next()
                try:
                    if len(records) == 1:
                        r = records[0]
                        placed = [producer.send(TOPIC, r.body, key=r.key, headers=r.headers)]
                    else:
                        placed = producer.send_batch(TOPIC, records)
                except EmsError as exc:
                    sends.failed(len(records), exc)
                    stopping.wait(0.05)
                    continue
                stopping.wait(sends.acked(records, placed))
    finally:
        os.close(out)


#: Tasks sharing one ems.aio.Producer in the `aproduce` mode.
ATASKS = 4


def aproduce(name: str, outfile: str, rate: float, identical: bool) -> None:
    """As produce, with one ems.aio.Producer shared by ATASKS tasks (their sends are
    committed together), each at a share of the rate."""
    out = _writer(outfile)
    stopping = _stop_on_term()

    async def task(producer: aio.Producer, sends: Sends) -> None:
        while not stopping.is_set():
            records = sends.next()
            try:
                if len(records) == 1:
                    r = records[0]
                    placed = [await producer.send(TOPIC, r.body, key=r.key, headers=r.headers)]
                else:
                    placed = await producer.send_batch(TOPIC, records)
            except EmsError as exc:
                sends.failed(len(records), exc)
                await asyncio.sleep(0.05)
                continue
            await asyncio.sleep(sends.acked(records, placed))

    async def run() -> None:
        async with aio.Producer(Settings.from_env()) as producer:
            print("ready", flush=True)
            await asyncio.gather(
                *(
                    task(producer, Sends(f"{name}.{t}", out, rate / ATASKS, identical))
                    for t in range(ATASKS)
                )
            )

    try:
        asyncio.run(run())
    finally:
        os.close(out)


def consume(group: str, outfile: str, ttl: float, renew: float, batch: int) -> None:
    out = _writer(outfile)
    settings = Settings.from_env()

    def handle(d: Delivery) -> None:
        os.write(out, f"{time.time():.6f} {d.partition} {d.offset} {label(d.body)}\n".encode())

    consumer = Consumer(
        group,
        TOPIC,
        handle,
        settings=settings,
        start="earliest",
        lease_ttl=ttl,
        renew_every=renew,
        batch_size=batch,
    )
    print(consumer.client_id, flush=True)
    try:
        consumer.run()  # until SIGTERM: then it acks what it handled, commits and leaves
    finally:
        os.close(out)
    print("left", flush=True)


def _sleep_without_clock_nanosleep() -> None:
    """Under libfaketime (a scenario's skewed clock) every time.sleep fails with EINVAL:
    libfaketime 0.9.10 mangles the absolute CLOCK_MONOTONIC deadline that Python's sleep
    hands to clock_nanosleep, so the process would die at its first sleep (the library's
    retry pauses included). A condition wait, which it leaves alone, sleeps instead: the
    same length on the same monotonic clock. A host whose clock is merely wrong has no
    such trouble."""

    def sleep(seconds: float) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        threading.Event().wait(seconds)

    if "faketime" in os.environ.get("LD_PRELOAD", ""):
        time.sleep = sleep


def main(argv: list[str]) -> None:
    _sleep_without_clock_nanosleep()
    # A process the harness finds stuck gets SIGUSR1 before SIGKILL: every thread's stack
    # goes to stderr, which the failing assertion shows.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    mode, *args = argv
    if mode == "produce":
        produce(args[0], args[1], float(args[2]), args[3:] == ["identical"])
    elif mode == "aproduce":
        aproduce(args[0], args[1], float(args[2]), args[3:] == ["identical"])
    elif mode == "consume":
        consume(args[0], args[1], float(args[2]), float(args[3]), int(args[4]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
