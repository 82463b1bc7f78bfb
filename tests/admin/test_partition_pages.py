"""Adding partitions through the console: preview, confirm by typing the topic's name,
apply exactly what was previewed (once), refuse with a new preview when the topic moved
under it; admins only, bad input a 4xx that changes nothing; every apply audited."""

from __future__ import annotations

import html
import re

import pytest
from flask.testing import FlaskClient

from ems.store import Store
from ems.types import TopicInfo
from ems.values.accounts import AuditFilter
from tests.admin.conftest import bearer, csrf_token, login
from tests.integration import seed

_PLAN = re.compile(r'name="plan" value="([^"]+)"')


@pytest.fixture
def orders(store: Store) -> TopicInfo:
    """Topic "orders" (2 partitions, offsets 0-9 in each) read by group "billing"."""
    topic = store.topics.create("orders", 2, 24, 1024)
    for p in (0, 1):
        seed.messages(store, topic, p, range(10), age_hours=1)
    seed.group(store, "billing", topic)
    return topic


def _signed_in(client: FlaskClient, name: str) -> FlaskClient:
    assert login(client, name).status_code == 302
    return client


def _preview(client: FlaskClient, **fields: str) -> tuple[int, str, str | None]:
    data = {"csrf_token": csrf_token(client), "topic": "orders", **fields}
    response = client.post("/partitions/preview", data=data)
    page = response.get_data(as_text=True)
    found = _PLAN.search(page)
    return response.status_code, page, found.group(1) if found else None


def _apply(client: FlaskClient, plan: str, confirm: str = "orders") -> tuple[int, str]:
    data = {"csrf_token": csrf_token(client), "plan": plan, "confirm": confirm}
    response = client.post("/partitions/apply", data=data)
    return response.status_code, response.get_data(as_text=True)


def _count(store: Store) -> int:
    return store.topics.get("orders").partitions


def test_preview_then_confirm_adds_the_partitions_once(
    client: FlaskClient, users: dict[str, str], store: Store, orders: TopicInfo
) -> None:
    ada = _signed_in(client, "ada")
    assert 'id="add-partitions"' in ada.get("/topics/orders").get_data(as_text=True)
    status, page, plan = _preview(ada, partitions="5")
    assert status == 200 and plan is not None
    assert "From <strong>2</strong> to <strong>5</strong>" in page
    assert "billing" in page and "cannot be removed" in page
    assert _count(store) == 2  # a preview changes nothing

    status, page = _apply(ada, plan, confirm="Orders")
    assert status == 400 and "type 'orders' exactly" in html.unescape(page)
    assert _count(store) == 2

    status, page = _apply(ada, plan)
    assert status == 200, page
    assert "has 5 partitions (was 2)" in page
    assert _count(store) == 5
    entry = store.audit.search(AuditFilter(action="add_partitions"), 10)[0]
    assert (entry.actor, entry.outcome, entry.target) == ("ada", "ok", "topic:orders")
    assert (entry.before, entry.after) == ("2", "5")

    status, page = _apply(ada, plan)  # a preview applies once
    assert status == 409 and "applied already" in page
    assert _count(store) == 5


def test_a_topic_that_moved_since_the_preview_is_refused_with_a_new_one(
    client: FlaskClient, users: dict[str, str], store: Store, orders: TopicInfo
) -> None:
    ada = _signed_in(client, "ada")
    _, _, first = _preview(ada, partitions="6")
    _, _, second = _preview(ada, partitions="4")
    assert first and second
    assert _apply(ada, second)[0] == 200  # 2 -> 4
    status, page = _apply(ada, first)  # previewed from 2
    assert status == 409
    assert "Nothing was changed" in page and "has 4 partitions now" in html.unescape(page)
    assert "From <strong>4</strong> to <strong>6</strong>" in page
    assert _count(store) == 4
    refused = store.audit.search(AuditFilter(action="add_partitions"), 10)[0]
    assert refused.outcome == "refused"


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({"partitions": "2"}, 400),
        ({"partitions": "1"}, 400),
        ({"partitions": "0"}, 400),
        ({"partitions": "-3"}, 400),
        ({"partitions": "five"}, 400),
        ({"partitions": "99999"}, 400),
        ({"partitions": "5", "topic": "missing"}, 404),
        ({"partitions": "5", "topic": "<b>x"}, 400),
    ],
)
def test_bad_input_changes_nothing(
    client: FlaskClient,
    users: dict[str, str],
    store: Store,
    orders: TopicInfo,
    fields: dict[str, str],
    status: int,
) -> None:
    ada = _signed_in(client, "ada")
    found, page, plan = _preview(ada, **fields)
    assert found == status and plan is None
    assert "<b>x" not in page  # escaped where shown
    assert _count(store) == 2


def test_operators_and_viewers_may_not(
    client: FlaskClient, users: dict[str, str], store: Store, orders: TopicInfo
) -> None:
    otto = _signed_in(client, "otto")
    assert 'id="add-partitions"' not in otto.get("/topics/orders").get_data(as_text=True)
    assert _preview(otto, partitions="5")[0] == 403
    assert _count(store) == 2


def test_the_json_api(
    client: FlaskClient, tokens: dict[str, str], store: Store, orders: TopicInfo
) -> None:
    admin = bearer(tokens["admin"])
    body = {"topic": "orders", "partitions": 3}
    response = client.post("/api/v1/partitions/preview", json=body, headers=admin)
    assert response.status_code == 200
    found = response.get_json()
    assert found["confirm"] == "orders"
    assert found["preview"]["before"] == 2 and found["preview"]["after"] == 3
    assert found["preview"]["watermarks"] == [10, 10]
    applied = client.post(
        "/api/v1/partitions/apply",
        json={"plan": found["plan"], "confirm": "orders"},
        headers=admin,
    )
    assert applied.status_code == 200
    assert applied.get_json()["result"]["after"] == 3
    assert _count(store) == 3
    operator = client.post(
        "/api/v1/partitions/preview", json=body, headers=bearer(tokens["operator"])
    )
    assert operator.status_code == 403
