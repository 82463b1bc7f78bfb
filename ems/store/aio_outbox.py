"""A transactional send from asyncio code: the outbox rows written through the caller's
SQLAlchemy AsyncSession or AsyncConnection (any async MySQL driver), with the checks and
statements of ems.store.outbox."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_scoped_session

from ems.exceptions import InvalidTransaction, StoreError
from ems.store.caller import ON_COMMIT, identity_of, refuse_autocommit
from ems.store.outbox import OutboxItem, OutboxWriter, outbox_statements
from ems.store.translation import translate
from ems.types import Schedule


async def _connection(tx: object) -> AsyncConnection:
    if isinstance(tx, async_scoped_session):
        tx = tx()
    if isinstance(tx, AsyncSession):
        tx = await tx.connection()
    if not isinstance(tx, AsyncConnection):
        raise InvalidTransaction(
            "an asyncio transactional send takes a SQLAlchemy AsyncSession or "
            f"AsyncConnection, not a {type(tx).__name__}"
        )
    return tx


async def _execute(conn: AsyncConnection, sql: str, params: tuple[object, ...]) -> list[Any]:
    try:
        result = await conn.exec_driver_sql(sql, params)
    except SQLAlchemyError as exc:
        raise translate(exc) from exc
    return [tuple(r) for r in result] if result.returns_rows else []


async def write(
    writer: object,
    tx: object,
    topic_id: int,
    items: Sequence[OutboxItem],
    on_commit: Callable[[], None] | None = None,
    schedule: Schedule | None = None,
) -> None:
    """As OutboxWriter.write, awaited (writer: the MySQL store's)."""
    if not isinstance(writer, OutboxWriter):
        raise InvalidTransaction("an asyncio transactional send needs the MySQL store")
    conn = await _connection(tx)
    sync = conn.sync_connection
    assert sync is not None  # an AsyncConnection handed out is started
    dbapi = sync.connection.dbapi_connection
    refuse_autocommit(dbapi)
    identity = identity_of(sync.connection.driver_connection)
    installation = writer.installation
    if not installation.checked(identity):
        await asyncio.to_thread(installation.uuid)
        try:
            rows = await _execute(conn, installation.identity_sql, ())
        except StoreError as exc:
            raise installation.unreachable(exc) from None
        installation.confirm(rows, identity)
    for sql, params in outbox_statements(writer.schema, topic_id, items, schedule):
        await _execute(conn, sql, params)
    if on_commit is not None:
        sync.info.setdefault(ON_COMMIT, set()).add(on_commit)
