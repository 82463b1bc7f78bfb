"""Sign-in and sign-out: the form, the generic refusal, the throttle, CSRF, the session
that follows the account, and the audit trail."""

from __future__ import annotations

from flask import Flask
from flask.testing import FlaskClient

from ems.admin.views.auth import REFUSED
from ems.config import Settings
from ems.ops.accounts import Accounts, AuditLog
from ems.store import Store
from ems.values.accounts import AuditFilter
from ems.values.login_limits import FREE_FAILURES
from tests.admin.conftest import PASSWORD, csrf_token, login
from tests.integration import seed


def _audit(settings: Settings, action: str) -> list[tuple[str, str, str]]:
    with AuditLog(settings) as log:
        return [(e.actor, e.target, e.outcome) for e in log.search(AuditFilter(action=action))]


def test_signing_in_and_out(
    client: FlaskClient, users: dict[str, str], admin_settings: Settings
) -> None:
    response = login(client, "ada", next_url="/users")
    assert response.status_code == 302
    assert response.headers["Location"] == "/users"
    page = client.get("/users")
    assert page.status_code == 200
    assert "ada" in page.get_data(as_text=True)
    assert client.get("/logout").status_code == 405  # never by GET
    out = client.post("/logout", data={"csrf_token": csrf_token(client)})
    assert (out.status_code, out.headers["Location"]) == (302, "/login")
    assert client.get("/users").status_code == 302
    assert _audit(admin_settings, "login") == [("ada", "user:ada", "ok")]
    assert _audit(admin_settings, "logout") == [("ada", "user:ada", "ok")]


def test_login_goes_to_this_site_only(client: FlaskClient, users: dict[str, str]) -> None:
    for target in ("https://evil.example/", "//evil.example", "/\\evil.example"):
        response = login(client, "vera", next_url=target)
        assert response.headers["Location"] == "/", target


def test_a_wrong_password_and_an_unknown_name_get_the_same_answer(
    client: FlaskClient, users: dict[str, str], admin_settings: Settings
) -> None:
    wrong = login(client, "ada", "not the password at all")
    unknown = login(client, "nobody", PASSWORD)
    malformed = login(client, "<b>ada</b>", PASSWORD)
    for response in (wrong, unknown, malformed):
        assert response.status_code == 200
        page = response.get_data(as_text=True)
        assert REFUSED in page
        with client.session_transaction() as session:
            assert "uid" not in session
    assert "&lt;b&gt;ada&lt;/b&gt;" in malformed.get_data(as_text=True)
    assert "<b>ada</b>" not in malformed.get_data(as_text=True)
    assert client.get("/").status_code == 302  # still nobody
    assert [o for _, _, o in _audit(admin_settings, "login")] == ["refused"] * 3


def _many_failures(store: Store, failures: int) -> None:
    """As if the pairs had failed this often (their last failure now)."""
    seed.sql(
        store,
        "UPDATE admin_login_failure SET failures = %s, last_at = NOW(6) "
        "WHERE scope LIKE 'pair:%%' AND failures > 0",
        (failures,),
    )


def test_guessing_backs_off(client: FlaskClient, users: dict[str, str], store: Store) -> None:
    for _ in range(FREE_FAILURES):
        assert login(client, "otto", "wrong password here").status_code == 200
    _many_failures(store, FREE_FAILURES + 7)  # a 128 s back-off
    throttled = login(client, "otto", PASSWORD)  # even the right password waits
    assert throttled.status_code == 429
    assert 100 < int(throttled.headers["Retry-After"]) <= 128
    assert "Too many failed sign-ins" in throttled.get_data(as_text=True)
    assert client.get("/").status_code == 302


def test_guessing_from_one_address_keeps_nobody_out_from_another(
    app: Flask, users: dict[str, str], store: Store
) -> None:
    attacker = app.test_client()
    attacker.environ_base["REMOTE_ADDR"] = "10.6.6.6"
    for _ in range(FREE_FAILURES):
        assert login(attacker, "otto", "wrong password here").status_code == 200
    _many_failures(store, FREE_FAILURES + 7)
    assert login(attacker, "otto", PASSWORD).status_code == 429
    owner = app.test_client()
    owner.environ_base["REMOTE_ADDR"] = "192.168.1.20"
    assert login(owner, "otto", PASSWORD).status_code == 302


def test_a_login_without_its_csrf_token_is_refused(
    client: FlaskClient, users: dict[str, str]
) -> None:
    client.get("/login")
    for data in (
        {"name": "ada", "password": PASSWORD},
        {"name": "ada", "password": PASSWORD, "csrf_token": "x"},
    ):
        response = client.post("/login", data=data)
        assert response.status_code == 400
        assert "CSRF" in response.get_data(as_text=True)
    assert client.get("/").status_code == 302


def test_a_role_change_takes_effect_at_the_next_request(
    app: Flask, users: dict[str, str], accounts: Accounts
) -> None:
    client = app.test_client()
    login(client, "ada")
    assert client.get("/api/v1/users").status_code == 200
    accounts.add_user("root", "admin", PASSWORD)  # the last admin cannot lose the role
    accounts.set_role("ada", "viewer")
    after = client.get("/api/v1/users")
    assert after.status_code in (401, 403)
    login(client, "ada")
    assert client.get("/api/v1/users").status_code == 403
    assert client.get("/api/v1/overview").status_code == 200


def test_a_removed_user_is_signed_out(
    app: Flask, users: dict[str, str], accounts: Accounts
) -> None:
    client = app.test_client()
    login(client, "otto")
    assert client.get("/").status_code == 200
    accounts.remove_user("otto")
    assert client.get("/").status_code == 302
    assert client.get("/api/v1/overview").status_code == 401


def test_a_password_change_ends_the_session(
    app: Flask, users: dict[str, str], accounts: Accounts
) -> None:
    client = app.test_client()
    login(client, "vera")
    accounts.set_password("vera", "another long password")
    assert client.get("/").status_code == 302


def test_the_role_is_read_again_on_every_request(
    app: Flask, users: dict[str, str], store: Store
) -> None:
    """The session holds no role: a role written by anything else (here, SQL that leaves
    the session epoch alone) applies at once, in both directions."""
    client = app.test_client()
    login(client, "vera")
    assert client.get("/api/v1/users").status_code == 403
    seed.sql(store, "UPDATE admin_user SET role = 'admin' WHERE name = 'vera'")
    assert client.get("/api/v1/users").status_code == 200
    seed.sql(store, "UPDATE admin_user SET role = 'viewer' WHERE name = 'vera'")
    assert client.get("/api/v1/users").status_code == 403
    assert client.get("/api/v1/overview").status_code == 200
