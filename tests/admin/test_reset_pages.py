"""Offset reset through the console: preview, confirm by typing the group's name, apply
exactly what was previewed (once), and refuse with a new preview when the state moved
under it. Bad input is a 4xx and changes nothing; every apply is in the audit trail."""

from __future__ import annotations

import html
import re

import pytest
from flask import Flask
from flask.testing import FlaskClient

from ems.consumer.groups import ensure_group
from ems.store import Store
from ems.types import GroupInfo, TopicInfo
from ems.values.accounts import AuditFilter
from tests.admin.conftest import MakeApp, bearer, csrf_token, login
from tests.integration import seed

_PLAN = re.compile(r'name="plan" value="([^"]+)"')


@pytest.fixture
def orders(store: Store) -> tuple[TopicInfo, GroupInfo]:
    """Topic "orders" (2 partitions, offsets 0-9 each) and group "billing" at 6 and 8."""
    topic = store.topics.create("orders", 2, 24, 1024)
    for p in (0, 1):
        seed.messages(store, topic, p, range(10), age_hours=1)
    group = seed.group(store, "billing", topic)
    seed.commit(store, group, 0, 6)
    seed.commit(store, group, 1, 8)
    return topic, group


@pytest.fixture
def otto(client: FlaskClient, users: dict[str, str]) -> FlaskClient:
    """The client signed in as the operator."""
    assert login(client, "otto").status_code == 302
    return client


def _cursors(store: Store, group: GroupInfo) -> dict[int, int]:
    return store.groups.offsets(group.id)


def _preview(client: FlaskClient, **fields: str) -> tuple[int, str, str | None]:
    data = {"csrf_token": csrf_token(client), "group": "billing", **fields}
    response = client.post("/reset/preview", data=data)
    page = response.get_data(as_text=True)
    found = _PLAN.search(page)
    return response.status_code, page, found.group(1) if found else None


def _apply(client: FlaskClient, plan: str, confirm: str = "billing") -> tuple[int, str]:
    data = {"csrf_token": csrf_token(client), "plan": plan, "confirm": confirm}
    response = client.post("/reset/apply", data=data)
    return response.status_code, response.get_data(as_text=True)


def test_preview_then_confirm_lands_the_previewed_offsets_once(
    otto: FlaskClient, store: Store, orders: tuple[TopicInfo, GroupInfo]
) -> None:
    _, group = orders
    status, page, plan = _preview(otto, to="earliest")
    assert status == 200 and plan is not None
    assert "replays 6" in page and "replays 8" in page
    assert "14 messages replayed" in page
    assert _cursors(store, group) == {0: 6, 1: 8}  # a preview changes nothing

    status, page = _apply(otto, plan, confirm="Billing")
    assert status == 400 and "type 'billing' exactly" in html.unescape(page)
    assert _cursors(store, group) == {0: 6, 1: 8}

    status, page = _apply(otto, plan)  # the same preview, now confirmed
    assert status == 200, page
    assert "Done: 2 partitions" in page
    assert _cursors(store, group) == {0: 0, 1: 0}
    entry = store.audit.search(AuditFilter(action="reset_offsets"), 10)[0]
    assert (entry.actor, entry.outcome, entry.target) == (
        "otto",
        "ok",
        "group:billing topic:orders",
    )
    assert entry.before == '{"0": 6, "1": 8}' and entry.after == '{"0": 0, "1": 0}'

    seed.commit(store, group, 0, 7)
    status, page = _apply(otto, plan)  # a preview applies once
    assert status == 409 and "applied already" in page
    assert _cursors(store, group) == {0: 7, 1: 0}


def test_latest_is_the_high_watermark_shown_not_the_one_at_apply(
    otto: FlaskClient, store: Store, orders: tuple[TopicInfo, GroupInfo]
) -> None:
    topic, group = orders
    _, page, plan = _preview(otto, to="latest", partitions="1")
    assert plan is not None and "skips 2" in page
    seed.messages(store, topic, 1, range(10, 15), age_hours=0)
    status, _ = _apply(otto, plan)
    assert status == 200
    assert _cursors(store, group) == {0: 6, 1: 10}


def test_a_shift_previews_and_lands_each_cursor_moved(
    otto: FlaskClient, store: Store, orders: tuple[TopicInfo, GroupInfo]
) -> None:
    _, group = orders
    status, page, plan = _preview(otto, to="shift", shift="-3")
    assert status == 200 and plan is not None, page
    assert "replays 3" in page and "a shift of -3 messages" in page
    assert _cursors(store, group) == {0: 6, 1: 8}
    status, _ = _apply(otto, plan)
    assert status == 200
    assert _cursors(store, group) == {0: 3, 1: 5}
    status, page, plan = _preview(otto, to="shift", shift="+1")
    assert status == 400 and "shift must be an integer" in page and plan is None


def test_consumption_since_the_preview_is_accepted_and_a_step_back_refused(
    otto: FlaskClient, store: Store, orders: tuple[TopicInfo, GroupInfo]
) -> None:
    _, group = orders
    _, _, plan = _preview(otto, to="offset", offset="9")
    assert plan is not None
    seed.commit(store, group, 0, 7)  # a member consumed one more: fewer skipped
    assert _apply(otto, plan)[0] == 200
    assert _cursors(store, group) == {0: 9, 1: 9}

    _, _, plan = _preview(otto, to="offset", offset="2")
    assert plan is not None
    seed.commit(store, group, 1, 4)  # another reset moved partition 1 back
    status, page = _apply(otto, plan)
    assert status == 409
    assert "went back from 9 to 4" in page
    fresh = _PLAN.search(page)
    assert fresh is not None and fresh.group(1) != plan  # a new preview, of the new state
    assert _cursors(store, group) == {0: 9, 1: 4}
    refused = store.audit.search(AuditFilter(action="reset_offsets"), 10)[0]
    assert refused.outcome == "refused"
    assert _apply(otto, fresh.group(1))[0] == 200
    assert _cursors(store, group) == {0: 2, 1: 2}


def test_a_target_purged_by_retention_is_refused(
    otto: FlaskClient, store: Store, orders: tuple[TopicInfo, GroupInfo]
) -> None:
    topic, group = orders
    _, _, plan = _preview(otto, to="offset", offset="1")
    assert plan is not None
    # What a purge does: the rows go, and the low watermark rises past them.
    seed.sql(store, "DELETE FROM message WHERE topic_id = %s AND offset_no < 3", (topic.id,))
    seed.sql(
        store,
        "INSERT INTO partition_low (topic_id, partition_no, low_offset) VALUES (%s, 0, 3)",
        (topic.id,),
    )
    status, page = _apply(otto, plan)
    assert status == 409 and "offset 1 now lies outside [3, 10]" in page
    assert "cannot be previewed again" in page
    assert _PLAN.search(page) is None
    assert _cursors(store, group) == {0: 6, 1: 8}


def test_a_preview_is_its_actors_and_expires(
    make_app: MakeApp, store: Store, users: dict[str, str], orders: tuple[TopicInfo, GroupInfo]
) -> None:
    _, group = orders
    app: Flask = make_app()
    otto, ada = app.test_client(), app.test_client()
    login(otto, "otto")
    login(ada, "ada")
    _, _, plan = _preview(otto, to="earliest")
    assert plan is not None
    status, page = _apply(ada, plan)
    assert status == 409 and "issued to someone else" in page
    seed.sql(store, "UPDATE admin_plan SET expires_at = NOW(6) - INTERVAL 1 SECOND")
    status, page = _apply(otto, plan)
    assert status == 409 and "expired" in page
    for forged in ("x" * 43, "short", "<script>" * 6):
        assert _apply(otto, forged)[0] == 409
    assert _cursors(store, group) == {0: 6, 1: 8}


@pytest.mark.parametrize(
    ("fields", "status", "says"),
    [
        ({"group": ""}, 400, "group is required"),
        ({"group": "nobody", "to": "earliest"}, 404, "nobody"),
        ({"to": "yesterday"}, 400, "to must be one of"),
        ({"to": "offset", "offset": "ten"}, 400, "non-negative integer"),
        ({"to": "offset", "offset": "-1"}, 400, "non-negative integer"),
        ({"to": "offset", "offset": "11"}, 400, "outside [earliest, high watermark]"),
        ({"to": "datetime", "datetime": "the day before"}, 400, "datetime"),
        ({"to": "shift", "shift": "1.5"}, 400, "shift must be an integer"),
        ({"to": "shift", "shift": "-"}, 400, "shift must be an integer"),
        ({"to": "earliest", "partitions": "0;1"}, 400, "partitions must be"),
        ({"to": "earliest", "partitions": "7"}, 404, "no partition 7"),
        ({"to": "earliest", "partitions": "0-99999"}, 400, "partitions"),
        ({"to": "earliest", "topic": "nope"}, 404, "nope"),
        ({"to": "earliest", "group": "<script>alert(1)</script>"}, 400, "&lt;script&gt;"),
    ],
)
def test_bad_input_is_a_4xx_and_changes_nothing(
    otto: FlaskClient,
    store: Store,
    orders: tuple[TopicInfo, GroupInfo],
    fields: dict[str, str],
    status: int,
    says: str,
) -> None:
    _, group = orders
    got, page, plan = _preview(otto, **fields)
    assert got == status, page
    assert says in page
    assert plan is None
    assert _cursors(store, group) == {0: 6, 1: 8}
    assert seed.sql(store, "SELECT COUNT(*) FROM admin_plan") == [(0,)]


def test_a_broadcast_group_has_nothing_to_reset(
    otto: FlaskClient, store: Store, orders: tuple[TopicInfo, GroupInfo]
) -> None:
    topic, _ = orders
    ensure_group(store, "fanout", topic, seed.options(broadcast=True))
    assert "broadcast group" in otto.get("/reset?group=fanout").get_data(as_text=True)
    status, page, _ = _preview(otto, group="fanout", to="earliest")
    assert status == 400 and "broadcast" in page


def test_the_form_offers_a_reset_only_to_who_may(
    make_app: MakeApp, users: dict[str, str], orders: tuple[TopicInfo, GroupInfo]
) -> None:
    for name, mode, offered in (
        ("vera", {}, False),
        ("otto", {}, True),
        ("ada", {"admin_read_only": True}, False),
    ):
        client = make_app(**mode).test_client()
        login(client, name)
        page = client.get("/reset?group=billing").get_data(as_text=True)
        assert ('action="/reset/preview"' in page) == offered, name
        group_page = client.get("/groups/billing").get_data(as_text=True)
        assert ('id="reset-link"' in group_page) == offered, name


def test_the_json_api(
    client: FlaskClient,
    store: Store,
    tokens: dict[str, str],
    orders: tuple[TopicInfo, GroupInfo],
) -> None:
    _, group = orders
    operator = bearer(tokens["operator"])
    body = {"group": "billing", "to": "offset", "offset": 3, "partitions": [0]}
    response = client.post("/api/v1/reset/preview", json=body, headers=operator)
    assert response.status_code == 200
    found = response.get_json()
    assert found["confirm"] == "billing"
    assert found["preview"]["changes"] == [{"partition": 0, "current": 6, "new": 3, "change": -3}]
    wrong = client.post(
        "/api/v1/reset/apply", json={"plan": found["plan"], "confirm": "x"}, headers=operator
    )
    assert wrong.status_code == 400 and "exactly" in wrong.get_json()["error"]
    applied = client.post(
        "/api/v1/reset/apply",
        json={"plan": found["plan"], "confirm": "billing"},
        headers=operator,
    )
    assert applied.status_code == 200
    assert applied.get_json()["result"]["changes"][0]["new"] == 3
    assert _cursors(store, group) == {0: 3, 1: 8}
    viewer = client.post("/api/v1/reset/preview", json=body, headers=bearer(tokens["viewer"]))
    assert viewer.status_code == 403
    assert client.post("/api/v1/reset/preview", data="[1]", headers=operator).status_code == 400
