"""The message pages and their JSON API against the real database: each search kind, the
time range a key or time search needs, keyset pages through the cursor, 404s for what
does not exist and 400s for bad or over-long input, hidden bodies, raw downloads by role,
bodies cut at 64 KiB and binary shown as hex, and the trace as a timeline."""

from __future__ import annotations

import html
import json
import re
from urllib.parse import quote

import pytest
from flask.testing import FlaskClient

from ems.store import Store
from ems.types import TopicInfo
from tests.admin.conftest import MakeApp, bearer
from tests.integration import seed
from tests.json_times import is_json_time

_NEXT = re.compile(r'<a class="next" rel="next" href="([^"]+)"')
_DETAIL = re.compile(r'<a class="message" href="([^"]+)">')
HOSTILE = "<script>alert(1)</script>"


def put(
    store: Store,
    topic: TopicInfo,
    partition: int,
    offset: int,
    *,
    body: bytes = b"x",
    key: bytes | None = None,
    headers: dict[str, str] | None = None,
    age_seconds: float = 60,
) -> int:
    """A message row written as stored, created age_seconds ago; its id."""
    seed.sql(
        store,
        "INSERT INTO message (topic_id, partition_no, offset_no, msg_key, headers, body, "
        "created_at) VALUES (%s, %s, %s, %s, %s, %s, NOW(6) - INTERVAL %s MICROSECOND)",
        (
            topic.id,
            partition,
            offset,
            key,
            None if headers is None else json.dumps(headers),
            body,
            int(age_seconds * 1e6),
        ),
    )
    return seed.message_id(store, topic, partition, offset)


@pytest.fixture
def orders(store: Store) -> TopicInfo:
    return store.topics.create("orders", 2, 24, 8 * 1024 * 1024)


@pytest.fixture
def viewer(tokens: dict[str, str]) -> dict[str, str]:
    return bearer(tokens["viewer"])


def _json(client: FlaskClient, path: str, headers: dict[str, str]) -> dict[str, object]:
    response = client.get(path, headers=headers)
    assert response.status_code == 200, (path, response.get_data(as_text=True))
    found = response.get_json()
    assert isinstance(found, dict)
    return found


def _items(client: FlaskClient, path: str, headers: dict[str, str]) -> list[dict[str, object]]:
    items = _json(client, path, headers)["items"]
    assert isinstance(items, list)
    return items


def _offsets(items: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(i["partition"], i["offset"]) for i in items]


def test_a_search_by_place_and_by_id(
    client: FlaskClient, store: Store, orders: TopicInfo, viewer: dict[str, str]
) -> None:
    put(store, orders, 1, 2, key=b"k")
    message_id = put(store, orders, 1, 3, key=b"k", body=b"hello")
    (item,) = _items(client, "/api/v1/messages?topic=orders&partition=1&offset=3", viewer)
    assert item == {
        "id": message_id,
        "topic": "orders",
        "partition": 1,
        "offset": 3,
        "created_at": item["created_at"],
        "size": 5,
        "key": "k",
        "key_encoding": "utf-8",
        "key_size": 1,
        "key_truncated": False,
        "preview": "hello",
    }
    assert is_json_time(item["created_at"])
    assert _items(client, f"/api/v1/messages?id={message_id}", viewer) == [item]
    page = client.get(f"/messages?id={message_id}", headers=viewer).get_data(as_text=True)
    assert _DETAIL.findall(page) == ["/messages/orders/1/3"]
    assert 'data-label="created"' in page
    assert " UTC</time></td>" in page


def test_a_search_by_key_within_a_time_range(
    client: FlaskClient, store: Store, orders: TopicInfo, viewer: dict[str, str]
) -> None:
    put(store, orders, 0, 0, key=b"k1", age_seconds=7200)  # before the window
    put(store, orders, 0, 1, key=b"k1", age_seconds=1200)
    put(store, orders, 1, 0, key=b"k2", age_seconds=1100)
    put(store, orders, 1, 1, key=b"k1", age_seconds=1000)
    put(store, orders, 1, 2, key=b"k1", age_seconds=10)  # after until
    found = _json(client, "/api/v1/messages?topic=orders&key=k1&since=1h&until=5m", viewer)
    assert found["kind"] == "key"
    assert _offsets(found["items"]) == [(0, 1), (1, 1)]  # type: ignore[arg-type]
    assert found["key_partition"] in {0, 1}
    assert found["next_after"] is None
    assert is_json_time(found["since"])
    only_1 = "/api/v1/messages?topic=orders&key=k1&since=1h&partition=1"
    assert _offsets(_items(client, only_1, viewer)) == [(1, 1), (1, 2)]
    page = client.get("/messages?topic=orders&key=k1&since=1h", headers=viewer)
    assert page.get_data(as_text=True).count('<a class="message"') == 3


def test_a_search_by_time_range_alone(
    client: FlaskClient, store: Store, orders: TopicInfo, viewer: dict[str, str]
) -> None:
    put(store, orders, 0, 0, age_seconds=7200)
    put(store, orders, 0, 1, age_seconds=300)
    put(store, orders, 1, 0, age_seconds=200)
    seed.sql(
        store,
        "INSERT INTO message (topic_id, partition_no, offset_no, body, tombstone) "
        "VALUES (%s, 1, 1, '', 1)",
        (orders.id,),
    )
    found = _items(client, "/api/v1/messages?topic=orders&since=1h", viewer)
    assert _offsets(found) == [(0, 1), (1, 0)]  # oldest first, no tombstone
    iso = "/api/v1/messages?topic=orders&since=2000-01-01T00:00:00Z&until=" + quote(
        "2100-01-01 00:00:00+02:00"
    )
    assert len(_items(client, iso, viewer)) == 3


@pytest.mark.parametrize(
    "query",
    ["topic=orders", "topic=orders&key=k", "topic=orders&until=1h", "topic=orders&key=k&until=1h"],
)
def test_a_key_or_time_search_needs_a_time_range(
    client: FlaskClient, orders: TopicInfo, viewer: dict[str, str], query: str
) -> None:
    response = client.get("/api/v1/messages?" + query, headers=viewer)
    assert response.status_code == 400
    assert "needs a time range: give since" in response.get_json()["error"]
    page = client.get("/messages?" + query, headers=viewer)
    assert page.status_code == 400
    assert "needs a time range" in page.get_data(as_text=True)


def test_pages_follow_the_cursor(
    client: FlaskClient, store: Store, orders: TopicInfo, viewer: dict[str, str]
) -> None:
    for offset in range(7):
        put(store, orders, offset % 2, offset // 2, key=b"k", age_seconds=600 - offset // 3)
    # Several messages share a created_at: the cursor's id breaks the tie.
    for search in ("since=1h", "key=k&since=1h", "since=1h&partition=0", "partition=0"):
        seen: list[tuple[object, object]] = []
        path = f"/api/v1/messages?topic=orders&{search}&limit=2"
        pages = 0
        while True:
            found = _json(client, path, viewer)
            items = found["items"]
            assert isinstance(items, list) and len(items) <= 2
            seen += _offsets(items)
            pages += 1
            if found["next_after"] is None:
                break
            since = f"&since={quote(str(found['since']))}" if found["since"] else ""
            base = re.sub(r"since=[^&]*", "", search).strip("&")
            path = (
                f"/api/v1/messages?topic=orders&{base}{since}&limit=2"
                f"&after={quote(str(found['next_after']))}"
            )
        expected = 4 if "partition=0" in search else 7
        assert len(seen) == len(set(seen)) == expected, (search, seen)
        assert pages == (expected + 1) // 2
    # The HTML pages: "next page" links carry the cursor (and the window, resolved).
    path, rows = "/messages?topic=orders&since=1h&limit=3", 0
    for _ in range(3):
        page = client.get(path, headers=viewer).get_data(as_text=True)
        rows += page.count('<a class="message"')
        links = _NEXT.findall(page)
        if not links:
            break
        path = html.unescape(links[0])
        assert "after=" in path and "since=20" in path
    assert rows == 7
    assert _NEXT.findall(client.get(path, headers=viewer).get_data(as_text=True)) == []


def test_the_partition_links_of_a_topic_search_it(
    client: FlaskClient, store: Store, orders: TopicInfo, viewer: dict[str, str]
) -> None:
    put(store, orders, 1, 5)
    page = client.get("/topics/orders", headers=viewer).get_data(as_text=True)
    assert '<a class="partition" href="/messages?topic=orders&amp;partition=1">1</a>' in page
    listed = client.get("/messages?topic=orders&partition=1", headers=viewer)
    assert _DETAIL.findall(listed.get_data(as_text=True)) == ["/messages/orders/1/5"]
    assert '<a href="/messages">Messages</a>' in page


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/messages?topic=nope&since=1h",
        "/api/v1/messages?topic=orders&partition=2",
        "/api/v1/messages?topic=orders&partition=0&offset=99",
        "/api/v1/messages?id=999999",
        "/messages?topic=orders&partition=0&offset=99",
        "/messages/orders/0/99",
        "/messages/orders/9/0",
        "/messages/nope/0/0",
        "/messages/id/999999",
        "/message?id=999999",
        "/api/v1/messages/orders/0/99",
        "/api/v1/messages/id/999999",
        "/api/v1/message?topic=orders&partition=0&offset=99",
        "/messages/orders/0/99/raw",
        "/messages/id/999999/raw",
    ],
)
def test_what_does_not_exist_is_a_404(
    client: FlaskClient, orders: TopicInfo, tokens: dict[str, str], path: str
) -> None:
    response = client.get(path, headers=bearer(tokens["operator"]))
    assert response.status_code == 404, response.get_data(as_text=True)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/messages?topic=orders&partition=x",
        "/api/v1/messages?topic=orders&partition=0&offset=-1",
        "/api/v1/messages?id=1.5",
        "/api/v1/messages?id=1&topic=orders",
        "/api/v1/messages?topic=orders&offset=1",
        "/api/v1/messages?topic=orders&since=yesterday",
        "/api/v1/messages?topic=orders&since=1h&until=2h",
        "/api/v1/messages?topic=orders&since=1h&after=garbage",
        "/api/v1/messages?topic=orders&partition=0&after=2026-01-01/1",
        "/api/v1/messages?topic=orders&since=1h&limit=101",
        "/api/v1/messages?partition=0",
        "/messages?topic=orders&since=1h&limit=0",
        "/messages/orders/x/0",
        "/messages/orders/0/-1",
        "/messages/id/abc",
        "/message",
        "/message?topic=orders&partition=0",
        "/message?id=1&topic=orders",
        "/api/v1/message?id=x",
        "/messages/orders/0/x/raw",
    ],
)
def test_malformed_parameters_are_a_400(
    client: FlaskClient, orders: TopicInfo, tokens: dict[str, str], path: str
) -> None:
    response = client.get(path, headers=bearer(tokens["operator"]))
    assert response.status_code == 400, response.get_data(as_text=True)


@pytest.mark.parametrize(
    "query",
    [
        "topic=" + "t" * 129 + "&since=1h",
        "topic=" + "t" * 20_000 + "&since=1h",
        "topic=orders&since=1h&key=" + "k" * 256,
        "topic=orders&since=" + "1" * 65,
        "topic=orders&since=1h&until=" + "2" * 5000,
        "topic=orders&since=1h&after=" + "a" * 65,
        "id=" + "9" * 40,
    ],
)
def test_over_long_inputs_are_a_400(
    client: FlaskClient, orders: TopicInfo, viewer: dict[str, str], query: str
) -> None:
    response = client.get("/api/v1/messages?" + query, headers=viewer)
    assert response.status_code == 400
    assert len(response.get_json()["error"]) < 300
    assert client.get("/messages/" + "t" * 5000 + "/0/0", headers=viewer).status_code == 400


def _hostile_message(store: Store, orders: TopicInfo) -> int:
    return put(
        store,
        orders,
        0,
        4,
        key=HOSTILE.encode(),
        headers={'"><svg onload=alert(1)>': "<img src=x onerror=alert(1)>"},
        body=b'{"html": "<script>alert(1)</script>"}',
    )


def test_a_detail_shows_headers_and_body_escaped(
    client: FlaskClient, store: Store, orders: TopicInfo, tokens: dict[str, str]
) -> None:
    viewer = bearer(tokens["viewer"])
    message_id = _hostile_message(store, orders)
    for path in ("/messages/orders/0/4", f"/messages/id/{message_id}", f"/message?id={message_id}"):
        page = client.get(path, headers=viewer).get_data(as_text=True)
        assert "<script>alert" not in page and "<svg" not in page and "<img" not in page
        assert html.escape(HOSTILE, quote=False) in page
        assert "&lt;img src=x onerror=alert(1)&gt;</td>" in page
        assert "JSON (UTF-8), pretty-printed, 37 bytes" in page
        assert '<pre class="body body-json">{\n  &#34;html&#34;' in page
        assert "Download the raw body" not in page  # viewers may not download
    found = _json(client, "/api/v1/messages/orders/0/4", viewer)
    assert found["key"] == HOSTILE
    assert found["headers"] == {'"><svg onload=alert(1)>': "<img src=x onerror=alert(1)>"}
    body = found["body"]
    assert isinstance(body, dict)
    assert (body["kind"], body["size"], body["truncated"]) == ("json", 37, False)
    assert found == _json(client, f"/api/v1/messages/id/{message_id}", viewer)
    operator = client.get("/messages/orders/0/4", headers=bearer(tokens["operator"]))
    assert 'href="/messages/orders/0/4/raw" download>' in operator.get_data(as_text=True)


def test_a_topic_of_dots_is_reached_by_the_query_form(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    dots = store.topics.create("..", 1, 24, 1024)
    put(store, dots, 0, 0)
    page = client.get("/messages?topic=..&partition=0", headers=viewer).get_data(as_text=True)
    (link,) = _DETAIL.findall(page)
    assert html.unescape(link) == "/message?topic=..&partition=0&offset=0"
    assert client.get(html.unescape(link), headers=viewer).status_code == 200
    found = _json(client, "/api/v1/message?topic=..&partition=0&offset=0", viewer)
    assert found["topic"] == ".."


def test_hidden_bodies_hide_keys_and_refuse_a_key_search(
    make_app: MakeApp, store: Store, orders: TopicInfo, tokens: dict[str, str]
) -> None:
    _hostile_message(store, orders)
    client = make_app(admin_hide_bodies=True).test_client()
    viewer = bearer(tokens["viewer"])
    page = client.get("/messages?topic=orders&since=1h", headers=viewer).get_data(as_text=True)
    assert '<td data-label="key" class="key"><span class="reason">hidden</span></td>' in page
    assert "alert" not in page and 'name="key"' not in page
    (item,) = _items(client, "/api/v1/messages?topic=orders&since=1h", viewer)
    assert (item["key"], item["key_hidden"]) == (None, True)
    for path in ("/api/v1/messages?topic=orders&since=1h&key=k", "/messages?topic=orders&key=k"):
        refused = client.get(path, headers=viewer)
        assert refused.status_code == 403
        assert "hidden from viewers" in refused.get_data(as_text=True)
    detail = client.get("/messages/orders/0/4", headers=viewer).get_data(as_text=True)
    assert "Bodies are hidden from viewers" in detail
    assert "alert" not in detail and "<pre" not in detail
    found = _json(client, "/api/v1/messages/orders/0/4", viewer)
    assert (found["key"], found["headers"], found["body"], found["bodies_hidden"]) == (
        None,
        None,
        None,
        True,
    )
    assert "alert" not in json.dumps(found)
    # Operators and admins resend and replay: they still see what they act on.
    operator = bearer(tokens["operator"])
    assert _json(client, "/api/v1/messages/orders/0/4", operator)["key"] == HOSTILE
    assert _items(client, "/api/v1/messages?topic=orders&since=1h&key=" + quote(HOSTILE), operator)


def test_the_raw_download_by_role(
    client: FlaskClient, store: Store, orders: TopicInfo, tokens: dict[str, str]
) -> None:
    body = bytes(range(256)) * 10
    message_id = put(store, orders, 1, 0, body=body)
    paths = (
        "/messages/orders/1/0/raw",
        f"/messages/id/{message_id}/raw",
        "/message/raw?topic=orders&partition=1&offset=0",
    )
    for path in paths:
        assert client.get(path, headers=bearer(tokens["viewer"])).status_code == 403
        for role in ("operator", "admin"):
            response = client.get(path, headers=bearer(tokens[role]))
            assert response.status_code == 200
            assert response.data == body
            assert response.headers["Content-Type"] == "application/octet-stream"
            assert response.headers["Content-Disposition"] == (
                'attachment; filename="message-orders-1-0.bin"'
            )
            assert response.headers["X-Content-Type-Options"] == "nosniff"
    rows = seed.sql(
        store, "SELECT COUNT(*) FROM admin_audit WHERE action = 'download' AND outcome = 'ok'"
    )
    assert rows == [(6,)]


def test_a_long_body_is_cut_with_a_notice(
    client: FlaskClient, store: Store, orders: TopicInfo, viewer: dict[str, str]
) -> None:
    put(store, orders, 0, 0, body=b"<" * (5 * 1024 * 1024))
    page = client.get("/messages/orders/0/0", headers=viewer).get_data(as_text=True)
    assert "truncated: 64.0 KiB of 5.0 MiB shown" in page
    shown = re.search(r'<pre class="body body-text">([^<]*)</pre>', page)
    assert shown is not None and shown.group(1) == "&lt;" * 64 * 1024
    body = _json(client, "/api/v1/messages/orders/0/0", viewer)["body"]
    assert isinstance(body, dict)
    assert (body["shown"], body["size"], body["truncated"]) == (65536, 5 * 1024 * 1024, True)
    assert body["notice"] == "truncated: 64.0 KiB of 5.0 MiB shown"


def test_a_binary_body_is_shown_as_hex(
    client: FlaskClient, store: Store, orders: TopicInfo, viewer: dict[str, str]
) -> None:
    put(store, orders, 0, 0, body=b"\x00\xff<svg onload=alert(1)>")
    page = client.get("/messages/orders/0/0", headers=viewer).get_data(as_text=True)
    assert "binary, shown as hex, 23 bytes" in page
    assert (
        "00000000  00 ff 3c 73 76 67 20 6f 6e 6c 6f 61 64 3d 61 6c  |..&lt;svg onload=al|" in page
    )
    assert "<svg" not in page


def test_the_trace_is_a_timeline(
    client: FlaskClient, store: Store, orders: TopicInfo, viewer: dict[str, str]
) -> None:
    put(store, orders, 0, 0)
    billing = seed.group(store, "billing", orders)
    seed.group(store, "audit", orders)
    seed.log(store, billing, 0, 0, state="retry", attempts=2)
    seed.sql(
        store,
        "UPDATE topic_group_log SET error = %s, finished_at = NOW(6) WHERE group_id = %s",
        ("<img src=x onerror=alert(1)>", billing.id),
    )
    page = client.get("/messages/orders/0/0", headers=viewer).get_data(as_text=True)
    assert "attempt 2 failed: &lt;img src=x onerror=alert(1)&gt;" in page
    assert "<img" not in page
    timeline = _json(client, "/api/v1/messages/orders/0/0", viewer)["trace"]
    assert isinstance(timeline, dict)
    kinds = [(e["group"], e["kind"], e["current"]) for e in timeline["timeline"]]
    assert kinds[0] == (None, "produced", False)
    assert ("billing", "delivered", False) in kinds
    assert ("billing", "error", False) in kinds
    assert ("billing", "retrying", True) in kinds
    assert ("audit", "pending", True) in kinds
    assert {g["group"] for g in timeline["groups"]} == {"billing", "audit"}


def test_the_trace_shows_a_kept_traceback_escaped(
    client: FlaskClient, store: Store, orders: TopicInfo, viewer: dict[str, str]
) -> None:
    message_id = put(store, orders, 0, 0)
    billing = seed.group(store, "billing", orders)
    seed.log(store, billing, 0, 0, state="retry", attempts=2)
    seed.retry(store, billing, 0, 0, msg_id=message_id)
    kept = f"Traceback (most recent call last):\nValueError: {HOSTILE}\n"
    seed.sql(
        store,
        "UPDATE retry_message SET last_error = %s, last_traceback = %s",
        (f"ValueError: {HOSTILE}", kept),
    )
    page = client.get("/messages/orders/0/0", headers=viewer).get_data(as_text=True)
    assert "<summary>traceback</summary>" in page
    assert "Traceback (most recent call last):\nValueError: &lt;script&gt;alert(1)" in page
    assert HOSTILE not in page
    timeline = _json(client, "/api/v1/messages/orders/0/0", viewer)["trace"]
    assert isinstance(timeline, dict)
    errors = [e["traceback"] for e in timeline["timeline"] if e["kind"] == "error"]
    assert errors == [kept]


def test_the_trace_tells_transactional_publishing_and_exactly_once_settlement(
    client: FlaskClient, store: Store, orders: TopicInfo, viewer: dict[str, str]
) -> None:
    put(store, orders, 0, 0)
    put(store, orders, 0, 1)
    seed.sql(store, "UPDATE message SET transactional = 1 WHERE offset_no = 1", ())
    billing = seed.group(store, "billing", orders)
    for offset in (0, 1):
        seed.log(store, billing, 0, offset, state="done")
    seed.sql(store, "UPDATE topic_group_log SET exactly_once = 1 WHERE offset_no = 1", ())
    plain = client.get("/messages/orders/0/0", headers=viewer).get_data(as_text=True)
    assert '<dd id="published">directly</dd>' in plain
    assert "exactly once" not in plain
    page = client.get("/messages/orders/0/1", headers=viewer).get_data(as_text=True)
    assert '<dd id="published">in its producer\'s transaction' in page
    assert "settled exactly once, in the handler&#39;s own transaction" in page
    found = _json(client, "/api/v1/messages/orders/0/1", viewer)
    assert found["transactional"] is True
    assert _json(client, "/api/v1/messages/orders/0/0", viewer)["transactional"] is False
