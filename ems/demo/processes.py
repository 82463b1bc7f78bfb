"""The demo's processes: gateways publishing readings and data handlers consuming them,
each spawned on its own, and the pool that starts, watches and stops them."""

from __future__ import annotations

import multiprocessing
import os
import queue
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.context import ForkServerProcess
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event, Semaphore

from ems.config import Settings
from ems.consumer import Consumer
from ems.demo.readings import parse, readings
from ems.exceptions import EmsError
from ems.producer import Producer
from ems.signals import relayed
from ems.types import Delivery


@dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    settings: Settings
    topic: str
    group: str
    projects: int
    batch: int
    #: Readings per second per gateway; 0: as fast as it can.
    rate: float = 0.0


def pause(began: float, sent: int, rate: float, now: float) -> float:
    """Seconds a gateway waits before its next batch to keep `rate` readings a second
    (0: no pacing), having sent `sent` since `began`."""
    return 0.0 if rate <= 0 else max(0.0, began + sent / rate - now)


Target = Callable[[WorkerConfig, str, Event, Event, "Queue[EmsError]", Semaphore], None]


def run_gateway(
    config: WorkerConfig,
    name: str,
    stop: Event,
    gate: Event,
    errors: Queue[EmsError],
    ready: Semaphore,
) -> None:
    """Publish batches until `stop` is set. Ctrl-C is the parent's business: it sets
    `stop`, so a batch in flight is finished rather than cut off."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rng = random.Random(f"{name}-{time.time_ns()}")
    parent = multiprocessing.parent_process()
    try:
        with Producer(config.settings) as producer:
            producer.send_batch(config.topic, readings(rng, config.projects, config.batch))
            ready.release()
            began, sent = time.monotonic(), 0
            # A parent killed outright (SIGKILL) never sets `stop`: do not outlive it.
            while not stop.is_set() and (parent is None or parent.is_alive()):
                if stop.wait(pause(began, sent, config.rate, time.monotonic())):
                    break
                producer.send_batch(config.topic, readings(rng, config.projects, config.batch))
                sent += config.batch
    except EmsError as exc:
        errors.put(exc)
        raise SystemExit(1) from None


def store_reading(delivery: Delivery) -> None:
    """The data handler's work: parse and check the reading (storing it is the user's
    part; a malformed one raises, so the group retries and finally dead-letters it)."""
    parse(delivery.body)


def run_handler(
    config: WorkerConfig,
    name: str,
    stop: Event,
    gate: Event,
    errors: Queue[EmsError],
    ready: Semaphore,
) -> None:
    """A member of the cluster group from when `gate` opens until SIGTERM, which finishes
    the batch in hand, commits and leaves, so its partitions move to the others at once.
    (Started ahead behind a closed gate, a handler joins on cue, not after its imports.)"""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    while not gate.wait(0.5):
        if parent is not None and not parent.is_alive():
            return
    try:
        consumer = Consumer(
            config.group, config.topic, store_reading, settings=config.settings, start="earliest"
        )
        consumer.start()
        ready.release()
        _leave_with_parent(consumer)
        # SIGTERM only: a Ctrl-C in the terminal reaches every process of the group, and
        # the handlers are to drain what the gateways published before they leave.
        with relayed((signal.SIGTERM,), lambda signum: consumer.stop()):
            consumer.run(handle_signals=False)
    except EmsError as exc:
        errors.put(exc)
        raise SystemExit(1) from None


def _leave_with_parent(consumer: Consumer) -> None:
    """A parent killed outright (SIGKILL) sends no SIGTERM: do not outlive it."""
    parent = multiprocessing.parent_process()

    def watch() -> None:
        while parent is None or parent.is_alive():
            time.sleep(0.5)
        consumer.stop()

    threading.Thread(target=watch, name="ems-demo-parent", daemon=True).start()


@contextmanager
def sigint_ignored() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class Pool:
    """Spawned processes sharing a stop event, an error queue and a ready count."""

    def __init__(self, config: WorkerConfig) -> None:
        # Not fork: children open their own connections instead of sharing the parent's
        # sockets. forkserver forks each child from a clean server process that imported
        # this module once, rather than a new interpreter importing ems for each.
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload([__name__])
        self.config = config
        self._stop = self._context.Event()
        self._errors: Queue[EmsError] = self._context.Queue()
        self._ready = self._context.Semaphore(0)
        self.processes: dict[str, ForkServerProcess] = {}
        self._gates: dict[str, Event] = {}

    def spawn(self, name: str, target: Target, *, gated: bool = False) -> None:
        """Start a process; a gated one waits for open(name) before it does its work."""
        gate = self._gates[name] = self._context.Event()
        if not gated:
            gate.set()
        process = self._context.Process(
            target=target,
            args=(self.config, name, self._stop, gate, self._errors, self._ready),
            name=f"ems-demo-{name}",
            daemon=True,
        )
        # Children start with SIGINT ignored, so a Ctrl-C during their start-up cannot
        # kill them with a traceback; the parent alone decides when they stop.
        with sigint_ignored():
            process.start()
        self.processes[name] = process

    def open(self, name: str) -> None:
        self._gates[name].set()

    def names(self) -> dict[int, str]:
        """Process id -> name, for the processes started."""
        return {p.pid: name for name, p in self.processes.items() if p.pid is not None}

    def wait_ready(self, count: int, timeout: float = 60.0) -> None:
        """Until `count` more processes are up (a gateway published, a handler joined):
        spawning and importing take seconds on a busy host."""
        deadline = time.monotonic() + timeout
        for _ in range(count):
            while not self._ready.acquire(timeout=0.1):
                self.check()
                if time.monotonic() > deadline:
                    raise EmsError(f"the demo's processes did not start within {timeout:.0f}s")

    def check(self) -> None:
        """Raise the error of a process that died."""
        failed = [p for p in self.processes.values() if p.exitcode not in (None, 0)]
        if not failed:
            return
        try:
            error = self._errors.get(timeout=1.0)
        except queue.Empty:
            error = EmsError(f"{failed[0].name} exited with code {failed[0].exitcode}")
        raise error

    def terminate(self, name: str) -> None:
        """SIGTERM: a handler finishes its batch, commits and leaves."""
        pid = self.processes[name].pid
        if pid is not None:
            os.kill(pid, signal.SIGTERM)

    def join(self, names: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for name in names:
            self.processes[name].join(max(0.0, deadline - time.monotonic()))

    def stop_gateways(self, names: list[str], timeout: float = 10.0) -> None:
        """Gateways finish the batch in flight and stop."""
        self._stop.set()
        self._finish(names, timeout)

    def stop_handlers(self, names: list[str], timeout: float = 20.0) -> None:
        """Handlers finish their batch, commit and leave (one still behind its gate
        just ends)."""
        for name in dict.fromkeys(names):
            if self.processes[name].is_alive():
                self.terminate(name)
        self._finish(names, timeout)

    def _finish(self, names: list[str], timeout: float) -> None:
        self.join(names, timeout)
        for name in names:
            process = self.processes[name]
            if process.is_alive():
                process.terminate()
                process.join(1.0)
