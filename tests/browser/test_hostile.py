"""Hostile text in a real browser: what an attacker can put on the console's pages (a typed
name, the `next` link, names in the database) is shown as text and runs nothing, and the
login sends nobody off-site.

Each payload would open a dialog or set window.__emsXss if it ran; the page fixture fails
the test on any dialog, page error, CSP violation (a payload that got into the markup
and was stopped only by the policy) or request to another site.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from ems.store import Store
from tests.browser.conftest import LiveConsole, nothing_ran, sign_in, signed_in
from tests.integration import seed

#: Each breaks out of an attribute or a text node and runs script if printed unescaped.
PAYLOADS = (
    '"><svg onload=alert(1)>',
    "<script>alert(1)</script>",
    '\'><img src=x onerror="window.__emsXss=1">',
    "</title><script>window.__emsXss=1</script>",
)


@pytest.mark.parametrize("name", PAYLOADS)
def test_a_hostile_name_typed_at_login_comes_back_as_text(
    page: Page, live_console: LiveConsole, name: str
) -> None:
    page.goto("/login")
    sign_in(page, name, "whatever the password")
    expect(page.get_by_role("alert")).to_have_text("Wrong name or password.")
    expect(page.get_by_label("Name")).to_have_value(name)  # re-rendered, as typed
    expect(page.locator("input")).to_have_count(4)  # csrf_token, next, name, password
    nothing_ran(page)
    assert page.title() == "Sign in · ems admin"


@pytest.mark.parametrize("target", ["javascript:alert(1)", "//evil.example/"])
def test_the_next_link_cannot_leave_the_site(
    page: Page, live_console: LiveConsole, target: str
) -> None:
    page.goto("/login?next=" + quote(target, safe=""))
    expect(page.locator('input[name="next"]')).to_have_value("/")
    sign_in(page, "vera")
    expect(page).to_have_url(live_console.at("/"))
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    nothing_ran(page)


def test_a_hostile_next_path_stays_an_attribute_value(
    page: Page, live_console: LiveConsole
) -> None:
    """A path on this site is a valid `next`, quotes and angle brackets included: it is
    printed into the form's hidden field, and after sign-in the browser goes to that path
    on this site (a 404)."""
    target = PAYLOADS[0].replace('"', '/"', 1)  # '/"><svg onload=alert(1)>'
    page.goto("/login?next=" + quote(target, safe=""))
    expect(page.locator('input[name="next"]')).to_have_value(target)
    expect(page.locator("input")).to_have_count(4)
    nothing_ran(page)
    with page.expect_response(lambda r: r.request.is_navigation_request() and r.status == 404):
        sign_in(page, "vera")
    assert page.url.startswith(live_console.url + "/")
    expect(page.get_by_role("heading", name="404")).to_be_visible()
    nothing_ran(page)


def test_hostile_names_in_the_database_are_shown_literally(
    page: Page, live_console: LiveConsole, store: Store
) -> None:
    """Topic, group and user names are checked when made; names written by other means
    (SQL, an older release) still reach the pages as text only."""
    topic_name, group_name, user_name = PAYLOADS[1], PAYLOADS[2], PAYLOADS[3]
    topic = store.topics.create("orders", 1, 24, 1024)
    seed.group(store, "billing", topic)
    seed.sql(store, "UPDATE topic SET name = %s WHERE id = %s", (topic_name, topic.id))
    seed.sql(store, "UPDATE consumer_group SET name = %s WHERE name = 'billing'", (group_name,))

    signed_in(page, "ada")
    # The session names the user by id: renamed, the signed-in admin is shown by the new
    # name in the header and on the users page.
    seed.sql(store, "UPDATE admin_user SET name = %s WHERE name = 'ada'", (user_name,))
    page.reload()
    cells = page.locator("table.groups tbody tr").first.locator("td")
    expect(cells.nth(0)).to_have_text(group_name)
    expect(cells.nth(1)).to_have_text(topic_name)
    expect(page.locator(".who .principal")).to_have_text(user_name)
    nothing_ran(page)

    page.locator("header nav").get_by_role("link", name="Users").click()
    expect(
        page.locator("table.users tbody td").get_by_text(f"{user_name} (you)", exact=True)
    ).to_have_count(1)
    expect(page.locator(".who .principal")).to_have_text(user_name)
    nothing_ran(page)
    assert page.title() == "Users · ems admin"
