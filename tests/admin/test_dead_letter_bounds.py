"""The dead letters' error search has a bounded cost: it reads at most ERROR_SCAN of the
newest dead letters (at or below `below`), whatever the other filters, on the page, the
API and a plan's scope=matching preview, and says when older ones were not searched.

Rows read are counted by the server: each statement the console sent on the dead-letter
table is run again on a connection of the test's own between FLUSH STATUS and its
Handler_read_* counters (index and table reads, whatever plan the optimizer chose), so a
full scan coming back fails here on a table of a few thousand rows."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pymysql
import pytest
from flask.testing import FlaskClient

from ems.admin.views import dead_letters as view
from ems.config import Settings
from ems.store import Store
from tests.admin.conftest import bearer, csrf_token, login
from tests.conftest import connect
from tests.integration import seed

ROWS = 3000
SCAN = 400
# Rows of a handful of small tables (group and topic names, the plan's and audit's
# statements are not counted: only those reading dead_message).
_SLACK = 50


@pytest.fixture
def many(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """ROWS dead letters of group g (ids in order, one a second, newest now); the one at
    index 10 (old) and the last but 10 (new) say "needle"; the scan is SCAN rows."""
    monkeypatch.setattr(view, "ERROR_SCAN", SCAN)
    topic = store.topics.create("t", 1, 24, 1024)
    group = seed.group(store, "g", topic)
    rows = [
        (
            group.id,
            topic.id,
            i,
            i,
            "needle in" if i in (10, ROWS - 10) else f"ValueError {i}",
            ROWS - i,
        )
        for i in range(ROWS)
    ]
    conn = connect(store.settings)
    try:
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO dead_message (group_id, topic_id, partition_no, offset_no, "
                "message_id, body, attempts, last_error, created_at) VALUES "
                "(%s, %s, 0, %s, %s, 'b', 5, %s, NOW(6) - INTERVAL %s SECOND)",
                rows,
            )
            cursor.execute("ANALYZE TABLE dead_message")
            cursor.fetchall()
        conn.commit()
    finally:
        conn.close()
    return [int(r[0]) for r in seed.sql(store, "SELECT id FROM dead_message ORDER BY id")]


@contextmanager
def _sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The statements (parameters filled in) PyMySQL sends while the block runs."""
    sent: list[str] = []
    execute = pymysql.cursors.Cursor.execute

    def recording(cursor: pymysql.cursors.Cursor, query: str, args: Any = None) -> int:
        sent.append(cursor.mogrify(query, args))
        return execute(cursor, query, args)

    with monkeypatch.context() as patch:
        patch.setattr(pymysql.cursors.Cursor, "execute", recording)
        yield sent


def rows_read(settings: Settings, statement: str) -> int:
    """The rows the server reads to run `statement` (the sum of its Handler_read_*)."""
    conn = connect(settings)
    try:
        with conn.cursor() as cursor:
            cursor.execute("FLUSH STATUS")
            cursor.execute(statement)
            cursor.fetchall()
            cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
            return sum(int(v) for _, v in cursor.fetchall())
    finally:
        conn.rollback()
        conn.close()


def _dead_letter_reads(settings: Settings, sent: list[str]) -> list[int]:
    selects = [s for s in sent if s.lstrip().upper().startswith("SELECT") and "dead_message" in s]
    assert selects, sent
    return [rows_read(settings, s) for s in selects]


def test_the_counter_sees_a_full_scan(store: Store, many: list[int]) -> None:
    """The measure can fail: a LIKE over the whole table reads every row."""
    full = "SELECT id FROM dead_message d WHERE d.last_error LIKE '%zzzz%' ORDER BY id LIMIT 101"
    assert rows_read(store.settings, full) >= ROWS


@pytest.mark.parametrize(
    "query", ["error=zzzz", "error=zzzz&group=g", "error=zzzz&since=30d", "error=zzzz&resent=no"]
)
def test_an_error_search_reads_a_bounded_number_of_rows(
    client: FlaskClient,
    store: Store,
    tokens: dict[str, str],
    many: list[int],
    monkeypatch: pytest.MonkeyPatch,
    query: str,
) -> None:
    viewer = bearer(tokens["viewer"])
    for path in (f"/dead-letters?{query}", f"/api/v1/dead-letters?{query}"):
        with _sent(monkeypatch) as sent:
            response = client.get(path, headers=viewer)
        assert response.status_code == 200, path
        reads = _dead_letter_reads(store.settings, sent)
        assert sum(reads) <= 2 * SCAN + _SLACK, (path, reads)


def test_the_page_says_what_was_not_searched_and_searches_on(
    client: FlaskClient, tokens: dict[str, str], many: list[int]
) -> None:
    viewer = bearer(tokens["viewer"])
    found = client.get("/api/v1/dead-letters?error=needle", headers=viewer).get_json()
    assert [d["id"] for d in found["dead_letters"]] == [many[ROWS - 10]]
    searched = found["searched"]
    assert searched["newest"] == SCAN and searched["above_id"] == many[ROWS - SCAN - 1]
    page = client.get("/dead-letters?error=needle", headers=viewer).get_data(as_text=True)
    assert f"read the newest {SCAN} dead letters" in page
    older = re.search(r'id="search-older" href="([^"]+)"', page)
    assert older is not None
    # Window by window to the oldest, each bounded, the old needle found on the way.
    seen: list[int] = []
    path = html.unescape(older.group(1))
    for _ in range(ROWS // SCAN + 1):
        step = client.get(path, headers=viewer).get_data(as_text=True)
        seen += [int(i) for i in re.findall(r'id="dead-(\d+)"', step)]
        more = re.search(r'id="search-older" href="([^"]+)"', step)
        if more is None:
            break
        path = html.unescape(more.group(1))
    assert seen == [many[10]]
    # A since that the window reaches back to needs no notice.
    recent = client.get("/api/v1/dead-letters?error=needle&since=60s", headers=viewer).get_json()
    assert recent["searched"] is None


def test_a_matching_preview_is_bounded_and_its_apply_acts_on_what_it_listed(
    client: FlaskClient,
    store: Store,
    users: dict[str, str],
    many: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert login(client, "ada").status_code == 302
    data = {"csrf_token": csrf_token(client), "scope": "matching", "error": "needle"}
    with _sent(monkeypatch) as sent:
        response = client.post("/dead-letters/purge/preview", data=data)
    page = response.get_data(as_text=True)
    assert response.status_code == 200 and "1 dead letter listed" in page
    assert "older ones that match are not in this preview" in page
    assert sum(_dead_letter_reads(store.settings, sent)) <= 2 * SCAN + _SLACK
    plan = re.search(r'name="plan" value="([^"]+)"', page)
    assert plan is not None
    done = client.post(
        "/dead-letters/purge/apply",
        data={"csrf_token": csrf_token(client), "plan": plan.group(1), "confirm": "g"},
    )
    assert done.status_code == 200, done.get_data(as_text=True)
    left = {int(r[0]) for r in seed.sql(store, "SELECT id FROM dead_message")}
    assert many[ROWS - 10] not in left and many[10] in left and len(left) == ROWS - 1


def test_below_must_be_an_id(client: FlaskClient, tokens: dict[str, str], many: list[int]) -> None:
    viewer = bearer(tokens["viewer"])
    for bad in ("-1", "x", "0"):
        got = client.get(f"/api/v1/dead-letters?error=a&below={bad}", headers=viewer)
        assert got.status_code == 400, bad
