"""Statements the hot paths send with executemany must fold into one multi-row INSERT."""

from __future__ import annotations

import pytest
from pymysql.cursors import RE_INSERT_VALUES

from ems.store import inserts


@pytest.mark.parametrize("sql", [inserts.ESCAPED_INSERT], ids=["message-insert"])
def test_executemany_is_one_multi_row_insert(sql: str) -> None:
    # PyMySQL sends one statement per row (each its own autocommit transaction) when the
    # VALUES tuple holds anything but placeholders.
    assert RE_INSERT_VALUES.match(sql)
