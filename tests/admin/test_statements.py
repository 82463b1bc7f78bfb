"""The statements each page of the console sends do not grow with the rows it shows, and
none counts the message or consumption-log tables: every page of
benchmarks.admin_seed.PAGES (the admin benchmark's table), on a small seed and on one ten
times larger.

Statements are counted where PyMySQL sends them (Cursor.execute): the store runs some
through SQLAlchemy's engines and its hot-path reads (Database.select) on raw driver
connections, which an engine's before_cursor_execute event does not see."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pymysql
import pytest
from flask import Flask

from benchmarks.admin_seed import Scale, paths, rows_of, seed
from ems.config import Settings
from ems.ops.accounts import Accounts
from tests.admin.conftest import PASSWORD, MakeApp, bearer
from tests.conftest import connect, reset_state

SMALL = Scale(
    topics=3,
    partitions=3,
    groups=3,
    big_partitions=3,
    members=1,
    big_members=1,
    messages=3,
    deep_messages=9,
    dead_letters=5,
    dead_groups=3,
    alarms=8,
    autoscale_every=1,
    decisions=2,
    audit_rows=10,
    chart_hours=2,
    stream_queries=3,
)
LARGE = Scale(
    topics=30,
    partitions=30,
    groups=30,
    big_partitions=30,
    members=10,
    big_members=10,
    messages=3,
    broadcast_every=10,
    deep_messages=900,
    dead_letters=300,
    dead_groups=30,
    alarms=400,
    autoscale_every=1,
    decisions=10,
    audit_rows=500,
    chart_hours=24,
    stream_queries=30,
)
#: The pages that show as many rows on either seed: one user, one message (its trace: the
#: one group of its topic), one dead letter.
SAME_ROWS = [
    f"{label}{api}"
    for label in ("users", "message detail", "dead letter detail")
    for api in ("", " (API)")
]
#: The message, consumption-log, dead-letter and audit tables, which a page never counts.
_BIG_TABLES = ("message", "topic_group_log", "dead_message", "admin_audit")
_COUNT = re.compile(r"\bCOUNT\s*\(_\)", re.IGNORECASE)
_FROM = re.compile(r"\b(?:FROM|JOIN)\s+`?(\w+)`?", re.IGNORECASE)


def counted_tables(statement: str) -> set[str]:
    """The tables read at each level of the statement (the statement, each subquery)
    where a COUNT is taken: a level's own text is its text with every parenthesized part
    inside it replaced by "(_)"."""
    found: set[str] = set()
    levels: list[list[str]] = [[]]

    def check(own: str) -> None:
        if _COUNT.search(own):
            found.update(table.lower() for table in _FROM.findall(own))

    for char in statement:
        if char == "(":
            levels.append([])
        elif char == ")" and len(levels) > 1:
            check("".join(levels.pop()))
            levels[-1].append("(_)")
        else:
            levels[-1].append(char)
    check("".join(levels[0]))
    return found


@contextmanager
def sent_statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement PyMySQL sends in this process while the block runs."""
    sent: list[str] = []
    execute = pymysql.cursors.Cursor.execute

    def recording(cursor: pymysql.cursors.Cursor, query: str, args: Any = None) -> int:
        sent.append(query)
        return execute(cursor, query, args)

    with monkeypatch.context() as patch:
        patch.setattr(pymysql.cursors.Cursor, "execute", recording)
        yield sent


def _measure(
    app: Flask, settings: Settings, scale: Scale, monkeypatch: pytest.MonkeyPatch
) -> dict[str, tuple[int, int]]:
    """Per page: (statements sent, rows shown), after one warm-up request."""
    reset_state(settings)
    conn = connect(settings)
    conn.autocommit(False)
    try:
        seed(conn, scale)
    finally:
        conn.close()
    with Accounts(settings) as accounts:
        accounts.add_user("ada", "admin", PASSWORD)
        headers = bearer(accounts.create_token("t-admin", "admin", "tests")[1])
    client = app.test_client()
    out: dict[str, tuple[int, int]] = {}
    for label, path in paths(scale):
        client.get(path, headers=headers)
        with sent_statements(monkeypatch) as sent:
            response = client.get(path, headers=headers)
        assert response.status_code == 200, (label, response.status_code)
        for statement in sent:
            counted = counted_tables(statement) & set(_BIG_TABLES)
            assert not counted, (label, statement)
        out[label] = (len(sent), rows_of(path, response.get_data()))
    return out


def test_a_page_costs_the_same_statements_however_many_rows_it_shows(
    make_app: MakeApp, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app()
    small = _measure(app, settings, SMALL, monkeypatch)
    large = _measure(app, settings, LARGE, monkeypatch)
    assert set(small) == set(large)
    grew = {
        label: (small[label], large[label]) for label in small if large[label][0] != small[label][0]
    }
    assert not grew, grew
    for label in small:
        assert 2 <= small[label][0] <= 16, (label, small[label])
    same = {label: small[label] for label in small if large[label][1] <= small[label][1]}
    # Every page but the users' and one object's shows more rows on the larger seed.
    assert sorted(same) == sorted(SAME_ROWS), same


def test_counted_tables_sees_the_level_of_the_count() -> None:
    assert counted_tables("SELECT COUNT(*) FROM message WHERE topic_id = 1") == {"message"}
    assert counted_tables("SELECT count(id) AS n FROM `topic_group_log`") == {"topic_group_log"}
    lags = (
        "SELECT p.g, COUNT(CASE WHEN p.c IS NULL THEN 1 END) FROM (SELECT g.id AS g, "
        "(SELECT m.offset_no FROM message m ORDER BY m.offset_no LIMIT 1) AS c "
        "FROM consumer_group g) p GROUP BY p.g"
    )
    assert counted_tables(lags) == set()
    nested = "SELECT x FROM topic WHERE id IN (SELECT COUNT(*) FROM message)"
    assert counted_tables(nested) == {"message"}
    assert counted_tables("SELECT (SELECT COUNT(*) FROM topic), 1") == {"topic"}
