"""Exactly-once handling for asyncio code: ems.consumer.exactly_once's protocol, with the
batch's transaction an AsyncSession or AsyncConnection of the service's async engine
(asyncmy, aiomysql).

The handler is awaited on the event loop with (delivery, transaction), one message after
another (the batch shares one transaction, which runs one statement at a time). The
settlement is the sync Consumer's own (Settler): it runs on the consumer's worker thread,
which drives the partition session, and its statements go through the batch's connection
on the loop, where that connection belongs: the worker hands them to the loop, and
SQLAlchemy's run_sync gives them the connection as a synchronous one (its greenlet
bridge), so the same code writes the same fenced rows through either kind. Then the loop
commits: the handler's writes, its sends (`transaction=`) and the settlement, or none.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import sessionmaker

from ems.consumer.exactly_once import (
    ENDED,
    IDLE_UNBOUND,
    Settler,
    batch_bound,
    check_use,
)
from ems.consumer.state import Outcome
from ems.exceptions import InvalidHandler, InvalidSetting, InvalidTransaction
from ems.store.translation import translate
from ems.types import Delivery

#: What opens a batch's transaction: an AsyncEngine (an AsyncConnection each batch), or a
#: callable returning an AsyncSession (an async_sessionmaker) or AsyncConnection, or an
#: awaitable of one.
AsyncTransactionFactory = AsyncEngine | Callable[[], Any]

#: Runs a function on the consumer's worker thread, awaited (Consumer._off_loop).
OffLoop = Callable[..., Awaitable[Any]]


def check_transactional(
    factory: object, handler: object, broadcast: bool, concurrency: int
) -> None:
    """As ems.Consumer's checks, for asyncio factories; and one handler call at a time: the
    batch's handlers share its one transaction, which runs one statement at a time and
    nests a savepoint per message."""
    check_use(handler, broadcast)
    if concurrency > 1:
        raise InvalidSetting(
            "an exactly-once consumer handles its batch one message at a time, in one "
            "transaction: concurrency above 1 is refused"
        )
    if isinstance(factory, Engine | sessionmaker):
        raise InvalidTransaction(
            "ems.aio.Consumer's transactional takes an asyncio factory (create_async_engine, "
            f"async_sessionmaker), not a {type(factory).__name__}: ems.Consumer takes those"
        )
    if not (isinstance(factory, AsyncEngine) or callable(factory)):
        raise InvalidTransaction(
            "transactional takes a SQLAlchemy AsyncEngine or async_sessionmaker, or a "
            "callable that returns an AsyncSession or AsyncConnection, not a "
            f"{type(factory).__name__}"
        )


class AsyncBatchTransaction:
    """One batch's transaction, through what the factory gave: committed, rolled back
    and closed by ems (its connection goes back to the service's pool)."""

    def __init__(self, given: AsyncSession | AsyncConnection, idle_timeout: int) -> None:
        self.given = given
        self._session = given if isinstance(given, AsyncSession) else None
        self._conn = given if isinstance(given, AsyncConnection) else None
        self._bounded = idle_timeout > 0
        self._idle_timeout = idle_timeout
        self._root: object = None

    @classmethod
    async def open(
        cls, factory: AsyncTransactionFactory, idle_timeout: int = 0
    ) -> AsyncBatchTransaction:
        try:
            made = factory.connect() if isinstance(factory, AsyncEngine) else factory()
            if isinstance(made, AsyncConnection):
                if made.sync_connection is None:
                    await made.start()
            elif inspect.isawaitable(made):
                made = await made
        except SQLAlchemyError as exc:  # the server, not the factory
            raise translate(exc) from exc
        if not isinstance(made, AsyncSession | AsyncConnection):
            close = getattr(made, "close", None)
            with suppress(Exception):
                if close is not None and inspect.isawaitable(closing := close()):
                    await closing
            raise InvalidTransaction(
                "an asyncio exactly-once consumer's transaction factory must return a "
                f"SQLAlchemy AsyncSession or AsyncConnection, not a {type(made).__name__}"
            )
        tx = cls(made, idle_timeout)
        try:
            await tx._begin()
        except BaseException:
            await tx.close()
            raise
        return tx

    async def _begin(self) -> None:
        try:
            if self._session is not None:
                await self._session.connection()  # begins
                self._root = self._session.sync_session.get_transaction()
            else:
                assert self._conn is not None
                await self._conn.begin()
                self._root = self._transaction()
            if self._bounded:
                await self._run(batch_bound(self._idle_timeout))
        except SQLAlchemyError as exc:
            raise translate(exc) from exc

    def _transaction(self) -> object:
        if self._session is not None:
            return self._session.sync_session.get_transaction()
        assert self._conn is not None and self._conn.sync_connection is not None
        return self._conn.sync_connection.get_transaction()

    async def _run(self, sql: str) -> None:
        conn = self._conn if self._session is None else await self._session.connection()
        assert conn is not None
        await conn.exec_driver_sql(sql)

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """A message's writes, undone alone when the handler raises."""
        async with self.given.begin_nested():
            yield

    async def flush(self) -> None:
        """An AsyncSession's pending writes, sent now: their errors are the handler's."""
        if self._session is not None:
            await self._session.flush()

    def intact(self) -> bool:
        """Whether the batch's transaction is still the one open (the handler neither
        committed nor rolled it back)."""
        return self._root is not None and self._transaction() is self._root

    async def commit_with(self, write: Callable[[Any], None]) -> None:
        """write(connection) through this transaction's connection, as a synchronous
        Session or Connection (run_sync: on the loop, its I/O awaited by the bridge),
        then commit."""
        try:
            await self.given.run_sync(write)
            await self.given.commit()
        except SQLAlchemyError as exc:
            raise translate(exc) from exc

    async def rollback(self) -> None:
        """Quietly: a lost connection has rolled back already."""
        with suppress(SQLAlchemyError):
            await self.given.rollback()

    async def close(self) -> None:
        if self._bounded:  # a pooled connection goes back as it came
            with suppress(SQLAlchemyError):
                await self._run(IDLE_UNBOUND)
        with suppress(SQLAlchemyError):
            await self.given.close()


class AsyncExactlyOnce:
    """Runs batches through an async handler, each in one transaction with its
    settlement (ems.consumer.exactly_once.ExactlyOnce, awaited)."""

    def __init__(
        self,
        factory: AsyncTransactionFactory,
        handler: Callable[[Delivery, Any], Awaitable[object] | object],
        settler: Settler,
        off_loop: OffLoop,
    ) -> None:
        self._factory = factory
        self._handler = handler
        self._settler = settler
        self._off_loop = off_loop

    async def handle(self, batch: list[Delivery]) -> None:
        """Handle and settle the batch in one transaction: without savepoints, or, once
        a handler raised, again with one per message."""
        if batch and not await self._attempt(batch, savepoints=False):
            await self._attempt(batch, savepoints=True)

    async def _attempt(self, batch: list[Delivery], *, savepoints: bool) -> bool:
        try:
            tx = await AsyncBatchTransaction.open(self._factory, self._settler.idle_timeout)
        except BaseException:
            self._settler.read_again(batch)
            raise
        try:
            outcomes = await self._run(tx, batch, savepoints)
            if outcomes is None:
                await tx.rollback()
                return False
            await self._settle(tx, outcomes)
            return True
        except BaseException:
            await tx.rollback()
            self._settler.read_again(batch)
            raise
        finally:
            await tx.close()

    async def _run(
        self, tx: AsyncBatchTransaction, batch: list[Delivery], savepoints: bool
    ) -> list[Outcome] | None:
        results = self._settler.outcomes()
        for d in batch:
            if results.held(d):
                continue
            try:
                if savepoints:
                    async with tx.savepoint():
                        await self._call(tx, d)
                else:
                    await self._call(tx, d)
            except InvalidHandler:
                raise
            except Exception as exc:  # the handler's failure is the message's
                if not savepoints:
                    return None
                results.raised(d, exc)
            else:
                results.passed(d)
        return results.outcomes

    async def _call(self, tx: AsyncBatchTransaction, d: Delivery) -> None:
        began = time.perf_counter()
        try:
            result = self._handler(d, tx.given)
            if inspect.isawaitable(result):
                await result
            await tx.flush()
        finally:
            self._settler.observe(time.perf_counter() - began)
        if not tx.intact():
            raise InvalidHandler(ENDED)

    async def _settle(self, tx: AsyncBatchTransaction, outcomes: list[Outcome]) -> None:
        """The settlement on the worker thread (the session's), its writes and the
        commit handed back to the loop, which owns the connection."""
        loop = asyncio.get_running_loop()

        def commit(write: Callable[[Any], None]) -> None:
            asyncio.run_coroutine_threadsafe(tx.commit_with(write), loop).result()

        settling = asyncio.ensure_future(self._off_loop(self._settler.settle, outcomes, commit))
        try:
            await asyncio.shield(settling)
        except asyncio.CancelledError:
            # The commit may be under way: the connection is rolled back and closed only
            # once it has ended (the stored cursors then say whether it landed).
            await asyncio.wait([settling])
            raise
