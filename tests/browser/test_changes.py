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


def test_a_streaming_query_paged_then_dropped_through_preview_and_confirm(
    page: Page, live_console: LiveConsole, store: Store, artifacts: Path
) -> None:
    """A query of 150 partitions: 100 on the first page, the rest behind the next link;
    then its drop, a wrong name changing nothing."""
    topic = store.topics.create("readings", 150, 24, 1024)
    seed.messages(store, topic, 0, range(4), age_hours=1)
    store.stream_queries.record("windows", [(topic.id, p, 1) for p in range(150)])

    signed_in(page, "ada")
    page.goto("/streaming-queries")
    page.get_by_role("link", name="windows").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("windows")
    expect(page.locator("#total-lag")).to_have_text("3")
    expect(page.locator("table.partitions tbody tr")).to_have_count(100)
    page.get_by_role("link", name="next partitions").click()
    expect(page.locator("table.partitions tbody tr")).to_have_count(50)
    page.get_by_role("button", name="Preview drop of the query…").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Preview: drop streaming query")
    expect(page.locator("#summary")).to_contain_text("150 partitions of 1 topic (readings)")
    page.screenshot(path=artifacts / "query-drop-preview.png", full_page=True)

    page.get_by_label("Type the query name").fill("window")
    page.get_by_role("button", name="Drop query").click()
    expect(page.get_by_role("alert")).to_contain_text("exactly to confirm")
    assert store.stream_queries.totals("windows") is not None

    page.get_by_label("Type the query name").fill("windows")
    page.get_by_role("button", name="Drop query").click()
    expect(page.locator("#outcome")).to_have_text("Done: the positions of 150 partitions dropped.")
    assert store.stream_queries.totals("windows") is None
