"""A member keeps its lease over a slow database link, leader or not: renewals must not
wait behind the leader's work, so a round that takes many round trips never lets the
lease lapse while the database is answering. From the join on, the leader's assignment
(a dozen round trips) runs over the slow link too, while renewals go on."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from ems import Consumer, TopicAdmin
from ems.config import Settings
from ems.coordination.membership import Membership
from ems.store.assignments import AssignmentStore
from ems.store.leases import LeaseHeartbeat, LeaseStore
from tests.faults.proxy import FaultProxy
from tests.faults.servers import PrivateMariaDB
from tests.faults.timeline import Timeline

pytestmark = pytest.mark.faults


def _traced(consumer: Consumer, monkeypatch: pytest.MonkeyPatch) -> Timeline:
    """A timeline of the member's renewals, leader statements and new connections."""
    timeline = Timeline()
    for owner, name in (
        (LeaseHeartbeat, "renew"),
        (LeaseStore, "lead"),
        (LeaseStore, "members"),
        (AssignmentStore, "rows"),
        (AssignmentStore, "apply"),
    ):
        timeline.trace(monkeypatch, owner, name)
    timeline.watch(monkeypatch)
    return timeline


@contextmanager
def _through_proxy(
    settings: Settings, mariadb: PrivateMariaDB
) -> Iterator[tuple[FaultProxy, Consumer]]:
    """A proxy in front of the server (no latency yet) and a member of group g on topic t
    that reaches the database through it, with a 2 s lease renewed every 0.5 s."""
    with FaultProxy("127.0.0.1", mariadb.port, protocol="mysql") as proxy:
        port = f":{mariadb.port}/"
        slow = settings.with_(database_url=settings.database_url.replace(port, f":{proxy.port}/"))
        yield proxy, Consumer("g", "t", settings=slow, lease_ttl=2.0, renew_every=0.5)


def _wait_for(check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


class _Deadlines:
    """Each move of the member's lease deadline (local monotonic time) by a renewal."""

    def __init__(self) -> None:
        #: (when the renewal moved it, the deadline before, the deadline after)
        self.moves: list[tuple[float, float, float]] = []

    def lapses(self, until: float) -> list[str]:
        """Each lapse from the first move to `until`: a renewal that moved the deadline
        after it had passed, a deadline set by a new join, or a last deadline before
        `until`. Exact, where sampling
        lease_valid() misses a short lapse and needs the sampling thread to keep a pace
        that a loaded machine does not promise."""
        found = [
            f"renewed {(when - before) * 1000:.0f} ms after the deadline"
            for when, before, _ in self.moves
            if when > before
        ]
        found += [
            "the deadline moved by a new join, not a renewal (the lease was lost)"
            for (_, _, after), (_, before, _) in zip(self.moves, self.moves[1:], strict=False)
            if before != after
        ]
        if self.moves[-1][2] < until:
            found.append("the last deadline passed before the end")
        return found


def _watch_deadline(monkeypatch: pytest.MonkeyPatch, timeline: Timeline) -> _Deadlines:
    watched = _Deadlines()
    renew = Membership._renew

    def recorded(self: Membership) -> None:
        before = self.deadline
        renew(self)
        if self.deadline != before:
            when = time.monotonic()
            watched.moves.append((when, before, self.deadline))
            if when > before:
                timeline.note(when, f"lease lapsed {(when - before) * 1000:.0f} ms before")

    monkeypatch.setattr(Membership, "_renew", recorded)
    return watched


@pytest.mark.parametrize("slow_from", ["after the join", "the join"])
def test_the_leader_keeps_its_lease_over_a_slow_link(
    fault_settings: Settings,
    private_mariadb: PrivateMariaDB,
    monkeypatch: pytest.MonkeyPatch,
    slow_from: str,
) -> None:
    TopicAdmin(fault_settings).create("t", 8)
    with _through_proxy(fault_settings, private_mariadb) as (proxy, consumer):
        timeline = _traced(consumer, monkeypatch)
        try:
            if slow_from == "the join":
                proxy.set_latency(0.1)
            consumer.poll(timeout=0.5)
            assert consumer.membership.lease_valid()
            proxy.set_latency(0.1)  # 200 ms per round trip from here on, in any case
            timeline.mark(f"slow ({proxy.connections} connections through the proxy)")
            # From the first renewal seen to the end, every move of the deadline is seen.
            watched = _watch_deadline(monkeypatch, timeline)
            joined_as = consumer.client_id
            _wait_for(lambda: bool(watched.moves), 30)
            time.sleep(10)  # how long the slow link lasts, not a wait for a result
            lapses = watched.lapses(time.monotonic())
            assert not lapses and consumer.client_id == joined_as, (
                f"the lease lapsed: {lapses}; the member did:\n{timeline}"
            )
        finally:
            proxy.set_latency(0)
            consumer.close()


def test_the_first_renewal_comes_within_the_first_lease_over_a_slow_link(
    fault_settings: Settings,
    private_mariadb: PrivateMariaDB,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The heartbeat's own connection is opened before the lease starts: its handshake,
    authentication and session settings take more round trips than a short lease lasts
    over a slow link, and opened by the first renewal (after the join had started the
    lease's clock) they left that renewal 0.1 s of a 2 s lease at 200 ms per round trip,
    half the time none at 300 ms, and none at 400 ms: the join and the renewal take one
    round trip each, 0.8 s of the lease."""
    TopicAdmin(fault_settings).create("t", 8)
    with _through_proxy(fault_settings, private_mariadb) as (proxy, consumer):
        timeline = _traced(consumer, monkeypatch)
        watched = _watch_deadline(monkeypatch, timeline)
        try:
            proxy.set_latency(0.2)  # 400 ms per round trip, from before the join
            timeline.mark("slow")
            consumer.poll(timeout=0.5)
            _wait_for(lambda: len(watched.moves) >= 3, 30)
            lapses = watched.lapses(watched.moves[-1][0])
            assert not lapses, f"the lease lapsed: {lapses}; the member did:\n{timeline}"
        finally:
            proxy.set_latency(0)
            consumer.close()
