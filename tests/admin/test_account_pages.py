"""Account changes through the console: each previewed, confirmed by typing the user's or
token's name, applied only while the state it was computed from holds (else a 409 with a
new preview), refused for the last admin, audited, and never keeping a password or a
token secret anywhere but the one answer that shows the secret."""

from __future__ import annotations

import html
import re

import pytest
from flask import Flask
from flask.testing import FlaskClient

from ems.ops.accounts import Accounts
from ems.store import Store
from ems.values.accounts import AuditFilter
from tests.admin.conftest import PASSWORD, MakeApp, bearer, csrf_token, login
from tests.integration import seed

_PLAN = re.compile(r'name="plan" value="([^"]+)"')
_SECRET = re.compile(r"ems_[A-Za-z0-9_-]{43}")
NEW_PASSWORD = "a long new password 7"


@pytest.fixture
def ada(client: FlaskClient, users: dict[str, str]) -> FlaskClient:
    """The client signed in as the admin."""
    assert login(client, "ada").status_code == 302
    return client


def _preview(client: FlaskClient, path: str, **fields: str) -> tuple[int, str, str | None]:
    data = {"csrf_token": csrf_token(client), **fields}
    response = client.post(f"{path}/preview", data=data)
    page = response.get_data(as_text=True)
    found = _PLAN.search(page)
    return response.status_code, html.unescape(page), found.group(1) if found else None


def _apply(
    client: FlaskClient, path: str, plan: str, confirm: str, **fields: str
) -> tuple[int, str]:
    data = {"csrf_token": csrf_token(client), "plan": plan, "confirm": confirm, **fields}
    response = client.post(f"{path}/apply", data=data)
    return response.status_code, html.unescape(response.get_data(as_text=True))


def _dump(store: Store) -> str:
    """Everything the plans and the audit trail hold, as text."""
    plans = seed.sql(store, "SELECT action, target, body FROM admin_plan")
    entries = seed.sql(
        store,
        "SELECT actor, action, target, params, before_state, after_state, detail FROM admin_audit",
    )
    return repr(plans) + repr(entries)


def _audit(store: Store, action: str) -> list[tuple[str, str, str | None, str | None]]:
    found = store.audit.search(AuditFilter(action=action), 20)
    return [(e.target, e.outcome, e.before, e.after) for e in found]


def test_a_role_change_through_preview_and_confirm(
    ada: FlaskClient, app: Flask, accounts: Accounts, store: Store
) -> None:
    otto = app.test_client()
    login(otto, "otto")
    status, page, plan = _preview(ada, "/users/role", name="otto", role="admin")
    assert status == 200 and plan is not None
    assert "otto: operator -> admin." in page
    assert "otto is signed out everywhere" in page
    assert accounts.user_named("otto").role == "operator"  # a preview changes nothing

    status, page = _apply(ada, "/users/role", plan, "Otto")
    assert status == 400 and "type 'otto' exactly" in page
    assert _PLAN.search(page) is not None  # the same preview, to confirm again
    assert accounts.user_named("otto").role == "operator"

    status, page = _apply(ada, "/users/role", plan, "otto")
    assert status == 200, page
    assert "otto: operator -> admin." in page
    assert accounts.user_named("otto").role == "admin"
    assert otto.get("/").status_code == 302  # signed out by the new session epoch
    [(target, outcome, before, after)] = [e for e in _audit(store, "user.set_role") if e[1] == "ok"]
    assert (target, outcome) == ("user:otto", "ok")
    assert '"role": "operator"' in (before or "") and '"role": "admin"' in (after or "")
    # A plan applies once.
    status, page = _apply(ada, "/users/role", plan, "otto")
    assert status == 409 and "applied already" in page


def test_a_change_since_the_preview_is_refused_with_a_new_preview(
    ada: FlaskClient, accounts: Accounts, store: Store
) -> None:
    status, _, plan = _preview(ada, "/users/role", name="otto", role="viewer")
    assert plan is not None
    accounts.set_role("otto", "admin")  # the CLI, meanwhile
    status, page = _apply(ada, "/users/role", plan, "otto")
    assert status == 409, page
    assert "Nothing was changed" in page and "changed since the preview" in page
    assert "otto: admin -> viewer." in page
    assert accounts.user_named("otto").role == "admin"
    assert ("user:otto", "refused") in [e[:2] for e in _audit(store, "user.set_role")]
    fresh = _PLAN.search(page)
    assert fresh is not None and fresh.group(1) != plan
    status, page = _apply(ada, "/users/role", fresh.group(1), "otto")
    assert status == 200, page
    assert accounts.user_named("otto").role == "viewer"


def test_the_last_admin_is_refused_at_preview_time(
    ada: FlaskClient, accounts: Accounts, store: Store
) -> None:
    for path, fields in (("/users/role", {"role": "operator"}), ("/users/remove", {})):
        status, page, plan = _preview(ada, path, name="ada", **fields)
        assert status == 400 and plan is None, page
        assert "last admin" in page
    assert accounts.user_named("ada").role == "admin"
    assert ("user:ada", "refused") in [e[:2] for e in _audit(store, "user.remove")]
    # With a second admin, ada may demote herself: she is signed out.
    accounts.set_role("otto", "admin")
    status, page, plan = _preview(ada, "/users/role", name="ada", role="viewer")
    assert status == 200 and plan is not None
    assert "your own account" in page
    status, page = _apply(ada, "/users/role", plan, "ada")
    assert status == 200 and "you are signed out" in page
    assert ada.get("/users").status_code == 302


def test_the_last_admin_is_refused_at_apply_time_too(
    client: FlaskClient, users: dict[str, str], accounts: Accounts, store: Store
) -> None:
    admin = bearer(accounts.create_token("root", "admin", "tests")[1])
    accounts.set_role("otto", "admin")
    preview = client.post(
        "/api/v1/users/remove/preview", json={"name": "otto"}, headers=admin
    ).get_json()
    accounts.remove_user("ada")  # the CLI, meanwhile: otto is the last admin now
    refused = client.post(
        "/api/v1/users/remove/apply",
        json={"plan": preview["plan"], "confirm": "otto"},
        headers=admin,
    )
    assert refused.status_code == 400
    assert "last admin" in refused.get_json()["error"]
    assert accounts.user_named("otto").role == "admin"
    assert ("user:otto", "refused") in [e[:2] for e in _audit(store, "user.remove")]


def test_removing_a_user_and_oneself(
    ada: FlaskClient, app: Flask, accounts: Accounts, store: Store
) -> None:
    status, page, plan = _preview(ada, "/users/remove", name="vera")
    assert status == 200 and plan is not None
    assert "User vera (viewer) is removed." in page
    status, page = _apply(ada, "/users/remove", plan, "vera")
    assert status == 200, page
    assert [u.name for u in accounts.users()] == ["ada", "otto"]
    assert ("user:vera", "ok") in [e[:2] for e in _audit(store, "user.remove")]
    accounts.set_role("otto", "admin")
    _, page, plan = _preview(ada, "/users/remove", name="ada")
    assert plan is not None and "your own account" in page
    status, page = _apply(ada, "/users/remove", plan, "ada")
    assert status == 200 and "you are signed out" in page
    assert ada.get("/users").status_code == 302


def test_adding_a_user_keeps_no_password(
    ada: FlaskClient, app: Flask, accounts: Accounts, store: Store
) -> None:
    status, page, plan = _preview(ada, "/users/add", name="nina", role="operator")
    assert status == 200 and plan is not None
    assert "A new user nina with role operator." in page
    assert 'name="password"' in page and 'name="password_again"' in page
    for password, again, said in (
        ("Qx7tinyZ", "Qx7tinyZ", "at least 12 characters"),
        (NEW_PASSWORD, NEW_PASSWORD + "x", "the two passwords differ"),
    ):
        status, page = _apply(
            ada, "/users/add", plan, "nina", password=password, password_again=again
        )
        assert status == 400 and said in page, page
        assert _PLAN.search(page) is not None and password not in page.split("<main")[1]
    status, page = _apply(ada, "/users/add", plan, "nina", password=NEW_PASSWORD)
    assert status == 400 and "type the password twice" in page
    assert [u.name for u in accounts.users()] == ["ada", "otto", "vera"]
    status, page = _apply(
        ada, "/users/add", plan, "nina", password=NEW_PASSWORD, password_again=NEW_PASSWORD
    )
    assert status == 200, page
    assert accounts.user_named("nina").role == "operator"
    nina = app.test_client()
    assert login(nina, "nina", NEW_PASSWORD).status_code == 302
    assert NEW_PASSWORD not in _dump(store)
    for path in ("/users", "/audit", "/api/v1/users", "/api/v1/audit"):
        assert NEW_PASSWORD not in ada.get(path).get_data(as_text=True), path
    # The name was taken meanwhile: nothing to preview again.
    _, _, plan = _preview(ada, "/users/add", name="zed", role="viewer")
    assert plan is not None
    accounts.add_user("zed", "viewer", PASSWORD)
    status, page = _apply(
        ada, "/users/add", plan, "zed", password=NEW_PASSWORD, password_again=NEW_PASSWORD
    )
    assert status == 409 and "cannot be previewed again" in page
    assert NEW_PASSWORD not in _dump(store)


def test_a_new_token_is_shown_once_and_works(
    ada: FlaskClient, accounts: Accounts, store: Store
) -> None:
    status, page, plan = _preview(ada, "/tokens/create", name="ci", role="viewer")
    assert status == 200 and plan is not None
    assert "A new API token ci with role viewer." in page
    status, page = _apply(ada, "/tokens/create", plan, "ci")
    assert status == 200, page
    [secret] = _SECRET.findall(page)
    assert ada.get("/api/v1/overview", headers=bearer(secret)).status_code == 200
    assert ada.get("/api/v1/users", headers=bearer(secret)).status_code == 403  # a viewer
    assert secret not in _dump(store)
    for path in ("/users", "/audit", "/api/v1/tokens", "/api/v1/audit"):
        assert secret not in ada.get(path).get_data(as_text=True), path
    [token] = accounts.tokens()
    assert (token.name, token.role, token.created_by) == ("ci", "viewer", "ada")
    assert ("token:ci", "ok") in [e[:2] for e in _audit(store, "token.create")]


def test_the_json_twins_with_a_token(
    client: FlaskClient, users: dict[str, str], accounts: Accounts, store: Store
) -> None:
    admin = bearer(accounts.create_token("root", "admin", "tests")[1])
    answer = client.post(
        "/api/v1/tokens/create/preview", json={"name": "bot", "role": "operator"}, headers=admin
    )
    assert answer.status_code == 200, answer.get_json()
    preview = answer.get_json()
    assert preview["confirm"] == "bot"
    assert preview["preview"]["changes"][0] == "A new API token bot with role operator."
    made = client.post(
        "/api/v1/tokens/create/apply",
        json={"plan": preview["plan"], "confirm": "bot"},
        headers=admin,
    ).get_json()
    secret = made["secret"]
    assert made["token"]["name"] == "bot" and not made["token"]["revoked"]
    assert client.get("/api/v1/overview", headers=bearer(secret)).status_code == 200

    preview = client.post(
        "/api/v1/tokens/revoke/preview", json={"name": "bot"}, headers=admin
    ).get_json()
    accounts.revoke_token("bot")  # the CLI, meanwhile
    refused = client.post(
        "/api/v1/tokens/revoke/apply",
        json={"plan": preview["plan"], "confirm": "bot"},
        headers=admin,
    )
    assert refused.status_code == 409
    assert "revoked already" in refused.get_json()["error"]
    assert client.get("/api/v1/overview", headers=bearer(secret)).status_code == 401

    preview = client.post(
        "/api/v1/users/role/preview", json={"name": "vera", "role": "operator"}, headers=admin
    ).get_json()
    assert preview["preview"]["changes"][:2] == [
        "vera: viewer -> operator.",
        "vera is signed out everywhere (their sessions end).",
    ]
    accounts.set_password("vera", NEW_PASSWORD)  # a new session epoch
    refused = client.post(
        "/api/v1/users/role/apply",
        json={"plan": preview["plan"], "confirm": "vera"},
        headers=admin,
    )
    assert refused.status_code == 409
    again = refused.get_json()
    assert again["plan"] != preview["plan"]
    done = client.post(
        "/api/v1/users/role/apply", json={"plan": again["plan"], "confirm": "vera"}, headers=admin
    )
    assert done.status_code == 200 and done.get_json()["user"]["role"] == "operator"
    entry = store.audit.search(AuditFilter(action="user.set_role", target_prefix="user:vera"), 1)
    assert (entry[0].actor, entry[0].outcome) == ("token:root", "ok")

    created = client.post(
        "/api/v1/users/add/preview", json={"name": "api-user", "role": "viewer"}, headers=admin
    ).get_json()
    done = client.post(
        "/api/v1/users/add/apply",
        json={"plan": created["plan"], "confirm": "api-user", "password": NEW_PASSWORD},
        headers=admin,
    )
    assert done.status_code == 200 and done.get_json()["user"]["role"] == "viewer"
    assert NEW_PASSWORD not in _dump(store)


def test_revoking_a_token_through_the_pages(
    ada: FlaskClient, accounts: Accounts, tokens: dict[str, str], store: Store
) -> None:
    page = ada.get("/users").get_data(as_text=True)
    assert "t-viewer" in page and "Revoke" in page
    status, page, plan = _preview(ada, "/tokens/revoke", name="t-viewer")
    assert status == 200 and plan is not None
    assert "API token t-viewer (viewer, created by tests) is revoked" in page
    status, page = _apply(ada, "/tokens/revoke", plan, "t-viewer")
    assert status == 200, page
    assert ada.get("/api/v1/overview", headers=bearer(tokens["viewer"])).status_code == 401
    status, page, plan = _preview(ada, "/tokens/revoke", name="t-viewer")
    assert status == 400 and "revoked already" in page
    listed = ada.get("/api/v1/tokens").get_json()["tokens"]
    assert [t["revoked"] for t in listed] == [False, False, True]


@pytest.mark.parametrize(
    ("path", "fields", "status"),
    [
        ("/users/role", {"name": "nobody", "role": "admin"}, 404),
        ("/users/role", {"name": "otto", "role": "root"}, 400),
        ("/users/role", {"name": "otto", "role": "operator"}, 400),  # the role it has
        ("/users/role", {"name": "<script>", "role": "admin"}, 400),
        ("/users/remove", {"name": "x" * 65}, 400),
        ("/users/add", {"name": "otto", "role": "viewer"}, 409),
        ("/users/add", {"name": "new", "role": ""}, 400),
        ("/tokens/create", {"name": "a b", "role": "viewer"}, 400),
        ("/tokens/revoke", {"name": "none"}, 404),
    ],
)
def test_bad_input_changes_nothing(
    ada: FlaskClient, accounts: Accounts, path: str, fields: dict[str, str], status: int
) -> None:
    before = (accounts.users(), accounts.tokens())
    got, page, plan = _preview(ada, path, **fields)
    assert got == status and plan is None, page
    assert (accounts.users(), accounts.tokens()) == before


def test_a_bad_plan_or_confirm_changes_nothing(ada: FlaskClient, accounts: Accounts) -> None:
    for forged in ("", "forged", "x" * 43):
        status, _ = _apply(ada, "/users/remove", forged, "otto")
        assert status in {400, 409}, forged
    _, _, plan = _preview(ada, "/users/remove", name="otto")
    assert plan is not None
    # A plan is for its own kind of change.
    status, _ = _apply(ada, "/users/role", plan, "otto")
    assert status == 409
    assert [u.name for u in accounts.users()] == ["ada", "otto", "vera"]


def test_who_may_change_accounts(make_app: MakeApp, users: dict[str, str]) -> None:
    for changes, name in (({}, "vera"), ({}, "otto"), ({"admin_read_only": True}, "ada")):
        client = make_app(**changes).test_client()
        login(client, name)
        token = csrf_token(client)
        for path in ("/users/role/preview", "/users/add/apply", "/api/v1/tokens/create/preview"):
            answer = client.post(path, data={"csrf_token": token, "name": "vera", "role": "admin"})
            assert answer.status_code == 403, (name, path)
        if name == "ada":
            page = client.get("/users").get_data(as_text=True)
            assert "read-only mode" in page and "Change role" not in page


def test_the_lists_are_pages_by_name(ada: FlaskClient, accounts: Accounts) -> None:
    for i in range(101):
        accounts.create_token(f"tok{i:03d}", "viewer", "tests")
    first = ada.get("/api/v1/tokens").get_json()
    assert len(first["tokens"]) == 100 and first["next_after"] == "tok099"
    rest = ada.get("/api/v1/tokens?after=tok099").get_json()
    assert [t["name"] for t in rest["tokens"]] == ["tok100"] and rest["next_after"] is None
    page = ada.get("/users").get_data(as_text=True)
    assert "tokens_after=tok099" in page
    assert ada.get("/users?tokens_after=<bad>").status_code == 400
    assert ada.get("/api/v1/users?after=" + "x" * 65).status_code == 400
