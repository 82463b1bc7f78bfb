"""Exactly-once handling: a batch's handler calls and its settlement committed in one
transaction of the service's own database, on the server that holds ems's.

Each batch runs in a transaction that the service's factory opens (a SQLAlchemy
sessionmaker or Engine, or a callable that returns a Session, Connection or PyMySQL
connection). The handler receives the delivery and that transaction, and writes through
it; sends with `transaction=` ride on it too. ems then writes the batch's settlement (log
rows done, retries, dead letters, the cursors of every partition the batch touched)
through the same connection and commits: the handler's writes and the settlement commit
together or not at all. A member that lost a partition (generation moved, lease lapsed)
fails the commit at its cursor's fence.

A batch is first handled without savepoints: one transaction, one commit. A handler that
raises rolls that transaction back, and the batch is handled again with a savepoint per
message, so that a failure undoes only its own message's writes and the message goes to
the group's retry ladder. A handler may thus be called twice for a message within one
delivery; only one call's writes ever commit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

import pymysql
from pymysql.constants.SERVER_STATUS import SERVER_STATUS_IN_TRANS
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import RootTransaction
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, SessionTransaction

from ems.consumer.cluster import ClusterSession
from ems.consumer.state import Outcome, Policy, holds_back
from ems.exceptions import InvalidHandler, InvalidSetting, InvalidTransaction
from ems.ports import SettlementsThrough
from ems.store.database import idle_bound_statement
from ems.store.translation import translate
from ems.types import Delivery, Settlement

#: What opens a batch's transaction: an Engine (a Connection each batch), or a callable
#: returning a Session (a sessionmaker), a Connection or a PyMySQL connection.
TransactionFactory = Engine | Callable[[], Any]
#: An exactly-once handler: the delivery and the batch's transaction (what the factory
#: gave: Session, Connection or PyMySQL connection).
TransactionalHandler = Callable[[Delivery, Any], object]
_SAVEPOINT = "ems_message"
#: Why a handler that committed or rolled back the batch's transaction is stopped.
ENDED = (
    "an exactly-once handler ended the batch's transaction (commit or rollback): it "
    "writes in it, and ems commits it with the settlement"
)
#: Why ack() and nack() are refused on an exactly-once consumer.
PULL_REFUSED = (
    "an exactly-once consumer settles each batch with its handler's writes, in run(): "
    "ack() and nack() would settle outside that transaction"
)
# On MariaDB, the bound on the batch's transaction sitting idle (EMS_IDLE_TRANSACTION_TIMEOUT,
# as ems's own sessions have): a member paused inside a batch (past its lease, so its commit
# would be refused anyway) loses its session and so its row locks, those of a handler's
# locking reads too, and the partition's next owner does not wait on them. Set for the
# batch and put back after it: the connection is the service's. MySQL, which has no such
# setting, runs the plain SET.
BATCH_MARKER = "@ems_batch"
IDLE_UNBOUND = (
    f"SET {BATCH_MARKER} = NULL /*M!100300 , SESSION idle_transaction_timeout = DEFAULT */"
)


def batch_bound(seconds: int) -> str:
    """The bound on a batch's transaction sitting idle (IDLE_UNBOUND puts it back)."""
    return idle_bound_statement(seconds, BATCH_MARKER)


class BatchTransaction:
    """One batch's transaction, through what the factory gave: committed, rolled back
    and closed by ems (a Session closed returns its connection to the pool)."""

    def __init__(self, factory: TransactionFactory, idle_timeout: int = 0) -> None:
        try:
            made = factory.connect() if isinstance(factory, Engine) else factory()
        except (SQLAlchemyError, pymysql.err.Error) as exc:  # the server, not the factory
            raise translate(exc) from exc
        self.given: Any = made
        self._session = made if isinstance(made, Session) else None
        self._conn = made if isinstance(made, Connection) else None
        self._driver = made if isinstance(made, pymysql.connections.Connection) else None
        if self._session is None and self._conn is None and self._driver is None:
            with suppress(Exception):
                made.close()
            raise InvalidTransaction(
                "an exactly-once consumer's transaction factory must return a SQLAlchemy "
                f"Session or Connection or a PyMySQL connection, not a {type(made).__name__}"
            )
        self._root: SessionTransaction | RootTransaction | None = None
        self._bounded = idle_timeout > 0
        try:
            if self._session is not None:
                self._session.connection()  # begins
                self._root = self._session.get_transaction()
            elif self._conn is not None:
                self._root = self._conn.begin()
            elif self._driver is not None:
                self._driver.begin()
            if self._bounded:
                self._run(batch_bound(idle_timeout))
        except (SQLAlchemyError, pymysql.err.Error) as exc:
            self.close()
            raise translate(exc) from exc

    def _run(self, sql: str) -> None:
        """One statement of ems's on the batch's connection (no rows)."""
        if self._session is not None:
            self._session.connection().exec_driver_sql(sql)
        elif self._conn is not None:
            self._conn.exec_driver_sql(sql)
        elif self._driver is not None:
            with self._driver.cursor() as cursor:
                cursor.execute(sql)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A message's writes, undone alone when the handler raises."""
        if self._session is not None:
            with self._session.begin_nested():
                yield
        elif self._conn is not None:
            with self._conn.begin_nested():
                yield
        else:
            assert self._driver is not None
            with self._driver.cursor() as cursor:
                cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
            try:
                yield
            except BaseException:
                with self._driver.cursor() as cursor:
                    cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
                raise
            with self._driver.cursor() as cursor:
                cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")

    def flush(self) -> None:
        """A Session's pending writes, sent now: their errors are the handler's."""
        if self._session is not None:
            self._session.flush()

    def intact(self) -> bool:
        """Whether the batch's transaction is still the one open (the handler neither
        committed nor rolled it back)."""
        if self._session is not None:
            return self._session.get_transaction() is self._root and self._root is not None
        if self._conn is not None:
            return self._conn.get_transaction() is self._root
        assert self._driver is not None
        return bool(self._driver.server_status & SERVER_STATUS_IN_TRANS)

    def commit(self) -> None:
        try:
            if self._session is not None:
                self._session.commit()
            elif self._conn is not None:
                self._conn.commit()
            elif self._driver is not None:
                self._driver.commit()
        except (SQLAlchemyError, pymysql.err.Error) as exc:
            raise translate(exc) from exc

    def rollback(self) -> None:
        """Quietly: a lost connection has rolled back already."""
        with suppress(SQLAlchemyError, pymysql.err.Error):
            if self._session is not None:
                self._session.rollback()
            elif self._conn is not None:
                self._conn.rollback()
            elif self._driver is not None:
                self._driver.rollback()

    def close(self) -> None:
        if self._bounded and self._driver is None:  # a pooled connection goes back as it came
            with suppress(SQLAlchemyError, pymysql.err.Error):
                self._run(IDLE_UNBOUND)
        with suppress(SQLAlchemyError, pymysql.err.Error):
            if self._session is not None:
                self._session.close()
            elif self._conn is not None:
                self._conn.close()
            elif self._driver is not None:
                self._driver.close()


def check_use(handler: object, broadcast: bool) -> None:
    """An exactly-once consumer runs a handler of (delivery, transaction) in run(), in a
    cluster group (a broadcast group keeps no cursor to commit with the handler's writes)."""
    if handler is None:
        raise InvalidHandler("an exactly-once consumer needs a handler of (delivery, transaction)")
    if broadcast:
        raise InvalidSetting("a broadcast group keeps no cursor: it cannot consume exactly once")


class BatchOutcomes:
    """A batch's outcomes as its handler calls end: an ordered group's retry in place
    holds back the rest of its partition's batch."""

    def __init__(self, policy: Policy, failed: Callable[[Delivery, Exception], Outcome]) -> None:
        self.outcomes: list[Outcome] = []
        self._policy = policy
        self._failed = failed
        self._blocked: set[int] = set()

    def held(self, d: Delivery) -> bool:
        """Whether d waits behind its partition's retry in place (not handled now)."""
        return d.partition in self._blocked

    def passed(self, d: Delivery) -> None:
        self.outcomes.append(Outcome(d))

    def raised(self, d: Delivery, exc: Exception) -> None:
        outcome = self._failed(d, exc)
        self.outcomes.append(outcome)
        if holds_back(outcome, self._policy):
            self._blocked.add(d.partition)


#: Has write(connection) run through the batch's connection, then commits the batch's
#: transaction; write is handed what the transaction is reached through (a Session,
#: Connection or PyMySQL connection).
Committer = Callable[[Callable[[Any], None]], None]


class Settler:
    """The settlement side of exactly-once batches, the same for ems.Consumer and
    ems.aio.Consumer: a batch's outcomes, and their settlement written through the
    batch's own connection by the session's fenced protocol."""

    def __init__(
        self,
        session: ClusterSession,
        settlements: SettlementsThrough,
        *,
        policy: Policy,
        failed: Callable[[Delivery, Exception], Outcome],
        observe: Callable[[float], None] = lambda seconds: None,
        idle_timeout: int = 0,
    ) -> None:
        self.session = session
        # Settlements commit in the callers' transactions, never on the ack writer: it
        # must write a batch's start rows at once, not hold them for a settlement.
        session.settles_elsewhere()
        self.settlements = settlements
        self.policy = policy
        self.failed = failed
        #: Records each handler call's seconds (the ems_handler_seconds histogram).
        self.observe = observe
        #: Seconds the batch's transaction may sit idle (MariaDB; 0: no bound).
        self.idle_timeout = idle_timeout

    def outcomes(self) -> BatchOutcomes:
        return BatchOutcomes(self.policy, self.failed)

    def read_again(self, batch: list[Delivery]) -> None:
        """The batch was not settled: its partitions are read again from the stored
        cursors (which also say whether a commit whose reply was lost landed)."""
        self.session.read_again({d.partition for d in batch})

    def settle(self, outcomes: list[Outcome], commit: Committer) -> None:
        """Apply the outcomes and have commit write their settlement through the batch's
        connection and commit it (ClusterSession.settle_within). Runs on the thread that
        drives the session."""
        self.settlements.ready()

        def through(settlement: Settlement, expected: dict[int, int]) -> None:
            commit(lambda conn: self._write(conn, settlement, expected))

        self.session.settle_within(outcomes, through)

    def _write(self, conn: object, settlement: Settlement, expected: Mapping[int, int]) -> None:
        group, topic = self.session.group, self.session.topic
        client = self.session.membership.client_id
        self.settlements.write(conn, group.id, topic.id, client, settlement, expected)


class ExactlyOnce:
    """Runs batches through the handler, each in one transaction with its settlement."""

    def __init__(
        self, factory: TransactionFactory, handler: TransactionalHandler, settler: Settler
    ) -> None:
        self._factory = factory
        self._handler = handler
        self._settler = settler

    def handle(self, batch: list[Delivery]) -> None:
        """Handle and settle the batch in one transaction: without savepoints, or, once
        a handler raised, again with one per message."""
        if batch and not self._attempt(batch, savepoints=False):
            self._attempt(batch, savepoints=True)

    def _attempt(self, batch: list[Delivery], *, savepoints: bool) -> bool:
        """Whether the batch was settled: False when, without savepoints, a handler
        raised (everything it and the others wrote rolled back)."""
        try:
            tx = BatchTransaction(self._factory, self._settler.idle_timeout)
        except BaseException:
            self._settler.read_again(batch)
            raise
        try:
            outcomes = self._run(tx, batch, savepoints)
            if outcomes is None:
                tx.rollback()
                return False
            self._settler.settle(outcomes, lambda write: self._commit(tx, write))
            return True
        except BaseException:
            tx.rollback()
            self._settler.read_again(batch)
            raise
        finally:
            tx.close()

    def _run(
        self, tx: BatchTransaction, batch: list[Delivery], savepoints: bool
    ) -> list[Outcome] | None:
        results = self._settler.outcomes()
        for d in batch:
            if results.held(d):
                continue
            try:
                if savepoints:
                    with tx.savepoint():
                        self._call(tx, d)
                else:
                    self._call(tx, d)
            except InvalidHandler:
                raise
            except Exception as exc:  # the handler's failure is the message's
                if not savepoints:
                    return None
                results.raised(d, exc)
            else:
                results.passed(d)
        return results.outcomes

    def _call(self, tx: BatchTransaction, d: Delivery) -> None:
        began = time.perf_counter()
        try:
            self._handler(d, tx.given)
            tx.flush()
        finally:
            self._settler.observe(time.perf_counter() - began)
        if not tx.intact():
            raise InvalidHandler(ENDED)

    @staticmethod
    def _commit(tx: BatchTransaction, write: Callable[[Any], None]) -> None:
        write(tx.given)
        tx.commit()
