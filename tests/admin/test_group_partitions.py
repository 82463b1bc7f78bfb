"""A group's detail shows its partitions by pages (at most 50, "next partitions" links
with a cursor) and at most 50 members: at most 100 rows however large the group, with
totals over every partition."""

from __future__ import annotations

import html
import re

import pytest
from flask.testing import FlaskClient

from benchmarks.admin_seed import BIG_GROUP, Scale, rows_of, seed
from ems.config import Settings
from tests.admin.conftest import bearer
from tests.conftest import connect

SCALE = Scale(
    topics=1,
    partitions=1,
    groups=1,
    big_partitions=120,
    big_members=60,
    messages=3,
    # The other pages' data, which this test does not read: a row or two each.
    deep_messages=1,
    dead_letters=1,
    alarms=1,
    decisions=1,
    audit_rows=1,
    chart_hours=1,
)
_NEXT = re.compile(r'<a class="next" rel="next" href="([^"]+)"')
_PARTITION = re.compile(r'<tr id="partition-(\d+)">')


@pytest.fixture
def viewer(settings: Settings, tokens: dict[str, str]) -> dict[str, str]:
    conn = connect(settings)
    conn.autocommit(False)
    try:
        seed(conn, SCALE)
    finally:
        conn.close()
    return bearer(tokens["viewer"])


def test_next_links_visit_every_partition_once(client: FlaskClient, viewer: dict[str, str]) -> None:
    seen: list[int] = []
    path: str | None = f"/groups/{BIG_GROUP}"
    while path is not None:
        response = client.get(path, headers=viewer)
        assert response.status_code == 200, path
        body = response.get_data()
        assert rows_of(path, body) <= 100
        text = body.decode()
        seen += [int(p) for p in _PARTITION.findall(text)]
        found = _NEXT.search(text)
        path = html.unescape(found.group(1)) if found else None
    assert seen == list(range(SCALE.big_partitions))
    assert "The first 50 of 60 members" in text


def test_the_api_pages_partitions_and_keeps_totals(
    client: FlaskClient, viewer: dict[str, str]
) -> None:
    first = client.get(f"/api/v1/groups/{BIG_GROUP}?limit=7", headers=viewer).get_json()
    assert [p["partition"] for p in first["partitions"]] == list(range(7))
    assert (first["next_after"], first["partition_count"], first["member_count"]) == (6, 120, 60)
    assert len(first["members"]) == 50
    rest = client.get(f"/api/v1/groups/{BIG_GROUP}?after=115", headers=viewer).get_json()
    assert [p["partition"] for p in rest["partitions"]] == [116, 117, 118, 119]
    assert rest["next_after"] is None
    # The total covers every partition, whatever the page.
    assert first["total_lag"] == rest["total_lag"] > sum(p["lag"] for p in first["partitions"])


@pytest.mark.parametrize(
    "query", ["after=-1", "after=x", "after=1e3", "after=" + "9" * 12, "limit=0", "limit=51"]
)
def test_a_bad_cursor_or_limit_is_a_400(
    client: FlaskClient, viewer: dict[str, str], query: str
) -> None:
    for path in (f"/groups/{BIG_GROUP}", f"/api/v1/groups/{BIG_GROUP}"):
        response = client.get(f"{path}?{query}", headers=viewer)
        assert response.status_code == 400, (path, query)


def test_a_later_page_reads_its_own_partitions_and_the_totals_of_all(
    client: FlaskClient, viewer: dict[str, str]
) -> None:
    """The last partition has no cursor (see the seeder): its lag counts everything stored,
    on its page, and the totals match the groups page's, whatever page is shown."""
    page = client.get(f"/api/v1/groups/{BIG_GROUP}?after=109", headers=viewer).get_json()
    last = page["partitions"][-1]
    assert (last["partition"], last["committed_offset"], last["lag_from"]) == (
        119,
        None,
        "low_watermark",
    )
    assert last["lag"] == SCALE.messages > 0
    assert last["lag_age_seconds"] is not None
    # The seeded report covers every partition: each row of the page has its status.
    assert len({p["report_status"] for p in page["partitions"]} - {None}) == 1
    (listed,) = client.get(f"/api/v1/groups?prefix={BIG_GROUP}", headers=viewer).get_json()["items"]
    cursors = range(SCALE.big_partitions - 1)
    total = sum(SCALE.messages - p % SCALE.messages for p in cursors) + SCALE.messages
    assert (page["total_lag"], page["partitions_without_cursor"]) == (total, 1)
    for key in ("total_lag", "partitions_without_cursor", "status", "report_as_of"):
        assert page[key] == listed[key], key
    text = client.get(f"/groups/{BIG_GROUP}?after=109", headers=viewer).get_data(as_text=True)
    assert "(1 partitions without a committed offset)" in text
    assert "(everything stored: no committed offset)" in text
