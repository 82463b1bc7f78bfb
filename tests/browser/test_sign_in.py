"""Signing in and out in a real browser: the login form, the pages each role may see, the
403 page, the sign-out form, and the sign-in throttle's 429."""

from __future__ import annotations

import re

from playwright.sync_api import Page, Response, expect

from ems.store import Store
from ems.values.login_limits import FREE_FAILURES
from tests.browser.conftest import LiveConsole, sign_in, signed_in
from tests.integration import seed


def test_a_viewer_signs_in_reads_is_refused_the_users_and_signs_out(
    page: Page, live_console: LiveConsole
) -> None:
    page.goto("/")
    expect(page).to_have_url(live_console.at("/login?next=/"))
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    sign_in(page, "vera")

    expect(page).to_have_url(live_console.at("/"))
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.locator(".who .principal")).to_have_text("vera")
    expect(page.locator(".who .role")).to_have_text("viewer")
    expect(page.locator("#topics")).to_have_text("0")
    expect(page.get_by_text("No consumer groups yet.")).to_be_visible()
    expect(page.locator("header nav").get_by_role("link", name="Users")).to_have_count(0)

    response = page.goto("/users")
    assert response is not None and response.status == 403
    expect(page.get_by_role("heading", name="403")).to_be_visible()
    expect(page.locator("p.error")).to_have_text("your role (viewer) may not do this")

    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(live_console.at("/login"))
    expect(page.get_by_role("button", name="Sign out")).to_have_count(0)
    page.goto("/")
    expect(page).to_have_url(live_console.at("/login?next=/"))


def test_an_admin_reaches_the_users_page_from_the_menu(
    page: Page, live_console: LiveConsole
) -> None:
    signed_in(page, "ada")
    page.locator("header nav").get_by_role("link", name="Users").click()
    expect(page).to_have_url(live_console.at("/users"))
    expect(page.get_by_role("heading", name="Users")).to_be_visible()
    rows = page.locator("table.users tbody tr")
    expect(rows).to_have_count(3)
    names = [rows.nth(i).locator("td").nth(0).inner_text() for i in range(3)]
    roles = [rows.nth(i).locator("td").nth(1).inner_text() for i in range(3)]
    assert dict(zip(names, roles, strict=True)) == {
        "ada (you)": "admin",
        "otto": "operator",
        "vera": "viewer",
    }
    page.locator("header nav").get_by_role("link", name="Overview").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_a_wrong_password_is_refused_and_the_throttle_answers_429(
    page: Page, live_console: LiveConsole
) -> None:
    page.goto("/login")
    for _ in range(FREE_FAILURES):
        with page.expect_response(_login_post) as answer:
            sign_in(page, "vera", "not the password at all")
        assert answer.value.status == 200
        expect(page.get_by_role("alert")).to_have_text("Wrong name or password.")
        expect(page.get_by_label("Name")).to_have_value("vera")

    store = Store(live_console.settings)
    try:  # as if it had failed 10 times: a 128 s back-off
        seed.sql(
            store,
            "UPDATE admin_login_failure SET failures = 10, last_at = NOW(6) "
            "WHERE scope LIKE 'pair:%%' AND failures > 0",
        )
    finally:
        store.close()
    with page.expect_response(_login_post) as answer:
        sign_in(page, "vera")  # the right password, too late
    assert answer.value.status == 429
    retry_after = int(answer.value.headers["retry-after"])
    assert 0 < retry_after <= 15 * 60
    expect(page.get_by_role("alert")).to_have_text(
        re.compile(rf"^Too many failed sign-ins\. Try again in {retry_after} seconds\.$")
    )
    expect(page.locator(".who")).to_have_count(0)  # nobody signed in
    page.goto("/")
    expect(page).to_have_url(live_console.at("/login?next=/"))


def _login_post(response: Response) -> bool:
    return response.request.method == "POST" and response.url.endswith("/login")
