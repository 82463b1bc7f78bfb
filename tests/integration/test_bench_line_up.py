"""The benchmarks' line-up (benchmarks.consumer_workers.balanced_share) sends a member to
the barrier only once the whole group is balanced. A member that holds its share while the
rest of the group is still moving would stop following the handoff at the barrier: once
the leader revoked a partition from it, nobody would release that partition, and the member
waiting for it would never line up (seen once in the aio suite: TimeoutError, barrier
broken)."""

from __future__ import annotations

import pytest

from benchmarks import consumer_workers
from benchmarks.harness import PARTITIONS
from ems import Consumer, TopicAdmin
from ems.config import Settings
from ems.consumer.groups import ensure_group
from ems.store import Store
from tests.integration import seed

WORKERS = 4
SHARE = PARTITIONS // WORKERS


def test_a_member_holding_its_share_waits_until_the_group_is_balanced(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = TopicAdmin(settings, store=store).create("t", PARTITIONS)
    group = ensure_group(store, "g", topic, seed.options(None))
    # A stand-in leader, so the grants below are the only ones the group sees.
    store.leases.register(group.id, "f1", "h", 1, ttl=120)
    epoch = store.leases.lead(group.id, "f1", ttl=120)
    assert epoch is not None
    with Consumer(
        "g", "t", settings=settings, start="earliest", lease_ttl=5.0, renew_every=0.2
    ) as member:
        mine = list(range(SHARE))
        grants = {p: (member.client_id if p in mine else "f1") for p in range(PARTITIONS)}
        store.assignments.apply(group.id, ("f1", epoch), grants, [])
        seed.wait_until(lambda: sorted(member.membership.ownership()[1]) == mine)

        # It holds exactly its share; "f1" holds the other 12 and two members are missing.
        monkeypatch.setattr(consumer_workers, "BARRIER_TIMEOUT", 1.0)
        with pytest.raises(TimeoutError):
            consumer_workers.balanced_share(member, WORKERS)

        for client in ("f2", "f3"):
            store.leases.register(group.id, client, "h", 1, ttl=120)
        store.assignments.apply(
            group.id,
            ("f1", epoch),
            {p: ("f2" if p < 3 * SHARE else "f3") for p in range(2 * SHARE, PARTITIONS)},
            [],
        )
        monkeypatch.setattr(consumer_workers, "BARRIER_TIMEOUT", 60.0)
        assert consumer_workers.balanced_share(member, WORKERS) == mine
        assert sorted(member.session.states) == mine  # type: ignore[attr-defined]
