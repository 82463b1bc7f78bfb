"""SQL for tests that seed or inspect the database directly, through the store's own
connections (Database.single and transaction): the store's session settings (UTC, READ
COMMITTED), each statement its own transaction unless inside transaction().

Placeholders: %s with a sequence of parameters (PyMySQL's own; a literal % is then
written %%), :name with a mapping (as SQLAlchemy's text() takes them)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pymysql.cursors import Cursor

from ems.store import Store
from ems.store.database import Database

#: What a statement's placeholders take: a sequence for %s, a mapping for :name.
Params = Sequence[Any] | Mapping[str, Any] | None
#: A :name placeholder, as text() finds them (not ::, not inside a word).
_NAMED = re.compile(r"(?<![:\w\\]):(\w+)(?!:)")


def _db(target: Store | Database) -> Database:
    return target if isinstance(target, Database) else target.db


def _named(sql: str, params: Params) -> str:
    """The statement in PyMySQL's placeholders for these parameters."""
    if isinstance(params, Mapping):
        return _NAMED.sub(r"%(\1)s", sql.replace("%", "%%"))
    return sql


def _execute(cursor: Cursor, sql: str, params: Params) -> int:
    return int(cursor.execute(_named(sql, params), params))


def rows(target: Store | Database, sql: str, params: Params = None) -> list[tuple[Any, ...]]:
    """Every row the statement returns."""
    with _db(target).single() as cursor:
        _execute(cursor, sql, params)
        return list(cursor.fetchall())


def values(target: Store | Database, sql: str, params: Params = None) -> list[Any]:
    """The first column of every row."""
    return [r[0] for r in rows(target, sql, params)]


def row(target: Store | Database, sql: str, params: Params = None) -> tuple[Any, ...]:
    """The one row the statement returns (an assertion error if it returns another count)."""
    found = rows(target, sql, params)
    assert len(found) == 1, f"expected one row, got {len(found)}"
    return found[0]


def value(target: Store | Database, sql: str, params: Params = None) -> Any:
    """The first column of the first row; None if there is no row."""
    found = rows(target, sql, params)
    return found[0][0] if found else None


def dicts(target: Store | Database, sql: str, params: Params = None) -> list[dict[str, Any]]:
    """Every row, as a dict by column name."""
    with _db(target).single() as cursor:
        _execute(cursor, sql, params)
        names = [d[0] for d in cursor.description or ()]
        return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]


def run(target: Store | Database, sql: str, params: Params = None) -> int:
    """Run a write; the rows it changed."""
    with _db(target).single() as cursor:
        return _execute(cursor, sql, params)


def run_many(target: Store | Database, sql: str, seq: Sequence[Params]) -> int:
    """Run a write for each set of parameters (executemany); the rows changed."""
    with _db(target).single() as cursor:
        return int(cursor.executemany(_named(sql, seq[0] if seq else None), seq) or 0)


def insert(target: Store | Database, sql: str, params: Params = None) -> int:
    """Run an INSERT; the AUTO_INCREMENT id it gave."""
    with _db(target).single() as cursor:
        _execute(cursor, sql, params)
        return int(cursor.lastrowid)


@contextmanager
def transaction(target: Store | Database) -> Iterator[Cursor]:
    """A cursor in one transaction, committed at the end: for locks held across
    statements (SELECT ... FOR UPDATE) while the test does something else."""
    with _db(target).transaction() as cursor:
        yield cursor
