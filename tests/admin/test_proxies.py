"""Behind a reverse proxy: X-Forwarded-For and X-Forwarded-Proto believed from trusted
peers only (EMS_ADMIN_FORWARDED_ALLOW_IPS), Secure cookies forced
(EMS_ADMIN_SECURE_COOKIES), and HSTS (EMS_ADMIN_HSTS_SECONDS)."""

from __future__ import annotations

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from ems.admin.proxies import Trust
from ems.config import Settings
from ems.exceptions import InvalidSetting
from ems.store import Store
from tests.admin.conftest import MakeApp, login
from tests.integration import seed

PROXY = "10.1.2.3"
OUTSIDER = "203.0.113.9"
INGRESS = ("10.0.0.0/8",)


def client_from(app: Flask, peer: str, **headers: str) -> FlaskClient:
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = peer
    for name, value in headers.items():
        client.environ_base["HTTP_" + name.upper().replace("-", "_")] = value
    return client


def session_cookie(response: TestResponse) -> str:
    (cookie,) = [
        c for c in response.headers.getlist("Set-Cookie") if c.startswith("ems_admin_session=")
    ]
    return cookie


def counted_addresses(store: Store) -> set[str]:
    found = seed.sql(store, "SELECT scope FROM admin_login_failure WHERE scope LIKE 'address:%%'")
    return {scope.removeprefix("address:") for (scope,) in found}


def long_back_off(store: Store) -> None:
    """As if every pair with failures had failed 10 times (a 128 s back-off): the next
    attempt is refused however slow the machine is."""
    seed.sql(
        store,
        "UPDATE admin_login_failure SET failures = 10, last_at = NOW(6) "
        "WHERE scope LIKE 'pair:%%' AND failures > 0",
    )


def test_the_client_is_read_from_the_right_past_our_own_proxies() -> None:
    trust = Trust(["10.0.0.0/8", "::1"])
    assert trust.peer("10.9.9.9") and trust.peer("::1")
    assert not trust.peer("203.0.113.9") and not trust.peer("") and not trust.peer("x")
    assert trust.client(PROXY, "198.51.100.7") == "198.51.100.7"
    # A client's own entry to the left of the real one is never reached.
    assert trust.client(PROXY, "1.1.1.1, 198.51.100.7, 10.0.0.2") == "198.51.100.7"
    assert trust.client(PROXY, None) == PROXY
    assert trust.client(PROXY, "") == PROXY
    assert trust.client(PROXY, "1.1.1.1, garbage, 10.0.0.2") == "10.0.0.2"
    # Any peer, for the one entry it appended.
    assert Trust(["*"]).client(OUTSIDER, "1.1.1.1, 198.51.100.7") == "198.51.100.7"


@pytest.mark.parametrize("value", ["nope", "10.0.0.0/33", "*,10.0.0.1"])
def test_a_malformed_allow_list_is_refused(value: str) -> None:
    with pytest.raises(InvalidSetting, match="EMS_ADMIN_FORWARDED_ALLOW_IPS"):
        Settings.from_env({"EMS_ADMIN_FORWARDED_ALLOW_IPS": value})


def test_the_defaults_trust_this_machine_only() -> None:
    defaults = Settings.from_env({})
    assert defaults.admin_forwarded_allow_ips == ("127.0.0.1", "::1")
    assert (defaults.admin_secure_cookies, defaults.admin_hsts_seconds) == (False, 0)
    assert Settings.from_env({"EMS_ADMIN_FORWARDED_ALLOW_IPS": ""}).admin_forwarded_allow_ips == ()


def test_the_cookie_is_secure_over_https_from_a_trusted_proxy_only(
    make_app: MakeApp, users: dict[str, str]
) -> None:
    app = make_app(admin_forwarded_allow_ips=INGRESS)
    via_ingress = client_from(
        app,
        PROXY,
        x_forwarded_proto="https",
        x_forwarded_for="198.51.100.7",
        referer="https://localhost/login",
    )
    assert "; Secure" in session_cookie(login(via_ingress, "ada"))
    spoofed = client_from(app, OUTSIDER, x_forwarded_proto="https")
    assert "Secure" not in session_cookie(login(spoofed, "ada"))
    plain = client_from(app, PROXY)
    assert "Secure" not in session_cookie(login(plain, "ada"))


def test_secure_cookies_can_be_forced(make_app: MakeApp, users: dict[str, str]) -> None:
    app = make_app(admin_secure_cookies=True)
    cookie = session_cookie(login(client_from(app, OUTSIDER), "ada"))
    assert "; Secure" in cookie and "HttpOnly" in cookie


@pytest.mark.parametrize("path", ["/login", "/static/admin.css", "/no/such/page"])
def test_hsts_only_when_set(make_app: MakeApp, path: str) -> None:
    assert "Strict-Transport-Security" not in make_app().test_client().get(path).headers
    answer = make_app(admin_hsts_seconds=31_536_000).test_client().get(path)
    assert answer.headers["Strict-Transport-Security"] == "max-age=31536000"


def test_forwarded_for_from_an_outsider_is_ignored(
    make_app: MakeApp, users: dict[str, str], store: Store
) -> None:
    app = make_app(admin_forwarded_allow_ips=INGRESS)
    for i in range(3):
        spoofer = client_from(app, OUTSIDER, x_forwarded_for=f"192.0.2.{i}")
        assert login(spoofer, "ada", "wrong password here").status_code == 200
    assert counted_addresses(store) == {OUTSIDER}
    long_back_off(store)
    # The back-off holds, whatever address the outsider claims next.
    assert login(client_from(app, OUTSIDER, x_forwarded_for="192.0.2.99"), "ada").status_code == 429


def test_forwarded_for_from_a_trusted_proxy_is_the_client(
    make_app: MakeApp, users: dict[str, str], store: Store
) -> None:
    app = make_app(admin_forwarded_allow_ips=INGRESS)
    attacker = client_from(app, PROXY, x_forwarded_for="192.0.2.66")
    for _ in range(3):
        assert login(attacker, "ada", "wrong password here").status_code == 200
    long_back_off(store)
    assert login(attacker, "ada").status_code == 429
    assert counted_addresses(store) == {"192.0.2.66"}
    # Everyone shares the proxy's connection, yet the owner is not kept out.
    owner = client_from(app, PROXY, x_forwarded_for="198.51.100.7")
    assert login(owner, "ada").status_code == 302
