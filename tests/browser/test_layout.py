"""The console's layout at a laptop's and a phone's width: screenshots of the overview in
var/browser/ to look at, and no page wider than a phone's screen (nothing to scroll
sideways)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from playwright.sync_api import Page, expect

from ems.consumer.groups import ensure_group
from ems.store import Store
from ems.types import GroupInfo
from tests.browser.conftest import LAPTOP, PHONE, LiveConsole, scroll_widths, signed_in
from tests.integration import seed, seed_browse, sql_seed

AS_OF = dt.datetime(2026, 11, 22, 10, 0)


def _lag(store: Store, report: int, group: GroupInfo, lag: int, status: str, worst: str) -> None:
    seed.sql(
        store,
        "INSERT INTO lag_report (report_id, group_id, partition_no, topic_id, high_watermark, "
        "committed_offset, lag, snapshots, status, group_status, last_captured_at) "
        "VALUES (%s, %s, 0, %s, %s, 0, %s, 3, %s, %s, NOW(6))",
        (report, group.id, group.topic_id, lag, lag, status, worst),
    )


def _seed(store: Store) -> None:
    """Topics and groups as a deployment has them, with names as long as they get in
    practice (one with no place to break a line but its dots), a published lag report
    over some of them and an open alarm."""
    readings = store.topics.create("iot.sensor-readings.eu-west-1.v2", 8, 24, 65536)
    commands = store.topics.create("device-commands", 2, 24, 4096)
    billing = seed.group(store, "billing-invoices-aggregator.eu-west-1", readings)
    dashboards = seed.group(store, "dashboards", readings)
    firmware = seed.group(store, "firmware-rollout", commands)
    seed.group(store, "sensor_readings.eu_west_1.hourly_aggregator", commands)
    ensure_group(store, "screens", readings, seed.options(broadcast=True))
    report = store.lag_reports.start(AS_OF, 900)
    _lag(store, report, billing, 125_000, "STALL", "ERR")
    _lag(store, report, dashboards, 1_800, "WARN", "WARN")
    _lag(store, report, firmware, 0, "OK", "OK")
    store.lag_reports.finish(report, 3)
    seed.sql(
        store,
        "INSERT INTO alarm (kind, condition_key, open_key, status, message) "
        "VALUES ('lag', 'lag:1', 'lag:1', 'open', 'billing is behind')",
    )


def test_the_overview_fits_a_laptop_and_a_phone(
    page: Page, live_console: LiveConsole, store: Store, artifacts: Path
) -> None:
    _seed(store)
    signed_in(page, "ada")
    expect(page.locator("table.groups tbody tr")).to_have_count(5)
    expect(page.locator("#open-alarms")).to_have_text("1")

    laptop = artifacts / "overview-laptop.png"
    page.screenshot(path=laptop, full_page=True)
    width, inner = scroll_widths(page)
    assert (width, inner) == (LAPTOP["width"], LAPTOP["width"])

    page.set_viewport_size(PHONE)
    phone = artifacts / "overview-phone.png"
    page.screenshot(path=phone, full_page=True)
    width, inner = scroll_widths(page)
    assert inner == PHONE["width"]
    assert width <= inner, f"the overview scrolls sideways on a phone: {width} > {inner}"
    print(f"screenshots: {laptop}, {phone}")
    assert laptop.stat().st_size > 0 and phone.stat().st_size > 0


def test_every_page_fits_a_phone(page: Page, live_console: LiveConsole, artifacts: Path) -> None:
    page.set_viewport_size(PHONE)
    page.goto("/login")
    pages = {"login": scroll_widths(page)}
    signed_in(page, "ada")
    for name, path in (
        ("users", "/users"),
        ("topics", "/topics"),
        ("groups", "/groups"),
        ("not-found", "/no-such-page"),
    ):
        page.goto(path)
        pages[name] = scroll_widths(page)
    page.goto("/users")
    page.screenshot(path=artifacts / "users-phone.png", full_page=True)
    wide = {name: w for name, (w, inner) in pages.items() if w > inner}
    assert not wide, f"pages that scroll sideways on a {PHONE['width']} px phone: {wide}"


def test_the_group_page_as_the_readme_shows_it(
    page: Page, live_console: LiveConsole, store: Store, artifacts: Path
) -> None:
    """The group page of a group with a live leader, a dead member still holding a
    partition, lag and a lag report: var/browser/group-page.png is the README's picture
    (copied to docs/images/console-group.png)."""
    seeded = sql_seed.seed_all(store)
    seed_browse.report(
        store, seeded.billing, {0: "STALL", 1: "WARN", 2: "OK", 3: "OK"}, "ERR", age_seconds=90
    )
    signed_in(page, "otto")
    page.goto("/groups/billing")
    expect(page.locator("#status")).to_contain_text("ERR")
    expect(page.locator("table.members tbody tr")).to_have_count(2)
    expect(page.locator("table.partitions tbody tr")).to_have_count(4)
    expect(page.locator("#partition-0 .lag")).to_have_text("3")
    assert scroll_widths(page)[0] <= LAPTOP["width"]
    page.screenshot(path=artifacts / "group-page.png", full_page=True)
