"""The console's script in a real browser: the theme follows the system and a choice is
remembered, "/" and "?" work but never while typing, live refresh is off until turned on
and then swaps <main> unless the tab is hidden or a field has focus, times say how long
ago on hover, and the lag chart draws an SVG with a hostile topic name as text.
Screenshots: var/browser/group-dark.png, lag-chart.png, lag-chart-dark.png."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from playwright.sync_api import Page, expect

from ems.store import Store
from ems.topics import TopicAdmin
from tests.browser.conftest import LiveConsole, signed_in
from tests.integration import seed, seed_browse

HOSTILE = '"><svg onload=alert(1)>'
WHITE, DARK = "rgb(255, 255, 255)", "rgb(20, 24, 28)"


def _orders(store: Store) -> None:
    """Topic orders and group billing with a day of snapshots and a lag report (ERR)."""
    topic = TopicAdmin(store=store).create("orders", 2)
    group = seed.group(store, "billing", topic)
    now = store.messages.now() - dt.timedelta(seconds=1)
    seed_browse.series_snapshots(store, group, 2, 24 * 6, 600.0, now)
    seed_browse.report(store, group, {0: "STALL", 1: "OK"}, "ERR")


def _background(page: Page) -> str:
    found: str = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    return found


def _contrast(page: Page, selector: str) -> float:
    """The lowest contrast ratio between the text of `selector`'s elements and the page."""
    colours: list[list[float]] = page.evaluate(
        """(selector) => {
          const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
          const bg = rgb(getComputedStyle(document.body).backgroundColor);
          return [bg, ...[...document.querySelectorAll(selector)].map(
            (e) => rgb(getComputedStyle(e).color))];
        }""",
        selector,
    )

    def luminance(rgb: list[float]) -> float:
        def channel(c: float) -> float:
            c /= 255
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

        r, g, b = (channel(c) for c in rgb)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    bg = luminance(colours[0])
    assert len(colours) > 1, f"nothing matches {selector}"
    ratios = [(max(bg, luminance(c)) + 0.05) / (min(bg, luminance(c)) + 0.05) for c in colours[1:]]
    return min(ratios)


def test_the_theme_follows_the_system_and_a_choice_is_remembered(
    page: Page, live_console: LiveConsole, store: Store, artifacts: Path
) -> None:
    _orders(store)
    page.emulate_media(color_scheme="dark")
    signed_in(page, "vera")
    html = page.locator("html")
    theme = page.get_by_label("Theme")
    expect(theme).to_have_value("system")
    assert html.get_attribute("data-theme") is None
    assert _background(page) == DARK
    page.emulate_media(color_scheme="light")
    assert _background(page) == WHITE

    # A choice overrides the system, and outlives a reload and other pages.
    theme.select_option("dark")
    expect(html).to_have_attribute("data-theme", "dark")
    assert _background(page) == DARK
    page.goto("/groups/billing")
    expect(page.locator("#status .status")).to_have_text("ERR")
    expect(theme).to_have_value("dark")
    assert _background(page) == DARK
    # Statuses are words, readable on either palette (WCAG AA: 4.5).
    assert _contrast(page, "main .status, main a, main .reason") >= 4.5
    page.screenshot(path=artifacts / "group-dark.png", full_page=True)
    page.reload()
    expect(html).to_have_attribute("data-theme", "dark")
    page.goto("/groups/billing/lag?range=24h")
    expect(page.locator("main svg.chart")).to_be_visible()
    page.screenshot(path=artifacts / "lag-chart-dark.png", full_page=True)

    theme.select_option("light")
    page.emulate_media(color_scheme="dark")
    assert _background(page) == WHITE
    page.goto("/groups/billing")
    assert _contrast(page, "main .status, main a, main .reason") >= 4.5
    theme.select_option("system")
    assert html.get_attribute("data-theme") is None
    assert _background(page) == DARK


def test_slash_searches_and_question_mark_opens_the_help_but_not_while_typing(
    page: Page, live_console: LiveConsole
) -> None:
    signed_in(page, "vera")
    page.goto("/topics")
    search = page.get_by_role("searchbox")
    help_dialog = page.locator("dialog#shortcuts")
    page.keyboard.press("/")
    expect(search).to_be_focused()
    page.keyboard.type("a/b?")
    expect(search).to_have_value("a/b?")
    expect(help_dialog).to_be_hidden()

    page.locator("h1").click()  # out of the field
    page.keyboard.press("Control+/")
    expect(search).not_to_be_focused()
    page.keyboard.press("?")
    expect(help_dialog).to_be_visible()
    expect(help_dialog.get_by_role("heading")).to_have_text("Keyboard shortcuts")
    page.keyboard.press("Escape")
    expect(help_dialog).to_be_hidden()
    page.get_by_role("button", name="?").click()
    expect(help_dialog).to_be_visible()
    help_dialog.get_by_role("button", name="Close").click()
    expect(help_dialog).to_be_hidden()


def _mark(page: Page) -> None:
    """Tag the current <main>: a refresh replaces it with one without the tag."""
    page.evaluate("() => document.querySelector('main').setAttribute('data-old', '1')")


def _stays(page: Page) -> None:
    page.wait_for_timeout(800)  # four refresh periods
    expect(page.locator("main[data-old]")).to_have_count(1)


def test_live_refresh_is_off_until_turned_on_and_waits_for_the_reader(
    page: Page, live_console: LiveConsole, store: Store
) -> None:
    topics = TopicAdmin(store=store)
    topics.create("first", 1)
    signed_in(page, "vera")
    page.goto("/topics")
    toggle = page.locator("#live-toggle")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    expect(toggle).to_have_text("Live: off")
    page.evaluate("() => document.documentElement.setAttribute('data-live-interval-ms', '200')")
    _mark(page)
    topics.create("second", 1)
    _stays(page)

    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(page.locator("main[data-old]")).to_have_count(0)
    expect(page.locator("table.topics").get_by_role("link", name="second")).to_be_visible()

    # Not while a field has focus ...
    search = page.get_by_role("searchbox")
    search.focus()
    _mark(page)
    topics.create("third", 1)
    _stays(page)
    page.evaluate("() => document.activeElement.blur()")
    expect(page.locator("main[data-old]")).to_have_count(0)
    expect(page.get_by_role("link", name="third")).to_be_visible()

    # ... nor while the tab is hidden. Hidden first, then marked: a refresh that lands
    # between the two calls (the page is still visible then) would replace the mark.
    page.evaluate(
        """() => {
          Object.defineProperty(document, 'visibilityState', {value: 'hidden', configurable: true});
          document.dispatchEvent(new Event('visibilitychange'));
        }"""
    )
    _mark(page)
    _stays(page)
    page.evaluate("() => { delete document.visibilityState; }")
    expect(page.locator("main[data-old]")).to_have_count(0)

    # Remembered in this tab; an edit to a form stops it until the page is left.
    page.reload()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    page.evaluate("() => document.documentElement.setAttribute('data-live-interval-ms', '200')")
    toggle.click()
    toggle.click()  # off and on again: the new period applies
    page.get_by_role("searchbox").fill("th")
    page.locator("h1").click()
    _mark(page)
    _stays(page)
    expect(toggle).to_have_text("Live: paused (form edited)")
    toggle.click()
    expect(toggle).to_have_text("Live: off")


def test_the_lag_chart_draws_a_hostile_topic_name_as_text_and_times_say_how_long_ago(
    page: Page, live_console: LiveConsole, store: Store, artifacts: Path
) -> None:
    _orders(store)
    seed.sql(store, "UPDATE topic SET name = %s WHERE name = 'orders'", (HOSTILE,))
    signed_in(page, "vera")
    page.goto("/groups/billing")
    page.get_by_role("link", name="Lag over time").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Lag of group billing on {HOSTILE}")
    page.get_by_role("link", name="24 hours").click()
    expect(page).to_have_url(re.compile(r"/groups/billing/lag\?range=24h$"))
    chart = page.get_by_role("img", name=f"Lag of group billing on {HOSTILE}, the last 24 hours")
    expect(chart).to_be_visible()
    expect(page.locator("main svg")).to_have_count(1)  # the chart, and no injected one
    expect(page.locator("svg[onload], main img, main script")).to_have_count(0)
    assert page.evaluate("() => window.__emsXss === undefined")
    rows = page.locator("table.series tbody tr")
    assert 0 < rows.count() <= 100
    expect(page.locator("svg.chart circle.dot")).to_have_count(rows.count())
    expect(page.locator("svg.chart .labels text").first).to_have_text("0")
    page.screenshot(path=artifacts / "lag-chart.png", full_page=True)

    newest = rows.last.locator("time")
    expect(newest).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"))
    newest.hover()
    expect(newest).to_have_attribute("title", re.compile(r"^(just now|\d+ s ago)$"))
    oldest = rows.first.locator("time")
    oldest.hover()
    expect(oldest).to_have_attribute("title", re.compile(r"^(2[0-3]|1\d) h ago$"))
    said = page.evaluate(
        """() => [0, 4e3, 42e3, 3 * 60e3, 5 * 3600e3, 2 * 86400e3, -3 * 60e3].map(
             (ago) => window.emsRelativeTime(1e12 - ago, 1e12))"""
    )
    assert said == [
        "just now",
        "just now",
        "42 s ago",
        "3 min ago",
        "5 h ago",
        "2 d ago",
        "in 3 min",
    ]
