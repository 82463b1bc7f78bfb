"""Server-Timing: every answer, refusals and errors included, says how long the console
took to make it, in milliseconds."""

from __future__ import annotations

import re
import time

import pytest
from flask import Flask

from ems.admin.capabilities import READ
from ems.admin.guard import requires
from ems.admin.timing import HEADER
from tests.admin.conftest import MakeApp, bearer

_VALUE = re.compile(r"app;dur=(\d+\.\d)")


def _ms(value: str | None) -> float:
    assert value is not None
    found = _VALUE.fullmatch(value)
    assert found is not None, value
    return float(found.group(1))


@pytest.fixture
def timed(make_app: MakeApp) -> Flask:
    app = make_app()

    def slow() -> str:
        time.sleep(0.08)
        return "done"

    def boom() -> str:
        raise RuntimeError("fault")

    app.add_url_rule("/api/v1/slow", "slow", requires(READ)(slow))
    app.add_url_rule("/api/v1/boom", "boom", requires(READ)(boom))
    return app


def test_every_answer_says_how_long_it_took(timed: Flask, tokens: dict[str, str]) -> None:
    client = timed.test_client()
    viewer = bearer(tokens["viewer"])
    answers = {
        "/": (None, 302),
        "/api/v1/overview": (None, 401),
        "/login": (None, 200),
        "/healthz": (None, 200),
        "/static/admin.css": (None, 200),
        "/no/such/page": (None, 404),
        "/api/v1/users": (viewer, 403),
        "/api/v1/topics?limit=0": (viewer, 400),
        "/api/v1/topics": (viewer, 200),
        "/api/v1/boom": (viewer, 500),
    }
    for path, (headers, status) in answers.items():
        response = timed.test_client().get(path, headers=headers)
        assert response.status_code == status, path
        assert 0 <= _ms(response.headers.get(HEADER)) < 5000, path
        assert len(response.headers.getlist(HEADER)) == 1, path
    assert client.get("/api/v1/overview", headers=viewer).headers[HEADER].startswith("app;dur=")


def test_the_duration_covers_the_view(timed: Flask, tokens: dict[str, str]) -> None:
    started = time.perf_counter()
    response = timed.test_client().get("/api/v1/slow", headers=bearer(tokens["viewer"]))
    wall = (time.perf_counter() - started) * 1000
    assert response.status_code == 200
    assert 80 <= _ms(response.headers.get(HEADER)) <= wall + 0.1
