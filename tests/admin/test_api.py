"""The JSON API: tokens, the overview and users as JSON, /healthz, and errors as
{"error": ...} with a 4xx for bad input, never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from ems.admin.capabilities import READ
from ems.admin.guard import requires
from ems.exceptions import DatabaseUnavailable, InvalidOffset, UnknownGroup
from ems.ops.accounts import Accounts
from ems.store import Store
from tests.admin.conftest import MakeApp, bearer
from tests.json_times import is_json_time


def test_a_token_reads_the_overview(
    client: FlaskClient, tokens: dict[str, str], store: Store
) -> None:
    store.topics.create("orders", 2, 24, 1024)
    response = client.get("/api/v1/overview", headers=bearer(tokens["viewer"]))
    assert response.status_code == 200
    body = response.get_json()
    assert body["topics"] == 1
    assert body["groups"] == []
    assert body["open_alarms"] == 0
    assert body["total_lag"] is None
    assert "lag report" in body["total_lag_reason"]
    assert body["lag_report"] is None
    assert is_json_time(body["read_at"])


def test_the_overview_page_says_what_it_does_not_know(
    client: FlaskClient, tokens: dict[str, str]
) -> None:
    page = client.get("/", headers=bearer(tokens["viewer"])).get_data(as_text=True)
    assert "—" in page
    assert "no lag report yet" in page
    assert " UTC" in page
    assert 'id="total-lag">\n    0' not in page


def test_a_revoked_token_is_refused(
    client: FlaskClient, tokens: dict[str, str], accounts: Accounts
) -> None:
    secret = tokens["admin"]
    assert client.get("/api/v1/users", headers=bearer(secret)).status_code == 200
    accounts.revoke_token("t-admin")
    refused = client.get("/api/v1/users", headers=bearer(secret))
    assert refused.status_code == 401
    assert set(refused.get_json()) == {"error"}
    assert client.get("/", headers=bearer(secret)).status_code == 401


def test_users_as_json(client: FlaskClient, users: dict[str, str], tokens: dict[str, str]) -> None:
    body = client.get("/api/v1/users", headers=bearer(tokens["admin"])).get_json()
    listed = {u["name"]: u for u in body["users"]}
    assert {n: u["role"] for n, u in listed.items()} == users
    assert set(listed["ada"]) == {"id", "name", "role", "created_at", "updated_at"}
    assert is_json_time(listed["ada"]["created_at"])


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer ",
        "Bearer nonsense",
        "Bearer ems_" + "A" * 43,
        "Basic YWRhOmNvcnJlY3Q=",
        "Bearer \u00e9\u00e9",
        "Bearer " + "x" * 5000,
        "ems_abc",
    ],
)
def test_bad_credentials_are_a_401(client: FlaskClient, authorization: str) -> None:
    response = client.get("/api/v1/overview", headers={"Authorization": authorization})
    assert response.status_code == 401
    assert response.is_json and set(response.get_json()) == {"error"}


def test_bad_requests_are_4xx_json(client: FlaskClient, tokens: dict[str, str]) -> None:
    viewer = bearer(tokens["viewer"])
    form = "application/x-www-form-urlencoded"
    cases: list[tuple[str, str, dict[str, Any], int]] = [
        ("GET", "/api/v1/nothing", {}, 404),
        ("POST", "/api/v1/overview", {}, 405),
        ("DELETE", "/api/v1/users", {}, 405),
        ("GET", "/api/v1/overview?limit=%ff%fe&x=" + "y" * 3000, {}, 200),
        ("POST", "/login", {"data": b"\xff\xfe" * 10, "content_type": form}, 400),
        ("POST", "/login", {"data": "x" * (2 * 1024 * 1024), "content_type": form}, 413),
    ]
    for method, path, extra, status in cases:
        response = client.open(path, method=method, headers=viewer, **extra)
        assert response.status_code == status, (method, path, response.status_code)
        if path.startswith("/api/") and status >= 400:
            assert response.is_json and set(response.get_json()) == {"error"}


def test_ems_errors_have_their_status(make_app: MakeApp, tokens: dict[str, str]) -> None:
    app = make_app()
    raised = {
        "invalid": InvalidOffset("an offset must be a non-negative integer, not -1"),
        "unknown": UnknownGroup("unknown group 'nope'"),
        "down": DatabaseUnavailable("connection refused to 10.0.0.7:3306 as root"),
    }
    for name, error in raised.items():

        def view(error: Exception = error) -> str:
            raise error

        app.add_url_rule(f"/api/v1/raise/{name}", f"raise_{name}", requires(READ)(view))
    client = app.test_client()
    viewer = bearer(tokens["viewer"])
    invalid = client.get("/api/v1/raise/invalid", headers=viewer)
    assert (invalid.status_code, invalid.get_json()) == (400, {"error": str(raised["invalid"])})
    unknown = client.get("/api/v1/raise/unknown", headers=viewer)
    assert (unknown.status_code, unknown.get_json()) == (404, {"error": "unknown group 'nope'"})
    down = client.get("/api/v1/raise/down", headers=viewer)
    assert down.status_code == 503
    assert "10.0.0.7" not in down.get_data(as_text=True)
    assert down.headers["Retry-After"]


def test_healthz(app: Flask, make_app: MakeApp) -> None:
    ok = app.test_client().get("/healthz")
    assert (ok.status_code, ok.get_json()) == (200, {"status": "ok"})
    down = make_app(
        database_url="mysql+pymysql://root@127.0.0.1:1/ems", connect_attempts=1
    ).test_client()
    answer = down.get("/healthz")
    assert (answer.status_code, answer.get_json()) == (503, {"status": "unavailable"})
