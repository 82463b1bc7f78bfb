"""A member keeps its lease over a slow database link, leader or not: renewals must not
wait behind the leader's work, so a round that takes many round trips never lets the
lease lapse while the database is answering."""

from __future__ import annotations

import time

import pytest

from ems import Consumer, TopicAdmin
from ems.config import Settings
from tests.faults.proxy import FaultProxy
from tests.faults.servers import PrivateMariaDB

pytestmark = pytest.mark.faults


def test_the_leader_keeps_its_lease_over_a_slow_link(
    fault_settings: Settings, private_mariadb: PrivateMariaDB
) -> None:
    TopicAdmin(fault_settings).create("t", 8)
    with FaultProxy("127.0.0.1", private_mariadb.port, protocol="mysql") as proxy:
        port = f":{private_mariadb.port}/"
        slow = fault_settings.with_(
            database_url=fault_settings.database_url.replace(port, f":{proxy.port}/")
        )
        consumer = Consumer("g", "t", settings=slow, lease_ttl=2.0, renew_every=0.5)
        try:
            consumer.poll(timeout=0.5)
            assert consumer.membership.lease_valid()
            proxy.set_latency(0.1)  # 200 ms per round trip from here on
            lapses, samples = 0, 0
            until = time.monotonic() + 10
            while time.monotonic() < until:
                samples += 1
                lapses += not consumer.membership.lease_valid()
                time.sleep(0.05)
            assert samples > 100
            assert lapses == 0, f"the lease lapsed in {lapses} of {samples} samples"
        finally:
            proxy.set_latency(0)
            consumer.close()
