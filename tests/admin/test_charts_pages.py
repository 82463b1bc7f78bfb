"""The lag and volume charts and their JSON twins: each range covers its window with at
most 100 points (the table shows the same ones), a bad range is a 400, an unknown group
or topic a 404, a broadcast group and an empty window say so, and every time is a
<time> element in UTC."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from flask.testing import FlaskClient

from ems.consumer.groups import ensure_group
from ems.store import Store
from ems.topics import TopicAdmin
from ems.types import GroupInfo, TopicInfo
from tests.admin.conftest import bearer
from tests.integration import seed, seed_browse

#: A capture every 10 minutes over 8 days, the newest a second ago.
EVERY = 600.0
CAPTURES = 8 * 24 * 6
_ROW = re.compile(r"<tr>\s*<td data-label=\"time\">(.*?)</td>", re.S)
_TIME = re.compile(r'^<time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ">[^<]+ UTC</time>$')


@pytest.fixture
def viewer(tokens: dict[str, str]) -> dict[str, str]:
    return bearer(tokens["viewer"])


@pytest.fixture
def names(store: Store) -> tuple[TopicInfo, GroupInfo]:
    """Topic orders (2 partitions) and group billing on it."""
    topic = TopicAdmin(store=store).create("orders", 2)
    return topic, seed.group(store, "billing", topic)


@pytest.fixture
def orders(store: Store, names: tuple[TopicInfo, GroupInfo]) -> tuple[TopicInfo, GroupInfo]:
    """orders and billing with snapshots and watermark captures over 8 days: at capture i
    each partition lags i and has high watermark 10i."""
    topic, group = names
    now = store.messages.now() - dt.timedelta(seconds=1)
    seed_browse.series_snapshots(store, group, 2, CAPTURES, EVERY, now)
    seed_browse.series_watermarks(store, topic, 2, CAPTURES, EVERY, now)
    return topic, group


def _get(client: FlaskClient, path: str, headers: dict[str, str], status: int = 200) -> str:
    response = client.get(path, headers=headers)
    assert response.status_code == status, (path, response.get_data(as_text=True)[:300])
    return response.get_data(as_text=True)


@pytest.mark.parametrize(
    ("query", "span"), [("", 1), ("?range=1h", 1), ("?range=24h", 24), ("?range=7d", 168)]
)
def test_a_lag_chart_covers_its_range_with_at_most_100_points(
    client: FlaskClient, orders: object, viewer: dict[str, str], query: str, span: int
) -> None:
    body = client.get(f"/api/v1/groups/billing/lag{query}", headers=viewer).get_json()
    assert set(body) == {"group", "topic", "mode", "range", "since", "until", "points", "reason"}
    assert (body["group"], body["topic"], body["mode"], body["reason"]) == (
        "billing",
        "orders",
        "cluster",
        None,
    )
    assert body["range"] == (query.partition("=")[2] or "1h")
    since, until = (
        dt.datetime.fromisoformat(body["since"]),
        dt.datetime.fromisoformat(body["until"]),
    )
    assert until - since == dt.timedelta(hours=span)
    points = body["points"]
    assert 0 < len(points) <= 100
    # An hour holds 6 captures; longer ranges keep one per step, up to 100.
    assert len(points) == (6 if span == 1 else 100 if span == 168 else len(points))
    for p in points:
        assert set(p) == {"at", "lag", "partitions"}
        assert since < dt.datetime.fromisoformat(p["at"]) <= until
        assert p["partitions"] == 2
    lags = [p["lag"] for p in points]
    assert lags == sorted(lags) and lags[-1] == 2 * (CAPTURES - 1)

    page = _get(client, f"/groups/billing/lag{query}", viewer)
    assert page.count('<svg class="chart"') == 1
    assert 'role="img"' in page and "<title>Lag of group billing on orders" in page
    cells = _ROW.findall(page)
    assert len(cells) == len(points) <= 100
    assert all(_TIME.match(cell) for cell in cells), cells[:2]
    assert '<polyline class="line" points="' in page
    assert page.count('<circle class="dot"') == len(points)
    assert 'aria-current="page">' + {1: "1 hour", 24: "24 hours", 168: "7 days"}[span] in page


def test_a_volume_chart_counts_the_messages_between_points(
    client: FlaskClient, orders: object, viewer: dict[str, str]
) -> None:
    body = client.get("/api/v1/topics/orders/volume?range=1h", headers=viewer).get_json()
    assert set(body) == {"topic", "range", "since", "until", "points"}
    points = body["points"]
    assert len(points) == 6
    for p in points:
        assert set(p) == {"at", "high_watermark_total", "messages", "span_seconds"}
        # 10 more per partition every capture, from the capture before the window too.
        assert (p["messages"], p["span_seconds"]) == (20, EVERY)
    week = client.get("/api/v1/topics/orders/volume?range=7d", headers=viewer).get_json()
    assert len(week["points"]) == 100

    page = _get(client, "/topics/orders/volume?range=7d", viewer)
    assert page.count('<svg class="chart"') == 1
    assert "<title>Messages written to topic orders, the last 7 days</title>" in page
    assert len(_ROW.findall(page)) == 100
    # The topic's page links to it.
    topic_page = _get(client, "/topics/orders", viewer)
    assert 'href="/topics/orders/volume"' in topic_page


@pytest.mark.parametrize(
    "path",
    [
        "/groups/billing/lag?range=2h",
        "/groups/billing/lag?range=",
        "/api/v1/groups/billing/lag?range=1d",
        "/topics/orders/volume?range=30d",
        "/api/v1/topics/orders/volume?range=%3Cscript%3E",
        "/topics/orders/volume?range=%3Cscript%3E",
        "/groups/bad%20name/lag",
        "/api/v1/group/lag",
        "/api/v1/groups/billing/lag?topic=no%20such",
    ],
)
def test_bad_input_is_a_400(
    client: FlaskClient, names: object, viewer: dict[str, str], path: str
) -> None:
    text = _get(client, path, viewer, 400)
    if path.startswith("/api/"):
        assert set(client.get(path, headers=viewer).get_json()) == {"error"}
    else:
        assert "<script>" not in text.partition("</head>")[2]


@pytest.mark.parametrize(
    "path",
    [
        "/groups/nobody/lag",
        "/api/v1/groups/nobody/lag",
        "/api/v1/groups/billing/lag?topic=elsewhere",
        "/topics/nothing/volume",
        "/api/v1/topics/nothing/volume?range=24h",
    ],
)
def test_an_unknown_group_or_topic_is_a_404(
    client: FlaskClient, names: object, store: Store, viewer: dict[str, str], path: str
) -> None:
    TopicAdmin(store=store).create("elsewhere", 1)
    _get(client, path, viewer, 404)


def test_a_broadcast_group_says_it_has_no_snapshots(
    client: FlaskClient, names: tuple[TopicInfo, GroupInfo], store: Store, viewer: dict[str, str]
) -> None:
    ensure_group(store, "screens", names[0], seed.options(broadcast=True))
    body = client.get("/api/v1/groups/screens/lag?range=24h", headers=viewer).get_json()
    assert (body["mode"], body["points"]) == ("broadcast", [])
    assert "broadcast group keeps no offset snapshots" in body["reason"]
    page = _get(client, "/groups/screens/lag?range=24h", viewer)
    assert "This is a broadcast group: a broadcast group keeps no offset snapshots" in page
    assert "<svg" not in page


def test_an_empty_window_says_so(client: FlaskClient, store: Store, viewer: dict[str, str]) -> None:
    topic = TopicAdmin(store=store).create("quiet", 1)
    seed.group(store, "idle", topic)
    page = _get(client, "/groups/idle/lag", viewer)
    assert "No snapshots in this range" in page and "<svg" not in page
    assert client.get("/api/v1/groups/idle/lag", headers=viewer).get_json()["points"] == []
    page = _get(client, "/topics/quiet/volume?range=7d", viewer)
    assert "No watermark captures in this range" in page and "<svg" not in page


def test_a_name_of_dots_and_a_group_on_two_topics(
    client: FlaskClient, names: tuple[TopicInfo, GroupInfo], store: Store, viewer: dict[str, str]
) -> None:
    other = TopicAdmin(store=store).create("refunds", 1)
    seed.group(store, "billing", other)
    dots = seed.group(store, "..", other)
    now = store.messages.now()
    seed_browse.series_snapshots(store, dots, 1, 3, 60.0, now)
    # billing consumes two topics now: which one must be said.
    _get(client, "/groups/billing/lag", viewer, 400)
    page = _get(client, "/groups/billing/lag?topic=orders&range=24h", viewer)
    assert 'href="/groups/billing/lag?range=7d&amp;topic=orders"' in page
    assert 'href="/groups/billing?topic=orders"' in page
    detail = _get(client, "/groups/billing?topic=orders", viewer)
    assert 'href="/groups/billing/lag?topic=orders"' in detail
    # A name of dots only goes in the query, links included.
    body = client.get("/api/v1/group/lag?name=..", headers=viewer).get_json()
    assert [p["lag"] for p in body["points"]] == [0, 1, 2]
    page = _get(client, "/group/lag?name=..&range=7d", viewer)
    assert 'href="/group/lag?name=..&amp;range=1h"' in page
