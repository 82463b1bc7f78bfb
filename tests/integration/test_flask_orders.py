"""docs/transactions.md's Flask example, run as printed: Flask-SQLAlchemy's db.session
carries the order row and its event in one transaction."""

from __future__ import annotations

from collections.abc import Iterator

import pymysql
import pytest

from ems import Producer, TopicAdmin
from ems.config import Settings
from ems.store import Store
from tests.conftest import BASE_URL


@pytest.fixture
def orders_db(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = settings.database_name + "_flask_orders"
    with pymysql.connect(host="127.0.0.1", user="root", autocommit=True) as conn:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.cursor().execute(f"CREATE DATABASE `{name}`")
    monkeypatch.setenv("ORDERS_DATABASE_URL", BASE_URL + name)
    yield name
    with pymysql.connect(host="127.0.0.1", user="root", autocommit=True) as conn:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")


def test_the_flask_service_publishes_exactly_its_committed_orders(
    settings: Settings, store: Store, orders_db: str
) -> None:
    from examples.flask_orders import create_app

    TopicAdmin(settings, store=store).create("order.created", 2)
    producer = Producer(settings)
    app = create_app(producer)
    client = app.test_client()
    statuses = [
        client.post("/orders", json={"customer": "c", "total": total}).status_code
        for total in (10, 20_000, 30)
    ]
    producer.close()  # a last relay pass: every committed event is in its topic now
    assert statuses == [201, 422, 201]
    with pymysql.connect(host="127.0.0.1", user="root", database=orders_db) as conn:
        cursor = conn.cursor()
        cursor.execute("SELECT id FROM orders ORDER BY id")
        ids = [int(row[0]) for row in cursor.fetchall()]
    keys = store.db.select("SELECT msg_key FROM message WHERE NOT tombstone", ())
    assert len(ids) == 2
    assert sorted(int(k) for (k,) in keys) == ids
