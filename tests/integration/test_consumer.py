"""Consumers in threads against the real servers: sharing, order, retry, dead letter,
broadcast, start positions, handoff, bad input."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest

from ems import Consumer, Delivery, Producer, TopicAdmin
from ems.config import Settings
from ems.exceptions import GroupConflict, InvalidHandler, InvalidName, UnknownTopic
from ems.store import Store
from tests import sql as db
from tests.integration.seed import poll_until

FAST: dict[str, Any] = {"lease_ttl": 2.0, "renew_every": 0.5}


class Running:
    """A consumer's run() in a thread, recording what its handler saw."""

    def __init__(self, consumer: Consumer, seen: list[Delivery]) -> None:
        self.consumer = consumer
        self.seen = seen
        self.thread = threading.Thread(target=consumer.run, kwargs={"handle_signals": False})
        self.thread.start()

    def stop(self) -> None:
        self.consumer.stop()
        self.thread.join(timeout=15)
        assert not self.thread.is_alive()


@pytest.fixture
def start(settings: Settings) -> Iterator[Callable[..., Running]]:
    running: list[Running] = []

    def starter(
        group: str = "g",
        topic: str = "t",
        handler: Callable[[Delivery], object] | None = None,
        **options: Any,
    ) -> Running:
        seen: list[Delivery] = []

        def record(d: Delivery) -> object:
            seen.append(d)
            return handler(d) if handler else None

        consumer = Consumer(group, topic, record, settings=settings, **{**FAST, **options})
        r = Running(consumer, seen)
        running.append(r)
        return r

    yield starter
    for r in running:
        if r.thread.is_alive():
            r.stop()


@pytest.fixture
def topic(settings: Settings) -> str:
    admin = TopicAdmin(settings)
    admin.create("t", 4)
    admin.close()
    return "t"


def produce(settings: Settings, n: int, *, keys: int = 10, first: int = 0) -> None:
    with Producer(settings) as producer:
        for i in range(first, first + n):
            producer.send("t", f"m{i}", key=f"k{i % keys}")


def wait_for(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def scalar(settings: Settings, sql: str) -> Any:
    store = Store(settings)
    try:
        return db.value(store, sql)
    finally:
        store.close()


def execute(settings: Settings, sql: str) -> None:
    store = Store(settings)
    try:
        db.run(store, sql)
    finally:
        store.close()


@contextmanager
def holding(store: Store, sql: str, params: Sequence[object]) -> Iterator[None]:
    """Row locks taken by a locking read, held by another connection until the block ends."""
    with db.transaction(store) as cursor:
        cursor.execute(sql, tuple(params))
        cursor.fetchall()
        yield


def bodies(seen: list[Delivery]) -> list[str]:
    return [d.body.decode() for d in seen]


def test_two_members_share_the_partitions_and_see_each_message_once_in_order(
    settings: Settings, topic: str, start: Callable[..., Running]
) -> None:
    a = start(start="earliest")
    b = start()
    wait_for(
        lambda: scalar(settings, "SELECT COUNT(DISTINCT client_id) FROM partition_assignment") == 2
    )
    produce(settings, 400)
    wait_for(lambda: len(a.seen) + len(b.seen) == 400)
    a.stop()
    b.stop()
    assert sorted(bodies(a.seen + b.seen), key=lambda s: int(s[1:])) == [
        f"m{i}" for i in range(400)
    ]
    assert a.seen and b.seen
    assert not {d.partition for d in a.seen} & {d.partition for d in b.seen}
    for seen in (a.seen, b.seen):
        for p in {d.partition for d in seen}:
            offsets = [d.offset for d in seen if d.partition == p]
            assert offsets == sorted(offsets)
    assert scalar(settings, "SELECT COUNT(*) FROM topic_group_log WHERE state = 'done'") == 400
    assert scalar(settings, "SELECT SUM(committed_offset) FROM group_offset") == 400
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_client") == 0


def test_a_failing_message_is_retried_by_the_ladder_then_dead_lettered(
    settings: Settings, topic: str, start: Callable[..., Running]
) -> None:
    def handler(d: Delivery) -> None:
        if d.body == b"m3":
            raise ValueError("poison")

    r = start(handler=handler, start="earliest", retry_ladder="0.2s", max_attempts=3)
    produce(settings, 10)
    wait_for(lambda: scalar(settings, "SELECT COUNT(*) FROM dead_message") == 1)
    r.stop()
    attempts = [d.attempt for d in r.seen if d.body == b"m3"]
    assert attempts == [1, 2, 3]
    assert sorted(set(bodies(r.seen))) == sorted(f"m{i}" for i in range(10))
    assert scalar(settings, "SELECT body FROM dead_message") == b"m3"
    assert scalar(settings, "SELECT last_error FROM dead_message") == "ValueError: poison"
    assert scalar(settings, "SELECT COUNT(*) FROM retry_message") == 0
    assert scalar(settings, "SELECT state FROM topic_group_log WHERE attempts = 3") == "dead"
    assert scalar(settings, "SELECT COUNT(*) FROM topic_group_log WHERE state = 'done'") == 9


def test_an_ordered_group_blocks_only_the_failing_partition(
    settings: Settings, topic: str, start: Callable[..., Running]
) -> None:
    failures = {"left": 2}

    def handler(d: Delivery) -> None:
        if d.body == b"m0" and failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("not yet")

    r = start(handler=handler, start="earliest", ordered=True, retry_ladder="0.5s")
    produce(settings, 40, keys=1)  # one key: one partition, strict order
    wait_for(lambda: len({d.body for d in r.seen}) == 40)
    r.stop()
    first_success = [d.body for d in r.seen].index(b"m0", 2)
    delivered = bodies(r.seen)[first_success:]
    assert delivered == [f"m{i}" for i in range(40)]  # in order once m0 got through
    assert bodies(r.seen)[:2] == ["m0", "m0"]
    assert scalar(settings, "SELECT COUNT(*) FROM retry_message") == 0


def test_broadcast_members_each_get_every_message_and_write_no_log(
    settings: Settings, topic: str, start: Callable[..., Running]
) -> None:
    a = start(group="b", broadcast=True)
    b = start(group="b", broadcast=True)
    wait_for(lambda: scalar(settings, "SELECT COUNT(*) FROM consumer_client") == 2)
    produce(settings, 50)
    wait_for(lambda: len(a.seen) == 50 and len(b.seen) == 50)
    a.stop()
    b.stop()
    assert sorted(bodies(a.seen)) == sorted(bodies(b.seen))
    assert scalar(settings, "SELECT COUNT(*) FROM topic_group_log") == 0


def test_start_position_latest_skips_the_backlog_and_earliest_reads_it(
    settings: Settings, topic: str, start: Callable[..., Running]
) -> None:
    produce(settings, 20)
    late = start(group="late")
    early = start(group="early", start="earliest")
    wait_for(lambda: len(early.seen) == 20)
    produce(settings, 5, first=20)
    wait_for(lambda: len(early.seen) == 25 and len(late.seen) == 5)
    assert sorted(bodies(late.seen)) == sorted(f"m{i}" for i in range(20, 25))


def test_a_joining_member_takes_its_share_and_only_moved_partitions_pause(
    settings: Settings, topic: str, start: Callable[..., Running]
) -> None:
    a = start(start="earliest")
    produce(settings, 200, keys=50)
    wait_for(lambda: len(a.seen) == 200)
    store = Store(settings)
    group_id = int(scalar(settings, "SELECT id FROM consumer_group"))
    before = {r.partition: r for r in store.assignments.rows(group_id)}
    b = start()
    touched: set[int] = set()  # partitions seen revoking, released or with another owner

    def settled() -> bool:
        rows = store.assignments.rows(group_id)
        touched.update(r.partition for r in rows if r != before[r.partition])
        owners = [r.client_id for r in rows if r.state == "assigned"]
        return len(owners) == 4 and owners.count(b.consumer.client_id) == 2

    wait_for(settled, 5)
    store.close()
    kept = {p for p, r in before.items() if r.client_id == a.consumer.client_id} - touched
    assert len(kept) == 2 and len(touched) == 2  # the kept two never paused
    produce(settings, 200, keys=50, first=200)
    wait_for(lambda: len(a.seen) + len(b.seen) == 400)
    a.stop()
    b.stop()
    assert {d.partition for d in b.seen} == touched
    all_bodies = bodies(a.seen + b.seen)
    assert len(all_bodies) == len(set(all_bodies)) == 400


def test_pull_form_ack_and_nack_with_delay(settings: Settings, topic: str) -> None:
    produce(settings, 3, keys=1)
    with Consumer("pull", "t", settings=settings, start="earliest", **FAST) as c:
        got = poll_until(c, 3)
        c.ack([got[0], got[2]])
        c.nack(got[1], "later", delay=0.3)
        (again,) = poll_until(c, 1)
        assert (again.offset, again.attempt) == (got[1].offset, 2)
        c.ack(again)
    assert scalar(settings, "SELECT COUNT(*) FROM topic_group_log WHERE state = 'done'") == 3
    assert scalar(settings, "SELECT MAX(attempts) FROM topic_group_log") == 2
    assert scalar(settings, "SELECT MAX(committed_offset) FROM group_offset") == 3
    assert scalar(settings, "SELECT COUNT(*) FROM retry_message") == 0


def test_pull_form_retries_what_is_not_acked_in_time(settings: Settings, topic: str) -> None:
    produce(settings, 1)
    options: dict[str, Any] = {"ack_timeout": 1, "retry_ladder": "0.1s", **FAST}
    with Consumer("pull", "t", settings=settings, start="earliest", **options) as c:
        (first,) = poll_until(c, 1)
        (again,) = poll_until(c, 1)
        assert (again.offset, again.attempt) == (first.offset, 2)
        c.ack(first)  # too late: already settled as timed out, so this changes nothing
        c.ack(again)
    assert scalar(settings, "SELECT error FROM topic_group_log") == "ack timeout"
    assert scalar(settings, "SELECT state FROM topic_group_log") == "done"


def test_polling_takes_over_when_redis_is_unreachable(settings: Settings, topic: str) -> None:
    no_redis = settings.with_(redis_url="redis://127.0.0.1:1/0", allocator="mysql")
    with Consumer("g", "t", settings=no_redis, start="earliest", **FAST) as c:
        produce(no_redis, 5)
        got: list[Delivery] = []
        deadline = time.monotonic() + 10
        while len(got) < 5 and time.monotonic() < deadline:
            got += c.poll(timeout=0.5)
        c.ack(got)
    assert sorted(bodies(got)) == [f"m{i}" for i in range(5)]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("g", "nope"), UnknownTopic),
        (("bad group!", "t"), InvalidName),
        (("g", "t", "not callable"), InvalidHandler),
    ],
)
def test_bad_input_raises_and_creates_nothing(
    settings: Settings, topic: str, args: tuple[Any, ...], error: type[Exception]
) -> None:
    with pytest.raises(error):
        Consumer(*args, settings=settings)
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_group") == 0


def test_a_conflicting_mode_for_an_existing_group_is_refused(
    settings: Settings, topic: str
) -> None:
    Consumer("g", "t", settings=settings).close()
    with pytest.raises(GroupConflict, match="mode"):
        Consumer("g", "t", settings=settings, broadcast=True)
    assert scalar(settings, "SELECT mode FROM consumer_group") == "cluster"
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_client") == 0


def test_past_the_lease_deadline_a_member_stops_fetching_and_commits_nothing(
    settings: Settings, topic: str
) -> None:
    produce(settings, 20)
    store = Store(settings)
    with Consumer("g", "t", settings=settings, start="earliest", **FAST) as c:
        got = poll_until(c, 20)
        # Renewals wait on the lease row while another connection holds it: the deadline
        # passes for real, and no renewal can land until the checks are done.
        lease = "SELECT * FROM consumer_client WHERE client_id = %s FOR UPDATE"
        with holding(store, lease, (c.client_id,)):
            wait_for(lambda: not c.membership.lease_valid())
            c.ack(got)
            assert c.poll(timeout=0.3) == []
            assert scalar(settings, "SELECT SUM(committed_offset) FROM group_offset") == 0
            done = "SELECT COUNT(*) FROM topic_group_log WHERE state='done'"
            assert scalar(settings, done) == 0
    store.close()


def test_renewals_wait_for_no_connection_of_the_pool(settings: Settings, topic: str) -> None:
    """The heartbeat renews on a connection of its own. From the pool, a renewal found none
    idle while the member's other threads held them all, and waited for one to be opened
    (over a 200 ms link, 1.5 s and more of a 2 s lease) or, at the pool's limit, given back."""
    with Consumer("g", "t", settings=settings.with_(pool_size=1), **FAST) as c:
        c.poll(timeout=0.5)
        with ExitStack() as held:
            for _ in range(3):  # pool_size 1 + overflow 2: the whole pool
                held.enter_context(c.store.db.single())
            until = time.monotonic() + 2 * c.membership.ttl
            while time.monotonic() < until:
                assert c.membership.lease_valid()
                time.sleep(0.05)


def test_a_member_whose_lease_expired_rejoins_under_a_new_id(
    settings: Settings, topic: str, start: Callable[..., Running]
) -> None:
    r = start(start="earliest")
    old = r.consumer.client_id
    wait_for(lambda: scalar(settings, "SELECT COUNT(client_id) FROM partition_assignment") == 4)
    execute(settings, "DELETE FROM consumer_client")  # the lease is gone, as after expiry
    wait_for(lambda: r.consumer.client_id != old)
    produce(settings, 30)
    wait_for(lambda: len(r.seen) == 30)
    new = r.consumer.client_id
    wait_for(
        lambda: (
            scalar(settings, f"SELECT COUNT(*) FROM partition_assignment WHERE client_id = '{new}'")
            == 4
        )
    )


# A handler of the consumer below that holds the stop event's lock while SIGTERM comes, as
# the main thread does inside Event.wait() between taking the lock back and leaving.
_HELD_STOP = """
import os, signal, sys
import ems
def handler(d):
    with c._stopping._cond:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # bytecodes: Python runs its signal handler among them
            pass
c = ems.Consumer("g", "t", handler, start="earliest")
print("handled", c.run(), flush=True)
"""


def test_sigterm_while_the_main_thread_holds_the_stop_events_lock_still_stops_run(
    settings: Settings, topic: str
) -> None:
    """A signal handler that set the stop event itself waited for ever on the lock its
    own thread held; the handler's call now runs on a relay thread (ems.signals)."""
    produce(settings, 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
    env.update(EMS_DATABASE_URL=settings.database_url, EMS_REDIS_URL=settings.redis_url)
    child = subprocess.Popen(
        [sys.executable, "-c", _HELD_STOP], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        out, _ = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail("the consumer never stopped on SIGTERM")
    assert child.returncode == 0 and out == "handled 1\n"
