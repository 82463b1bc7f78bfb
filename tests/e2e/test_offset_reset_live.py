"""Offset reset of a live group of real consumer processes: the members pause, the reset
lands with a generation bump, no member commits over it, and the members resume from the
new cursors; a member that cannot release in time makes the reset give up and change
nothing."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from ems import Producer, TopicAdmin
from ems.config import Settings
from ems.exceptions import GroupBusy
from ems.ops.reset import OffsetReset
from ems.store import Store
from ems.types import GroupInfo
from ems.wakeups import Publisher
from tests import forked

pytestmark = pytest.mark.slow
TTL, RENEW = 3.0, 1.0
TOPIC, GROUP = "live", "g"


class Member:
    def __init__(self, settings: Settings, out: Path, batch: int, delay: float) -> None:
        self.out = out
        env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
        args = [settings.database_url, GROUP, TOPIC, str(out), str(TTL), str(RENEW)]
        self.proc = forked.spawn(
            "tests.procs.slow_consumer",
            [*args, str(batch), str(delay)],
            env=env,
            stdout=forked.PIPE,
        )
        assert self.proc.stdout is not None
        self.client_id = self.proc.stdout.readline().strip()
        assert self.client_id, "consumer did not start"

    def lines(self) -> list[tuple[float, int, int, int]]:
        """(time, partition, offset, attempt) of every message handled."""
        if not self.out.exists():
            return []
        rows = []
        for line in self.out.read_text().splitlines():
            t, p, o, a, _ = line.split(" ", 4)
            rows.append((float(t), int(p), int(o), int(a)))
        return rows


@pytest.fixture
def members(settings: Settings, tmp_path: Path) -> Iterator[Callable[[int, float], Member]]:
    started: list[Member] = []

    def start(batch: int, delay: float) -> Member:
        m = Member(settings, tmp_path / f"member-{len(started)}.txt", batch, delay)
        started.append(m)
        return m

    yield start
    for m in started:
        if m.proc.poll() is None:
            m.proc.send_signal(signal.SIGKILL)
            m.proc.wait(timeout=10)


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def publish(settings: Settings, count: int) -> None:
    producer = Producer(settings)
    try:
        producer.send_batch(TOPIC, [f"m{i}" for i in range(count)])
    finally:
        producer.close()


def the_group(store: Store) -> GroupInfo:
    topic = store.topics.get(TOPIC)
    group = store.groups.get(GROUP, topic.id)
    assert group is not None
    return group


def caught_up(store: Store) -> Callable[[], bool]:
    def check() -> bool:
        group = store.groups.get(GROUP, store.topics.get(TOPIC).id)
        if group is None:
            return False
        return store.groups.offsets(group.id) == high(store)

    return check


def high(store: Store) -> dict[int, int]:
    return store.messages.high_watermarks(store.topics.get(TOPIC))


def owning(store: Store, members: list[Member]) -> Callable[[], bool]:
    ids = {m.client_id for m in members}

    def check() -> bool:
        rows = store.assignments.rows(the_group(store).id)
        return {r.client_id for r in rows if r.state == "assigned"} == ids

    return check


def resumed(store: Store, members: list[Member]) -> Callable[[], bool]:
    ids = {m.client_id for m in members}

    def check() -> bool:
        rows = store.assignments.rows(the_group(store).id)
        return all(r.client_id in ids and r.state == "assigned" for r in rows)

    return check


def test_a_reset_to_earliest_pauses_the_members_and_they_consume_everything_again(
    settings: Settings, store: Store, members: Callable[[int, float], Member]
) -> None:
    TopicAdmin(settings, store=store).create(TOPIC, 4)
    publish(settings, 200)
    group = [members(20, 0.0), members(20, 0.0)]
    wait_until(caught_up(store), 30, "the first pass")
    # The first member can catch up alone before the second is given partitions; the
    # reset must meet both as owners.
    wait_until(owning(store, group), 30, "both members owning partitions")
    before = the_group(store).generation
    first = [line for m in group for line in m.lines()]
    lows = {p: min(o for _, q, o, _ in first if q == p) for p in range(4)}
    started = time.time()

    with closing(OffsetReset(settings, store=store)) as resets:
        done = resets.reset(GROUP, resets.target(earliest=True), timeout=15)

    assert done.generation > before
    assert set(done.members_paused) == {m.client_id for m in group}
    assert {c.partition: c.new for c in done.changes} == lows
    assert all(c.current == high(store)[c.partition] for c in done.changes)
    wait_until(caught_up(store), 30, "the second pass")
    again = Counter((p, o) for m in group for t, p, o, _ in m.lines() if t > started)
    assert again == Counter((p, o) for m in group for t, p, o, _ in m.lines() if t <= started)
    assert set(again.values()) == {1}  # everything once more, nothing twice
    wait_until(resumed(store, group), 10, "the members to own every partition again")
    assert store.groups.pause_left(the_group(store).id) is None
    assert the_group(store).generation > done.generation  # the leader granted again


def test_no_member_commits_over_a_reset_to_latest_and_they_resume_from_it(
    settings: Settings, store: Store, members: Callable[[int, float], Member]
) -> None:
    TopicAdmin(settings, store=store).create(TOPIC, 4)
    publish(settings, 400)
    group = [members(20, 0.01), members(20, 0.01)]
    wait_until(lambda: sum(len(m.lines()) for m in group) >= 60, 30, "members at work")

    with closing(OffsetReset(settings, store=store)) as resets:
        done = resets.reset(GROUP, resets.target(latest=True), timeout=15)
    landed = time.time()
    end = high(store)

    assert {c.partition: c.new for c in done.changes} == end
    assert any(c.current < c.new for c in done.changes), "the members had a backlog"
    assert store.groups.offsets(the_group(store).id) == end
    wait_until(resumed(store, group), 10, "the members to own every partition again")

    # A stale commit from before the reset would move a cursor back below `end`, and its
    # messages would come again: after the next 40 are handled, exactly those 40 (each
    # once, none below `end`) are all that was handled since the reset landed.
    publish(settings, 40)
    wait_until(caught_up(store), 30, "the new messages")
    after = Counter((p, o) for m in group for t, p, o, _ in m.lines() if t > landed)
    assert sum(after.values()) == 40 and set(after.values()) == {1}
    assert all(o >= end[p] for p, o in after)


def test_a_member_that_cannot_release_in_time_leaves_the_group_unchanged_and_running(
    settings: Settings, store: Store, members: Callable[[int, float], Member]
) -> None:
    TopicAdmin(settings, store=store).create(TOPIC, 1)
    publish(settings, 10)
    slow = members(1, 4.0)  # each message holds the member for 4 s
    wait_until(lambda: len(slow.lines()) >= 1, 15, "the first message")  # now in the second
    group_id = the_group(store).id
    before = store.groups.offsets(group_id)[0]

    started = time.monotonic()
    resets = OffsetReset(settings, store=store)
    with closing(resets), pytest.raises(GroupBusy, match=slow.client_id):
        resets.reset(GROUP, resets.target(latest=True), timeout=1.0)
    assert time.monotonic() - started < 3.0
    assert store.groups.pause_left(group_id) is None
    assert store.groups.offsets(group_id)[0] in (before, before + 1)  # its own progress only

    handled = len(slow.lines())
    wait_until(resumed(store, [slow]), 10, "the member to own its partition again")
    wait_until(lambda: len(slow.lines()) > handled + 1, 15, "the member to carry on")
    assert store.groups.offsets(group_id)[0] < 10


def test_a_group_paused_by_a_reset_that_died_resumes_by_itself(
    settings: Settings, store: Store, members: Callable[[int, float], Member]
) -> None:
    TopicAdmin(settings, store=store).create(TOPIC, 2)
    publish(settings, 20)
    group = [members(20, 0.0)]
    wait_until(caught_up(store), 30, "the first pass")
    wait_until(resumed(store, group), 10, "the member to own every partition")
    group_id = the_group(store).id

    assert store.groups.pause(group_id, 3.0) is not None  # and the reset dies right here
    with closing(Publisher(settings)) as wakeups:
        wakeups.group(group_id)
    wait_until(lambda: store.assignments.held(group_id) == {}, 5, "the member to pause")
    assert store.groups.pause_left(group_id) is not None
    wait_until(resumed(store, group), 3.0 + RENEW + 2, "the group to resume by itself")
    assert store.groups.pause_left(group_id) is None
    publish(settings, 10)
    wait_until(caught_up(store), 10, "the member to carry on")
