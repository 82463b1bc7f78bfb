"""Real producer processes against the real servers: 8 producers (4 of the sync Producer,
4 of ems.aio's, each with four tasks sharing it; now and then a batch split into several
INSERTs), Redis losing this deployment's counters
in the middle, producers killed between allocation and insert, one of each kind killed
mid-stream, and a deliberately slow transaction, over a fresh topic and over one
whose history retention has purged. Each fault waits for the producers' progress and
checks they were still sending. Every acknowledged message must be stored exactly once, a
reader following along must see each exactly once in offset order, and every partition
must read back gap-free."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from contextlib import suppress
from pathlib import Path

import pytest

from ems import Reader, TopicAdmin
from ems.config import Settings
from ems.maintenance.purge import purge_retention
from ems.store import Store
from ems.store.errors import BelowLowWatermark, DuplicateKey
from tests import forked
from tests import sql as db
from tests.integration import seed
from tests.procs.producer import label

pytestmark = pytest.mark.slow
PARTITIONS = 4


def _spawn(settings: Settings, *args: str) -> forked.Child:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
    return forked.spawn(
        "tests.procs.producer", [settings.database_url, *args], env=env, stdout=forked.PIPE
    )


def _wait_line(proc: forked.Child, expected: str) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line == expected, line


class Follower(threading.Thread):
    """Follows every partition with the gap-free reader, as a consumer would, from the
    high watermarks at its start (a group whose cursors were there)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(daemon=True)
        self.reader = Reader(settings)
        marks = self.reader.high_watermarks("conc")
        self.cursors = {p: marks.get(p, 0) for p in range(PARTITIONS)}
        self.origin = dict(self.cursors)
        self.seen: list[tuple[int, int, str]] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for p in range(PARTITIONS):
                    batch = self.reader.read_partition("conc", p, self.cursors[p], limit=200)
                    self.seen += [(p, m.offset, label(m.body)) for m in batch.messages]
                    self.cursors[p] = batch.next_offset
                time.sleep(0.02)
        except BaseException as exc:  # surfaced by the test
            self.error = exc

    def caught_up(self) -> bool:
        return self.cursors == self.reader.high_watermarks("conc")


class Planter(threading.Thread):
    """Stores a tombstone a little ahead of each partition's high watermark now and then,
    as a reader does when it fills the hole of a producer that was slow: producers then
    meet a stored offset anywhere in a send, also in a later statement of a split batch,
    and must retry with fresh offsets without storing anything twice."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(daemon=True)
        self.store = Store(settings)
        self.stop = threading.Event()
        self.planted = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(7)
        try:
            topic = self.store.topics.get("conc")
            while not self.stop.wait(0.15):
                marks = self.store.messages.next_offsets(topic.id)
                for p, high in marks.items():
                    with suppress(DuplicateKey, BelowLowWatermark):
                        at = high + rng.randrange(5, 60)
                        self.store.messages.insert_tombstones(topic.id, p, range(at, at + 1))
                        self.planted += 1
        except BaseException as exc:  # surfaced by the test
            self.error = exc
        finally:
            self.store.close()


def _count_acks(paths: list[Path]) -> int:
    return sum(len(p.read_text().splitlines()) for p in paths if p.exists())


def _wait_acks(paths: list[Path], at_least: int, timeout: float = 60) -> int:
    """Wait until the producers have acknowledged at least this many messages in all."""
    deadline = time.monotonic() + timeout
    while (count := _count_acks(paths)) < at_least:
        assert time.monotonic() < deadline, f"only {count} of {at_least} acknowledged"
        time.sleep(0.05)
    return count


def _purge_history(settings: Settings, rows: int) -> dict[int, int]:
    """`rows` messages per partition, two days old, then a retention purge: every partition
    keeps its last row, and its low watermark stands just below it."""
    store = Store(settings)
    try:
        topic = store.topics.get("conc")
        for p in range(PARTITIONS):
            seed.messages(store, topic, p, range(rows), 48)
        purge_retention(store, settings)
        return {p: seed.low(store, topic, p) or 0 for p in range(PARTITIONS)}
    finally:
        store.close()


def _read_acks(paths: list[Path]) -> dict[str, tuple[int, int]]:
    acks: dict[str, tuple[int, int]] = {}
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            partition, offset, body = line.split(" ", 2)
            assert body not in acks, f"{body} acknowledged twice"
            acks[body] = (int(partition), int(offset))
    return acks


@pytest.mark.parametrize("purged", [False, True], ids=["fresh", "purged"])
def test_crashes_and_redis_loss_lose_and_duplicate_nothing(
    settings: Settings, tmp_path: Path, purged: bool
) -> None:
    """purged: the partitions' history was purged by retention before the stream, so
    after the Redis loss a counter seeded from nothing would land below the low
    watermark, where no reader looks."""
    TopicAdmin(settings).create("conc", PARTITIONS, retention_hours=1)
    lows = _purge_history(settings, 200) if purged else dict.fromkeys(range(PARTITIONS), 0)
    follower = Follower(settings)
    follower.start()
    planter = Planter(settings)

    hung = _spawn(settings, "hang")
    _wait_line(hung, "allocated")
    hung.send_signal(signal.SIGKILL)

    ack_files = [tmp_path / f"acks-{i}" for i in range(9)]
    # Paced (400 messages at 100/s, about 4 s each) so that both faults find them sending.
    # 0-3: the sync Producer; 4-7: ems.aio.Producer.
    producers = [
        _spawn(
            settings, "produce" if i < 4 else "aproduce", f"p{i}", "400", str(ack_files[i]), "100"
        )
        for i in range(8)
    ]
    slow = _spawn(settings, "slow", "3", str(ack_files[8]))
    _wait_line(slow, "inserted")
    planter.start()

    # The faults strike while the producers are sending: each waits on their progress.
    at_loss = _wait_acks(ack_files, 800)
    assert all(p.poll() is None for p in producers), "a producer ended before the Redis loss"
    assert seed.lose_redis(settings) > 0
    for victim in (3, 7):  # one of each kind
        before = _count_acks([ack_files[victim]])
        _wait_acks([ack_files[victim]], before + 20)  # it acknowledges after the Redis loss
        assert producers[victim].poll() is None, f"producer {victim} ended before its kill"
        producers[victim].send_signal(signal.SIGKILL)
    after_kill = _count_acks(ack_files)
    hung_again = _spawn(settings, "hang")
    _wait_line(hung_again, "allocated")
    hung_again.send_signal(signal.SIGKILL)

    for proc in [*producers[:3], *producers[4:7], slow]:
        assert proc.wait(timeout=120) == 0
    producers[3].wait(timeout=10)
    producers[7].wait(timeout=10)
    hung.wait(timeout=10)
    hung_again.wait(timeout=10)
    planter.stop.set()
    planter.join(timeout=10)
    assert planter.error is None, planter.error
    assert planter.planted > 0
    # Sending went on across both faults.
    assert at_loss < after_kill < _count_acks(ack_files)

    deadline = time.monotonic() + 30
    while not follower.caught_up() and time.monotonic() < deadline:
        time.sleep(0.2)
    follower.stop.set()
    follower.join(timeout=10)
    assert follower.error is None, follower.error
    assert follower.caught_up(), (follower.cursors, follower.reader.high_watermarks("conc"))

    acks = _read_acks(ack_files)
    assert len(acks) >= 6 * 400 + 1  # six full producers and the slow one

    store = Store(settings)
    stored = db.rows(store, "SELECT partition_no, offset_no, body FROM message WHERE tombstone = 0")
    below = db.value(
        store,
        "SELECT COUNT(*) FROM message m JOIN partition_low l ON l.topic_id = m.topic_id "
        "AND l.partition_no = m.partition_no WHERE m.offset_no < l.low_offset",
    )
    assert below == 0, f"{below} rows stored below their low watermark"
    store.close()
    readable = [r for r in stored if r[1] >= lows[r[0]]]  # what a reader can reach
    stored = [r for r in stored if r[1] >= follower.origin[r[0]]]  # sent during the test
    bodies = [label(bytes(b)) for _, _, b in stored]
    assert len(bodies) == len(set(bodies)), "a message is stored twice"
    where = {label(bytes(b)): (p, o) for p, o, b in stored}
    for body, place in acks.items():
        assert where.get(body) == place, f"acknowledged {body} at {place}, stored {where.get(body)}"
        assert place[1] >= lows[place[0]], f"{body} stored below the low watermark: {place}"

    # The follower saw every stored message exactly once, in offset order per partition.
    seen_bodies = [b for _, _, b in follower.seen]
    assert sorted(seen_bodies) == sorted(bodies)
    for p in range(PARTITIONS):
        offsets = [o for q, o, _ in follower.seen if q == p]
        assert offsets == sorted(offsets) and len(offsets) == len(set(offsets))

    # And every partition reads back gap-free from the start.
    reader = Reader(settings)
    for p, high in reader.high_watermarks("conc").items():
        cursor, count = lows[p], 0
        while cursor < high:
            batch = reader.read_partition("conc", p, cursor, limit=1000)
            assert batch.next_offset > cursor, f"partition {p} stalled at {cursor}"
            count += len(batch.messages)
            cursor = batch.next_offset
        assert count == sum(1 for q, _, _ in readable if q == p)
    reader.close()
