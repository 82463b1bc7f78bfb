"""Fixtures of the console's tests: apps on the test database (through Flask's test
client), accounts of each role, and helpers to sign in."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from ems.admin.app import create_app
from ems.admin.services import of
from ems.config import Settings
from ems.ops.accounts import Accounts
from tests.hashing import cheap_password_hashing

PASSWORD = "correct horse battery staple"
#: One user of each role, by name.
USERS = {"vera": "viewer", "otto": "operator", "ada": "admin"}
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')

MakeApp = Callable[..., Flask]


@pytest.fixture(autouse=True)
def _cheap_password_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    cheap_password_hashing(monkeypatch)


@pytest.fixture
def admin_settings(settings: Settings) -> Settings:
    return settings.with_(admin_secret_key=secrets.token_urlsafe(48))


@pytest.fixture
def make_app(admin_settings: Settings) -> Iterator[MakeApp]:
    """create_app on the test database, with settings changed as given."""
    made: list[Flask] = []

    def make(**changes: object) -> Flask:
        app = create_app(admin_settings.with_(**changes))
        made.append(app)
        return app

    yield make
    for app in made:
        of(app).close()


@pytest.fixture
def app(make_app: MakeApp) -> Flask:
    return make_app()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def accounts(admin_settings: Settings) -> Iterator[Accounts]:
    with Accounts(admin_settings) as found:
        yield found


@pytest.fixture
def users(accounts: Accounts) -> dict[str, str]:
    """vera (viewer), otto (operator) and ada (admin), each with PASSWORD."""
    for name, role in USERS.items():
        accounts.add_user(name, role, PASSWORD)
    return USERS


@pytest.fixture
def tokens(accounts: Accounts) -> dict[str, str]:
    """An API token per role: role -> secret."""
    return {
        role: accounts.create_token(f"t-{role}", role, "tests")[1]
        for role in ("viewer", "operator", "admin")
    }


def csrf_token(client: FlaskClient) -> str:
    """The CSRF token of the client's session (from the login form)."""
    page = client.get("/login").get_data(as_text=True)
    found = _CSRF.search(page)
    assert found is not None, page
    return found.group(1)


def login(
    client: FlaskClient, name: str, password: str = PASSWORD, next_url: str | None = None
) -> TestResponse:
    data = {"name": name, "password": password, "csrf_token": csrf_token(client)}
    if next_url is not None:
        data["next"] = next_url
    return client.post("/login", data=data)


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}
