"""The topics and groups pages and their JSON API: keyset pages through "next page"
links, the prefix search, details with watermarks, members and per-partition lag, statuses
as words, bad input as a 4xx, names escaped and reachable, and statements per page that do
not grow with its rows."""

from __future__ import annotations

import html
import re

import pytest
from flask import Flask
from flask.testing import FlaskClient

from ems.consumer.groups import ensure_group
from ems.store import Store
from ems.topics import TopicAdmin
from tests.admin.conftest import bearer
from tests.integration import seed, seed_browse
from tests.integration.seed_browse import counting
from tests.integration.sql_seed import seed_all
from tests.json_times import is_json_time

NEW_PATHS = [
    "/topics",
    "/api/v1/topics",
    "/topics/orders",
    "/api/v1/topics/orders",
    "/topic?name=orders",
    "/api/v1/topic?name=orders",
    "/groups",
    "/api/v1/groups",
    "/groups/billing",
    "/api/v1/groups/billing",
    "/group?name=billing",
    "/api/v1/group?name=billing",
]
_NEXT = re.compile(r'<a class="next" rel="next" href="([^"]+)"')
_TOPIC_LINK = re.compile(r'<a class="topic" href="([^"]+)">([^<]*)</a>')
_GROUP_LINK = re.compile(r'<a class="group" href="([^"]+)">([^<]*)</a>')


@pytest.fixture
def viewer(tokens: dict[str, str]) -> dict[str, str]:
    return bearer(tokens["viewer"])


def _text(client: FlaskClient, path: str, headers: dict[str, str]) -> str:
    response = client.get(path, headers=headers)
    assert response.status_code == 200, (path, response.status_code)
    return response.get_data(as_text=True)


def test_every_role_reads_them_and_nobody_signed_in_does(
    client: FlaskClient, store: Store, tokens: dict[str, str]
) -> None:
    seed_all(store)
    for role, secret in tokens.items():
        for path in NEW_PATHS:
            response = client.get(path, headers=bearer(secret))
            assert response.status_code == 200, (role, path)
            assert response.is_json == path.startswith("/api/")
    for path in NEW_PATHS:
        response = client.get(path)
        if path.startswith("/api/"):
            assert response.status_code == 401, path
            assert set(response.get_json()) == {"error"}
        else:
            assert response.status_code == 302, path
            assert response.headers["Location"].startswith("/login?next=")


def test_next_links_visit_every_topic_once(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    names = [f"t{i:02d}" for i in range(23)]
    seed_browse.topics(store, names, partitions=1)
    seen: list[str] = []
    path: str | None = "/topics?limit=5"
    pages = 0
    while path is not None:
        page = _text(client, path, viewer)
        seen += [html.unescape(name) for _, name in _TOPIC_LINK.findall(page)]
        found = _NEXT.search(page)
        path = html.unescape(found.group(1)) if found else None
        pages += 1
    assert seen == names
    assert pages == 5  # 5 + 5 + 5 + 5 + 3, and no link after the last
    # The API's cursor does the same.
    seen = []
    after: str | None = None
    while True:
        query = {"limit": "7"} | ({"after": after} if after else {})
        body = client.get("/api/v1/topics", query_string=query, headers=viewer).get_json()
        seen += [t["name"] for t in body["items"]]
        after = body["next_after"]
        if after is None:
            break
    assert seen == names


def test_next_links_visit_every_group_once_and_keep_the_prefix(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    t1, t2 = seed_browse.topics(store, ["t1", "t2"], partitions=1)
    expected = []
    for i in range(7):
        for topic in (t1, t2) if i % 3 == 0 else (t1,):
            ensure_group(store, f"g{i}", topic, seed.options())
            expected.append((f"g{i}", topic.name))
    ensure_group(store, "other", t1, seed.options())
    seen: list[tuple[str, str]] = []
    path: str | None = "/groups?prefix=g&limit=2"
    while path is not None:
        page = _text(client, path, viewer)
        groups = [html.unescape(n) for _, n in _GROUP_LINK.findall(page)]
        topics = [html.unescape(n) for _, n in _TOPIC_LINK.findall(page)]
        seen += list(zip(groups, topics, strict=True))
        found = _NEXT.search(page)
        path = html.unescape(found.group(1)) if found else None
        if path is not None:
            assert "prefix=g" in path and "limit=2" in path
    assert seen == expected


def test_the_prefix_search(client: FlaskClient, store: Store, viewer: dict[str, str]) -> None:
    made = seed_browse.topics(store, ["a_b", "ab", "b_a"], partitions=1)
    ensure_group(store, "g_1", made[0], seed.options())
    ensure_group(store, "gx1", made[0], seed.options())
    page = _text(client, "/topics?prefix=a_", viewer)
    assert [n for _, n in _TOPIC_LINK.findall(page)] == ["a_b"]
    assert 'value="a_"' in page  # the search box keeps what was typed
    body = client.get("/api/v1/topics?prefix=a", headers=viewer).get_json()
    assert [t["name"] for t in body["items"]] == ["a_b", "ab"]
    page = _text(client, "/groups?prefix=g_", viewer)
    assert [n for _, n in _GROUP_LINK.findall(page)] == ["g_1"]
    body = client.get("/api/v1/groups?prefix=%25", headers=viewer).get_json()
    assert body == {"items": [], "next_after": None}


def test_topic_detail(client: FlaskClient, store: Store, viewer: dict[str, str]) -> None:
    seed_all(store)
    body = client.get("/api/v1/topics/orders", headers=viewer).get_json()
    assert [
        (p["partition"], p["low_watermark"], p["high_watermark"], p["stored_offsets"])
        for p in body["partitions"]
    ] == [(0, 0, 10, 10), (1, 0, 8, 8), (2, 2, 6, 4), (3, 4, 4, 0)]
    assert body["summary"]["retention_hours"] == 168
    assert is_json_time(body["summary"]["created_at"])
    assert [g["name"] for g in body["groups"]] == ["audit", "billing"]
    page = _text(client, "/topics/orders", viewer)
    assert "168 hours" in page
    assert [n for _, n in _GROUP_LINK.findall(page)] == ["audit", "billing"]
    assert "/groups/billing?topic=orders" in page
    payments = _text(client, "/topics/payments", viewer)
    assert "never written" in payments
    assert "No group consumes this topic." in payments


def test_group_detail_with_leader_members_and_partitions(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    seeded = seed_all(store)
    assert store.leases.renew("c-live", 30, cpu_percent=150.0, load_rate=12.5)
    seed_browse.report(store, seeded.billing, {0: "STOP", 1: "OK", 2: "OK", 3: "OK"}, "ERR")
    body = client.get("/api/v1/groups/billing", headers=viewer).get_json()
    assert (body["mode"], body["status"], body["total_lag"]) == ("cluster", "ERR", 8)
    assert body["leader"]["client_id"] == "c-live"
    assert is_json_time(body["leader"]["lease_expires_at"])
    members = {m["client_id"]: m for m in body["members"]}
    assert (members["c-live"]["cpu_percent"], members["c-live"]["load_rate"]) == (150.0, 12.5)
    assert [(p["committed_offset"], p["lag"], p["status"]) for p in body["partitions"]] == [
        (7, 3, "STOP"),
        (3, 5, "OK"),
        (6, 0, "OK"),
        (4, 0, "OK"),
    ]
    page = _text(client, "/groups/billing?topic=orders", viewer)
    assert "epoch 4" in page
    assert "host-a" in page and "150 %" in page and "12.5 msg/s" in page
    assert re.search(
        r'<span title="\d+ s left"><time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ">'
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time></span>",
        page,
    )
    assert '<span class="status status-err">ERR</span>' in page
    assert '<span class="status status-stop">STOP</span>' in page
    assert "not reported" in page  # c-dead sent no load


def test_a_partition_without_a_committed_offset_shows_none_and_its_real_lag(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    topic = TopicAdmin(store=store).create("t", 2)
    seed.messages(store, topic, 0, range(3, 10), age_hours=1)
    seed.messages(store, topic, 1, range(4), age_hours=1)
    group = ensure_group(store, "g", topic, seed.options())
    seed.commit(store, group, 1, 4)
    seed.sql(
        store, "DELETE FROM group_offset WHERE group_id = %s AND partition_no = 0", (group.id,)
    )
    body = client.get("/api/v1/groups/g", headers=viewer).get_json()
    p0, p1 = body["partitions"]
    assert (p0["committed_offset"], p0["lag"], p0["lag_from"]) == (None, 7, "low_watermark")
    assert (p1["committed_offset"], p1["lag"]) == (4, 0)
    page = _text(client, "/groups/g", viewer)
    row = page[page.index('id="partition-0"') : page.index('id="partition-1"')]
    committed = '<td data-label="committed offset" class="committed"><span class="none">none</span>'
    assert committed + "</td>" in row
    assert re.search(r'<td data-label="lag" class="lag">7 <span class="reason">', row)
    listed = _text(client, "/groups", viewer)
    assert "1 partitions without a committed offset" in listed


def test_statuses_are_words_with_a_class_each(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    topic = TopicAdmin(store=store).create("t", 2)
    ok, err, rewound = (ensure_group(store, n, topic, seed.options()) for n in "abc")
    ensure_group(store, "d", topic, seed.options())  # no report: unknown
    seed_browse.report(store, ok, {0: "OK", 1: "OK"}, "OK")
    seed_browse.report(store, err, {0: "STALL", 1: "WARN"}, "ERR")
    seed_browse.snapshots(store, rewound, [(90, {0: (10, 20)}), (60, {0: (4, 20)})])
    page = _text(client, "/groups", viewer)
    for word in ("OK", "ERR", "REWIND", "unknown"):
        assert f'<span class="status status-{word.lower()}">{word}</span>' in page, word
    statuses = {
        g["name"]: g["status"]
        for g in client.get("/api/v1/groups", headers=viewer).get_json()["items"]
    }
    assert statuses == {"a": "OK", "b": "ERR", "c": "REWIND", "d": "unknown"}
    detail = _text(client, "/groups/b", viewer)
    assert '<span class="status status-stall">STALL</span>' in detail
    assert '<span class="status status-warn">WARN</span>' in detail


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/topics?prefix=" + "x" * 129, 400),
        ("/groups?prefix=" + "x" * 129, 400),
        ("/topics?after=not%20a%20name", 400),
        ("/topics?after=", 400),
        ("/groups?after=g/x", 400),
        ("/groups?after=g/12345678901234567890", 400),
        ("/topics?limit=0", 400),
        ("/topics?limit=101", 400),
        ("/groups?limit=-1", 400),
        ("/groups?limit=ten", 400),
        ("/topics?limit=1e2", 400),
        ("/topics/nope", 404),
        ("/topics/bad%20name", 400),
        ("/topic", 400),
        ("/groups/nope", 404),
        ("/groups/billing?topic=nope", 404),
        ("/groups/billing?topic=bad%20name", 400),
        ("/groups/billing?topic=", 400),
        ("/groups/shared", 400),  # on two topics: ?topic= says which
        ("/group", 400),
    ],
)
def test_bad_input_is_a_4xx_as_a_page_and_as_json(
    client: FlaskClient, store: Store, viewer: dict[str, str], path: str, status: int
) -> None:
    seeded = seed_all(store)
    ensure_group(store, "shared", seeded.orders, seed.options())
    ensure_group(store, "shared", seeded.payments, seed.options())
    page = client.get(path, headers=viewer)
    assert page.status_code == status, page.get_data(as_text=True)
    assert not page.is_json
    api = client.get("/api/v1" + path, headers=viewer)
    assert api.status_code == status
    assert set(api.get_json()) == {"error"}


def test_hostile_names_are_escaped_and_reachable(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    # Names are [A-Za-z0-9._-]{1,128}: the worst are those a browser resolves as a path.
    names = ["..", ".", "-", "._-"]
    made = TopicAdmin(store=store)
    for name in names:
        topic = made.create(name, 1)
        ensure_group(store, name, topic, seed.options())
    page = _text(client, "/topics", viewer)
    links = dict((html.unescape(n), html.unescape(h)) for h, n in _TOPIC_LINK.findall(page))
    assert links == {
        "-": "/topics/-",
        ".": "/topic?name=.",
        "..": "/topic?name=..",
        "._-": "/topics/._-",
    }
    for name, link in links.items():
        assert f'<span class="name">{name}</span>' in _text(client, link, viewer)
    groups = _text(client, "/groups", viewer)
    for link, name in _GROUP_LINK.findall(groups):
        assert f'<span class="name">{name}</span>' in _text(client, html.unescape(link), viewer)
    assert "/group?name=..&amp;topic=.." in groups
    body = client.get("/api/v1/group?name=..&topic=..", headers=viewer).get_json()
    assert (body["name"], body["topic"]) == ("..", "..")
    # Free text (the prefix) comes back escaped, never as markup.
    hostile = '"><script>alert(1)</script>'
    page = client.get("/topics", query_string={"prefix": hostile}, headers=viewer)
    text = page.get_data(as_text=True)
    assert "<script>alert" not in text
    assert html.escape(hostile) in text or "&#34;&gt;&lt;script&gt;" in text


def test_topic_detail_shows_the_scheduled_messages_capped(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    seed_all(store)
    topic_id = store.topics.get("orders").id
    body = client.get("/api/v1/topics/orders", headers=viewer).get_json()
    assert (body["scheduled"], body["next_scheduled_at"]) == (0, None)
    with store.db.transaction() as cursor:
        cursor.execute(
            "INSERT INTO message_outbox (topic_id, partition_no, body, deliver_at) "
            "SELECT %s, 0, '<b>x</b>', '2099-01-01' + INTERVAL seq SECOND FROM seq_1_to_1005",
            (topic_id,),
        )
    body = client.get("/api/v1/topics/orders", headers=viewer).get_json()
    assert body["scheduled"] == 1001  # counted up to the cap, and one more
    assert body["next_scheduled_at"] == "2099-01-01T00:00:01.000000Z"
    page = _text(client, "/topics/orders", viewer)
    assert '<dd id="scheduled">1000+, the next at <time datetime="2099-01-01T00:00:01Z">' in page


@pytest.mark.parametrize(("path", "kind"), [("/topics", "topics"), ("/groups", "groups")])
def test_the_statements_of_a_page_do_not_grow_with_its_rows(
    app: Flask, store: Store, viewer: dict[str, str], path: str, kind: str
) -> None:
    client = app.test_client()
    topics = seed_browse.topics(store, ["t1", "t2"], partitions=3)

    def rows(numbers: range) -> None:
        for i in numbers:
            if kind == "topics":
                seed_browse.topics(store, [f"x{i:02d}"], partitions=2)
            else:
                group = ensure_group(store, f"g{i:02d}", topics[i % 2], seed.options())
                store.leases.register(group.id, f"c{i}", "host", i, 30)
                seed_browse.report(store, group, {0: "OK", 1: "WARN", 2: "OK"}, "WARN")

    def count(expected_rows: int) -> int:
        for target in (path, "/api/v1" + path):
            prefix = "x" if kind == "topics" else "g"
            query = f"{target}?prefix={prefix}&limit=100"
            client.get(query, headers=viewer)  # warm: the token's lookups settle
            with counting() as sent:
                response = client.get(query, headers=viewer)
            assert response.status_code == 200
            if target.startswith("/api/"):
                assert len(response.get_json()["items"]) == expected_rows
            else:
                links = _TOPIC_LINK if kind == "topics" else _GROUP_LINK
                assert len(links.findall(response.get_data(as_text=True))) == expected_rows
        return len(sent)

    rows(range(5))
    five = count(5)
    rows(range(5, 50))
    assert five >= 2  # the page and its watermarks or facts, at least
    assert count(50) == five


def test_the_groups_page_counts_retries_and_dead_letters_beside_the_lag(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    from tests.integration.test_group_list_cli import caught_up

    caught_up(store)
    page = _text(client, "/groups", viewer)
    assert re.search(
        r'class="retries">2</td>\s*<td data-label="dead letters" class="dead-letters">0', page
    )
    assert re.search(
        r'class="retries">0</td>\s*<td data-label="dead letters" class="dead-letters">6', page
    )
    body = client.get("/api/v1/groups", headers=viewer).get_json()
    assert {g["name"]: (g["retries_waiting"], g["dead_letters"]) for g in body["items"]} == {
        "audit": (0, 6),
        "billing": (2, 0),
    }
