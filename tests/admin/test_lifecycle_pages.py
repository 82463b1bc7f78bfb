"""Topic alter, topic delete, group delete and a streaming query's drop through the
console: preview, confirm by typing the name, apply once; admins only; refused (nothing
changed, in the audit trail) when groups have live members, the topic changed or the
query committed since the preview."""

from __future__ import annotations

import html
import re

import pytest
from flask import Flask
from flask.testing import FlaskClient

from ems.store import Store
from ems.types import GroupInfo, TopicInfo
from ems.values.accounts import AuditFilter
from tests.admin.conftest import MakeApp, bearer, csrf_token, login
from tests.integration import seed

_PLAN = re.compile(r'name="plan" value="([^"]+)"')


@pytest.fixture
def app(make_app: MakeApp) -> Flask:
    return make_app(metadata_max_age=0.2, purge_pause=0, purge_chunk_rows=5)


@pytest.fixture
def orders(store: Store) -> tuple[TopicInfo, GroupInfo]:
    """Topic "orders" (2 partitions, 12 messages) and its group "billing"."""
    topic = store.topics.create("orders", 2, 24, 1024)
    for p in (0, 1):
        seed.messages(store, topic, p, range(6), age_hours=1)
    group = seed.group(store, "billing", topic)
    seed.log(store, group, 0, 0, state="done")
    return topic, group


@pytest.fixture
def ada(client: FlaskClient, users: dict[str, str]) -> FlaskClient:
    assert login(client, "ada").status_code == 302
    return client


def _post(client: FlaskClient, url: str, **fields: str) -> tuple[int, str, str | None]:
    response = client.post(url, data={"csrf_token": csrf_token(client), **fields})
    page = response.get_data(as_text=True)
    found = _PLAN.search(page)
    return response.status_code, page, found.group(1) if found else None


def _stored(store: Store, topic: TopicInfo) -> int:
    rows = seed.sql(store, "SELECT COUNT(*) FROM message WHERE topic_id = %s", (topic.id,))
    return int(rows[0][0])


def _audit(store: Store, action: str) -> list[tuple[str, str, str]]:
    entries = store.audit.search(AuditFilter(action=action), 10)
    return [(e.actor, e.outcome, e.target) for e in entries]


def test_a_topic_delete_is_previewed_confirmed_and_applied_once(
    ada: FlaskClient, store: Store, orders: tuple[TopicInfo, GroupInfo]
) -> None:
    topic, _ = orders
    page = ada.get("/topics/orders").get_data(as_text=True)
    assert 'id="preview-delete"' in page and 'id="preview-alter"' in page

    status, page, plan = _post(ada, "/topics/delete/preview", topic="orders")
    assert status == 200 and plan is not None
    assert "12 stored offsets over 2 partitions" in page and "billing" in page
    assert _stored(store, topic) == 12  # a preview changes nothing

    status, page, _ = _post(ada, "/topics/delete/apply", plan=plan, confirm="Orders")
    assert status == 400 and "type 'orders' exactly" in html.unescape(page)
    assert _stored(store, topic) == 12

    status, page, _ = _post(ada, "/topics/delete/apply", plan=plan, confirm="orders")
    assert status == 200, page
    assert 'Topic <span class="name">orders</span> deleted' in page
    assert _stored(store, topic) == 0
    assert store.groups.by_name("billing") == []
    assert _audit(store, "topic_delete") == [("ada", "ok", "topic:orders")]

    status, _, _ = _post(ada, "/topics/delete/apply", plan=plan, confirm="orders")
    assert status == 409  # applied already


def test_live_members_refuse_the_apply_unless_the_preview_forced_it(
    ada: FlaskClient, store: Store, orders: tuple[TopicInfo, GroupInfo]
) -> None:
    topic, group = orders
    _, _, plan = _post(ada, "/topics/delete/preview", topic="orders")
    store.leases.register(group.id, "alive", "host", 1, 60)

    status, page, _ = _post(ada, "/topics/delete/apply", plan=plan, confirm="orders")
    assert status == 409 and "live members" in page
    assert _stored(store, topic) == 12
    assert _audit(store, "topic_delete")[0][1] == "refused"

    status, page, plan = _post(ada, "/topics/delete/preview", topic="orders", force="1")
    assert "billing (1 live)" in page and "Forced" in page
    status, page, _ = _post(ada, "/topics/delete/apply", plan=plan, confirm="orders")
    assert status == 200, page
    assert _stored(store, topic) == 0


def test_a_topic_made_again_since_the_preview_is_not_deleted(
    ada: FlaskClient, store: Store, orders: tuple[TopicInfo, GroupInfo]
) -> None:
    _, _, plan = _post(ada, "/topics/delete/preview", topic="orders")
    _, _, other = _post(ada, "/topics/delete/preview", topic="orders")
    assert _post(ada, "/topics/delete/apply", plan=other, confirm="orders")[0] == 200
    again = store.topics.create("orders", 1, 24, 1024)

    status, page, _ = _post(ada, "/topics/delete/apply", plan=plan, confirm="orders")
    assert status == 409 and "made again" in page
    assert store.topics.get("orders") == again


def test_alter_through_the_api_and_bad_values_refused_at_the_preview(
    app: Flask, tokens: dict[str, str], store: Store, orders: tuple[TopicInfo, GroupInfo]
) -> None:
    api = app.test_client()
    auth = bearer(tokens["admin"])
    bad = api.post(
        "/api/v1/topics/alter/preview",
        json={"topic": "orders", "max_body_bytes": 0},
        headers=auth,
    )
    assert bad.status_code == 400
    nothing = api.post("/api/v1/topics/alter/preview", json={"topic": "orders"}, headers=auth)
    assert nothing.status_code == 400
    preview = api.post(
        "/api/v1/topics/alter/preview",
        json={"topic": "orders", "retention_hours": 2, "max_body_bytes": 4096},
        headers=auth,
    ).get_json()
    assert preview["preview"]["before"] == {"retention_hours": 24, "max_body_bytes": 1024}
    assert store.topics.get("orders").retention_hours == 24

    applied = api.post(
        "/api/v1/topics/alter/apply",
        json={"plan": preview["plan"], "confirm": "orders"},
        headers=auth,
    )
    assert applied.status_code == 200, applied.get_data(as_text=True)
    found = store.topics.get("orders")
    assert (found.retention_hours, found.max_body_bytes) == (2, 4096)
    assert _audit(store, "topic_alter")[0][1:] == ("ok", "topic:orders")


def test_a_group_delete_is_refused_while_live_and_applied_once_inactive(
    ada: FlaskClient, store: Store, orders: tuple[TopicInfo, GroupInfo]
) -> None:
    topic, group = orders
    page = ada.get("/groups/billing").get_data(as_text=True)
    assert 'id="preview-delete"' in page
    store.leases.register(group.id, "alive", "host", 1, 60)
    _, page, plan = _post(ada, "/groups/delete/preview", group="billing")
    assert "1 live member" in page
    status, page, _ = _post(ada, "/groups/delete/apply", plan=plan, confirm="billing")
    assert status == 409 and store.groups.by_name("billing") == [group]

    store.leases.delete("alive")
    _, page, plan = _post(ada, "/groups/delete/preview", group="billing")
    status, page, _ = _post(ada, "/groups/delete/apply", plan=plan, confirm="billing")
    assert status == 200, page
    assert store.groups.by_name("billing") == []
    assert _stored(store, topic) == 12  # the topic's messages stay
    assert [o for _, o, _ in _audit(store, "group_delete")] == ["ok", "refused"]


HOSTILE = '<b>q</b>&"x'


def test_a_query_drop_is_refused_after_a_commit_and_applied_once_idle(
    ada: FlaskClient, store: Store, orders: tuple[TopicInfo, GroupInfo]
) -> None:
    topic, _ = orders
    store.stream_queries.record("nightly", [(topic.id, 0, 3), (topic.id, 1, 6)])
    store.stream_queries.record(HOSTILE, [(topic.id, 0, 1)])  # a row written by hand
    page = ada.get("/streaming-queries/nightly").get_data(as_text=True)
    assert 'id="preview-drop"' in page
    _, page, plan = _post(ada, "/streaming-queries/drop/preview", query="nightly")
    assert "2 partitions of 1 topic (orders)" in page and plan is not None
    store.stream_queries.record("nightly", [(topic.id, 0, 4), (topic.id, 1, 6)])  # it runs
    status, page, _ = _post(ada, "/streaming-queries/drop/apply", plan=plan, confirm="nightly")
    assert status == 409 and "committed a micro-batch since the preview" in page
    assert store.stream_queries.totals("nightly") is not None

    _, page, plan = _post(ada, "/streaming-queries/drop/preview", query="nightly")
    status, page, _ = _post(ada, "/streaming-queries/drop/apply", plan=plan, confirm="nightly")
    assert status == 200, page
    assert "the positions of 2 partitions dropped" in page
    assert store.stream_queries.totals("nightly") is None
    status, _, _ = _post(ada, "/streaming-queries/drop/apply", plan=plan, confirm="nightly")
    assert status != 200  # a plan applies once
    assert [o for _, o, _ in _audit(store, "stream_query_drop")] == ["ok", "refused"]
    assert _audit(store, "stream_query_drop")[0][2] == "streaming query:nightly"
    assert _post(ada, "/streaming-queries/drop/preview", query="nightly")[0] == 404

    status, page, plan = _post(ada, "/streaming-queries/drop/preview", query=HOSTILE)
    assert status == 200 and "<b>q</b>" not in page and "&lt;b&gt;q&lt;/b&gt;" in page
    status, page, _ = _post(ada, "/streaming-queries/drop/apply", plan=plan, confirm=HOSTILE)
    assert status == 200 and "<b>q</b>" not in page
    assert store.stream_queries.totals(HOSTILE) is None


@pytest.mark.parametrize("name", ["vera", "otto"])
def test_viewers_and_operators_neither_see_nor_reach_the_changes(
    client: FlaskClient,
    users: dict[str, str],
    store: Store,
    orders: tuple[TopicInfo, GroupInfo],
    name: str,
) -> None:
    assert login(client, name).status_code == 302
    assert 'id="preview-delete"' not in client.get("/topics/orders").get_data(as_text=True)
    assert 'id="preview-delete"' not in client.get("/groups/billing").get_data(as_text=True)
    store.stream_queries.record("nightly", [(orders[0].id, 0, 3)])
    query_page = client.get("/streaming-queries/nightly").get_data(as_text=True)
    assert 'id="preview-drop"' not in query_page
    for url, field in (
        ("/topics/delete/preview", {"topic": "orders"}),
        ("/topics/alter/preview", {"topic": "orders", "retention_hours": "1"}),
        ("/groups/delete/preview", {"group": "billing"}),
        ("/streaming-queries/drop/preview", {"query": "nightly"}),
    ):
        assert _post(client, url, **field)[0] == 403
    assert _stored(store, orders[0]) == 12
    assert store.stream_queries.totals("nightly") is not None
