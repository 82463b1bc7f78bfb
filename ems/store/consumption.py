"""Statements of the consume path: the consumption log, retries and dead letters.

A fetched batch costs one INSERT into the log; an ack batch costs one transaction: one
UPDATE marks every handled message done, failures move to the retry or dead table, and
the cursors are committed under generation fencing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from operator import attrgetter

from pymysql.cursors import Cursor

from ems.store.caller import CallerConnection, Installation, qualified
from ems.store.database import Database
from ems.store.errors import StaleGeneration
from ems.store.groups import commit_cursors
from ems.store.translation import DRIVER_ERRORS, translate
from ems.types import Delivery, Failure, Settlement, delivery
from ems.values.fetch import decode_headers

_US = 1_000_000
# A fetched batch's start rows are one INSERT ... SELECT of its offset ranges: the server
# makes the rows from the message key it already holds, and the client sends a few ranges
# instead of a VALUES tuple per message (issue 43 measured 0.8 instead of 14.7 us of client
# CPU per message, and less server CPU as well). A batch's runs (offset_ranges) hold every
# delivered offset and only those, so the ranges select exactly the batch; a message
# deleted since its read (a purge, a compaction) gets no row, as it is delivered no more.
# The session reads READ COMMITTED: the SELECT part is a consistent read that locks none
# of the message rows, so producers appending to the partitions never wait on it.
_START = (
    "INSERT INTO topic_group_log (group_id, topic_id, partition_no, offset_no, client_id, "
    "state, attempts) SELECT %s, topic_id, partition_no, offset_no, %s, 'start', {attempts} "
    "FROM message WHERE topic_id = %s AND ({ranges}) ON DUPLICATE KEY UPDATE "
    "client_id = VALUES(client_id), state = 'start', "
    "attempts = GREATEST(topic_group_log.attempts + 1, VALUES(attempts)), "
    "started_at = NOW(6), finished_at = NULL, updated_at = NOW(6)"
)
# The same rows written as settled at once, in the transaction of their acks: what the
# start rows and the UPDATE to done would leave, in one statement.
_STARTED_DONE = (
    "INSERT INTO topic_group_log (group_id, topic_id, partition_no, offset_no, client_id, "
    "state, attempts, finished_at) SELECT %s, topic_id, partition_no, offset_no, %s, 'done', "
    "{attempts}, NOW(6) FROM message WHERE topic_id = %s AND ({ranges}) "
    "ON DUPLICATE KEY UPDATE client_id = VALUES(client_id), state = 'done', exactly_once = 0, "
    "attempts = GREATEST(topic_group_log.attempts + 1, VALUES(attempts)), "
    "started_at = NOW(6), finished_at = NOW(6), updated_at = NOW(6)"
)
_WHEN = "WHEN {ranges} THEN %s"
_DONE = (
    "UPDATE topic_group_log SET state = 'done', exactly_once = %s, finished_at = NOW(6), "
    "updated_at = NOW(6) "
    "WHERE group_id = %s AND client_id = %s AND state = 'start' AND ({ranges})"
)
_RANGE = "(partition_no = %s AND offset_no BETWEEN %s AND %s)"
_FAILED_LOG = (
    "UPDATE topic_group_log SET state = %s, attempts = %s, error = %s, exactly_once = %s, "
    "finished_at = NOW(6), updated_at = NOW(6) WHERE group_id = %s AND partition_no = %s "
    "AND offset_no = %s AND client_id = %s"
)
# The traceback is the last failure's too: NULL when that was an ack timeout or a nack().
_RETRY = (
    "INSERT INTO retry_message (group_id, topic_id, partition_no, offset_no, message_id, "
    "attempts, due_at, last_error, last_traceback) "
    "VALUES (%s, %s, %s, %s, %s, %s, NOW(6) + INTERVAL %s MICROSECOND, %s, %s) "
    "ON DUPLICATE KEY UPDATE attempts = VALUES(attempts), due_at = VALUES(due_at), "
    "last_error = VALUES(last_error), last_traceback = VALUES(last_traceback)"
)
# The dead letter keeps its own copy of the message, taken on the server.
_DEAD = (
    "INSERT INTO dead_message (group_id, topic_id, partition_no, offset_no, message_id, "
    "msg_key, headers, body, attempts, last_error, last_traceback) "
    "SELECT %s, topic_id, partition_no, offset_no, id, msg_key, headers, body, %s, %s, %s "
    "FROM message WHERE id = %s"
)
_CLEAR_RETRY = (
    "DELETE FROM retry_message WHERE group_id = %s AND partition_no = %s AND offset_no = %s"
)
_HAND_BACK = (
    "DELETE FROM topic_group_log WHERE group_id = %s AND partition_no = %s "
    "AND offset_no BETWEEN %s AND %s AND client_id = %s AND state = 'start'"
)
# Due retries, oldest due first, bounded by rows and by the bytes of their bodies by the
# rule of every fetch (ems.values.fetch.within_budget), applied here in SQL: the bodies are
# joined only for the rows within the budget, and the first due message comes whatever its
# size.
_DUE = (
    "SELECT w.id, w.partition_no, w.offset_no, w.attempts, m.id, m.msg_key, m.headers, "
    "m.body, m.created_at FROM ("
    "SELECT id, partition_no, offset_no, attempts, message_id, due_at, size, "
    "SUM(size) OVER (ORDER BY due_at, id ROWS UNBOUNDED PRECEDING) AS upto FROM ("
    "SELECT r.id, r.partition_no, r.offset_no, r.attempts, r.message_id, r.due_at, "
    "LENGTH(m.body) AS size FROM retry_message r JOIN message m ON m.id = r.message_id "
    "WHERE r.group_id = %s AND r.due_at <= NOW(6) AND r.partition_no IN ({partitions}) "
    "ORDER BY r.due_at, r.id LIMIT %s) AS due) AS w "
    "JOIN message m ON m.id = w.message_id "
    "WHERE w.upto <= %s OR w.upto = w.size ORDER BY w.due_at, w.id"
)
_CLAIM = "UPDATE retry_message SET due_at = NOW(6) + INTERVAL %s MICROSECOND WHERE id IN ({ids})"


def offset_ranges(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(partition, offset) pairs as maximal runs (partition, first, last)."""
    runs: list[tuple[int, int, int]] = []
    partition, first, last = -1, 0, 0
    for p, o in sorted(pairs):
        if p == partition and o == last + 1:
            last = o
            continue
        if partition >= 0:
            runs.append((partition, first, last))
        partition, first, last = p, o, o
    if partition >= 0:
        runs.append((partition, first, last))
    return runs


_ATTEMPT = attrgetter("attempt")
_PLACE = attrgetter("partition", "offset")


def start_statement(
    group_id: int,
    topic_id: int,
    client_id: str,
    deliveries: Sequence[Delivery],
    *,
    done: bool = False,
) -> tuple[str, tuple[object, ...]]:
    """The start rows of a batch as one INSERT ... SELECT of its offset ranges, each row
    with its delivery's attempt (a CASE over the ranges of each attempt when they differ);
    with `done`, written as settled (done) at once."""
    runs = offset_ranges(list(map(_PLACE, deliveries)))
    ranges = " OR ".join([_RANGE] * len(runs))
    where = [v for run in runs for v in run]
    kinds = set(map(_ATTEMPT, deliveries))
    if len(kinds) == 1:
        attempts, picks = "%s", list(kinds)
    else:
        by_attempt: dict[int, list[tuple[int, int]]] = {}
        for d in deliveries:
            by_attempt.setdefault(d.attempt, []).append((d.partition, d.offset))
        whens, picks = [], []
        for attempt, pairs in by_attempt.items():
            own = offset_ranges(pairs)
            whens.append(_WHEN.format(ranges=" OR ".join([_RANGE] * len(own))))
            picks.extend([*(v for run in own for v in run), attempt])
        attempts = "CASE " + " ".join(whens) + " END"
    sql = (_STARTED_DONE if done else _START).format(attempts=attempts, ranges=ranges)
    return sql, (group_id, client_id, *picks, topic_id, *where)


def settled_at_start(
    started: Sequence[Delivery], settlement: Settlement
) -> tuple[list[Delivery], list[Delivery], Settlement]:
    """Of deliveries whose start rows go in their settlement's transaction: those it acks
    (their rows written as done at once), the others (written as started, for the
    settlement to move on), and the settlement without the acks already written."""
    places = set(map(_PLACE, started)) & set(settlement.done)
    if not places:
        return [], list(started), settlement
    settled = [d for d in started if _PLACE(d) in places]
    rest = [d for d in started if _PLACE(d) not in places]
    return settled, rest, replace(settlement, done=[x for x in settlement.done if x not in places])


def due_query(
    group_id: int, partitions: Sequence[int], limit: int, max_bytes: int
) -> tuple[str, tuple[object, ...]]:
    sql = _DUE.format(partitions=", ".join(["%s"] * len(partitions)))
    return sql, (group_id, *partitions, limit, max_bytes)


def claim_statement(lease_us: int, ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    return _CLAIM.format(ids=", ".join(["%s"] * len(ids))), (lease_us, *ids)


class Statements:
    """The settlement's statements: ems's own (on its connection), or qualified with the
    ems database's name and marking the log rows as settled exactly once (through the
    caller's connection, in the caller's transaction)."""

    def __init__(self, schema: str | None = None) -> None:
        self.exactly_once = schema is not None
        self._schema = schema

    def __call__(self, sql: str) -> str:
        return sql if self._schema is None else qualified(sql, self._schema)


OWN = Statements()


def write_settlement(
    cursor: Cursor,
    group_id: int,
    topic_id: int,
    client_id: str,
    settlement: Settlement,
    sql: Statements = OWN,
    expected: Mapping[int, int] | None = None,
) -> None:
    """The statements of one ack batch, inside the cursor's transaction. Exactly once
    (sql.exactly_once), every row must be as this client left it: each done message still
    started by it, each cleared retry row still there, and the settlement's cursors (every
    partition it touches) still owned at their generation under a live lease and still at
    their `expected` values; else StaleGeneration, and the caller's transaction must roll
    back."""
    strict = sql.exactly_once
    runs = offset_ranges(settlement.done)
    if runs:
        done = sql(_DONE).format(ranges=" OR ".join([_RANGE] * len(runs)))
        values = [v for run in runs for v in run]
        marked = cursor.execute(done, (int(strict), group_id, client_id, *values))
        if strict and marked != len(settlement.done):
            raise StaleGeneration(
                f"{len(settlement.done) - marked} of the messages settled are no longer "
                f"started by {client_id}: another member took them"
            )
    for failure in settlement.failed:
        _fail(cursor, sql, group_id, topic_id, client_id, failure)
    for failure in settlement.logged_only:
        _log_failure(cursor, sql, group_id, client_id, failure, "retry")
    if settlement.cleared:
        params = [(group_id, p, o) for p, o in settlement.cleared]
        cleared = cursor.executemany(sql(_CLEAR_RETRY), params)
        if strict and cleared != len(params):
            raise StaleGeneration("a retried message was settled meanwhile by another member")
    if settlement.handed_back:
        cursor.executemany(
            sql(_HAND_BACK),
            [(group_id, p, a, b, client_id) for p, a, b in settlement.handed_back],
        )
    commit_cursors(cursor, group_id, client_id, settlement.cursors, sql, expected)


def _fail(
    cursor: Cursor, sql: Statements, group_id: int, topic_id: int, client_id: str, f: Failure
) -> None:
    if f.delay is None:
        cursor.execute(sql(_DEAD), (group_id, f.attempts, f.error, f.traceback, f.message_id))
        cursor.execute(sql(_CLEAR_RETRY), (group_id, f.partition, f.offset))
        state = "dead"
    else:
        delay = int(f.delay * _US)
        values = (group_id, topic_id, f.partition, f.offset, f.message_id, f.attempts)
        cursor.execute(sql(_RETRY), (*values, delay, f.error, f.traceback))
        state = "retry"
    _log_failure(cursor, sql, group_id, client_id, f, state)


def _log_failure(
    cursor: Cursor, sql: Statements, group_id: int, client_id: str, f: Failure, state: str
) -> None:
    log = (state, f.attempts, f.error, int(sql.exactly_once))
    cursor.execute(sql(_FAILED_LOG), (*log, group_id, f.partition, f.offset, client_id))


class ConsumptionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def start(
        self, group_id: int, topic_id: int, client_id: str, deliveries: Sequence[Delivery]
    ) -> None:
        """Log a fetched batch as started: one statement."""
        if not deliveries:
            return
        with self.db.single() as cursor:
            cursor.execute(*start_statement(group_id, topic_id, client_id, deliveries))

    def settle(
        self,
        group_id: int,
        topic_id: int,
        client_id: str,
        settlement: Settlement,
        started: Sequence[Delivery] = (),
    ) -> None:
        """Write one ack batch in one transaction, after the start rows of `started` (a
        batch whose handling ended before its start rows were written: one commit for
        both). StaleGeneration (nothing written) when a cursor's partition was
        reassigned."""
        settled, started, settlement = settled_at_start(started, settlement)
        with self.db.transaction() as cursor:
            if settled:
                statement = start_statement(group_id, topic_id, client_id, settled, done=True)
                cursor.execute(*statement)
            if started:
                cursor.execute(*start_statement(group_id, topic_id, client_id, started))
            write_settlement(cursor, group_id, topic_id, client_id, settlement)

    def claim_due(
        self,
        group_id: int,
        topic: str,
        partitions: Sequence[int],
        limit: int,
        lease: float,
        max_bytes: int,
    ) -> list[Delivery]:
        """Due retries of these partitions, oldest due first, claimed for lease seconds so
        that they are not handed out twice while in flight: at most `limit`, and only
        while their bodies total at most max_bytes (the first whatever its size)."""
        if not partitions:
            return []
        rows = self.db.select(*due_query(group_id, partitions, limit, max_bytes))
        if not rows:
            return []
        ids = [r[0] for r in rows]
        with self.db.single() as cursor:
            cursor.execute(*claim_statement(int(lease * _US), ids))
        headers = decode_headers([r[6] for r in rows])
        return [
            delivery(topic, int(r[1]), int(r[2]), r[5], h, r[7], r[8], int(r[3]) + 1, int(r[4]))
            for r, h in zip(rows, headers, strict=True)
        ]


class SettlementsThrough:
    """Exactly-once settlement: an ack batch's statements run through the caller's own
    connection, inside the transaction of the handler's writes, their tables named with
    the ems database's name; the connection checked once to reach this database."""

    def __init__(self, db: Database) -> None:
        self.installation = Installation(db)
        self._sql = Statements(self.installation.schema)

    def ready(self) -> None:
        self.installation.uuid()

    def write(
        self,
        tx: object,
        group_id: int,
        topic_id: int,
        client_id: str,
        settlement: Settlement,
        expected: Mapping[int, int],
    ) -> None:
        conn = CallerConnection(tx)
        self.installation.check(conn)
        cursor = conn.cursor()
        try:
            write_settlement(cursor, group_id, topic_id, client_id, settlement, self._sql, expected)
        except DRIVER_ERRORS as exc:  # PyMySQL's (aiomysql's too), asyncmy's
            raise translate(exc) from exc
        finally:
            cursor.close()
