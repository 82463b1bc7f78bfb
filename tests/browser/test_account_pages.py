"""Account changes in a real browser: an admin changes a user's role and creates an API
token, each through its preview and confirm pages; the token's secret is shown once (and
is on no page after), and hostile text in a token's "created by" is shown as text and runs
nothing. A screenshot of the users page goes to var/browser/users.png."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from ems.ops.accounts import Accounts
from tests.browser.conftest import LiveConsole, nothing_ran, signed_in

SCRIPT = "<script>window.__emsXss=1;alert(1)</script>"
SVG = '"><svg onload=alert(1)>'
IMG = "<img src=x onerror=alert(1)>"


def test_a_role_change_and_a_new_token_through_preview_and_confirm(
    page: Page, live_console: LiveConsole, artifacts: Path
) -> None:
    hostile = (SCRIPT + SVG + IMG)[:64]
    with Accounts(live_console.settings) as accounts:
        accounts.create_token("legacy", "viewer", hostile)

    signed_in(page, "ada")
    page.locator("header nav").get_by_role("link", name="Users").click()
    expect(page.get_by_role("heading", name="Users")).to_be_visible()
    legacy = page.locator("table#tokens tbody tr", has_text="legacy")
    expect(legacy.locator("td[data-label='created by']")).to_have_text(hostile)
    nothing_ran(page)

    otto = page.locator("table#users tbody tr", has_text="otto")
    otto.get_by_label("new role of otto").select_option("admin")
    otto.get_by_role("button", name="Change role…").click()
    expect(page.get_by_role("heading", name="Preview: change role otto")).to_be_visible()
    expect(page.locator("#changes")).to_contain_text("otto: operator -> admin.")
    expect(page.locator("#changes")).to_contain_text("otto is signed out everywhere")
    page.get_by_label("Type the user's name").fill("otto")
    page.get_by_role("button", name="Change role").click()
    expect(page.get_by_role("status")).to_have_text("Done.")
    expect(page.locator("#changes")).to_contain_text("otto: operator -> admin.")

    page.get_by_role("link", name="Back to the users").click()
    expect(
        page.locator("table#users tbody tr", has_text="otto").locator("td[data-label='role']")
    ).to_have_text("admin")
    form = page.locator("form#create-token")
    form.get_by_label("Name").fill("ci-bot")
    form.get_by_label("Role").select_option("viewer")
    form.get_by_role("button", name="Preview…").click()
    expect(page.locator("#changes")).to_contain_text("A new API token ci-bot with role viewer.")
    page.get_by_label("Type the token's name").fill("ci-bot")
    page.get_by_role("button", name="Create token").click()
    secret = page.locator("#secret").inner_text()
    assert re.fullmatch(r"ems_[A-Za-z0-9_-]{43}", secret)
    expect(page.locator("#token-secret")).to_contain_text("shown this once")

    page.get_by_role("link", name="Back to the users").click()
    expect(page.locator("table#tokens tbody tr", has_text="ci-bot")).to_have_count(1)
    assert secret not in page.content()
    page.goto(live_console.at("/users"))
    nothing_ran(page)
    page.screenshot(path=artifacts / "users.png", full_page=True)
