"""Consume and ack with 4 processes, for the aio suite: one cluster group of 4 member
processes drains a backlog with the sync ems.Consumer and another with ems.aio.Consumer,
DRAIN_ROUNDS times each, the order alternating, each by a group of its own after the
server settled; the medians are reported, and every round's rate in the order run.

Both members run the push form (`run()`) with a handler that does nothing but count:
`def handle(d)` for the sync Consumer, `async def handle(d)` for ems.aio.Consumer. The
consumer suite's machinery does the rest (benchmarks/consumer.py, consumer_procs.py,
consumer_workers.py): its fill, its process fleet, its wait for a balanced share of 4
partitions per member before a barrier releases them together, and its check of the group
afterwards (every message logged done, every cursor at the high watermark). The rate is
the backlog over the wall time from the group's first delivery to its last.

The backlog lives in a database of its own, dropped and filled afresh on every run, so
each group starts from offset 0 with nothing of an earlier run.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from typing import Any

from benchmarks.aio_drivers import prepare
from benchmarks.consumer import TOPIC, WORKERS, check_group, drop_databases, partition_ranges
from benchmarks.consumer_procs import Fleet
from benchmarks.consumer_workers import BODY_BYTES, GroupSpec, balanced_share, fill_ems, stop_when
from benchmarks.harness import (
    BARRIER_TIMEOUT,
    BenchConfig,
    BenchError,
    on_database,
    query,
    run_in_child,
    turns,
)
from benchmarks.innodb import settle
from benchmarks.pairing import paired
from ems import Consumer
from ems.aio import Consumer as AioConsumer
from ems.types import Delivery, StartPosition

DATABASE = "ems_bench_aio_consume"
#: Drains of the backlog per system (sync, aio), the order alternating; medians reported,
#: and aio against sync as the median of the rounds' ratios (paired_ratio). Eight, not
#: three: single drains swung from 0.66x to 1.28x of the other system's drain beside them,
#: so the median of three moved with one drain; and an even count lets each system run
#: first equally often.
DRAIN_ROUNDS = 8


@dataclass(frozen=True, kw_only=True)
class Drain:
    system: str
    handled: int
    seconds: float  # first delivery to last, over the group
    cpu_micros: float  # client CPU per message, all members
    checks: list[str]
    error: str | None = None
    #: msg/s of each of the system's rounds, in the order run (a median's parts).
    rounds: tuple[float, ...] = ()

    @property
    def rate(self) -> float:
        return self.handled / self.seconds if self.seconds > 0 else 0.0


class Tally:
    """The handler's only work: count deliveries, and report the member's drain
    (first delivery, last delivery, handled, CPU seconds) when its share is handled."""

    def __init__(self, events: Any, index: int) -> None:
        self.events, self.index = events, index
        self.expected = 0
        self.handled = 0
        self.first = 0.0
        self.cpu = 0.0

    def start(self, expected: int) -> None:
        self.expected, self.cpu = expected, time.process_time()

    def __call__(self, d: Delivery) -> None:
        now = time.time()
        if not self.handled:
            self.first = now
        self.handled += 1
        if self.handled == self.expected:
            cpu = time.process_time() - self.cpu
            self.events.put(("drained", self.index, (self.first, now, self.handled, cpu)))


def _line_up(events: Any, index: int, member: Consumer, spec: GroupSpec, barrier: Barrier) -> int:
    """Report ready, wait for a balanced share, then for the others: this member's backlog."""
    events.put(("ready", index, os.getpid()))
    share = balanced_share(member, spec.workers)
    barrier.wait(BARRIER_TIMEOUT)
    assert spec.counts is not None
    return sum(spec.counts[p] for p in share)


def _stop_on(flag: Any, stop: Callable[[], None]) -> None:
    threading.Thread(target=stop_when, args=(flag, stop), daemon=True).start()


def sync_member(events: Any, index: int, spec: GroupSpec, barrier: Barrier, stop: Any) -> None:
    counting_member(events, index, spec, barrier, stop, start="earliest")


def counting_member(
    events: Any,
    index: int,
    spec: GroupSpec,
    barrier: Barrier,
    stop: Any,
    *,
    start: StartPosition,
) -> None:
    """A sync Consumer whose handler only counts: lines up with the others, drains its
    share, reports it. start: the position of a group this member creates."""
    tally = Tally(events, index)
    consumer = Consumer(
        spec.group,
        spec.cfg.topic,
        tally,
        settings=spec.cfg.settings,
        start=start,
        lease_ttl=spec.lease_ttl,
        renew_every=spec.renew_every,
    )
    consumer.start()
    tally.start(_line_up(events, index, consumer, spec, barrier))
    _stop_on(stop, consumer.stop)
    consumer.run(handle_signals=False)
    events.put(("done", index, tally.handled))


def aio_member(events: Any, index: int, spec: GroupSpec, barrier: Barrier, stop: Any) -> None:
    asyncio.run(_aio_member(events, index, spec, barrier, stop))


async def _aio_member(
    events: Any, index: int, spec: GroupSpec, barrier: Barrier, stop: Any
) -> None:
    tally = Tally(events, index)

    async def handle(d: Delivery) -> None:
        tally(d)

    consumer = AioConsumer(
        spec.group,
        spec.cfg.topic,
        handle,
        settings=spec.cfg.settings,
        start="earliest",
        lease_ttl=spec.lease_ttl,
        renew_every=spec.renew_every,
    )
    await consumer.start()
    # The share is the group protocol's, which the sync member underneath holds; nothing
    # else runs on the loop yet, so waiting here blocks no one.
    tally.start(_line_up(events, index, consumer._member, spec, barrier))
    _stop_on(stop, consumer.stop)
    await consumer.run(handle_signals=False)
    events.put(("done", index, tally.handled))


#: system -> the process body of one member, in the order they drain
BODIES = {"sync": sync_member, "aio": aio_member}


def consume_config(cfg: BenchConfig) -> BenchConfig:
    return on_database(cfg, DATABASE, topic=TOPIC)


def fill(cfg: BenchConfig, messages: int) -> dict[int, int]:
    """A fresh database holding `messages` unkeyed messages of BODY_BYTES; partition ->
    messages."""
    drop_databases(cfg, DATABASE)
    prepare(cfg)
    run_in_child(fill_ems, (cfg, messages), timeout=600)
    return {p: end - first for p, (first, end) in partition_ranges(cfg).items()}


def drain(cfg: BenchConfig, system: str, counts: dict[int, int], group: str) -> Drain:
    """One new group of WORKERS members of `system` drains the backlog, then stops and
    leaves."""
    query(cfg.settings.database_url, "TRUNCATE TABLE topic_group_log")  # each starts empty
    fleet = Fleet()
    spec = GroupSpec(cfg=cfg, group=group, workers=WORKERS, counts=counts)
    barrier = fleet.ctx.Barrier(WORKERS)
    members = range(WORKERS)
    try:
        for i in members:
            fleet.spawn(i, BODIES[system], spec, barrier, fleet.stop)
        fleet.wait("ready", members, 120)
        drained = list(fleet.wait("drained", members, 900).values())
        fleet.stop.value = 1
        fleet.wait("done", members, 60)
    finally:
        fleet.close()
    handled = sum(d[2] for d in drained)
    checks = check_group(cfg, group)
    if handled != sum(counts.values()):
        checks.append(f"CHECK {group}: handled {handled:,} of {sum(counts.values()):,}")
    return Drain(
        system=system,
        handled=handled,
        seconds=max(d[1] for d in drained) - min(d[0] for d in drained),
        cpu_micros=sum(d[3] for d in drained) / handled * 1e6,
        checks=checks,
    )


def measure(cfg: BenchConfig, messages: int, log: Callable[[str], None]) -> list[Drain]:
    """DRAIN_ROUNDS drains of one backlog by each system, the order alternating (sync
    first, then aio first, ...); per system its median round (by rate, with the median
    CPU), in BODIES order. A system whose drain fails is reported by its first failure."""
    ccfg = consume_config(cfg)
    log(f"filling {messages:,} messages of {BODY_BYTES} bytes for the consume rows")
    counts = fill(ccfg, messages)
    done: dict[str, list[Drain]] = {system: [] for system in BODIES}
    failed: dict[str, Drain] = {}
    for r, order in enumerate(turns(tuple(BODIES), DRAIN_ROUNDS)):
        for system in order:
            if system in failed:
                continue
            settle(ccfg.settings.database_url)
            try:
                d = drain(ccfg, system, counts, f"bench-aio-{system}-{r}")
            except BenchError as exc:  # reported in the table, not lost with the other rows
                first = str(exc).partition("\n")[0]
                log(f"consume, {system}: FAILED\n{exc}")
                failed[system] = Drain(
                    system=system, handled=0, seconds=0.0, cpu_micros=0.0, checks=[], error=first
                )
                continue
            log(
                f"round {r + 1}: consume, {system}: {d.handled:,} in {d.seconds:.1f} s, "
                f"{d.rate:,.0f} msg/s"
            )
            done[system].append(d)
    return [failed.get(system) or median_drain(done[system]) for system in BODIES]


def paired_ratio(drains: list[Drain]) -> float | None:
    """aio against sync: the median over the rounds of aio's rate over sync's in the same
    round (benchmarks.pairing); None unless both drained in every round."""
    found = {d.system: d for d in drains if d.error is None}
    sync, aio = found.get("sync"), found.get("aio")
    if sync is None or aio is None:
        return None
    ratio = paired(aio.rounds, sync.rounds)
    return None if ratio is None else ratio.median


def median_drain(drains: list[Drain]) -> Drain:
    """The round of median rate (the lower of the middle two), with the rounds' median
    CPU, every round's checks and the rates in the order run."""
    middle = sorted(drains, key=lambda d: d.rate)[(len(drains) - 1) // 2]
    return Drain(
        system=middle.system,
        handled=middle.handled,
        seconds=middle.seconds,
        cpu_micros=statistics.median(d.cpu_micros for d in drains),
        checks=[c for d in drains for c in d.checks],
        rounds=tuple(d.rate for d in drains),
    )
