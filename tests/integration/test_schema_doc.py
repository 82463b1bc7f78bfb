"""docs/schema.md against the migrated schema: a section for every table of the models and
every ems_ view and for nothing else, each listing exactly the columns the server holds,
with their types and nullability, every index by name and every state value, so the
reference cannot go stale without a test failing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest
from sqlalchemy import JSON, Enum

from ems.config import Settings
from ems.models import metadata
from ems.store.readonly import VIEW_NAMES
from tests.conftest import connect

DOC = Path(__file__).resolve().parents[2] / "docs" / "schema.md"
_HEADING = re.compile(r"^### `(\w+)`$", re.M)
#: | `column` | type | null | meaning |  (tables)   or   | `column` | meaning |  (views)
_ROW = re.compile(r"^\| `(\w+)` \|([^|\n]*)\|(?:([^|\n]*)\|)?", re.M)
_INT_WIDTH = re.compile(r"^(bigint|int|smallint|mediumint)\(\d+\)")


def sections() -> dict[str, str]:
    text = DOC.read_text()
    heads = list(_HEADING.finditer(text))
    ends = [h.start() for h in heads[1:]] + [len(text)]
    return {h.group(1): text[h.end() : end] for h, end in zip(heads, ends, strict=True)}


@pytest.fixture(scope="module")
def conn(migrated_settings: Settings) -> Iterator[pymysql.Connection]:
    connection = connect(migrated_settings)
    yield connection
    connection.close()


def _query(conn: pymysql.Connection, sql: str, *params: object) -> list[tuple[object, ...]]:
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _server_type(table: str, column: str, column_type: str) -> str:
    """The type as documented: MariaDB's display widths dropped (MySQL 8 shows none), and
    a JSON column called json (MariaDB stores it as longtext with a validity check)."""
    if isinstance(metadata.tables[table].c[column].type, JSON):
        return "json"
    return _INT_WIDTH.sub(r"\1", column_type)


def test_every_table_and_view_has_a_section_and_nothing_else_does() -> None:
    assert set(sections()) == set(metadata.tables) | set(VIEW_NAMES)


@pytest.mark.parametrize("table", sorted(metadata.tables))
def test_table_columns_types_and_nullability(conn: pymysql.Connection, table: str) -> None:
    documented = {
        m[0]: (m[1].strip(), (m[2] or "").strip()) for m in _ROW.findall(sections()[table])
    }
    found = _query(
        conn,
        "SELECT column_name, column_type, is_nullable FROM information_schema.columns "
        "WHERE table_schema = DATABASE() AND table_name = %s",
        table,
    )
    assert found
    server = {
        str(name): (_server_type(table, str(name), str(kind)), "yes" if nullable == "YES" else "")
        for name, kind, nullable in found
    }
    assert documented == server
    assert set(documented) == set(metadata.tables[table].c.keys())


@pytest.mark.parametrize("table", sorted(metadata.tables))
def test_table_indexes_and_keys_are_named(conn: pymysql.Connection, table: str) -> None:
    section = sections()[table]
    names = {
        str(r[0])
        for r in _query(
            conn,
            "SELECT DISTINCT index_name FROM information_schema.statistics "
            "WHERE table_schema = DATABASE() AND table_name = %s",
            table,
        )
    }
    assert "PRIMARY" in names
    assert "primary key" in section
    for name in names - {"PRIMARY"}:
        assert f"`{name}`" in section, name
    for fk in metadata.tables[table].foreign_key_constraints:
        assert f"`{fk.name}`" in section, fk.name


@pytest.mark.parametrize("table", sorted(metadata.tables))
def test_every_state_value_is_explained(table: str) -> None:
    section = sections()[table]
    for column in metadata.tables[table].c:
        if isinstance(column.type, Enum):
            for value in column.type.enums:
                assert f"`{value}`" in section, (column.name, value)


@pytest.mark.parametrize("view", VIEW_NAMES)
def test_view_columns(conn: pymysql.Connection, view: str) -> None:
    documented = [m[0] for m in _ROW.findall(sections()[view])]
    found = _query(
        conn,
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = DATABASE() AND table_name = %s ORDER BY ordinal_position",
        view,
    )
    assert documented == [str(r[0]) for r in found]
