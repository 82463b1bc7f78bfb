"""What every answer carries, errors included; the session cookie's flags; templates
that escape everything and hold no inline script or style."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask import Flask
from werkzeug.test import TestResponse

from ems.admin.capabilities import READ
from ems.admin.guard import requires
from ems.admin.security import CONTENT_SECURITY_POLICY
from tests.admin.conftest import MakeApp, bearer, csrf_token, login

TEMPLATES = Path(__file__).resolve().parents[2] / "ems" / "admin" / "templates"
STATIC = TEMPLATES.parent / "static"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def _secure(response: TestResponse, *, static: bool = False) -> None:
    h = response.headers
    assert h["Content-Security-Policy"] == CSP
    assert h["X-Content-Type-Options"] == "nosniff"
    assert h["Referrer-Policy"] in ("same-origin", "no-referrer")
    assert h["X-Frame-Options"] == "DENY"
    assert h["Cache-Control"] == ("no-cache" if static else "no-store")
    assert not [k for k, _ in h.items() if k.lower().startswith("access-control-")]


@pytest.fixture
def crashing(make_app: MakeApp) -> Flask:
    app = make_app()

    def boom() -> str:
        raise RuntimeError("secret detail of the fault")

    app.add_url_rule("/api/v1/boom", "boom", requires(READ)(boom))
    app.add_url_rule("/boom", "boom_page", requires(READ)(boom))
    return app


def test_every_answer_carries_the_headers(
    crashing: Flask, users: dict[str, str], tokens: dict[str, str]
) -> None:
    assert CONTENT_SECURITY_POLICY == CSP
    client = crashing.test_client()
    viewer = bearer(tokens["viewer"])
    answers = {
        "health": client.get("/healthz"),
        "login page": client.get("/login"),
        "redirect": client.get("/"),
        "401": client.get("/api/v1/overview"),
        "403": client.get("/api/v1/users", headers=viewer),
        "404": client.get("/nothing/here"),
        "404 api": client.get("/api/v1/nothing"),
        "405": client.post("/healthz"),
        "400 csrf": client.post("/login", data={"name": "x"}),
        "500": client.get("/api/v1/boom", headers=viewer),
        "500 page": client.get("/boom", headers=viewer),
        "overview": client.get("/api/v1/overview", headers=viewer),
    }
    expected = {
        "health": 200,
        "login page": 200,
        "redirect": 302,
        "401": 401,
        "403": 403,
        "404": 404,
        "404 api": 404,
        "405": 405,
        "400 csrf": 400,
        "500": 500,
        "500 page": 500,
        "overview": 200,
    }
    assert {k: r.status_code for k, r in answers.items()} == expected
    for response in answers.values():
        _secure(response)
    for name in ("500", "500 page"):
        assert "secret detail" not in answers[name].get_data(as_text=True)
    assert answers["500"].get_json() == {"error": "internal error; the server log has the details"}
    login(client, "vera")
    _secure(client.get("/"))
    for name in ("admin.css", "admin.js"):
        asset = client.get(f"/static/{name}")
        assert asset.status_code == 200
        _secure(asset, static=True)
    assert client.get("/static/../app.py").status_code == 404


def _cookie(response: TestResponse) -> str:
    found = [
        c for c in response.headers.getlist("Set-Cookie") if c.startswith("ems_admin_session=")
    ]
    assert len(found) == 1, response.headers
    return found[0]


def test_the_session_cookie(app: Flask, users: dict[str, str]) -> None:
    plain = app.test_client()
    cookie = _cookie(login(plain, "ada"))
    assert "HttpOnly" in cookie
    assert "SameSite=Lax" in cookie
    assert "Secure" not in cookie
    tls = app.test_client()
    page = tls.get("/login", base_url="https://console.example")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.get_data(as_text=True))
    assert token is not None
    response = tls.post(
        "/login",
        base_url="https://console.example",
        data={"name": "ada", "password": "correct horse battery staple", "csrf_token": token[1]},
        headers={"Referer": "https://console.example/login"},
    )
    assert response.status_code == 302
    cookie = _cookie(response)
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie


def test_templates_hold_no_inline_script_or_style() -> None:
    templates = sorted(TEMPLATES.glob("*"))
    assert {t.suffix for t in templates} == {".html"}
    for template in templates:
        text = template.read_text()
        assert "<style" not in text, template
        assert not re.search(r"\sstyle\s*=", text), template
        assert not re.search(r"\son[a-z]+\s*=", text, re.I), template
        assert "javascript:" not in text, template
        for script in re.findall(r"<script\b[^>]*>(.*?)</script>", text, re.S):
            assert script.strip() == "", template
        assert not re.search(r"<script(?![^>]*\bsrc=)", text), template
        assert "|safe" not in text.replace(" ", ""), template
        assert "http://" not in text and "https://" not in text, template  # no CDN
    assert {p.name for p in STATIC.iterdir()} == {"admin.css", "admin.js"}


def test_everything_printed_is_escaped(app: Flask) -> None:
    assert app.jinja_env.autoescape is True
    client = app.test_client()
    token = csrf_token(client)
    hostile = '"><script>alert(1)</script>'
    page = client.post(
        "/login", data={"name": hostile, "password": "x", "csrf_token": token, "next": hostile}
    ).get_data(as_text=True)
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
