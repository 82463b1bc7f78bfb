"""The demo's timeline: handlers join, gateways publish, a handler joins and one leaves,
then the gateways stop and the group drains what is left."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass

from ems.config import Settings
from ems.demo.monitor import Monitor, summary
from ems.demo.processes import Pool, WorkerConfig, run_gateway, run_handler, sigint_ignored
from ems.exceptions import TopicExists
from ems.offsets.allocators import check_redis
from ems.store import Store
from ems.topics import TopicAdmin
from ems.types import TopicInfo

Echo = Callable[[str], None]
#: Seconds the group gets to catch up once the gateways stopped.
DRAIN_SECONDS = 20.0


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    duration: float = 0.0  # 0: until Ctrl-C or SIGTERM
    topic: str = "iot.readings"
    partitions: int = 8
    gateways: int = 4
    handlers: int = 2
    group: str = "data-handlers"
    projects: int = 50
    batch: int = 50
    #: Readings per second per gateway; 0: as fast as it can.
    rate: float = 0.0

    def schedule(self) -> tuple[float, float]:
        """Seconds from the start when a handler joins, and when the first one leaves."""
        if self.duration == 0:
            return 10.0, 20.0
        return self.duration / 3, 2 * self.duration / 3


def ensure_topic(settings: Settings, name: str, partitions: int, echo: Echo) -> TopicInfo:
    with closing(TopicAdmin(settings)) as admin:
        try:
            info = admin.create(name, partitions)
            echo(f"created topic {name} with {partitions} partitions")
        except TopicExists:
            info = admin.get(name)
            echo(f"using topic {name} ({info.partitions} partitions)")
    return info


def check_servers(settings: Settings) -> None:
    """MySQL, and Redis when it allocates offsets, answer before the demo creates its
    topic and group: with either unreachable the demo would fail half set up."""
    with closing(Store(settings)) as store:
        store.messages.now()
    if settings.allocator == "redis":
        check_redis(settings)


def run_demo(settings: Settings, options: DemoOptions, echo: Echo, echo_err: Echo) -> None:
    check_servers(settings)
    info = ensure_topic(settings, options.topic, options.partitions, echo)
    config = WorkerConfig(
        settings=settings,
        topic=options.topic,
        group=options.group,
        projects=options.projects,
        batch=options.batch,
        rate=options.rate,
    )
    pool = Pool(config)
    gateways = [f"gateway-{i + 1}" for i in range(options.gateways)]
    handlers = [f"handler-{i + 1}" for i in range(options.handlers)]
    #: Started with the others behind a closed gate: it joins on cue.
    joiner = f"handler-{options.handlers + 1}"
    monitor: Monitor | None = None
    with closing(Store(settings)) as store:
        try:
            with _sigterm_interrupts():
                for name in handlers:
                    pool.spawn(name, run_handler)
                pool.spawn(joiner, run_handler, gated=True)
                pool.wait_ready(len(handlers))  # the group exists once one joined
                monitor = Monitor(store, info, options.group, pool.names)
                for name in gateways:
                    pool.spawn(name, run_gateway)
                pool.wait_ready(len(gateways))
                monitor.restart()
                _timeline(monitor, pool, options, handlers, joiner, echo)
        except KeyboardInterrupt:
            echo_err("stopping the gateways, then the handlers")
        finally:
            with sigint_ignored():
                pool.stop_gateways(gateways)
                if monitor is not None:
                    _drain(monitor, pool)
                pool.stop_handlers([*handlers, joiner])
        if monitor is not None:
            with sigint_ignored():
                for line in summary(
                    monitor.baseline, monitor.first, monitor.sample(), info.name, options.group
                ):
                    echo(line)


def _timeline(
    monitor: Monitor,
    pool: Pool,
    options: DemoOptions,
    handlers: list[str],
    joiner: str,
    echo: Echo,
) -> None:
    """A progress line every second until the duration has passed (forever if 0); a
    handler joins at a third of it and the first one leaves at two thirds."""
    join_at, leave_at = options.schedule()
    started = monitor.first.at
    end = None if options.duration == 0 else started + options.duration
    joined = left = False
    next_tick = started + 1.0
    while end is None or time.monotonic() < end:
        wake = next_tick if end is None else min(next_tick, end)
        time.sleep(max(0.0, wake - time.monotonic()))
        pool.check()
        elapsed = time.monotonic() - started
        if not joined and elapsed >= join_at:
            joined = True
            handlers.append(joiner)
            pool.open(joiner)
            echo(f"+ {joiner} joins {options.group}")
        if not left and elapsed >= leave_at:
            left = True
            echo(f"- {handlers[0]} leaves {options.group} (SIGTERM: it commits and hands over)")
            pool.terminate(handlers[0])
        echo(monitor.tick())
        next_tick += 1.0


def _drain(monitor: Monitor, pool: Pool) -> None:
    """Until the group has caught up with the stopped gateways (or DRAIN_SECONDS)."""
    deadline = time.monotonic() + DRAIN_SECONDS
    while monitor.sample().lag > 0 and time.monotonic() < deadline:
        pool.check()
        time.sleep(0.2)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (kill, docker stop) ends the demo as cleanly as Ctrl-C does."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
