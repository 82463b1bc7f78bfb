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
