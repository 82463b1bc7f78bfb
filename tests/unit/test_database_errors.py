"""Connection failures on every checkout path become DatabaseUnavailable (no server
needed: port 1 refuses the connection)."""

from __future__ import annotations

import pytest

from ems.config import Settings
from ems.exceptions import DatabaseUnavailable
from ems.store import Database

UNREACHABLE = Settings(database_url="mysql+pymysql://root@127.0.0.1:1/ems", connect_attempts=2)


def test_single_statement_path_raises_database_unavailable() -> None:
    db = Database(UNREACHABLE)
    try:
        with pytest.raises(DatabaseUnavailable, match="MySQL is unreachable"):
            db.select("SELECT 1", ())
    finally:
        db.dispose()


def test_transaction_path_raises_database_unavailable() -> None:
    db = Database(UNREACHABLE)
    try:
        with pytest.raises(DatabaseUnavailable, match="MySQL is unreachable"), db.connect():
            pass
    finally:
        db.dispose()
