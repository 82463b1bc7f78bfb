"""The demo's producer processes: IoT gateways publishing readings keyed by project_id."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import queue
import random
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event, Semaphore

from ems.config import Settings
from ems.exceptions import EmsError
from ems.producer import Producer
from ems.types import Record

DEVICES_PER_PROJECT = 20


@dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    settings: Settings
    topic: str
    projects: int
    batch: int


def reading(rng: random.Random, projects: int) -> dict[str, object]:
    project = rng.randrange(1, projects + 1)
    return {
        "project_id": project,
        "device": f"gw-{project}-{rng.randrange(DEVICES_PER_PROJECT)}",
        "ts": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
        "temperature": round(rng.gauss(21.0, 4.0), 2),
    }


def readings(rng: random.Random, projects: int, count: int) -> list[Record]:
    batch = (reading(rng, projects) for _ in range(count))
    return [Record(json.dumps(r), key=str(r["project_id"])) for r in batch]


def run_producer(
    config: WorkerConfig, index: int, stop: Event, errors: Queue[EmsError], ready: Semaphore
) -> None:
    """Publish batches until `stop` is set. Ctrl-C is the parent's business: it sets
    `stop`, so a batch in flight is finished rather than cut off."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rng = random.Random(f"{index}-{time.time_ns()}")
    parent = multiprocessing.parent_process()
    try:
        with Producer(config.settings) as producer:
            producer.send_batch(config.topic, readings(rng, config.projects, config.batch))
            ready.release()
            # A parent killed outright (SIGKILL) never sets `stop`: do not outlive it.
            while not stop.is_set() and (parent is None or parent.is_alive()):
                producer.send_batch(config.topic, readings(rng, config.projects, config.batch))
    except EmsError as exc:
        errors.put(exc)
        raise SystemExit(1) from None


@contextmanager
def sigint_ignored() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (kill, docker stop) ends the demo as cleanly as Ctrl-C does."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class ProducerPool:
    """N spawned producer processes sharing a stop event and an error queue."""

    def __init__(self, config: WorkerConfig, size: int) -> None:
        # spawn, not fork: children open their own connections instead of sharing
        # the parent's sockets, and behave the same on every platform.
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._errors: Queue[EmsError] = context.Queue()
        self._ready = context.Semaphore(0)
        self._processes = [
            context.Process(
                target=run_producer,
                args=(config, i, self._stop, self._errors, self._ready),
                name=f"ems-demo-producer-{i}",
                daemon=True,
            )
            for i in range(size)
        ]

    def start(self) -> None:
        # Children start with SIGINT ignored, so a Ctrl-C during their start-up cannot
        # kill them with a traceback; the parent alone decides when they stop.
        with sigint_ignored():
            for process in self._processes:
                process.start()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until every producer has published its first batch: spawning and importing
        take seconds on a busy host, and the demo's clock should not count them."""
        deadline = time.monotonic() + timeout
        for _ in self._processes:
            while not self._ready.acquire(timeout=0.1):
                self.check()
                if time.monotonic() > deadline:
                    raise EmsError(f"the producers did not start within {timeout:.0f}s")

    def check(self) -> None:
        """Raise the error of a producer that died."""
        failed = [p for p in self._processes if p.exitcode not in (None, 0)]
        if not failed:
            return
        try:
            error = self._errors.get(timeout=1.0)
        except queue.Empty:
            error = EmsError(f"{failed[0].name} exited with code {failed[0].exitcode}")
        raise error

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout
        for process in self._processes:
            if process.pid is not None:
                process.join(max(0.0, deadline - time.monotonic()))
        for process in self._processes:
            if process.is_alive():
                process.terminate()
                process.join(1.0)
