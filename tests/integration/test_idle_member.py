"""An idle member costs the server one look at the high watermarks per idle wait, not a
read of every partition it owns; a message that came without a wake-up is still found."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from ems import Consumer, Delivery, TopicAdmin
from ems.config import Settings
from ems.store import Store
from tests.integration import seed
from tests.integration.test_consumer import FAST

PARTITIONS = 16


@pytest.fixture
def topic(settings: Settings, store: Store) -> str:
    TopicAdmin(settings, store=store).create("t", PARTITIONS)
    return "t"


def _counting(store: Store) -> dict[str, int]:
    """Count the store's partition reads, on the real store (fetch_rows: what every read
    runs, the consume path's and MessageStore.fetch's)."""
    calls = {"fetch": 0}
    fetch: Callable[..., Any] = store.messages.fetch_rows

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls["fetch"] += 1
        return fetch(*args, **kwargs)

    store.messages.fetch_rows = counted  # type: ignore[method-assign]
    return calls


@pytest.mark.parametrize("redis", [True, False], ids=["wake-ups", "no redis"])
def test_an_idle_member_reads_no_partition_until_one_has_news(
    settings: Settings, store: Store, topic: str, redis: bool
) -> None:
    if not redis:
        settings = settings.with_(redis_url="redis://127.0.0.1:1/0", allocator="mysql")
    calls = _counting(store)
    with Consumer("g", topic, settings=settings, store=store, start="earliest", **FAST) as c:
        group = store.groups.get("g", store.topics.get(topic).id)
        assert group is not None

        def owns_all() -> bool:
            assert c.poll(timeout=0.2) == []  # joins, takes its partitions, reads each once
            return len(store.assignments.held(group.id)) == PARTITIONS

        seed.wait_until(owns_all)
        assert c.poll(timeout=0.3) == []
        calls["fetch"] = 0
        assert c.poll(timeout=2.5) == []  # 2 idle waits with Redis, 12 without
        assert calls["fetch"] == 0
        # Written without a wake-up (as by a producer that died before sending one):
        # found at the next look at the high watermarks, by a read of its partition only.
        info = store.topics.get(topic)
        seed.messages(store, info, 5, range(1), 0)
        got: list[Delivery] = []
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            got = c.poll(timeout=0.5)
        assert [(d.partition, d.offset) for d in got] == [(5, 0)]
        assert calls["fetch"] == 1
        c.ack(got)
