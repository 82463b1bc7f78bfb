"""The message pages in a real browser: a message whose key, headers and body hold
hostile markup is found by the search form and opened, and every payload shows as text
and runs nothing (the page fixture also fails the test on any dialog, page error or CSP
violation)."""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import Page, expect

from ems.store import Store
from tests.browser.conftest import LiveConsole, nothing_ran, signed_in
from tests.integration import seed

KEY = "<script>alert(1)</script>"
HEADER_NAME = '"><svg onload=alert(1)>'
HEADER_VALUE = "<img src=x onerror=alert(1)>"
BODY = "\n".join([KEY, HEADER_NAME, HEADER_VALUE, '<img src=x onerror="window.__emsXss=1">'])


def test_hostile_key_headers_and_body_are_shown_as_text(
    page: Page, live_console: LiveConsole, store: Store, artifacts: Path
) -> None:
    topic = store.topics.create("orders", 2, 24, 1024 * 1024)
    seed.group(store, "billing", topic)
    seed.sql(
        store,
        "INSERT INTO message (topic_id, partition_no, offset_no, msg_key, headers, body) "
        "VALUES (%s, 1, 0, %s, %s, %s)",
        (topic.id, KEY.encode(), json.dumps({HEADER_NAME: HEADER_VALUE}), BODY.encode()),
    )
    signed_in(page, "otto")
    page.locator("header nav").get_by_role("link", name="Messages").click()
    expect(page.get_by_role("heading", name="Messages")).to_be_visible()
    page.get_by_label("Topic").fill("orders")
    page.get_by_label("Key", exact=True).fill(KEY)
    page.get_by_label("Since").fill("1h")
    page.get_by_role("button", name="Search").click()
    row = page.locator("table.messages tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator('td[data-label="key"]')).to_have_text(KEY)
    expect(page.get_by_label("Key", exact=True)).to_have_value(KEY)
    nothing_ran(page)

    row.get_by_role("link", name="details").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("partition 1, offset 0")
    expect(page.locator("#key")).to_have_text(KEY)
    cells = page.locator("table.headers tbody td")
    expect(cells.nth(0)).to_have_text(HEADER_NAME)
    expect(cells.nth(1)).to_have_text(HEADER_VALUE)
    expect(page.locator("pre.body")).to_have_text(BODY)
    expect(page.locator(".body-label")).to_have_text("text (UTF-8), 118 bytes")
    expect(page.locator("table.timeline tbody tr")).to_have_count(2)  # produced, billing
    nothing_ran(page)
    page.screenshot(path=artifacts / "message.png", full_page=True)
