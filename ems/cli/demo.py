"""`ems demo`: the IoT pipeline behind `make run`, with a progress line every second."""

from __future__ import annotations

import time
from contextlib import closing

import click

from ems.cli.common import settings
from ems.cli.demo_workers import (
    ProducerPool,
    WorkerConfig,
    sigint_ignored,
    sigterm_interrupts,
)
from ems.cli.params import MAX_OFFSET, PARTITION, seconds
from ems.config import Settings
from ems.exceptions import TopicExists
from ems.store import Store
from ems.topics import TopicAdmin
from ems.types import TopicInfo


def ensure_topic(config: Settings, name: str, partitions: int) -> TopicInfo:
    with closing(TopicAdmin(config)) as admin:
        try:
            info = admin.create(name, partitions)
            click.echo(f"created topic {name} with {partitions} partitions")
        except TopicExists:
            info = admin.get(name)
            click.echo(f"using topic {name} ({info.partitions} partitions)")
    return info


def progress_line(elapsed: float, rate: float, total: int, marks: dict[int, int]) -> str:
    partitions = " ".join(f"p{p}={mark}" for p, mark in sorted(marks.items()))
    return f"{elapsed:7.1f}s {rate:9.0f} msg/s  total {total}  {partitions}"


class Monitor:
    """Samples the topic's high watermarks; counts what was published since it started."""

    def __init__(self, store: Store, topic: TopicInfo) -> None:
        self.store = store
        self.topic = topic
        self.baseline = sum(self.marks().values())
        self.start_clock()

    def start_clock(self) -> None:
        """Elapsed time and rates count from now; what was published before counts in
        the totals only."""
        self.started = time.monotonic()
        self.last_total = sum(self.marks().values()) - self.baseline
        self.last_time = self.started

    def marks(self) -> dict[int, int]:
        return self.store.messages.high_watermarks(self.topic)

    def tick(self) -> str:
        marks = self.marks()
        now = time.monotonic()
        total = sum(marks.values()) - self.baseline
        rate = (total - self.last_total) / max(now - self.last_time, 1e-6)
        self.last_total, self.last_time = total, now
        return progress_line(now - self.started, rate, total, marks)

    def summary(self) -> str:
        elapsed = time.monotonic() - self.started
        total = sum(self.marks().values()) - self.baseline
        rate = total / max(elapsed, 1e-6)
        name = self.topic.name
        return f"done: {total} messages to {name} in {elapsed:.1f}s ({rate:.0f} msg/s)"


def watch(monitor: Monitor, pool: ProducerPool, duration: float) -> None:
    """A progress line every second until `duration` has passed (forever if 0)."""
    end = None if duration == 0 else monitor.started + duration
    next_tick = monitor.started + 1.0
    while end is None or time.monotonic() < end:
        wake = next_tick if end is None else min(next_tick, end)
        time.sleep(max(0.0, wake - time.monotonic()))
        pool.check()
        click.echo(monitor.tick())
        next_tick += 1.0


@click.command()
@click.option(
    "--duration",
    "-d",
    type=seconds(zero=True),
    default=0.0,
    show_default=True,
    help="Seconds to run; 0 runs until Ctrl-C.",
)
@click.option("--topic", default="iot.readings", show_default=True)
@click.option(
    "--partitions",
    type=PARTITION,
    default=8,
    show_default=True,
    help="Partitions when the topic is created.",
)
@click.option(
    "--producers",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Producer processes.",
)
@click.option(
    "--projects",
    type=click.IntRange(1, MAX_OFFSET),
    default=50,
    show_default=True,
    help="Distinct project_id keys.",
)
@click.option(
    "--batch",
    type=click.IntRange(1, 10_000),
    default=50,
    show_default=True,
    help="Readings per send_batch.",
)
def demo(
    duration: float, topic: str, partitions: int, producers: int, projects: int, batch: int
) -> None:
    """Publish IoT readings from producer processes and report throughput."""
    config = settings()
    info = ensure_topic(config, topic, partitions)
    worker = WorkerConfig(settings=config, topic=topic, projects=projects, batch=batch)
    pool = ProducerPool(worker, producers)
    with closing(Store(config)) as store:
        monitor = Monitor(store, info)
        try:
            with sigterm_interrupts():
                pool.start()
                pool.wait_ready()
                monitor.start_clock()
                watch(monitor, pool, duration)
        except KeyboardInterrupt:
            click.echo("stopping producers", err=True)
        finally:
            with sigint_ignored():
                pool.stop()
        with sigint_ignored():
            click.echo(monitor.summary())
