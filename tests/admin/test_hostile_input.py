"""No input gives a 500: every route of the console, pages and API, fed hostile query
values (times at the edges of the calendar, NULs, huge numbers, quotes) as an admin, and
every route that takes a JSON body fed one nested far past the parser's depth. Each ends
in a 2xx, 3xx or 4xx."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask, url_for
from flask.testing import FlaskClient

from tests.admin.conftest import bearer

#: Values at the edges: a time that overflows once moved to UTC, either way, and what a
#: parser meets least often.
HOSTILE = (
    "9999-12-31T23:59:59-01:00",
    "0001-01-01T00:00:00+01:00",
    "9" * 40,
    "-1",
    "\x00",
    "'\"%_\\",
    "1e308",
)
#: Query parameters the console's routes read (a route ignores those it does not).
PARAMETERS = ("since", "until", "at", "after", "limit", "prefix", "error", "key", "partition")
DEEP = "[" * 50_000 + "]" * 50_000


def _url(app: Flask, endpoint: str, arguments: set[str]) -> str:
    values: dict[str, Any] = dict.fromkeys(arguments, "7")
    with app.test_request_context():
        return url_for(endpoint, **values)


@pytest.fixture
def admin(tokens: dict[str, str]) -> dict[str, str]:
    return bearer(tokens["admin"])


def test_hostile_query_values_never_give_a_500(
    app: Flask, client: FlaskClient, admin: dict[str, str]
) -> None:
    tried = 0
    for rule in app.url_map.iter_rules():
        if "GET" not in (rule.methods or set()) or rule.endpoint == "static":
            continue
        url = _url(app, rule.endpoint, set(rule.arguments))
        for value in HOSTILE:
            for name in PARAMETERS:
                response = client.get(url, query_string={name: value}, headers=admin)
                tried += 1
                assert response.status_code < 500, (url, name, value, response.status_code)
    assert tried > 1000


def test_a_json_body_nested_past_the_parser_is_a_400(
    app: Flask, client: FlaskClient, admin: dict[str, str]
) -> None:
    tried = 0
    for rule in app.url_map.iter_rules():
        if "POST" not in (rule.methods or set()) or not rule.rule.startswith("/api/"):
            continue
        url = _url(app, rule.endpoint, set(rule.arguments))
        response = client.post(
            url, data=DEEP, headers={**admin, "Content-Type": "application/json"}
        )
        tried += 1
        assert response.status_code < 500, (url, response.status_code)
    assert tried >= 5
