"""The alarms page and its API: open, closed or all alarms newest first, by group or group
prefix, keyset pages; acknowledging several at once with an outcome each (mixed ones
too), who acknowledged kept on the alarm and every acknowledgement in the audit trail;
bad input a 400 with nothing changed; read-only mode and viewers acknowledge nothing."""

from __future__ import annotations

import html
import re

import pytest
from flask import Flask
from flask.testing import FlaskClient
from markupsafe import escape

from ems.alarms.desk import check_ack_ids, check_state
from ems.exceptions import InvalidInput
from ems.ops.accounts import AuditLog
from ems.store import Store
from ems.types import GroupInfo, TopicInfo
from ems.values.accounts import AuditFilter
from ems.values.alarms import Condition
from tests.admin.conftest import MakeApp, bearer, csrf_token, login
from tests.integration import seed
from tests.json_times import is_json_time

_NEXT = re.compile(r'<a class="next" rel="next" href="([^"]+)"')
_CHECKBOX = re.compile(r'<input type="checkbox" name="id" value="(\d+)"')


@pytest.fixture
def groups(store: Store) -> dict[str, tuple[GroupInfo, TopicInfo]]:
    """billing and billing-eu on orders, shipping on parcels."""
    orders = store.topics.create("orders", 4, 24, 1024)
    parcels = store.topics.create("parcels", 2, 24, 1024)
    return {
        "billing": (seed.group(store, "billing", orders), orders),
        "billing-eu": (seed.group(store, "billing-eu", orders), orders),
        "shipping": (seed.group(store, "shipping", parcels), parcels),
    }


def open_alarm(
    store: Store, group: GroupInfo, topic: TopicInfo, n: int, message: str = "lag is high"
) -> int:
    """An open lag alarm of the group on partition n (one per n)."""
    found = store.alarms.open(
        Condition(
            kind="lag",
            key=f"lag:{group.id}:{n}",
            group_id=group.id,
            topic_id=topic.id,
            partition=n,
            value=5000.0 + n,
            threshold=1000.0,
            message=message,
        )
    )
    assert found is not None
    return found


def _ids(response_json: dict[str, object]) -> list[int]:
    items = response_json["items"]
    assert isinstance(items, list)
    return [item["id"] for item in items]


def _status(store: Store, alarm_id: int) -> tuple[str, str | None]:
    rows = seed.sql(store, "SELECT status, acknowledged_by FROM alarm WHERE id = %s", (alarm_id,))
    return rows[0][0], rows[0][1]


def _acks(admin_settings_store: Store) -> list[tuple[str, str]]:
    rows = seed.sql(
        admin_settings_store,
        "SELECT target, outcome FROM admin_audit WHERE action = 'alarm.ack' ORDER BY id",
    )
    return [(r[0], r[1]) for r in rows]


def test_open_closed_and_all_newest_first_by_group_or_prefix(
    client: FlaskClient,
    store: Store,
    tokens: dict[str, str],
    groups: dict[str, tuple[GroupInfo, TopicInfo]],
) -> None:
    viewer = bearer(tokens["viewer"])
    billing = open_alarm(store, *groups["billing"], 0)
    eu = open_alarm(store, *groups["billing-eu"], 1)
    shipping = open_alarm(store, *groups["shipping"], 0)
    closed = open_alarm(store, *groups["billing"], 2)
    assert store.alarms.clear(closed)

    def ids(query: str) -> list[int]:
        response = client.get("/api/v1/alarms" + query, headers=viewer)
        assert response.status_code == 200, response.get_json()
        return _ids(response.get_json())

    assert ids("") == [shipping, eu, billing]
    assert ids("?state=open") == [shipping, eu, billing]
    assert ids("?state=closed") == [closed]
    assert ids("?state=all") == [closed, shipping, eu, billing]
    assert ids("?state=all&group=billing") == [closed, billing]
    assert ids("?state=all&prefix=billing") == [closed, eu, billing]
    assert ids("?prefix=billing_") == []  # literal: _ is no wildcard
    assert ids("?group=nobody") == []

    item = client.get("/api/v1/alarms?group=shipping", headers=viewer).get_json()["items"][0]
    assert item["kind"] == "lag"
    assert (item["group"], item["topic"], item["partition"]) == ("shipping", "parcels", 0)
    assert is_json_time(item["opened_at"])
    assert item["cleared_at"] is None and item["acknowledged_by"] is None

    page = client.get("/alarms?state=all", headers=viewer).get_data(as_text=True)
    assert page.index(f'<td data-label="id">{closed}</td>') < page.index(
        f'<td data-label="id">{billing}</td>'
    )
    assert "still open" in page and " UTC" in page
    assert '<option value="all" selected>' in page


def test_pages_follow_the_keyset_cursor(
    client: FlaskClient,
    store: Store,
    tokens: dict[str, str],
    groups: dict[str, tuple[GroupInfo, TopicInfo]],
) -> None:
    viewer = bearer(tokens["viewer"])
    made = [open_alarm(store, *groups["billing"], n) for n in range(7)]
    seen: list[int] = []
    path: str | None = "/api/v1/alarms?limit=3"
    while path is not None:
        found = client.get(path, headers=viewer).get_json()
        assert len(found["items"]) <= 3
        seen += _ids(found)
        after = found["next_before"]
        path = None if after is None else f"/api/v1/alarms?limit=3&before={after}"
    assert seen == made[::-1]

    # The page's "next page" links walk the same way, keeping the filters.
    seen_html: list[str] = []
    link: str | None = "/alarms?group=billing&limit=3"
    while link is not None:
        text = client.get(link, headers=viewer).get_data(as_text=True)
        seen_html += re.findall(r'<td data-label="id">(\d+)</td>', text)
        found_link = _NEXT.search(text)
        link = html.unescape(found_link.group(1)) if found_link else None
        if link is not None:
            assert "group=billing" in link and "limit=3" in link
    assert [int(i) for i in seen_html] == made[::-1]


@pytest.mark.parametrize(
    "query",
    [
        "state=bogus",
        "state=OPEN",
        "before=abc",
        "before=-1",
        "before=0",
        "before=" + "9" * 30,
        "limit=0",
        "limit=101",
        "limit=x",
        "group=no%20spaces",
        "group=" + "g" * 129,
        "prefix=" + "p" * 129,
    ],
)
def test_bad_parameters_are_a_400(client: FlaskClient, tokens: dict[str, str], query: str) -> None:
    for path in ("/api/v1/alarms", "/alarms"):
        response = client.get(f"{path}?{query}", headers=bearer(tokens["viewer"]))
        assert response.status_code == 400, (path, query)
        if path.startswith("/api/"):
            assert set(response.get_json()) == {"error"}


def test_an_operator_acknowledges_through_the_page(
    client: FlaskClient,
    store: Store,
    users: dict[str, str],
    groups: dict[str, tuple[GroupInfo, TopicInfo]],
) -> None:
    first = open_alarm(store, *groups["billing"], 0)
    second = open_alarm(store, *groups["shipping"], 1)
    login(client, "otto")
    page = client.get("/alarms").get_data(as_text=True)
    assert sorted(int(i) for i in _CHECKBOX.findall(page)) == [first, second]
    assert "Acknowledge selected" in page

    response = client.post(
        "/alarms/ack", data={"id": [str(first), str(second)], "csrf_token": csrf_token(client)}
    )
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    assert "All 2 alarms were acknowledged." in text
    assert text.count(">acknowledged</span>") == 2
    assert _status(store, first) == ("cleared", "otto")
    assert _status(store, second) == ("cleared", "otto")

    closed = client.get("/api/v1/alarms?state=closed", headers={}).get_json()["items"]
    assert {a["acknowledged_by"] for a in closed} == {"otto"}
    assert all(is_json_time(a["acknowledged_at"]) for a in closed)
    page = client.get("/alarms?state=closed").get_data(as_text=True)
    assert '<span class="ack-by">otto</span>' in page
    assert _CHECKBOX.search(page) is None  # a closed alarm has nothing to acknowledge

    entries = AuditLog(store=store).search(AuditFilter(action="alarm.ack"))
    assert {(e.target, e.outcome, e.actor) for e in entries} == {
        (f"alarm:{first}", "ok", "otto"),
        (f"alarm:{second}", "ok", "otto"),
    }
    entry = next(e for e in entries if e.target == f"alarm:{first}")
    assert entry.params["id"] == first and entry.params["outcome"] == "acknowledged"
    assert entry.params["request"] == [first, second]
    assert entry.before is not None and '"status": "open"' in entry.before
    assert entry.after is not None and '"acknowledged_by": "otto"' in entry.after
    assert entry.detail == "acknowledged"


def test_mixed_outcomes_say_which_failed(
    client: FlaskClient,
    store: Store,
    tokens: dict[str, str],
    groups: dict[str, tuple[GroupInfo, TopicInfo]],
) -> None:
    operator = bearer(tokens["operator"])
    fresh = open_alarm(store, *groups["billing"], 0)
    acked = open_alarm(store, *groups["billing"], 1)
    scanned = open_alarm(store, *groups["billing"], 2)
    assert store.alarms.clear(acked, acknowledged=True, by="ada")
    assert store.alarms.clear(scanned)

    ids = [fresh, acked, 424242, scanned, fresh]
    response = client.post("/api/v1/alarms/ack", json={"ids": ids}, headers=operator)
    assert response.status_code == 200
    body = response.get_json()
    assert body["ok"] is False
    assert body["acknowledged"] == 1
    outcomes = [(r["id"], r["outcome"]) for r in body["results"]]
    assert outcomes == [
        (fresh, "acknowledged"),
        (acked, "already_acknowledged"),
        (424242, "unknown"),
        (scanned, "already_closed"),
    ]
    messages = [r["message"] for r in body["results"]]
    assert messages[0] == "acknowledged"
    assert re.fullmatch(
        r"already acknowledged by ada at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", messages[1]
    )
    assert messages[2] == "unknown alarm id 424242"
    assert messages[3].startswith("already closed at ") and messages[3].endswith(" UTC")
    assert body["results"][2]["alarm"] is None
    assert _status(store, fresh) == ("cleared", "token:t-operator")
    assert _status(store, acked) == ("cleared", "ada")
    assert _acks(store) == [
        (f"alarm:{fresh}", "ok"),
        (f"alarm:{acked}", "refused"),
        ("alarm:424242", "refused"),
        (f"alarm:{scanned}", "refused"),
    ]

    # The page says the same, and does not claim success.
    again = open_alarm(store, *groups["shipping"], 0)
    page = client.post("/alarms/ack", data={"id": [str(again), "7777"]}, headers=operator)
    text = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "1 of 2 alarms acknowledged; the others were not" in text
    assert "unknown alarm id 7777" in text
    assert "were acknowledged." not in text


@pytest.mark.parametrize(
    "form",
    [
        {},
        {"id": ""},
        {"id": "abc"},
        {"id": "-1"},
        {"id": "0"},
        {"id": "1.5"},
        {"id": "9" * 30},
        {"id": ["1", "x"]},
        {"id": [str(n) for n in range(1, 102)]},
    ],
)
def test_bad_ids_change_nothing(
    client: FlaskClient,
    store: Store,
    tokens: dict[str, str],
    groups: dict[str, tuple[GroupInfo, TopicInfo]],
    form: dict[str, object],
) -> None:
    alarm = open_alarm(store, *groups["billing"], 0)
    operator = bearer(tokens["operator"])
    for path in ("/alarms/ack", "/api/v1/alarms/ack"):
        response = client.post(path, data=form, headers=operator)
        assert response.status_code == 400, (path, form)
    assert _status(store, alarm) == ("open", None)
    assert _acks(store) == []


@pytest.mark.parametrize(
    "body",
    [[1], {"ids": "1"}, {"ids": []}, {"ids": [True]}, {"ids": [1.0]}, {"ids": ["1"]}, {"id": [1]}],
)
def test_bad_json_ids_change_nothing(
    client: FlaskClient,
    store: Store,
    tokens: dict[str, str],
    groups: dict[str, tuple[GroupInfo, TopicInfo]],
    body: object,
) -> None:
    alarm = open_alarm(store, *groups["billing"], 0)
    response = client.post("/api/v1/alarms/ack", json=body, headers=bearer(tokens["operator"]))
    assert response.status_code == 400, body
    assert set(response.get_json()) == {"error"}
    assert _status(store, alarm) == ("open", None)
    malformed = client.post(
        "/api/v1/alarms/ack",
        data="{not json",
        content_type="application/json",
        headers=bearer(tokens["operator"]),
    )
    assert malformed.status_code == 400
    assert _acks(store) == []


def test_a_hundred_ids_at_once_are_taken(
    client: FlaskClient,
    store: Store,
    tokens: dict[str, str],
    groups: dict[str, tuple[GroupInfo, TopicInfo]],
) -> None:
    alarm = open_alarm(store, *groups["billing"], 0)
    ids = [alarm] + [10_000 + n for n in range(99)]
    response = client.post(
        "/api/v1/alarms/ack", json={"ids": ids}, headers=bearer(tokens["operator"])
    )
    assert response.status_code == 200
    assert len(response.get_json()["results"]) == 100
    assert _status(store, alarm)[0] == "cleared"


def test_read_only_mode_and_viewers_acknowledge_nothing(
    make_app: MakeApp,
    store: Store,
    users: dict[str, str],
    tokens: dict[str, str],
    groups: dict[str, tuple[GroupInfo, TopicInfo]],
) -> None:
    alarm = open_alarm(store, *groups["billing"], 0)
    read_only: Flask = make_app(admin_read_only=True)
    client = read_only.test_client()
    login(client, "otto")
    page = client.get("/alarms").get_data(as_text=True)
    assert _CHECKBOX.search(page) is None
    assert "Acknowledge selected" not in page
    assert f'<td data-label="id">{alarm}</td>' in page
    token = csrf_token(client)
    refused = client.post("/alarms/ack", data={"id": str(alarm), "csrf_token": token})
    assert refused.status_code == 403
    api = client.post("/api/v1/alarms/ack", json={"ids": [alarm]}, headers={"X-CSRFToken": token})
    assert api.status_code == 403

    viewer = make_app().test_client()
    login(viewer, "vera")
    assert _CHECKBOX.search(viewer.get("/alarms").get_data(as_text=True)) is None
    forbidden = viewer.post(
        "/api/v1/alarms/ack", json={"ids": [alarm]}, headers={"X-CSRFToken": csrf_token(viewer)}
    )
    assert forbidden.status_code == 403
    assert _status(store, alarm) == ("open", None)
    assert _acks(store) == []


def test_a_session_needs_the_csrf_token_to_acknowledge(
    client: FlaskClient,
    store: Store,
    users: dict[str, str],
    groups: dict[str, tuple[GroupInfo, TopicInfo]],
) -> None:
    alarm = open_alarm(store, *groups["billing"], 0)
    login(client, "otto")
    assert client.post("/alarms/ack", data={"id": str(alarm)}).status_code == 400
    assert _status(store, alarm) == ("open", None)


def test_texts_are_escaped_and_the_overview_links_the_open_alarms(
    client: FlaskClient,
    store: Store,
    tokens: dict[str, str],
    groups: dict[str, tuple[GroupInfo, TopicInfo]],
) -> None:
    hostile = '<script>alert(1)</script>"><svg onload=alert(1)>'
    open_alarm(store, *groups["billing"], 0, message=hostile)
    viewer = bearer(tokens["viewer"])
    page = client.get("/alarms", headers=viewer).get_data(as_text=True)
    assert hostile not in page
    assert str(escape(hostile)) in page
    overview = client.get("/", headers=viewer).get_data(as_text=True)
    assert '<a href="/alarms?state=open">1</a>' in overview


def test_the_desk_checks_its_input() -> None:
    assert check_ack_ids([3, 1, 3]) == (3, 1)
    assert check_state("closed") == "closed"
    for bad in ([], "1", [0], [True], [1.5], list(range(1, 102)), None):
        with pytest.raises(InvalidInput):
            check_ack_ids(bad)
    with pytest.raises(InvalidInput):
        check_state("cleared")
