"""One worker process: its members (a Consumer per topic and thread, or ems.aio
Consumers on one event loop for an `async def` handler), its /metrics endpoint, and the
graceful stop on SIGTERM and SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ems.aio.consumer import Consumer as AsyncConsumer
from ems.config import Settings
from ems.consumer import Consumer
from ems.exceptions import InvalidSetting
from ems.metrics import MetricsServer, start_server
from ems.signals import relayed
from ems.worker.handlers import Handler, is_async, load_handler
from ems.worker.options import WorkerConfig

log = logging.getLogger(__name__)

Say = Callable[[str], None]
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def run_process(config: WorkerConfig, settings: Settings, say: Say) -> int:
    """Import the handler, join the group on every topic and deliver until SIGTERM or
    SIGINT; then each member finishes its batch, acks, commits and leaves. Returns the
    messages handled. Raises what a member raised (typed: an unknown topic, a group that
    exists with other settings) having closed the others.

    The signals are caught from the start: one that comes while the handler is imported
    or the members join stops them as soon as they have joined, so none is killed with a
    lease the group would wait out."""
    stopper = _Stopper()
    with _on_signals(stopper):
        handler = load_handler(config.handler)
        if is_async(handler):
            return asyncio.run(_run_async(config, handler, settings, say, stopper))
        if config.concurrency > 1:
            raise InvalidSetting(
                "--concurrency applies to `async def` handlers; a plain function's calls run "
                "one at a time per member: use --threads or --processes"
            )
        return _run_threads(config, handler, settings, say, stopper)


class _Stopper:
    """What a stop signal stops: set once, it stops every member added, before or after."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self._stops: list[Callable[[], None]] = []

    def add(self, stop: Callable[[], None]) -> None:
        self._stops.append(stop)
        if self.requested.is_set():
            stop()

    def __call__(self) -> None:
        self.requested.set()
        for stop in list(self._stops):
            stop()


# -- plain functions: a thread per member -------------------------------------------------


def _run_threads(
    config: WorkerConfig, handler: Handler, settings: Settings, say: Say, stopper: _Stopper
) -> int:
    members: list[Consumer] = []
    try:
        for topic in config.topics:
            for _ in range(config.threads):
                members.append(
                    Consumer(config.group, topic, handler, settings=settings, **_kwargs(config))
                )
    except BaseException:
        for member in members:
            member.close()
        raise
    crew = _Crew(members)
    stopper.add(crew.stop)
    try:
        with _metrics(config, settings, say):
            say(f"{config.describe()}; clients {', '.join(m.client_id for m in members)}")
            return crew.run()
    finally:
        for member in members:  # run() closed each one it ran; these never ran
            member.close()


class _Crew:
    """Members running on threads of their own: when one ends (stopped, or failed), all
    are stopped, and the first failure is raised once every member has left."""

    def __init__(self, members: list[Consumer]) -> None:
        self.members = members
        self.ended = threading.Event()
        self.handled = 0
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()

    def stop(self) -> None:
        for member in self.members:
            member.stop()

    def run(self) -> int:
        threads = [
            threading.Thread(target=self._member, args=(m,), name=f"ems-worker-{i}")
            for i, m in enumerate(self.members)
        ]
        for thread in threads:
            thread.start()
        while not self.ended.wait(1.0):  # a timed wait: signal handlers run meanwhile
            pass
        self.stop()
        for thread in threads:
            while thread.is_alive():
                thread.join(1.0)
        if self.errors:
            raise self.errors[0]
        return self.handled

    def _member(self, member: Consumer) -> None:
        try:
            handled = member.run(handle_signals=False)
            with self._lock:
                self.handled += handled
        except BaseException as exc:
            log.error("member %s of the worker failed", member.client_id, exc_info=exc)
            with self._lock:
                self.errors.append(exc)
        finally:
            self.ended.set()


def _on_signal(signum: int, stop: Callable[[], None]) -> None:
    log.info("signal %d: each member finishes its batch, then leaves", signum)
    stop()


@contextmanager
def _on_signals(stop: Callable[[], None]) -> Iterator[None]:
    with relayed(STOP_SIGNALS, lambda signum: _on_signal(signum, stop)):
        yield


# -- async def: ems.aio Consumers on one event loop ----------------------------------------


async def _run_async(
    config: WorkerConfig, handler: Handler, settings: Settings, say: Say, stopper: _Stopper
) -> int:
    members = [
        AsyncConsumer(
            config.group,
            topic,
            handler,
            settings=settings,
            concurrency=config.concurrency,
            **_kwargs(config),
        )
        for topic in config.topics
        for _ in range(config.threads)
    ]
    try:
        for member in members:
            await member.start()
    except BaseException:
        for member in members:
            await member.close()
        raise

    def stop() -> None:
        for member in members:
            member.stop()

    stopper.add(stop)
    loop = asyncio.get_running_loop()
    with _metrics(config, settings, say):
        for s in STOP_SIGNALS:
            loop.add_signal_handler(s, _on_signal, s, stopper)
        say(f"{config.describe()} (async); clients {', '.join(m.client_id for m in members)}")
        tasks = [asyncio.create_task(m.run(handle_signals=False)) for m in members]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for member in members:  # one ended (stopped, or failed): all leave
            member.stop()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    for failure in failures:
        log.error("a member of the worker failed", exc_info=failure)
    if failures:
        raise failures[0]
    return sum(r for r in results if isinstance(r, int))


# -- shared -----------------------------------------------------------------------------


def _kwargs(config: WorkerConfig) -> dict[str, Any]:
    """The consumer's keyword arguments the worker was given (the rest: its defaults)."""
    return {name: value for name, value in config.consumer.items() if value is not None}


@contextmanager
def _metrics(config: WorkerConfig, settings: Settings, say: Say) -> Iterator[None]:
    """/metrics of this process, every member's metrics in it (one registry)."""
    if config.metrics_port is None:
        yield
        return
    addr = settings.metrics_addr
    try:
        server: MetricsServer = start_server(config.metrics_port, addr)
    except OSError as exc:
        raise InvalidSetting(
            f"cannot serve metrics on {addr} port {config.metrics_port}: {exc}"
        ) from exc
    say(f"metrics on port {server.port} ({addr})")
    try:
        yield
    finally:
        server.close()
