"""Changes in a real browser, preview then confirm: an offset reset from the group page
and a resend of dead letters whose texts are hostile. Nothing changes before the
confirm, a wrong typed name changes nothing, and the result says what happened."""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import Page, expect

from ems.store import Store
from tests.browser.conftest import LiveConsole, nothing_ran, signed_in
from tests.integration import seed

HOSTILE = ('"><svg onload=alert(1)>', "<script>alert(1)</script>", "<img src=x onerror=alert(1)>")


def test_an_offset_reset_through_preview_and_confirm(
    page: Page, live_console: LiveConsole, store: Store, artifacts: Path
) -> None:
    topic = store.topics.create("readings", 2, 24, 1024)
    for p in (0, 1):
        seed.messages(store, topic, p, range(10), age_hours=1)
    group = seed.group(store, "handlers", topic)
    seed.commit(store, group, 0, 6)
    seed.commit(store, group, 1, 8)

    signed_in(page, "otto")
    page.goto("/groups/handlers")
    page.get_by_role("link", name="Reset offsets…").click()
    page.get_by_label("the earliest stored offset").check()
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Preview: reset offsets")
    expect(page.locator("#summary")).to_contain_text("14 messages replayed")
    expect(page.locator("main")).to_have_attribute("data-static", "")  # never live-refreshed
    page.screenshot(path=artifacts / "reset-preview.png", full_page=True)
    assert store.groups.offsets(group.id) == {0: 6, 1: 8}

    page.get_by_label("Type the group").fill("handler")
    page.get_by_role("button", name="Reset offsets").click()
    expect(page.get_by_role("alert")).to_contain_text("exactly to confirm")
    assert store.groups.offsets(group.id) == {0: 6, 1: 8}

    page.get_by_label("Type the group").fill("handlers")
    page.get_by_role("button", name="Reset offsets").click()
    expect(page.locator("#outcome")).to_have_text("Done: 2 partitions now start from earliest.")
    assert store.groups.offsets(group.id) == {0: 0, 1: 0}
    page.get_by_role("link", name="Back to the group").click()
    expect(page.locator("#partition-0 .committed")).to_have_text("0")


def test_a_dead_letter_resend_with_hostile_texts(
    page: Page, live_console: LiveConsole, store: Store, artifacts: Path
) -> None:
    topic = store.topics.create("readings", 1, 24, 1024)
    seed.messages(store, topic, 0, range(5), age_hours=1)
    group = seed.group(store, "handlers", topic)
    for offset, text in enumerate(HOSTILE):
        seed.sql(
            store,
            "INSERT INTO dead_message (group_id, topic_id, partition_no, offset_no, "
            "message_id, msg_key, headers, body, attempts, last_error) "
            "VALUES (%s, %s, 0, %s, %s, %s, %s, %s, 3, %s)",
            (
                group.id,
                topic.id,
                offset,
                seed.message_id(store, topic, 0, offset),
                text.encode(),
                json.dumps({text: text}),
                text.encode(),
                f"ValueError: {text}",
            ),
        )

    signed_in(page, "otto")
    page.goto("/dead-letters")
    errors = page.locator("table.dead-letters td.error-text")
    expect(errors).to_have_text([f"ValueError: {t}" for t in HOSTILE])
    nothing_ran(page)
    page.get_by_role("link", name="1", exact=True).click()
    # The key and the body, printable text, shown as text (and never run).
    expect(page.locator("#key")).to_have_text(HOSTILE[0])
    expect(page.locator("pre.body")).to_have_text(HOSTILE[0])
    expect(page.locator("table.headers td").first).to_have_text(HOSTILE[0])
    nothing_ran(page)

    page.goto("/dead-letters")
    checks = page.locator('input[name="id"]')
    checks.nth(0).check()
    checks.nth(2).check()
    page.get_by_role("button", name="Resend to the topic…").click()
    expect(page.locator("#summary")).to_contain_text("2 dead letters listed: 2 would change")
    page.screenshot(path=artifacts / "dead-letters-preview.png", full_page=True)
    page.get_by_label("Type the name").fill("handlers")
    page.get_by_role("button", name="Resend to the topic").click()
    expect(page.locator("#outcome")).to_have_text("Done: 2 resent.")
    expect(page.locator("table.outcomes tbody tr")).to_have_count(2)
    nothing_ran(page)
    resent = seed.sql(store, "SELECT id FROM dead_message WHERE resent_at IS NOT NULL")
    assert len(resent) == 2
