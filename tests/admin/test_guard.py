"""The guard fails closed: every view is marked, an unmarked one is refused to everyone,
nobody signed in reaches nothing but the public views, and each refusal is audited."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from flask import Blueprint, Flask, url_for
from flask.testing import FlaskClient

from ems.admin import app as app_module
from ems.admin.capabilities import PUBLIC, RESEND
from ems.admin.guard import required, requires, route_problems
from ems.admin.services import of
from ems.admin.views import BLUEPRINTS
from ems.config import Settings
from ems.exceptions import InvalidSetting
from ems.ops.accounts import AuditLog
from ems.values.accounts import AuditFilter
from tests.admin.conftest import MakeApp, bearer

#: The views anyone may reach; any other view needs a principal.
PUBLIC_ENDPOINTS = {
    "health.healthz",
    "auth.login",
    "auth.login_post",
    "auth.logout",
    "assets.static",
}


def _url(app: Flask, endpoint: str, arguments: set[str]) -> str:
    # "7" fits every converter (text and int) and names nothing that exists.
    values: dict[str, Any] = dict.fromkeys(arguments, "7")
    with app.test_request_context():
        return url_for(endpoint, **values)


def test_every_view_is_marked(app: Flask) -> None:
    rules = list(app.url_map.iter_rules())
    assert len(rules) >= 9
    for rule in rules:
        assert required(app.view_functions[rule.endpoint]) is not None, rule.rule
    public = {r.endpoint for r in rules if required(app.view_functions[r.endpoint]) == PUBLIC}
    assert public == PUBLIC_ENDPOINTS
    assert route_problems(app) == []


def test_nobody_signed_in_reaches_no_private_route(
    app: Flask, client: FlaskClient, admin_settings: Settings
) -> None:
    tried = 0
    for rule in app.url_map.iter_rules():
        if required(app.view_functions[rule.endpoint]) == PUBLIC:
            continue
        url = _url(app, rule.endpoint, set(rule.arguments))
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            response = client.open(url, method=method)
            tried += 1
            if url.startswith("/api/"):
                assert response.status_code == 401, url
                assert response.is_json and "error" in response.get_json()
                assert response.headers["WWW-Authenticate"].startswith("Bearer")
            else:
                assert response.status_code == 302, url
                assert response.headers["Location"].startswith("/login?next=")
    assert tried >= 4
    # Refusals of anonymous callers are sampled: one entry per address and minute stands
    # for those held back, and the rest is written when the app closes.
    with AuditLog(admin_settings) as log:
        sampled = log.search(AuditFilter(action="access"))
        of(app).flush_refusals()
        denied = log.search(AuditFilter(action="access"))
    assert len(sampled) == 1 and len(denied) == 2
    assert sum(int(e.params["refusals"]) for e in denied) == tried
    assert {e.outcome for e in denied} == {"denied"}
    assert {e.actor for e in denied} == {"-"}


def test_the_login_page_sends_the_browser_back(client: FlaskClient) -> None:
    response = client.get("/users?sort=name")
    assert response.status_code == 302
    assert response.headers["Location"] == "/login?next=/users?sort%3Dname"
    page = client.get(response.headers["Location"]).get_data(as_text=True)
    assert 'name="next" value="/users?sort=name"' in page


def test_an_unmarked_view_is_refused_to_everyone(
    make_app: MakeApp,
    tokens: dict[str, str],
    admin_settings: Settings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = make_app()
    app.add_url_rule("/unmarked", "unmarked", lambda: "the view ran")
    app.add_url_rule("/api/v1/unmarked", "api_unmarked", lambda: "the view ran")
    assert route_problems(app) == [
        "/unmarked (unmarked) has no capability mark",
        "/api/v1/unmarked (api_unmarked) has no capability mark",
    ]
    client = app.test_client()
    with caplog.at_level(logging.ERROR, logger="ems.admin.guard"):
        for url in ("/unmarked", "/api/v1/unmarked"):
            for headers in ({}, bearer(tokens["admin"])):
                response = client.get(url, headers=headers)
                assert response.status_code == 403
                assert "the view ran" not in response.get_data(as_text=True)
    assert "has no capability mark" in caplog.text
    of(app).flush_refusals()  # the second anonymous refusal was held back
    with AuditLog(admin_settings) as log:
        denied = log.search(AuditFilter(action="access"))
    assert len(denied) == 4
    assert {e.actor for e in denied} == {"-", "token:t-admin"}


def test_an_app_with_an_unsafe_view_is_not_built(
    monkeypatch: pytest.MonkeyPatch, admin_settings: Settings
) -> None:
    unmarked = Blueprint("unmarked", __name__)
    unmarked.add_url_rule("/x", "x", lambda: "x")
    monkeypatch.setattr(app_module, "BLUEPRINTS", (*BLUEPRINTS, unmarked))
    with pytest.raises(RuntimeError, match="has no capability mark"):
        app_module.create_app(admin_settings)

    by_get = Blueprint("by_get", __name__)
    by_get.add_url_rule("/resend", "resend", requires(RESEND)(lambda: "x"), methods=["GET", "POST"])
    monkeypatch.setattr(app_module, "BLUEPRINTS", (*BLUEPRINTS, by_get))
    with pytest.raises(RuntimeError, match="changes state but answers GET"):
        app_module.create_app(admin_settings)


def test_no_app_without_a_secret_key(admin_settings: Settings) -> None:
    for key in (None, "x" * 31):
        with pytest.raises(InvalidSetting, match="EMS_ADMIN_SECRET_KEY"):
            app_module.create_app(admin_settings.with_(admin_secret_key=key))


def test_an_unknown_capability_cannot_be_required() -> None:
    with pytest.raises(ValueError, match="no such capability"):
        requires("delete_everything")


def test_a_flood_of_refused_requests_costs_rows_by_the_minute_not_by_the_request(
    app: Flask, client: FlaskClient, admin_settings: Settings
) -> None:
    """1,000 requests with a bad token and a long user agent: one audit entry stands for
    them (and what the flush writes when the app closes), every refusal counted."""
    for _ in range(1_000):
        response = client.get(
            "/api/v1/overview",
            headers={"Authorization": "Bearer nope", "User-Agent": "x" * 400},
        )
        assert response.status_code == 401
    with AuditLog(admin_settings) as log:
        assert len(log.search(AuditFilter(action="access"))) == 1
        of(app).flush_refusals()
        denied = log.search(AuditFilter(action="access"))
    assert len(denied) == 2
    assert sum(int(e.params["refusals"]) for e in denied) == 1_000
