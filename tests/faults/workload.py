"""Child processes of the fault scenarios (`python -m tests.faults.workload MODE ...`).

Both read their servers from EMS_DATABASE_URL and EMS_REDIS_URL, so a scenario can put a
fault proxy or a private server between them and the real ones.

  produce NAME OUTFILE RATE [identical]
      send messages until SIGTERM, singles and batches, at about RATE msg/s; append one
      line per acknowledged message, "ack TIME PARTITION OFFSET BODY", and one per failed
      call, "fail TIME COUNT ERROR" (the messages of a failed call are never acknowledged,
      and may or may not be stored). With `identical`, every message has the same body,
      key and headers (a heartbeat), so only the place tells two apart.
  consume GROUP OUTFILE TTL RENEW BATCH
      a cluster member until SIGTERM; one line per handled message, "TIME PARTITION
      OFFSET BODY", written and flushed by the handler, so a kill -9 loses no line of a
      message it finished.

Lines are written whole with one write() on an unbuffered file, so a reader never sees
half a line from a live process.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
from types import FrameType

from ems import Consumer, Delivery, Producer, Record, Settings
from ems.exceptions import EmsError

TOPIC = "faults"
HEARTBEAT = b"heartbeat"


def _stop_on_term() -> threading.Event:
    """An event SIGTERM sets. (A handler that raised instead could land inside a __del__,
    where Python prints the exception and drops it: the producer would never stop.)"""
    stopping = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, handler)
    return stopping


def _writer(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def produce(name: str, outfile: str, rate: float, identical: bool) -> None:
    rng = random.Random(name)
    out = _writer(outfile)
    started, sent, attempted = time.monotonic(), 0, 0
    settings = Settings.from_env()
    stopping = _stop_on_term()
    try:
        with Producer(settings) as producer:
            print("ready", flush=True)
            while not stopping.is_set():
                n = rng.choice([1, 1, 1, 5, 20])
                if identical:
                    records = [Record(HEARTBEAT, key="gw-1", headers={"v": "1"})] * n
                else:
                    records = [
                        Record(f"{name}-{attempted + i}", key=f"project-{rng.randrange(30)}")
                        for i in range(n)
                    ]
                attempted += n
                try:
                    if n == 1:
                        r = records[0]
                        placed = [producer.send(TOPIC, r.body, key=r.key, headers=r.headers)]
                    else:
                        placed = producer.send_batch(TOPIC, records)
                except EmsError as exc:
                    line = f"fail {time.time():.6f} {n} {type(exc).__name__}\n"
                    os.write(out, line.encode())
                    stopping.wait(0.05)
                    continue
                now = time.time()
                os.write(
                    out,
                    "".join(
                        f"ack {now:.6f} {m.partition} {m.offset} {_text(r.body)}\n"
                        for r, m in zip(records, placed, strict=True)
                    ).encode(),
                )
                sent += n
                stopping.wait(max(0.0, started + sent / rate - time.monotonic()))
    finally:
        os.close(out)


def _text(body: bytes | str) -> str:
    return body.decode() if isinstance(body, bytes) else body


def consume(group: str, outfile: str, ttl: float, renew: float, batch: int) -> None:
    out = _writer(outfile)
    settings = Settings.from_env()

    def handle(d: Delivery) -> None:
        os.write(out, f"{time.time():.6f} {d.partition} {d.offset} {d.body.decode()}\n".encode())

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
    mode, *args = argv
    if mode == "produce":
        produce(args[0], args[1], float(args[2]), args[3:] == ["identical"])
    elif mode == "consume":
        consume(args[0], args[1], float(args[2]), float(args[3]), int(args[4]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
