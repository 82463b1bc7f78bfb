"""Message queries must be ordered index range reads, never scans or sorts of a topic."""

from __future__ import annotations

import datetime as dt

from ems import TopicAdmin
from ems.config import Settings
from ems.ops.query import MessageQuery
from ems.store import Store
from ems.store import queries as q
from tests import sql as db
from tests.integration import seed

T0 = dt.datetime(2026, 1, 1)


def test_key_and_time_queries_read_their_index_in_order(settings: Settings, store: Store) -> None:
    topic = TopicAdmin(settings, store=store).create("t", 8)
    db.run(
        store,
        "INSERT INTO message (topic_id, partition_no, offset_no, msg_key, body, "
        "created_at) SELECT :t, seq % 8, seq DIV 8, CONCAT('k', seq % 500), 'x', "
        ":t0 + INTERVAL seq SECOND FROM seq_0_to_39999",
        {"t": topic.id, "t0": T0},
    )
    db.rows(store, "ANALYZE TABLE message")
    since, until = T0 + dt.timedelta(hours=1), T0 + dt.timedelta(hours=2)
    by_key = q._BY_KEY.format(partition="")
    # The first page (after nothing: the lower bound and id 0), and a page after a cursor.
    for after in ((since, 0), (since + dt.timedelta(minutes=30), 5000)):
        (row,) = seed.explain(store, by_key, (topic.id, b"k7", since, until, *after, 101))
        assert row["key"] == "ix_message_topic_id_msg_key_created_at_id"
        assert "filesort" not in str(row["Extra"])
        for row in seed.explain(store, q._KEYS_IN_RANGE, (topic.id, 3, since, until, *after, 101)):
            assert row["key"] == "ix_message_topic_id_partition_no_created_at_id"
            assert "filesort" not in str(row["Extra"])
    found = MessageQuery(settings, store=store).find("t", since=since, until=until, limit=5)
    assert [m.created_at for m in found.messages] == [
        since + dt.timedelta(seconds=i) for i in range(5)
    ]
