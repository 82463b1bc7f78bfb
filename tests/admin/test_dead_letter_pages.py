"""Dead letters through the console: the filtered list and a dead letter in full, and
resend, replay and purge, each preview then confirm, on exactly the ids previewed, with
an outcome per dead letter. Bad input is a 4xx and changes nothing."""

from __future__ import annotations

import html
import json
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
_WORD = re.compile(r'<code class="word">([^<]*)</code>')
HOSTILE = '<script>alert(1)</script>"><svg onload=alert(1)>'


def dead(
    store: Store,
    group: GroupInfo,
    topic: TopicInfo,
    offset: int,
    error: str = "ValueError: bad",
    *,
    partition: int = 0,
) -> int:
    """A dead letter of group's message at (partition, offset), which must exist."""
    message_id = seed.message_id(store, topic, partition, offset)
    seed.sql(
        store,
        "INSERT INTO dead_message (group_id, topic_id, partition_no, offset_no, message_id, "
        "msg_key, headers, body, attempts, last_error) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 3, %s)",
        (
            group.id,
            topic.id,
            partition,
            offset,
            message_id,
            f"key-{offset}".encode(),
            json.dumps({"source": HOSTILE}),
            f"body {offset} {HOSTILE}".encode(),
            error,
        ),
    )
    return int(seed.sql(store, "SELECT MAX(id) FROM dead_message")[0][0])


@pytest.fixture
def world(store: Store) -> tuple[TopicInfo, GroupInfo, list[int]]:
    """Topic t (1 partition, offsets 0-9), group g with dead letters of offsets 1-3."""
    topic = store.topics.create("t", 1, 24, 1024)
    seed.messages(store, topic, 0, range(10), age_hours=1)
    group = seed.group(store, "g", topic)
    ids = [dead(store, group, topic, o, f"ValueError: cannot handle {o}") for o in (1, 2, 3)]
    return topic, group, ids


@pytest.fixture
def otto(client: FlaskClient, users: dict[str, str]) -> FlaskClient:
    assert login(client, "otto").status_code == 302
    return client


def _post(client: FlaskClient, path: str, data: dict[str, object]) -> tuple[int, str]:
    response = client.post(path, data={"csrf_token": csrf_token(client), **data})
    return response.status_code, response.get_data(as_text=True)


def _preview(client: FlaskClient, action: str, **data: object) -> tuple[int, str, str | None]:
    status, page = _post(client, f"/dead-letters/{action}/preview", data)
    found = _PLAN.search(page)
    return status, page, found.group(1) if found else None


def _apply(client: FlaskClient, action: str, plan: str, confirm: str) -> tuple[int, str]:
    return _post(client, f"/dead-letters/{action}/apply", {"plan": plan, "confirm": confirm})


def _resent(store: Store) -> dict[int, bool]:
    rows = seed.sql(store, "SELECT id, resent_at IS NOT NULL FROM dead_message ORDER BY id")
    return {int(i): bool(r) for i, r in rows}


def _messages(store: Store, topic: TopicInfo) -> int:
    return int(
        seed.sql(store, "SELECT COUNT(*) FROM message WHERE topic_id = %s", (topic.id,))[0][0]
    )


def test_the_list_filters_pages_and_escapes(
    otto: FlaskClient, store: Store, world: tuple[TopicInfo, GroupInfo, list[int]]
) -> None:
    topic, group, ids = world
    dead(store, group, topic, 4, HOSTILE)
    page = otto.get("/dead-letters").get_data(as_text=True)
    assert all(f'id="dead-{i}"' in page for i in ids)
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    only = otto.get("/dead-letters?error=handle+2").get_data(as_text=True)
    assert f'id="dead-{ids[1]}"' in only and f'id="dead-{ids[0]}"' not in only
    first = otto.get("/dead-letters?limit=2").get_data(as_text=True)
    assert f'id="dead-{ids[2]}"' not in first
    link = re.search(r'<a class="next" rel="next" href="([^"]+)"', first)
    assert link is not None
    rest = otto.get(html.unescape(link.group(1))).get_data(as_text=True)
    assert f'id="dead-{ids[2]}"' in rest and f'id="dead-{ids[0]}"' not in rest
    detail = otto.get(f"/dead-letters/{ids[0]}").get_data(as_text=True)
    assert "ValueError: cannot handle 1" in detail and "&lt;svg onload" in detail


def test_a_dead_letter_shows_its_traceback_escaped(
    otto: FlaskClient,
    store: Store,
    tokens: dict[str, str],
    world: tuple[TopicInfo, GroupInfo, list[int]],
) -> None:
    _, _, ids = world
    kept = f'Traceback (most recent call last):\n  File "h.py", line 3\nValueError: {HOSTILE}\n'
    seed.sql(store, "UPDATE dead_message SET last_traceback = %s WHERE id = %s", (kept, ids[0]))
    page = otto.get(f"/dead-letters/{ids[0]}").get_data(as_text=True)
    shown = re.search(r'<pre class="error-text traceback">(.*?)</pre>', page, re.S)
    # Line by line, each escaped (nothing in it needs it here), the last newline dropped.
    assert shown is not None and html.unescape(shown.group(1)) == kept.removesuffix("\n")
    assert HOSTILE not in page and "&lt;svg onload=alert(1)&gt;" in shown.group(1)
    none = otto.get(f"/dead-letters/{ids[1]}").get_data(as_text=True)
    assert "none kept" in none and 'class="error-text traceback"' not in none
    viewer = bearer(tokens["viewer"])
    found = otto.get(f"/api/v1/dead-letters/{ids[0]}", headers=viewer).get_json()
    assert found["last_traceback"] == kept
    listed = otto.get("/api/v1/dead-letters", headers=viewer).get_json()["dead_letters"]
    assert listed and all("last_traceback" not in d for d in listed)  # not read by a listing


def test_resend_the_checked_ones_once(
    otto: FlaskClient, store: Store, world: tuple[TopicInfo, GroupInfo, list[int]]
) -> None:
    topic, _, ids = world
    status, page, plan = _preview(otto, "resend", id=[str(ids[0]), str(ids[2])])
    assert status == 200 and plan is not None
    assert page.count(">publish<") == 2
    word = _WORD.search(page)
    assert word is not None and word.group(1) == "g"
    assert _apply(otto, "resend", plan, "G")[0] == 400
    assert _messages(store, topic) == 10

    status, page = _apply(otto, "resend", plan, "g")
    assert status == 200, page
    assert "Done: 2 resent." in page
    assert _resent(store) == {ids[0]: True, ids[1]: False, ids[2]: True}
    assert _messages(store, topic) == 12
    entry = store.audit.search(AuditFilter(action="dlq.resend"), 5)[0]
    assert (entry.actor, entry.outcome, entry.after) == ("otto", "ok", "2 resent")
    assert entry.params["ids"] == [ids[0], ids[2]]
    assert _apply(otto, "resend", plan, "g")[0] == 409  # once
    assert _messages(store, topic) == 12


def test_all_matching_means_the_ones_previewed(
    otto: FlaskClient, store: Store, world: tuple[TopicInfo, GroupInfo, list[int]]
) -> None:
    topic, group, ids = world
    _, page, plan = _preview(otto, "resend", scope="matching", group="g")
    assert plan is not None and "3 dead letters listed: 3 would change" in page
    late = dead(store, group, topic, 5)  # arrives after the preview, matches the filter
    status, page = _apply(otto, "resend", plan, "g")
    assert status == 200 and "Done: 3 resent." in page
    assert _resent(store) == {**dict.fromkeys(ids, True), late: False}


def test_a_partial_failure_lists_each_outcome_and_claims_no_success(
    otto: FlaskClient, store: Store, world: tuple[TopicInfo, GroupInfo, list[int]]
) -> None:
    topic, _, ids = world
    seed.sql(store, "DELETE FROM message WHERE topic_id = %s AND offset_no = 2", (topic.id,))
    status, page, plan = _preview(otto, "replay", id=[str(i) for i in ids])
    assert status == 200 and plan is not None
    assert "2 would change, 1 cannot" in page and "purged by retention" in page
    status, page = _apply(otto, "replay", plan, "g")
    assert status == 200
    assert "Not everything succeeded: 2 replayed, 1 failed: id " + str(ids[1]) in page
    assert "Done" not in page
    retries = seed.sql(store, "SELECT offset_no FROM retry_message ORDER BY offset_no")
    assert retries == [(1,), (3,)]
    assert _resent(store) == {ids[0]: True, ids[1]: False, ids[2]: True}
    entry = store.audit.search(AuditFilter(action="dlq.replay"), 5)[0]
    assert entry.outcome == "failed" and entry.after is not None and "1 failed" in entry.after


def test_a_dead_letter_resent_since_the_preview_refuses_the_apply(
    otto: FlaskClient, store: Store, world: tuple[TopicInfo, GroupInfo, list[int]]
) -> None:
    topic, _, ids = world
    _, _, plan = _preview(otto, "resend", id=[str(i) for i in ids])
    assert plan is not None
    seed.sql(store, "UPDATE dead_message SET resent_at = NOW(6) WHERE id = %s", (ids[0],))
    status, page = _apply(otto, "resend", plan, "g")
    assert status == 409
    assert f"dead letters {ids[0]} were resent since the preview" in page
    assert "Nothing was changed" in page
    assert _messages(store, topic) == 10
    fresh = _PLAN.search(page)
    assert fresh is not None and fresh.group(1) != plan
    status, page = _apply(otto, "resend", fresh.group(1), "g")
    assert status == 200 and "Not everything succeeded: 2 resent, 1 skipped" in page
    assert _messages(store, topic) == 12


def test_purge_is_for_admins(
    make_app: MakeApp,
    store: Store,
    users: dict[str, str],
    world: tuple[TopicInfo, GroupInfo, list[int]],
) -> None:
    _, _, ids = world
    app: Flask = make_app()
    otto, ada = app.test_client(), app.test_client()
    login(otto, "otto")
    login(ada, "ada")
    assert _preview(otto, "purge", id=[str(ids[0])])[0] == 403
    assert 'id="preview-purge"' not in otto.get("/dead-letters").get_data(as_text=True)
    assert 'id="preview-purge"' in ada.get("/dead-letters").get_data(as_text=True)
    _, page, plan = _preview(ada, "purge", id=[str(ids[0]), str(ids[1])])
    assert plan is not None
    assert _apply(otto, "purge", plan, "g")[0] == 403
    status, page = _apply(ada, "purge", plan, "g")
    assert status == 200 and "Done: 2 purged." in page
    assert _resent(store) == {ids[2]: False}


@pytest.mark.parametrize(
    ("data", "status", "says"),
    [
        ({}, 400, "select at least one dead letter"),
        ({"id": "abc"}, 400, "non-negative integer"),
        ({"id": "999999"}, 404, "no dead letter with id 999999"),
        ({"scope": "everything"}, 400, "scope must be"),
        ({"scope": "matching", "error": "x" * 257}, 400, "at most 256"),
        ({"scope": "matching", "since": "last week"}, 400, "datetime"),
        ({"scope": "matching", "group": "nobody"}, 404, "nobody"),
        ({"scope": "matching", "resent": "maybe"}, 400, "resent must be"),
        ({"id": [str(i) for i in range(1, 1003)]}, 400, "at most 1000"),
    ],
)
def test_bad_input_is_a_4xx_and_changes_nothing(
    otto: FlaskClient,
    store: Store,
    world: tuple[TopicInfo, GroupInfo, list[int]],
    data: dict[str, object],
    status: int,
    says: str,
) -> None:
    got, page, plan = _preview(otto, "resend", **data)
    assert got == status, page
    assert says in html.unescape(page)
    assert plan is None
    assert seed.sql(store, "SELECT COUNT(*) FROM admin_plan") == [(0,)]


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=101", "after=x", "since=nonsense", "group=nobody", "resent=1"]
)
def test_bad_list_parameters_are_a_4xx(
    otto: FlaskClient, world: tuple[TopicInfo, GroupInfo, list[int]], query: str
) -> None:
    assert otto.get(f"/dead-letters?{query}").status_code in {400, 404}
    assert otto.get(f"/api/v1/dead-letters?{query}").status_code in {400, 404}
    assert otto.get("/dead-letters/999999").status_code == 404


def test_bodies_hidden_from_viewers_when_asked(
    make_app: MakeApp, tokens: dict[str, str], world: tuple[TopicInfo, GroupInfo, list[int]]
) -> None:
    _, _, ids = world
    client = make_app(admin_hide_bodies=True).test_client()
    viewer, operator = bearer(tokens["viewer"]), bearer(tokens["operator"])
    page = client.get(f"/dead-letters/{ids[0]}", headers=viewer).get_data(as_text=True)
    assert "body 1" not in page and "hidden from viewers" in page
    found = client.get(f"/api/v1/dead-letters/{ids[0]}", headers=viewer).get_json()
    assert found["body"] is None and found["headers"] is None and found["key"] is None
    shown = client.get(f"/api/v1/dead-letters/{ids[0]}", headers=operator).get_json()
    assert shown["body"]["text"].startswith("body 1") and shown["headers"] == {"source": HOSTILE}
    assert shown["last_error"] == "ValueError: cannot handle 1"
    assert found["last_error"] is None and found["last_traceback"] is None
    listed = client.get("/api/v1/dead-letters", headers=viewer).get_json()["dead_letters"]
    assert listed and all(d["last_error"] is None for d in listed)
    assert "cannot handle" not in page
    listing = client.get("/dead-letters", headers=viewer).get_data(as_text=True)
    assert "cannot handle" not in listing and 'name="error"' not in listing
    refused = client.get("/api/v1/dead-letters?error=cannot", headers=viewer)
    assert refused.status_code == 403
    assert client.get("/api/v1/dead-letters?error=cannot", headers=operator).status_code == 200


def test_the_json_api(
    client: FlaskClient,
    store: Store,
    tokens: dict[str, str],
    world: tuple[TopicInfo, GroupInfo, list[int]],
) -> None:
    topic, _, ids = world
    operator = bearer(tokens["operator"])
    listed = client.get("/api/v1/dead-letters?group=g", headers=operator).get_json()
    assert [d["id"] for d in listed["dead_letters"]] == ids and listed["next_after"] is None
    found = client.post(
        "/api/v1/dead-letters/resend/preview", json={"ids": ids[:2]}, headers=operator
    ).get_json()
    assert found["ids"] == ids[:2] and found["confirm"] == "g"
    assert [o["action"] for o in found["outcomes"]] == ["would publish", "would publish"]
    done = client.post(
        "/api/v1/dead-letters/resend/apply",
        json={"plan": found["plan"], "confirm": "g"},
        headers=operator,
    )
    assert done.status_code == 200
    body = done.get_json()
    assert body["succeeded"] is True and body["summary"] == "2 resent"
    assert [o["action"] for o in body["outcomes"]] == ["published", "published"]
    assert _messages(store, topic) == 12
