"""Every page of the console opens in a real browser, signed in as an admin, on a seeded
database: each answers 200, has its heading, runs under the Content-Security-Policy with
no error, and fits a laptop's width (the page fixture fails the test on any CSP
violation, page error or dialog)."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from ems.store import Store
from tests.browser.conftest import LAPTOP, LiveConsole, scroll_widths, signed_in
from tests.integration import seed, seed_browse, sql_seed

#: (path, a text its first heading holds)
PAGES = (
    ("/", "Overview"),
    ("/topics", "Topics"),
    ("/topics/orders", "orders"),
    ("/topics/orders/volume?range=24h", "orders"),
    ("/ranking?window=day", "Busiest topics"),
    ("/groups", "Consumer groups"),
    ("/groups/billing", "billing"),
    ("/groups/billing/lag?range=7d", "billing"),
    ("/streaming-queries", "Streaming queries"),
    ("/streaming-queries/nightly", "nightly"),
    ("/reset?group=billing", "Reset offsets"),
    ("/messages", "Messages"),
    ("/messages?topic=orders&partition=1", "Messages"),
    ("/messages/orders/1/3", "orders"),
    ("/dead-letters", "Dead letters"),
    ("/alarms?state=all", "Alarms"),
    ("/autoscale", "Autoscaling"),
    ("/audit", "Audit"),
    ("/users", "Users"),
)


def test_every_page_opens(
    page: Page, live_console: LiveConsole, store: Store, artifacts: Path
) -> None:
    seeded = sql_seed.seed_all(store)
    seed_browse.report(store, seeded.billing, {0: "STALL", 1: "WARN", 2: "OK", 3: "OK"}, "ERR")
    now = seed.sql(store, "SELECT NOW(6)")[0][0]
    seed_browse.series_watermarks(store, seeded.orders, 4, 5, 600, now)
    seed_browse.series_snapshots(store, seeded.billing, 4, 40, 4 * 3600, now)
    dead_id = seed.sql(store, "SELECT MIN(id) FROM dead_message")[0][0]
    store.stream_queries.record("nightly", [(seeded.orders.id, p, 1) for p in range(4)])
    signed_in(page, "ada")
    for path, heading in (*PAGES, (f"/dead-letters/{dead_id}", "Dead letter")):
        response = page.goto(path)
        assert response is not None and response.status == 200, path
        expect(page.get_by_role("heading", level=1)).to_contain_text(heading)
        assert scroll_widths(page)[0] <= LAPTOP["width"], path
    page.goto("/groups/billing/lag?range=7d")
    expect(page.locator("main svg")).to_have_count(1)
    page.screenshot(path=artifacts / "lag-7d.png", full_page=True)
