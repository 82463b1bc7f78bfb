"""The scale suite's drain: 1, 4 and 16 cluster groups, each of one member process,
drain the last messages of the large topic at once.

Each group is created with its cursors at the latest offsets, then moved back by ems's
offset reset to the datetime of the message BACKLOG from the end (a reset by datetime,
through the time index; its wall time is reported). The reset lands on the first message
created at or after that time, so the rows committed late add a few percent to the
backlog; each member drains exactly what the reset left behind its cursors. Every member
then holds all 16 partitions of its group and, behind a barrier shared by all members,
runs the push form (`run()`) with a handler that does nothing but count
(benchmarks/aio_consume.Tally). The total rate is every delivery over the wall time from
the first delivery of any group to the last of any; a group's rate is its own deliveries
over its own first to last. The parent samples each member's VmRSS while they drain.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from typing import Any

from benchmarks.aio_consume import counting_member
from benchmarks.consumer_procs import Fleet, rss_mb
from benchmarks.consumer_workers import GroupSpec
from benchmarks.cpu import cpu_seconds, local_server_pid
from benchmarks.harness import BenchConfig, query
from ems.consumer.groups import GroupOptions, new_group
from ems.ops.reset import OffsetReset, ResetTarget
from ems.store import Store
from ems.types import TopicInfo

GROUPS = (1, 4, 16)
#: The drains in the order they run: 4 and 16 groups twice, alternating, so that the
#: fan-out ratio is taken from two pairs measured apart (this host's noise between two
#: drains minutes apart is as large as the effect).
ORDER = (1, 4, 16, 4, 16)
#: Messages of the topic, counted from its end, that each group drains.
BACKLOG = 200_000
#: Seconds between VmRSS samples.
SAMPLE_EVERY = 0.2


@dataclass(frozen=True, kw_only=True)
class Drain:
    groups: int
    run: int  # 1 for the first drain of this many groups, 2 for the second
    handled: int
    seconds: float  # first delivery of any group to the last of any
    group_rates: tuple[float, ...]
    reset_s: tuple[float, ...]  # wall time of each group's reset by datetime
    rss_start: float  # MB, the largest member's before draining
    rss_peak: float  # MB, the largest member's while draining
    member_cpu_s: float  # CPU seconds of all members while draining
    server_cpu_s: float | None  # CPU seconds of the database server (None: not local)
    page_reads: int  # pages the server read from disk while the members drained
    pages_flushed: int  # pages it wrote
    checks: tuple[str, ...]

    @property
    def rate(self) -> float:
        return self.handled / self.seconds if self.seconds > 0 else 0.0

    def micros(self, cpu_s: float | None) -> float | None:
        """CPU microseconds per delivery."""
        return None if cpu_s is None or not self.handled else cpu_s * 1e6 / self.handled


def member(events: Any, index: int, spec: GroupSpec, barrier: Barrier, stop: Any) -> None:
    """One group's only member: wait for all partitions and the others, then drain."""
    # The group exists: its cursors are the reset's, whatever the start position.
    counting_member(events, index, spec, barrier, stop, start="latest")


def backlog_start(store: Store, topic: TopicInfo) -> dt.datetime:
    """created_at of the message BACKLOG from the end of the topic (in the order written)."""
    rows = store.db.select(
        "SELECT created_at FROM message WHERE topic_id = %s "
        "AND id = (SELECT MAX(id) FROM message WHERE topic_id = %s) - %s",
        (topic.id, topic.id, BACKLOG),
    )
    return rows[0][0]  # type: ignore[no-any-return]


def create_groups(
    cfg: BenchConfig, store: Store, topic: TopicInfo, names: list[str], at: dt.datetime
) -> tuple[dict[str, dict[int, int]], list[float]]:
    """Create the groups at the latest offsets and reset each to `at`: (group -> partition
    -> messages to drain, reset wall times)."""
    options = GroupOptions.checked(
        broadcast=False,
        start="latest",
        ordered=None,
        retry_ladder=None,
        max_attempts=None,
        ack_timeout=None,
        batch_size=500,
        lease_ttl=10.0,
        renew_every=3.0,
    )
    highs = store.messages.high_watermarks(topic)
    counts, took = {}, []
    resets = OffsetReset(cfg.settings, store=store)
    try:
        for name in names:
            store.groups.create(new_group(name, topic, options), topic)
            t0 = time.monotonic()
            result = resets.reset(name, ResetTarget(kind="datetime", at=at), topic=topic.name)
            took.append(time.monotonic() - t0)
            counts[name] = {c.partition: highs[c.partition] - c.new for c in result.changes}
    finally:
        resets.close()
    return counts, took


class RssSampler:
    """VmRSS of some processes every SAMPLE_EVERY seconds on a thread: the peak."""

    def __init__(self, pids: list[int]) -> None:
        self.pids, self.peak = pids, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            self.peak = max(self.peak, *(rss_mb(pid) for pid in self.pids))

    def close(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


def page_io(cfg: BenchConfig) -> tuple[int, ...]:
    """(pages read from disk, pages flushed) by the server so far."""
    rows = dict(
        query(
            cfg.settings.database_url,
            "SHOW GLOBAL STATUS WHERE Variable_name IN "
            "('Innodb_buffer_pool_reads', 'Innodb_buffer_pool_pages_flushed')",
        )
    )
    return int(rows["Innodb_buffer_pool_reads"]), int(rows["Innodb_buffer_pool_pages_flushed"])


def check_cursors(cfg: BenchConfig, topic: TopicInfo, names: list[str]) -> list[str]:
    """Every group's cursors at the partitions' high watermarks."""
    problems = []
    for name in names:
        behind = query(
            cfg.settings.database_url,
            "SELECT o.partition_no, o.committed_offset FROM group_offset o "
            "JOIN consumer_group g ON g.id = o.group_id WHERE g.name = %s "
            "AND o.committed_offset < (SELECT MAX(offset_no) + 1 FROM message m "
            "WHERE m.topic_id = %s AND m.partition_no = o.partition_no)",
            (name, topic.id),
        )
        problems += [f"CHECK {name}: partition {p} cursor {c} short of the end" for p, c in behind]
    return problems


def drain(cfg: BenchConfig, store: Store, topic: TopicInfo, groups: int, run: int = 1) -> Drain:
    """`groups` groups of one member each drain the last BACKLOG messages, together (new
    groups each run)."""
    names = [f"scale-{groups}-r{run}-{i}" for i in range(groups)]
    counts, took = create_groups(cfg, store, topic, names, backlog_start(store, topic))
    fleet = Fleet()
    barrier = fleet.ctx.Barrier(groups)
    members = range(groups)
    try:
        for i, name in enumerate(names):
            spec = GroupSpec(cfg=cfg, group=name, workers=1, counts=counts[name])
            fleet.spawn(i, member, spec, barrier, fleet.stop)
        pids = list(fleet.wait("ready", members, 120).values())
        rss_start = max(rss_mb(pid) for pid in pids)
        server = local_server_pid()
        server_cpu = cpu_seconds(server) if server else 0.0
        io = page_io(cfg)
        sampler = RssSampler(pids)
        try:
            drained = list(fleet.wait("drained", members, 1800).values())
        finally:
            rss_peak = sampler.close()
        server_cpu_s = cpu_seconds(server) - server_cpu if server else None
        io = tuple(b - a for a, b in zip(io, page_io(cfg), strict=True))
        fleet.stop.value = 1
        fleet.wait("done", members, 60)
    finally:
        fleet.close()
    expected = sum(sum(c.values()) for c in counts.values())
    handled = sum(d[2] for d in drained)
    checks = check_cursors(cfg, topic, names)
    if handled != expected:
        checks.append(f"CHECK {groups} groups: handled {handled:,} of {expected:,}")
    return Drain(
        groups=groups,
        run=run,
        handled=handled,
        seconds=max(d[1] for d in drained) - min(d[0] for d in drained),
        group_rates=tuple(d[2] / (d[1] - d[0]) for d in drained),
        reset_s=tuple(took),
        rss_start=rss_start,
        rss_peak=rss_peak,
        member_cpu_s=sum(d[3] for d in drained),
        server_cpu_s=server_cpu_s,
        page_reads=io[0],
        pages_flushed=io[1],
        checks=tuple(checks),
    )
