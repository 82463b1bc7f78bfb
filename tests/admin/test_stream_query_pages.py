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


def test_the_detail_pages_250_partitions_by_100(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    """Two topics (200 and 50 partitions): pages of 100 rows by topic name and partition,
    the totals over all 250 on each, and a cursor that is not one a 400."""
    wide = store.topics.create("wide", 200, 24, 1024)
    narrow = store.topics.create("narrow", 50, 24, 1024)
    seed.messages(store, wide, 7, range(4), age_hours=1)
    positions = [(wide.id, p, 1 if p == 7 else 0) for p in range(200)]
    positions += [(narrow.id, p, 0) for p in range(50)]
    store.stream_queries.record("wide-reader", positions, {(wide.id, 7): 5})
    pages, after = [], None
    while True:
        query = {} if after is None else {"after": after}
        found = client.get(
            "/api/v1/streaming-queries/wide-reader", query_string=query, headers=viewer
        ).get_json()
        assert (found["partition_count"], found["lag"], found["skipped_offsets"]) == (250, 3, 5)
        pages.append([(p["topic"], p["partition"]) for p in found["partitions"]])
        after = found["next_after"]
        if after is None:
            break
    assert [len(p) for p in pages] == [100, 100, 50]
    shown = [row for page in pages for row in page]
    expected = [("narrow", p) for p in range(50)] + [("wide", p) for p in range(200)]
    assert shown == expected
    page = client.get("/streaming-queries/wide-reader", headers=viewer).get_data(as_text=True)
    assert len(re.findall(r'<td data-label="partition">', page)) == 100
    assert 'rel="next" href="/streaming-queries/wide-reader?after=wide/49"' in page
    assert "100 of 250 partitions" in page
    assert '<dd id="skipped">5' in page
    last = client.get("/streaming-queries/wide-reader?after=wide/149", headers=viewer)
    body = last.get_data(as_text=True)
    assert len(re.findall(r'<td data-label="partition">', body)) == 50
    assert 'rel="next"' not in body and 'class="first"' in body
    for bad in ("wide", "wide/x", "no such/1", "wide/-1"):
        answer = client.get(
            "/api/v1/streaming-queries/wide-reader", query_string={"after": bad}, headers=viewer
        )
        assert answer.status_code == 400, bad
    too_many = client.get("/api/v1/streaming-queries/wide-reader?limit=101", headers=viewer)
    assert too_many.status_code == 400


def test_the_list_pages_150_queries_with_their_figures_taken_in_sql(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    """150 queries over 8 topics each (their figures summed in the server): pages of 50
    by default, 100 at most, and the first five topics named with a count of the rest."""
    topics = [store.topics.create(f"t{i}", 2, 24, 1024) for i in range(8)]
    seed.messages(store, topics[0], 1, range(6), age_hours=1)
    for i in range(150):
        rows = [(t.id, p, 2) for t in topics for p in range(2)]
        store.stream_queries.record(f"q{i:03d}", rows, {(topics[0].id, 1): i})
    names: list[str] = []
    after = None
    while True:
        query = {} if after is None else {"after": after}
        found = client.get(
            "/api/v1/streaming-queries", query_string=query, headers=viewer
        ).get_json()
        assert len(found["items"]) <= 50
        names += [q["query"] for q in found["items"]]
        after = found["next_after"]
        if after is None:
            break
    assert names == [f"q{i:03d}" for i in range(150)]
    big = client.get("/api/v1/streaming-queries?limit=100", headers=viewer).get_json()
    assert len(big["items"]) == 100 and big["next_after"] == "q099"
    q7 = big["items"][7]
    assert (q7["partitions"], q7["lag"], q7["skipped_offsets"]) == (16, 4, 7)
    assert (q7["topics"], q7["topic_count"]) == (["t0", "t1", "t2", "t3", "t4"], 8)
    page = client.get("/streaming-queries", headers=viewer).get_data(as_text=True)
    assert len(_QUERY.findall(page)) == 50
    assert 'rel="next" href="/streaming-queries?after=q049"' in page
    assert "and 3 more" in page
