"""Fixtures of the browser tests: one headless Chromium per run (Debian's, driven by
Playwright), the console served for real over HTTP on 127.0.0.1 with an account of each
role, and a page per test in a context of its own (no cookies shared) that fails its test
on a page error, a Content-Security-Policy violation, a dialog (alert, confirm) or a
request to another site.

The tests skip, saying why, when /usr/bin/chromium is missing (scripts/setup.sh installs
it when run as root). Screenshots go to var/browser/ (ignored by git); the run's summary
names them.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Dialog,
    Page,
    Request,
    Route,
    ViewportSize,
    expect,
    sync_playwright,
)
from playwright.sync_api import Error as PlaywrightError
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from ems.admin.app import create_app
from ems.admin.services import of
from ems.config import Settings
from ems.ops.accounts import Accounts
from tests.admin.conftest import PASSWORD, USERS
from tests.conftest import BROWSER_ARTIFACTS
from tests.hashing import cheap_password_hashing

CHROMIUM = Path("/usr/bin/chromium")
#: What Chromium needs on these machines: run as root without a sandbox, no GPU, and none
#: of its own network traffic (the machine's closed network refuses it, many at a time).
#: Playwright gives each launch a new, empty user-data-dir.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NO_CHROMIUM = (
    f"no Chromium at {CHROMIUM}: the browser tests drive Debian's chromium package "
    "(as root, scripts/setup.sh installs it; or run: apt-get install chromium)"
)
LAPTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}

#: Reports a securitypolicyviolation event of any document the page loads to Python.
_CSP_LISTENER = """
document.addEventListener("securitypolicyviolation", (e) => {
  window.__emsCspViolation({
    directive: e.effectiveDirective, blocked: e.blockedURI, sample: e.sample,
    url: e.documentURI,
  });
});
"""
_CSP_CONSOLE = re.compile(r"Content Security Policy", re.IGNORECASE)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium per test module (the browser tests run in the Spark lane under
    xdist: see _SHARED_FIXTURES in tests/conftest.py). Not one per session: Playwright's sync API
    keeps an event loop running on the thread while it is started, and the asyncio tests
    that run on the same worker afterwards need the thread free of one."""
    if not CHROMIUM.exists():
        pytest.skip(NO_CHROMIUM)
    with sync_playwright() as playwright:
        found = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True
        )
        yield found
        found.close()


@dataclass(frozen=True)
class LiveConsole:
    """The console served over HTTP: its address, settings and app."""

    url: str
    settings: Settings
    app: Flask

    def at(self, path: str) -> str:
        return self.url + path


@pytest.fixture
def live_console(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveConsole]:
    """create_app(settings) served by werkzeug on a free port of 127.0.0.1 (threads: the
    browser opens several connections at once), with vera (viewer), otto (operator) and
    ada (admin), each with PASSWORD.

    The passwords are hashed with argon2id at its cheapest: these tests are about the
    pages, and the default parameters cost a tenth of a second per account and sign-in
    (the console's own tests keep them)."""
    cheap_password_hashing(monkeypatch)
    console_settings = settings.with_(admin_secret_key=secrets.token_urlsafe(48))
    with Accounts(console_settings) as accounts:
        for name, role in USERS.items():
            accounts.add_user(name, role, PASSWORD)
    app = create_app(console_settings)
    server: BaseWSGIServer = make_server(
        "127.0.0.1", 0, app, threaded=True, request_handler=_NoDelayHandler
    )
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield LiveConsole(f"http://127.0.0.1:{server.server_port}", console_settings, app)
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
        of(app).close()


class _NoDelayHandler(WSGIRequestHandler):
    """Answers sent at once: with Nagle's algorithm, each answer on a kept-alive
    connection waits for the client's delayed ACK (40 ms a request)."""

    disable_nagle_algorithm = True


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go: var/browser/ of the checkout (ignored by git)."""
    BROWSER_ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return BROWSER_ARTIFACTS


@dataclass
class PageWatch:
    """What a page did that a test of the console must not see: page errors, CSP
    violations (the DOM event and Chromium's console report), dialogs, requests to other
    sites."""

    origin: str
    errors: list[str] = field(default_factory=list)
    csp: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    offsite: list[str] = field(default_factory=list)
    #: Every console message, to show beside the problems.
    console: list[str] = field(default_factory=list)

    def on_console(self, message: ConsoleMessage) -> None:
        self.console.append(f"{message.type}: {message.text}")
        if _CSP_CONSOLE.search(message.text):
            self.csp.append(f"console: {message.text}")

    def on_violation(self, report: dict[str, Any]) -> None:
        self.csp.append(f"event: {report}")

    def on_dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def on_route(self, route: Route, request: Request) -> None:
        if request.url.startswith(self.origin + "/") or request.url.startswith("data:"):
            route.continue_()
        else:
            self.offsite.append(request.url)
            route.abort("blockedbyclient")

    def take_csp(self) -> list[str]:
        """The CSP violations so far, which the test expected: they no longer fail it."""
        taken, self.csp = self.csp, []
        return taken

    def problems(self) -> list[str]:
        return (
            [f"page error: {e}" for e in self.errors]
            + [f"CSP violation: {c}" for c in self.csp]
            + [f"dialog: {d}" for d in self.dialogs]
            + [f"request to another site: {u}" for u in self.offsite]
        )


@pytest.fixture
def page_watch(live_console: LiveConsole) -> PageWatch:
    return PageWatch(origin=live_console.url)


@pytest.fixture
def page(
    browser: Browser,
    live_console: LiveConsole,
    page_watch: PageWatch,
    artifacts: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Page]:
    """A page in a new browser context (its own cookies) at laptop size, with the console
    as its base URL. The test fails when the page reports an error, a CSP violation, a
    dialog or a request to another site (checked after the test's body); a failed test
    leaves a screenshot in var/browser/."""
    context = browser.new_context(viewport=LAPTOP, base_url=live_console.url)
    context.set_default_timeout(10_000)
    context.expose_function("__emsCspViolation", page_watch.on_violation)
    context.add_init_script(_CSP_LISTENER)
    context.route("**/*", page_watch.on_route)
    found = context.new_page()
    found.on("console", page_watch.on_console)
    found.on("pageerror", lambda error: page_watch.errors.append(str(error)))
    found.on("dialog", page_watch.on_dialog)
    request.node.stash[_WATCHED] = (found, page_watch)
    try:
        yield found
    finally:
        report = request.node.stash.get(_CALL_REPORT, None)
        if report is not None and report.failed:
            shot = artifacts / f"failed-{_file_name(request.node.name)}.png"
            with contextlib.suppress(PlaywrightError):
                found.screenshot(path=shot, full_page=True)
                print(f"screenshot of the failed page: {shot}")
        context.close()


_WATCHED = pytest.StashKey[tuple[Page, PageWatch]]()
_CALL_REPORT = pytest.StashKey[pytest.TestReport]()


def _file_name(test_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", test_name).strip("-")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """After a passing test body: fail it when its page saw what it must not."""
    result = yield
    watched = item.stash.get(_WATCHED, None)
    if watched is not None:
        found, watch = watched
        if not found.is_closed():
            with contextlib.suppress(PlaywrightError):
                found.evaluate("() => 0")  # events the page sent before now are handled
        problems = watch.problems()
        if problems:
            console = "".join(f"\n  {line}" for line in watch.console)
            pytest.fail(
                "the page saw:\n  " + "\n  ".join(problems) + "\nits console:" + console,
                pytrace=False,
            )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[_CALL_REPORT] = report
    return report


# -- helpers of the tests ---------------------------------------------------------------


def sign_in(page: Page, name: str, password: str = PASSWORD) -> None:
    """Fill in and send the login form of the page (already at /login)."""
    page.get_by_label("Name").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()


def nothing_ran(page: Page) -> None:
    """No hostile text ran: the payloads set window.__emsXss or add an element to <main>
    when they do (a chart's own SVG aside)."""
    assert page.evaluate("() => window.__emsXss === undefined")
    expect(page.locator("main svg:not(.chart), main img, main script")).to_have_count(0)


def signed_in(page: Page, name: str) -> None:
    """Sign in as `name` through the login form and wait for the overview."""
    page.goto("/login")
    sign_in(page, name)
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.locator(".who .principal")).to_have_text(name)


def scroll_widths(page: Page) -> tuple[int, int]:
    """The document's scroll width and the window's inner width."""
    widths: list[int] = page.evaluate(
        "() => [document.scrollingElement.scrollWidth, window.innerWidth]"
    )
    return widths[0], widths[1]
