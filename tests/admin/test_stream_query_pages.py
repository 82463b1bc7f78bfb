"""Streaming queries in the console: the list (name, topics, partitions, total lag, last
commit) and a query's partitions (committed offset, high watermark, lag), their JSON
twins, paging by name, a missing query a 404, and a name written by hand rendered
escaped."""

from __future__ import annotations

import html
import re

import pytest
from flask.testing import FlaskClient

from ems.store import Store
from tests.admin.conftest import bearer
from tests.integration import seed

HOSTILE = '<script>alert("q")</script>&\'x'
_QUERY = re.compile(r'<a class="stream-query" href="([^"]+)">([^<]*)</a>')


@pytest.fixture
def viewer(tokens: dict[str, str]) -> dict[str, str]:
    return bearer(tokens["viewer"])


@pytest.fixture
def recorded(store: Store) -> None:
    """windows reads readings' two partitions (lag 3 and 0) and alerts' one (lag 4);
    archive reads readings' partition 0 (lag 0)."""
    readings = store.topics.create("readings", 2, 24, 1024)
    alerts = store.topics.create("alerts", 1, 24, 1024)
    seed.messages(store, readings, 0, range(5), age_hours=1)
    seed.messages(store, readings, 1, range(2), age_hours=1)
    seed.messages(store, alerts, 0, range(4), age_hours=1)
    positions = store.stream_queries
    positions.record("windows", [(readings.id, 0, 2), (readings.id, 1, 2), (alerts.id, 0, 0)])
    positions.record("archive", [(readings.id, 0, 5)])


@pytest.mark.usefixtures("recorded")
def test_the_list_shows_each_query_with_its_total_lag(
    client: FlaskClient, viewer: dict[str, str]
) -> None:
    page = client.get("/streaming-queries", headers=viewer).get_data(as_text=True)
    assert [name for _, name in _QUERY.findall(page)] == ["archive", "windows"]
    assert "/streaming-queries/windows" in page
    assert 'href="/streaming-queries">Streaming queries</a>' in page  # the nav link
    found = client.get("/api/v1/streaming-queries", headers=viewer).get_json()
    assert found["next_after"] is None
    archive, windows = found["items"]
    assert windows["topics"] == ["alerts", "readings"]
    assert (windows["partitions"], windows["lag"]) == (3, 7)
    assert (archive["partitions"], archive["lag"]) == (1, 0)
    assert windows["committed_at"].endswith("Z")


@pytest.mark.usefixtures("recorded")
def test_the_list_pages_by_name_and_searches_by_prefix(
    client: FlaskClient, viewer: dict[str, str]
) -> None:
    first = client.get("/api/v1/streaming-queries?limit=1", headers=viewer).get_json()
    assert [q["query"] for q in first["items"]] == ["archive"]
    assert first["next_after"] == "archive"
    second = client.get("/api/v1/streaming-queries?limit=1&after=archive", headers=viewer)
    assert [q["query"] for q in second.get_json()["items"]] == ["windows"]
    assert second.get_json()["next_after"] is None
    html = client.get("/streaming-queries?limit=1", headers=viewer).get_data(as_text=True)
    assert 'rel="next" href="/streaming-queries?after=archive&amp;limit=1"' in html
    found = client.get("/api/v1/streaming-queries?prefix=win", headers=viewer).get_json()
    assert [q["query"] for q in found["items"]] == ["windows"]
    bad = client.get("/api/v1/streaming-queries?limit=101", headers=viewer)
    assert bad.status_code == 400


@pytest.mark.usefixtures("recorded")
def test_the_detail_shows_each_partition(client: FlaskClient, viewer: dict[str, str]) -> None:
    found = client.get("/api/v1/streaming-queries/windows", headers=viewer).get_json()
    assert found["query"] == "windows" and found["lag"] == 7
    rows = [
        (p["topic"], p["partition"], p["committed_offset"], p["high_watermark"], p["lag"])
        for p in found["partitions"]
    ]
    assert rows == [("alerts", 0, 0, 4, 4), ("readings", 0, 2, 5, 3), ("readings", 1, 2, 2, 0)]
    page = client.get("/streaming-queries/windows", headers=viewer).get_data(as_text=True)
    cells = re.findall(r'<td data-label="(?:committed offset|high watermark|lag)"[^>]*>(\d+)', page)
    assert cells == ["0", "4", "4", "2", "5", "3", "2", "2", "0"]
    missing = client.get("/api/v1/streaming-queries/nothing", headers=viewer)
    assert missing.status_code == 404
    assert "ems.query.name" in missing.get_json()["error"]
    assert client.get("/streaming-queries/nothing", headers=viewer).status_code == 404


def test_a_hostile_name_is_rendered_escaped(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    topic = store.topics.create("t", 1, 24, 1024)
    seed.messages(store, topic, 0, range(3), age_hours=1)
    # The source refuses such a name: only a row written by hand holds one.
    store.stream_queries.record(HOSTILE, [(topic.id, 0, 1)])
    page = client.get("/streaming-queries", headers=viewer).get_data(as_text=True)
    assert "<script>" not in page
    ((link, name),) = _QUERY.findall(page)
    assert name == "&lt;script&gt;alert(&#34;q&#34;)&lt;/script&gt;&amp;&#39;x"
    assert link.startswith("/streaming-query?name=")
    detail = client.get(html.unescape(link), headers=viewer)
    assert detail.status_code == 200
    assert "<script>" not in detail.get_data(as_text=True)
    assert "&lt;script&gt;" in detail.get_data(as_text=True)
    api = client.get("/api/v1/streaming-queries", headers=viewer).get_json()
    assert api["items"][0]["query"] == HOSTILE
    by_query = client.get("/api/v1/streaming-query", query_string={"name": HOSTILE}, headers=viewer)
    assert by_query.get_json()["lag"] == 2
    empty = client.get("/streaming-queries", query_string={"prefix": HOSTILE + "z"}, headers=viewer)
    assert "<script>" not in empty.get_data(as_text=True)


def test_a_query_page_needs_a_login(client: FlaskClient) -> None:
    assert client.get("/api/v1/streaming-queries").status_code == 401
