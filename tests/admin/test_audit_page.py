"""The audit trail page and its API, for admins only: newest first, searched by actor,
action, target prefix and time range (ISO 8601 or ages), keyset pages by id, every text
escaped, bad input a 400."""

from __future__ import annotations

import datetime as dt
import html
import re

import pytest
from flask.testing import FlaskClient
from markupsafe import escape

from ems.ops.accounts import AuditLog
from ems.store import Store
from ems.values.accounts import AuditEntry
from tests.admin.conftest import bearer
from tests.json_times import is_json_time

_NEXT = re.compile(r'<a class="next" rel="next" href="([^"]+)"')
HOSTILE = '<script>alert(1)</script>"><svg onload=alert(1)>'


def _entry(
    log: AuditLog,
    at: dt.datetime,
    actor: str = "alice",
    action: str = "user.add",
    target: str = "user:bob",
    **more: object,
) -> None:
    log.record(
        AuditEntry(
            actor=actor,
            address=str(more.get("address", "10.0.0.1")),
            user_agent=str(more.get("user_agent", "curl/8")),
            action=action,
            target=target,
            params={"role": more.get("role", "viewer")},
            outcome=str(more.get("outcome", "ok")),
            detail=None if more.get("detail") is None else str(more["detail"]),
            at=at,
        )
    )


@pytest.fixture
def now(store: Store) -> dt.datetime:
    found: dt.datetime = store.maintenance.now()
    return found


@pytest.fixture
def trail(store: Store, now: dt.datetime) -> AuditLog:
    """Five entries: three hours ago to a minute ago."""
    log = AuditLog(store=store)
    _entry(log, now - dt.timedelta(hours=3), "alice", "user.add", "user:bob")
    _entry(log, now - dt.timedelta(hours=2), "bob", "token.create", "token:ci")
    _entry(log, now - dt.timedelta(minutes=50), "alice", "alarm.ack", "alarm:7", outcome="refused")
    _entry(log, now - dt.timedelta(minutes=10), "token:ci", "alarm.ack", "alarm:8")
    _entry(
        log,
        now - dt.timedelta(minutes=1),
        HOSTILE,
        "login",
        "user:" + HOSTILE,
        user_agent=HOSTILE,
        address="10.0.0.9",
        detail=HOSTILE,
        role=HOSTILE,
    )
    return log


def _search(client: FlaskClient, admin: dict[str, str], query: str) -> list[tuple[str, str]]:
    response = client.get("/api/v1/audit" + query, headers=admin)
    assert response.status_code == 200, response.get_json()
    return [(e["actor"], e["target"]) for e in response.get_json()["items"]]


def test_newest_first_and_searched(
    client: FlaskClient, tokens: dict[str, str], trail: AuditLog, now: dt.datetime
) -> None:
    admin = bearer(tokens["admin"])
    everything = _search(client, admin, "")
    assert everything == [
        (HOSTILE, "user:" + HOSTILE),
        ("token:ci", "alarm:8"),
        ("alice", "alarm:7"),
        ("bob", "token:ci"),
        ("alice", "user:bob"),
    ]
    assert _search(client, admin, "?actor=alice") == [("alice", "alarm:7"), ("alice", "user:bob")]
    assert _search(client, admin, "?action=alarm.ack") == everything[1:3]
    assert _search(client, admin, "?target=alarm:") == everything[1:3]
    assert _search(client, admin, "?target=user%3A%25") == []  # % is a character
    assert _search(client, admin, "?since=1h") == everything[:3]
    assert _search(client, admin, "?until=1h") == everything[3:]
    assert _search(client, admin, "?since=150m&until=30m") == everything[2:4]
    iso = (now - dt.timedelta(minutes=30)).isoformat()
    assert _search(client, admin, f"?since={iso}") == everything[:2]
    aware = (now - dt.timedelta(minutes=30)).replace(tzinfo=dt.UTC).isoformat()
    assert _search(client, admin, f"?since={aware.replace('+', '%2B')}") == everything[:2]
    assert _search(client, admin, "?actor=alice&action=alarm.ack") == [("alice", "alarm:7")]

    item = client.get("/api/v1/audit?actor=alice", headers=admin).get_json()["items"][0]
    assert is_json_time(item["at"])
    assert (item["address"], item["user_agent"], item["outcome"]) == (
        "10.0.0.1",
        "curl/8",
        "refused",
    )
    assert item["params"] == {"role": "viewer"}


def test_pages_by_id(
    client: FlaskClient, tokens: dict[str, str], store: Store, now: dt.datetime
) -> None:
    admin = bearer(tokens["admin"])
    log = AuditLog(store=store)
    for n in range(7):
        _entry(log, now - dt.timedelta(minutes=10 - n), target=f"user:u{n}")
    seen: list[str] = []
    path: str | None = "/api/v1/audit?limit=3&actor=alice"
    while path is not None:
        found = client.get(path, headers=admin).get_json()
        assert len(found["items"]) <= 3
        seen += [e["target"] for e in found["items"]]
        before = found["next_before"]
        path = None if before is None else f"/api/v1/audit?limit=3&actor=alice&before={before}"
    assert seen == [f"user:u{n}" for n in range(6, -1, -1)]

    pages, link = 0, "/audit?limit=3&actor=alice"
    targets: list[str] = []
    while link:
        text = client.get(link, headers=admin).get_data(as_text=True)
        targets += re.findall(r'<td data-label="target" class="target">([^<]*)</td>', text)
        pages += 1
        found_link = _NEXT.search(text)
        link = html.unescape(found_link.group(1)) if found_link else ""
        assert not link or "actor=alice" in link
    assert pages == 3 and targets == seen


def test_every_text_is_escaped(
    client: FlaskClient, tokens: dict[str, str], trail: AuditLog
) -> None:
    page = client.get("/audit", headers=bearer(tokens["admin"])).get_data(as_text=True)
    assert HOSTILE not in page
    escaped = str(escape(HOSTILE))
    # actor, target, user agent, detail; the params are JSON text, escaped in turn.
    assert page.count(escaped) >= 4
    assert "<svg" not in page and "<script>alert" not in page
    assert " UTC" in page


@pytest.mark.parametrize(
    "query",
    [
        "since=yesterday",
        "since=2h30m",
        "until=2026-13-01",
        "since=1h&until=2h",
        "since=" + "1" * 65,
        "before=abc",
        "before=0",
        "before=-5",
        "limit=0",
        "limit=101",
        "limit=ten",
        "actor=" + "a" * 65,
        "action=" + "a" * 65,
        "target=" + "t" * 256,
    ],
)
def test_bad_parameters_are_a_400(client: FlaskClient, tokens: dict[str, str], query: str) -> None:
    for path in ("/api/v1/audit", "/audit"):
        response = client.get(f"{path}?{query}", headers=bearer(tokens["admin"]))
        assert response.status_code == 400, (path, query)


def test_admins_only(client: FlaskClient, tokens: dict[str, str], trail: AuditLog) -> None:
    for role in ("viewer", "operator"):
        for path in ("/audit", "/api/v1/audit"):
            response = client.get(path, headers=bearer(tokens[role]))
            assert response.status_code == 403, (role, path)
            assert "10.0.0.1" not in response.get_data(as_text=True)
