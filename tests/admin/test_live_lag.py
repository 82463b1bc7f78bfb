"""The overview shows each group's lag now, read live as the group page reads it, before
any lag report exists (and the report's status beside it when one does), in a bounded
number of statements (tests/admin/test_statements.py counts them at two scales)."""

from __future__ import annotations

import re

from flask.testing import FlaskClient

from ems.config import Settings
from ems.consumer.groups import ensure_group
from ems.ops.overview import NO_REPORT, OverviewReader
from ems.store import Store
from tests.admin.conftest import bearer
from tests.integration import seed


def test_the_overview_reads_lag_live_without_a_report(
    settings: Settings, store: Store, client: FlaskClient, tokens: dict[str, str]
) -> None:
    orders = store.topics.create("orders", 2, 24, 1024)
    seed.messages(store, orders, 0, range(5), age_hours=1)
    seed.messages(store, orders, 1, range(3), age_hours=1)
    billing = seed.group(store, "billing", orders)
    seed.sql(store, "DELETE FROM group_offset WHERE group_id = %s", (billing.id,))
    seed.sql(
        store,
        "INSERT INTO group_offset (group_id, partition_no, committed_offset, generation) "
        "VALUES (%s, 0, 4, 1)",
        (billing.id,),
    )
    ensure_group(store, "screens", orders, seed.options(broadcast=True))
    with OverviewReader(settings) as reader:
        o = reader.read()
    shown = {g.group: (g.live_lag, g.status, g.reason) for g in o.groups}
    # Partition 0: 5 stored, committed 4 -> 1; partition 1: no cursor, all 3.
    assert shown["billing"] == (4, None, NO_REPORT)
    assert shown["screens"][0] is None
    page = client.get("/", headers=bearer(tokens["viewer"])).get_data(as_text=True)
    cell = re.search(r'<td data-label="lag now" class="live-lag">([^<]*)</td>', page)
    assert cell is not None and cell.group(1) == "4"
    api = client.get("/api/v1/overview", headers=bearer(tokens["viewer"])).get_json()
    assert {g["group"]: g["live_lag"] for g in api["groups"]}["billing"] == 4


def test_the_overview_and_the_groups_list_show_the_lag_age_live(
    settings: Settings, store: Store, client: FlaskClient, tokens: dict[str, str]
) -> None:
    """Lag age: how old the oldest unconsumed message is, by the database clock, over
    the group's partitions; nothing waiting shows none."""
    orders = store.topics.create("orders", 2, 24, 1024)
    seed.messages(store, orders, 0, range(3), age_hours=2)
    seed.messages(store, orders, 1, range(3), age_hours=1)
    behind = seed.group(store, "behind", orders)
    caught_up = seed.group(store, "caught-up", orders)
    for group, offsets in ((behind, (3, 0)), (caught_up, (3, 3))):
        seed.sql(store, "DELETE FROM group_offset WHERE group_id = %s", (group.id,))
        for partition, offset in enumerate(offsets):
            seed.sql(
                store,
                "INSERT INTO group_offset (group_id, partition_no, committed_offset, "
                "generation) VALUES (%s, %s, %s, 1)",
                (group.id, partition, offset),
            )
    with OverviewReader(settings) as reader:
        ages = {g.group: g.lag_age_seconds for g in reader.read().groups}
    # behind: partition 0 is consumed; partition 1's oldest waits since an hour ago.
    assert ages["behind"] is not None and 3500 < ages["behind"] < 3700
    assert ages["caught-up"] is None
    viewer = bearer(tokens["viewer"])
    for path in ("/", "/groups"):
        page = client.get(path, headers=viewer).get_data(as_text=True)
        cells = re.findall(r'<td data-label="lag age" class="lag-age">([^<]*)</td>', page)
        assert len(cells) == 2, path
        assert "—" in cells, path
        assert any(re.fullmatch(r"3[56]\d\d s", c) for c in cells), (path, cells)
    api = client.get("/api/v1/groups", headers=viewer).get_json()
    listed = {g["name"]: g["lag_age_seconds"] for g in api["items"]}
    assert listed["caught-up"] is None and 3500 < listed["behind"] < 3700
