"""The asyncio producer's MySQL statements, over asyncmy connections.

The same statements as the thread-safe producer's path (ems.store.inserts builds the
INSERTs; the topic, seed and write-token reads are the same SQL), on autocommit asyncmy
connections kept in a list, as DirectConnections keeps PyMySQL's: one INSERT alone is its
own transaction, several share one. asyncmy reports MySQL's error numbers as PyMySQL does,
so they are translated by the same table (translate_code).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, Concatenate, ParamSpec, TypeVar

import asyncmy
import asyncmy.errors
from sqlalchemy.engine import make_url

from ems.config import Settings
from ems.exceptions import DatabaseUnavailable, EmsError, TopicDeleting, UnknownTopic
from ems.store.connections import INSERTS_SESSION, RECYCLE, in_transaction
from ems.store.errors import ParentMissing
from ems.store.fences import (
    FENCE_READS,
    FENCES_QUERY,
    FenceCache,
    Fences,
    moved_too_often,
    stale,
)
from ems.store.inserts import ESCAPED_INSERT, escaped_params, insert_statements
from ems.store.messages import _LOWS, _TOKEN_AT, NEXT_OFFSETS
from ems.store.nodes import NodeSet, Vetting, unusable
from ems.store.translation import error_number, translate_code
from ems.types import Placed, TopicInfo
from ems.values.lifecycle import check_not_fenced

T = TypeVar("T")
P = ParamSpec("P")

_TOPIC = (
    "SELECT id, name, partitions, retention_hours, max_body_bytes, created_at, deleting_at "
    "FROM topic WHERE name = %s"
)
_ALLOCATE = (
    "UPDATE partition_head SET next_offset = LAST_INSERT_ID(next_offset + %s) "
    "WHERE topic_id = %s AND partition_no = %s"
)
_RAISE_HEAD = (
    "UPDATE partition_head SET next_offset = GREATEST(next_offset, %s) "
    "WHERE topic_id = %s AND partition_no = %s"
)
_SESSION = INSERTS_SESSION.decode()
_DRIVER_ERRORS = (asyncmy.errors.Error, OSError, asyncio.IncompleteReadError, EOFError)


def _translate(exc: BaseException) -> EmsError:
    lost = not isinstance(exc, asyncmy.errors.Error) or isinstance(
        exc, asyncmy.errors.InterfaceError
    )
    return translate_code(error_number(exc), str(exc), lost=lost)


class AsyncMessageStore:
    """Connections and statements of one asyncio producer. Safe for the tasks of one
    event loop: each statement group checks a connection out of the idle list."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        url = make_url(settings.database_nodes[0])
        self._nodes = NodeSet(settings.database_nodes, settings.node_failback)
        self._args: dict[str, Any] = {
            "host": url.host or "127.0.0.1",
            "port": url.port or 3306,
            "user": url.username or "root",
            "password": url.password or "",
            "database": url.database,
            "autocommit": True,
            "connect_timeout": max(1, int(settings.connect_timeout)),
            "read_timeout": settings.read_timeout,
            "init_command": settings.session_init,
        }
        self._idle: list[tuple[Any, float]] = []
        self._fences = FenceCache()

    # -- statements ------------------------------------------------------------------

    async def topic(self, name: str) -> TopicInfo:
        rows = await self.select(_TOPIC, (name,))
        if not rows:
            raise UnknownTopic(f"unknown topic {name!r}")
        i, n, partitions, retention, max_body, created, deleting = rows[0]
        if deleting is not None:
            raise TopicDeleting(f"topic {name!r} is being deleted")
        return TopicInfo(
            id=int(i),
            name=n,
            partitions=int(partitions),
            retention_hours=int(retention),
            max_body_bytes=int(max_body),
            created_at=created,
        )

    async def seed_offsets(self, topic_id: int) -> dict[int, int]:
        """As MessageStore.seed_offsets: past the highest stored offset, never below the
        low watermark."""
        seeds = {int(p): int(low) for p, low in await self.select(_LOWS, (topic_id,))}
        check_not_fenced(topic_id, seeds)
        for p, top in await self.select(NEXT_OFFSETS, (topic_id,)):
            seeds[int(p)] = max(int(top) + 1, seeds.get(int(p), 0))
        return seeds

    async def write_token_at(self, topic_id: int, partition: int, offset: int) -> int | None:
        rows = await self.select(_TOKEN_AT, (topic_id, partition, offset))
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    async def insert(
        self, placed: Placed, token: int | None, *, partitions: int | None = None
    ) -> None:
        """As MessageStore.insert: all rows or none, DuplicateKey or BelowLowWatermark
        (also when the topic no longer has the `partitions` the rows were routed by), the
        rows checked against the partitions' fences and carrying them."""
        if not placed.rows:
            return
        topic_id = placed.topic_id
        fences = self._fences.get(topic_id)
        fresh = False
        for _ in range(FENCE_READS):
            if fences is None:
                fences, fresh = await self.fences(topic_id), True
            if stale(placed.firsts, fences, partitions, fresh=fresh):
                fences = None
                continue
            statements = insert_statements(placed, token, fences.fences)
            try:
                if statements is None:
                    params = escaped_params(placed, token, fences.fences)
                    await self._run(self._insert_escaped, params)
                else:
                    await self._run(self._statements, statements)
                return
            except ParentMissing:
                fences = None  # a fence moved on since the read: read them again
        raise moved_too_often(topic_id)

    async def fences(self, topic_id: int) -> Fences:
        """As MessageStore.fences."""
        return self._fences.keep(topic_id, await self.select(FENCES_QUERY, (topic_id,)))

    async def allocate_heads(self, topic_id: int, counts: Mapping[int, int]) -> dict[int, int]:
        """The MySQL allocator's UPDATE per partition (see HeadStore.allocate)."""
        return await self._run(self._allocate_heads, topic_id, counts)

    async def raise_heads(self, topic_id: int, floors: Mapping[int, int]) -> None:
        params = [(floor, topic_id, p) for p, floor in floors.items()]
        if params:
            await self._run(self._executemany, _RAISE_HEAD, params)

    async def select(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        """A read; safe to repeat, so once more on a new connection if one was lost."""
        try:
            return await self._run(self._select, sql, params)
        except DatabaseUnavailable:
            return await self._run(self._select, sql, params)

    async def close(self) -> None:
        while self._idle:
            conn, _ = self._idle.pop()
            _close(conn)

    # -- on one connection -------------------------------------------------------------

    async def _run(
        self, work: Callable[Concatenate[Any, P], Awaitable[T]], *args: P.args, **kw: P.kwargs
    ) -> T:
        conn, born = await self._take()
        try:
            result = await work(conn, *args, **kw)
        except _DRIVER_ERRORS as exc:
            error = _translate(exc)
            if isinstance(error, DatabaseUnavailable):
                _close(conn)
                await self.close()  # its idle mates likely went with it (a restart)
            else:
                await self._give_back(conn, born)
            raise error from exc
        except BaseException:
            _close(conn)  # cancelled mid-statement: its state is unknown
            raise
        await self._give_back(conn, born)
        return result

    @staticmethod
    async def _statements(conn: Any, statements: Sequence[bytes]) -> None:
        if len(statements) == 1:
            await conn.query(statements[0])
            return
        await conn.begin()
        for statement in statements:
            await conn.query(statement)
        await conn.commit()

    @staticmethod
    async def _insert_escaped(conn: Any, params: list[tuple[object, ...]]) -> None:
        """See MessageStore._insert_escaped: one transaction, the rows with their fences
        (a refusal leaves it open: _run's give-back rolls it back)."""
        await conn.begin()
        async with conn.cursor() as cursor:
            await cursor.executemany(ESCAPED_INSERT, params)
        await conn.commit()

    @staticmethod
    async def _allocate_heads(
        conn: Any, topic_id: int, counts: Mapping[int, int]
    ) -> dict[int, int]:
        firsts = {}
        async with conn.cursor() as cursor:
            for p, n in counts.items():
                await cursor.execute(_ALLOCATE, (n, topic_id, p))
                firsts[p] = int(cursor.lastrowid) - n
        return firsts

    @staticmethod
    async def _executemany(conn: Any, sql: str, params: Sequence[tuple[object, ...]]) -> None:
        async with conn.cursor() as cursor:
            await cursor.executemany(sql, params)

    @staticmethod
    async def _select(conn: Any, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        async with conn.cursor() as cursor:
            await cursor.execute(sql, params)
            return [tuple(r) for r in await cursor.fetchall()]

    async def _take(self) -> tuple[Any, float]:
        now = time.monotonic()
        while self._idle:
            conn, born = self._idle.pop()
            if now - born < RECYCLE and not self._nodes.stale(born):
                return conn, born
            _close(conn)
        conn = await self._connect()
        return conn, time.monotonic()

    async def _connect(self) -> Any:
        """A new connection, with the producer's bounded retries on an unreachable
        server, in the session the thread store's insert connections run
        (INSERTS_SESSION)."""
        delay = 0.1
        attempts = self.settings.connect_attempts
        for attempt in range(1, attempts + 1):
            try:
                conn: Any = await self._connect_node()
                await conn.query(_SESSION)
                return conn
            except _DRIVER_ERRORS as exc:
                error = _translate(exc)
                if not isinstance(error, DatabaseUnavailable) or attempt == attempts:
                    raise error from exc
            await asyncio.sleep(delay)
            delay *= 2
        raise DatabaseUnavailable()  # pragma: no cover - the loop returns or raises

    async def _connect_node(self) -> Any:
        """A connection to the only node, or to the cluster node ems writes through
        (ems.store.nodes decides which; this drives its checks over asyncmy)."""
        if not self._nodes.cluster:
            return await asyncmy.connect(**self._args)
        problems = []
        for index in self._nodes.candidates():
            host, port = self._nodes.addresses[index]
            try:
                conn = await asyncmy.connect(**{**self._args, "host": host, "port": port})
            except _DRIVER_ERRORS as exc:
                problems.append(f"{self._nodes.where(index)}: {exc}")
                continue
            try:
                problem = await _drive(self._nodes.vet(index), conn)
            except _DRIVER_ERRORS as exc:
                problem = str(exc)
            except BaseException:
                _close(conn)
                raise
            if problem is None:
                return conn
            _close(conn)
            problems.append(f"{self._nodes.where(index)}: {problem}")
        raise DatabaseUnavailable(unusable(problems))

    async def _give_back(self, conn: Any, born: float) -> None:
        # The list, not each caller, makes sure no connection waits in it inside a
        # transaction: a statement group that failed half-way left its earlier rows open,
        # and the next group on the connection would commit them (its BEGIN) or run its
        # own autocommit INSERT inside them, to be lost with them.
        if in_transaction(conn):
            try:
                await conn.rollback()
            except _DRIVER_ERRORS:
                _close(conn)
                return
            except BaseException:
                _close(conn)  # cancelled mid-rollback: its state is unknown
                raise
        if len(self._idle) < self.settings.pool_size:
            self._idle.append((conn, born))
        else:
            _close(conn)


async def _drive(vetting: Vetting, conn: Any) -> str | None:
    """Run a node's vetting statements on an asyncmy connection."""
    try:
        statement = next(vetting)
        while True:
            statement = vetting.send(await AsyncMessageStore._select(conn, statement, ()))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _close(conn: Any) -> None:
    with suppress(Exception):
        conn.close()
