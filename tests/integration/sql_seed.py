"""One small, known state of every table the ems_ views read, for the view tests and the
docs' SQL examples (docs/sql.md names the topic `orders`, the group `billing`, the key
`device-7` and the message at partition 1, offset 3).

Topic `orders`, 4 partitions:
  p0 offsets 0-9, p1 offsets 0-7 (offsets 1, 3, 5 keyed `device-7`), p2 offsets 2-5 (0-1
  purged: low watermark 2), p3 emptied by a purge at 4 (no rows, low watermark 4).
Topic `payments`, 2 partitions, never written.
Cluster group `billing` on orders, ack timeout 300 s, created at earliest, cursors then
  moved to p0 7, p1 3, p2 6, p3 4: lag 3, 5, 0, 0.
  Members: `c-live` (live, leader at epoch 4) holds p1 and p3 (assigned) and p2
  (revoking); `c-dead` (lease expired 30 s ago) still holds p0, which lags.
  Log: p0 0-1 and 4 done, 2-3 dead, 5 retry, 6 done, 7 start (c-dead, 600 s ago: overdue);
  p1 0-1 done, 2 retry, 3-4 start (c-live, 10 s ago).
  Retries: p0 offset 5 due in an hour, p1 offset 2 due now.
  Dead letters: p0 offset 2 (`Timeout`, an hour ago, resent), p0 offset 3
  (`ValueError: bad reading`, a minute ago).
Broadcast group `audit` on orders with one live member `c-audit` (no leader yet).
"""

from __future__ import annotations

from dataclasses import dataclass

from ems.consumer.groups import ensure_group
from ems.store import Store
from ems.topics import TopicAdmin
from ems.types import GroupInfo, TopicInfo
from tests.integration import seed

#: Offsets stored per partition of `orders` (first, last), None for an empty one.
ORDERS_ROWS: dict[int, tuple[int, int] | None] = {0: (0, 9), 1: (0, 7), 2: (2, 5), 3: None}
#: Partitions of `orders` purged up to a low watermark.
ORDERS_LOWS = {2: 2, 3: 4}
CURSORS = {0: 7, 1: 3, 2: 6, 3: 4}
KEYED = {(1, 1), (1, 3), (1, 5)}
LEADER_EPOCH = 4


@dataclass(frozen=True)
class Seeded:
    orders: TopicInfo
    payments: TopicInfo
    billing: GroupInfo
    audit: GroupInfo


def seed_all(store: Store) -> Seeded:
    admin = TopicAdmin(store=store)
    orders = admin.create("orders", 4)
    payments = admin.create("payments", 2)
    _messages(store, orders)
    billing = ensure_group(store, "billing", orders, seed.options(300))
    audit = ensure_group(store, "audit", orders, seed.options(broadcast=True))
    for partition, offset in CURSORS.items():
        seed.commit(store, billing, partition, offset)
    _members(store, billing, audit)
    _log(store, billing)
    _retries_and_dead_letters(store, billing, orders)
    return Seeded(orders=orders, payments=payments, billing=billing, audit=audit)


def _messages(store: Store, orders: TopicInfo) -> None:
    for partition, rows in ORDERS_ROWS.items():
        if rows is None:
            continue
        first, last = rows
        for offset in range(first, last + 1):
            key = b"device-7" if (partition, offset) in KEYED else None
            seed.sql(
                store,
                "INSERT INTO message (topic_id, partition_no, offset_no, msg_key, body, "
                "created_at) VALUES (%s, %s, %s, %s, %s, "
                "NOW(6) - INTERVAL %s SECOND)",
                (orders.id, partition, offset, key, f"{partition}:{offset}".encode(), 100 - offset),
            )
    for partition, low in ORDERS_LOWS.items():
        seed.sql(
            store,
            "INSERT INTO partition_low (topic_id, partition_no, low_offset, updated_at) "
            "VALUES (%s, %s, %s, NOW(6))",
            (orders.id, partition, low),
        )


def _members(store: Store, billing: GroupInfo, audit: GroupInfo) -> None:
    store.leases.register(billing.id, "c-live", "host-a", 101, 30)
    store.leases.register(billing.id, "c-dead", "host-b", 102, 30)
    store.leases.register(audit.id, "c-audit", "host-c", 103, 30)
    seed.sql(
        store,
        "UPDATE consumer_client SET lease_expires_at = NOW(6) - INTERVAL 30 SECOND "
        "WHERE client_id = 'c-dead'",
    )
    seed.sql(
        store,
        "UPDATE group_leader SET client_id = 'c-live', epoch = %s, "
        "lease_expires_at = NOW(6) + INTERVAL 30 SECOND WHERE group_id = %s",
        (LEADER_EPOCH, billing.id),
    )
    held = {0: ("c-dead", "assigned"), 1: ("c-live", "assigned"), 2: ("c-live", "revoking")}
    held[3] = ("c-live", "assigned")
    for partition, (client, state) in held.items():
        seed.sql(
            store,
            "UPDATE partition_assignment SET client_id = %s, state = %s, generation = 1, "
            "updated_at = NOW(6) WHERE group_id = %s AND partition_no = %s",
            (client, state, billing.id, partition),
        )


def _log(store: Store, billing: GroupInfo) -> None:
    rows = [(0, o, "done", "c-live", 50) for o in (0, 1, 4, 6)]
    rows += [(0, 2, "dead", "c-live", 3600), (0, 3, "dead", "c-live", 60)]
    rows += [(0, 5, "retry", "c-live", 50), (0, 7, "start", "c-dead", 600)]
    rows += [(1, 0, "done", "c-live", 50), (1, 1, "done", "c-live", 50)]
    rows += [(1, 2, "retry", "c-live", 50), (1, 3, "start", "c-live", 10)]
    rows += [(1, 4, "start", "c-live", 10)]
    for partition, offset, state, client, age in rows:
        seed.log(store, billing, partition, offset, state=state, client=client, age_seconds=age)


def _retries_and_dead_letters(store: Store, billing: GroupInfo, orders: TopicInfo) -> None:
    seed.retry(store, billing, 0, 5, msg_id=seed.message_id(store, orders, 0, 5), due_in=3600)
    seed.retry(store, billing, 1, 2, msg_id=seed.message_id(store, orders, 1, 2), due_in=-1)
    # A traceback as a handler's failure leaves it, with a line longer than any screen.
    kept = (
        "Traceback (most recent call last):\n"
        '  File "/srv/billing/handlers.py", line 42, in store_reading\n'
        f"    charge(reading, {', '.join(f'arg{i}' for i in range(60))})\n"
        "TimeoutError: Timeout\n"
    )
    for offset, error, traceback, age, resent in (
        (2, "Timeout", kept, 3600, True),
        (3, "ValueError: bad reading", None, 60, False),
    ):
        seed.sql(
            store,
            "INSERT INTO dead_message (group_id, topic_id, partition_no, offset_no, message_id, "
            "msg_key, headers, body, attempts, last_error, last_traceback, created_at, "
            "resent_at) SELECT %s, topic_id, partition_no, offset_no, id, msg_key, headers, "
            "body, 16, %s, %s, NOW(6) - INTERVAL %s SECOND, IF(%s, NOW(6), NULL) FROM message "
            "WHERE topic_id = %s AND partition_no = 0 AND offset_no = %s",
            (billing.id, error, traceback, age, resent, orders.id, offset),
        )
