"""A member keeps its lease over a slow database link, leader or not: renewals must not
wait behind the leader's work, so a round that takes many round trips never lets the
lease lapse while the database is answering. From the join on, the leader's assignment
(a dozen round trips) runs over the slow link too, while renewals go on."""

from __future__ import annotations

import time

import pytest

from ems import Consumer, TopicAdmin
from ems.config import Settings
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
    timeline.watch(consumer.store.db.engine, "pool")
    timeline.watch(consumer.store.db.autocommit_engine, "autocommit pool")
    return timeline


@pytest.mark.parametrize("slow_from", ["after the join", "the join"])
def test_the_leader_keeps_its_lease_over_a_slow_link(
    fault_settings: Settings,
    private_mariadb: PrivateMariaDB,
    monkeypatch: pytest.MonkeyPatch,
    slow_from: str,
) -> None:
    TopicAdmin(fault_settings).create("t", 8)
    with FaultProxy("127.0.0.1", private_mariadb.port, protocol="mysql") as proxy:
        port = f":{private_mariadb.port}/"
        slow = fault_settings.with_(
            database_url=fault_settings.database_url.replace(port, f":{proxy.port}/")
        )
        consumer = Consumer("g", "t", settings=slow, lease_ttl=2.0, renew_every=0.5)
        timeline = _traced(consumer, monkeypatch)
        try:
            if slow_from == "the join":
                proxy.set_latency(0.1)
            consumer.poll(timeout=0.5)
            assert consumer.membership.lease_valid()
            proxy.set_latency(0.1)  # 200 ms per round trip from here on, in any case
            timeline.mark(f"slow ({proxy.connections} connections through the proxy)")
            lapses, samples = 0, 0
            until = time.monotonic() + 10
            while time.monotonic() < until:
                samples += 1
                if not consumer.membership.lease_valid():
                    lapses += 1
                    timeline.mark("lease lapsed")
                time.sleep(0.05)
            assert samples > 100
            assert lapses == 0, (
                f"the lease lapsed in {lapses} of {samples} samples; the member did:\n{timeline}"
            )
        finally:
            proxy.set_latency(0)
            consumer.close()
