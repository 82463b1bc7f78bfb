"""The producer's INSERT statements on the message table, formatted here with every
binary value as a hex literal (see key_headers), each row carrying its partition's fence
(ems.store.fences) and the first row of a write its write token; the same rows for the
driver's escaping, for rows too large for hex (escaped_params); and the guard of the path
that does not carry fences (the outbox relay's INSERT ... SELECT): a locking read of the
partitions' low watermarks in the statement."""

from __future__ import annotations

from binascii import hexlify
from collections.abc import Mapping, Sequence
from operator import itemgetter

from ems.types import NewMessage, Placed, placed_messages
from ems.validation import MAX_KEY_BYTES

#: The head of a plain multi-row INSERT of values() tuples (no write token): what a writer
#: that never needs to recognise its own writes sends (the producer benchmark's baseline).
INSERT_HEAD = (
    b"INSERT INTO message (topic_id, partition_no, offset_no, msg_key, headers, body) VALUES "
)
#: A row of INSERT_HEAD: (topic id, partition, offset, key literal, headers literal, body
#: hex digits).
PLAIN_ROW = b"(%d,%d,%d,%b,%b,X'%b')"
_KEY = b"X'%b'"
_HEADERS = b"_utf8mb4 X'%b'"
#: Literals of recent keys (see _key_literal), and how many are kept at most.
_KEY_LITERALS = 4096
_key_literals: dict[bytes, bytes] = {}
#: Literals of recent headers JSON (see _headers_literal), and how many are kept at most.
_HEADERS_LITERALS = 1024
_headers_literals: dict[str, bytes] = {}
# The producer's INSERTs also carry a write token, on the first row of a write only: the
# write is atomic (one statement, or one transaction), so that row being stored with the
# token proves all of it committed, and a row at its place without it proves none did.
#: The head of the producer's INSERTs: the columns of INSERT_HEAD, the fence and the token.
TOKENED_HEAD = (
    b"INSERT INTO message (topic_id, partition_no, offset_no, msg_key, headers, body, "
    b"fence, write_token) VALUES "
)
#: A row of the producer's INSERT with its partition's fence and no token; a write's
#: first row has the token for the NULL.
_ROW_AT = b"(%d,%d,%d,%b,%b,X'%b',%d,NULL)"
_TOKENED_ROW = b"(%d,%d,%d,%b,%b,X'%b',%d,%b)"
# The relay's INSERT ... SELECT, which carries no fences, keeps the guard in SQL. No
# message may be stored below its partition's low watermark: a purge removed that range and
# readers jump over it, so a row there would be acknowledged and never delivered. The
# guard is a scalar subquery that yields 0 alone, or a second row (an error: "Subquery
# returns more than 1 row", whatever the sql_mode) when the lowest offset of any partition
# in the statement lies below that partition's watermark; the statement then inserts
# nothing. Offsets of a partition in one
# statement ascend, so its lowest one stands for all. The relay's transaction runs
# REPEATABLE READ, where a subquery of an INSERT is a locking read: a purge that raised
# the watermark (before it deletes) holds the row, so the insert waits for its commit and
# then sees the new one (a partition without a watermark row is gap-locked instead).
# A derived table of VALUES or JSON_TABLE would say the same in SQL, but cost up to twice
# the INSERT for large batches, and MariaDB's table value constructor truncates binary
# values longer than 64 KiB.
_GUARD_ZERO = (
    b"(SELECT 0 UNION ALL SELECT 0 FROM partition_low WHERE topic_id = %d AND (%b) LIMIT 2)"
)
# The fence of a partition change (ems.store.partitions): the rows were routed by a count
# of partitions, and each of their partitions' partition_low row must still say that count
# (or NULL: no change since a purge created the row). The same locking read on the same
# rows makes a change (which writes that count on every old partition's row, creating the
# missing ones, under X locks) and the inserts take turns: an insert routed by the old count
# that comes after the change is refused (as the low-watermark guard refuses), and the
# producer routes its rows again by the new count. No insert reads the topic's row, which
# every producer of the topic would share.
_BELOW = b"partition_no = %d AND low_offset > %d"
_BELOW_ROUTED = b"partition_no = %d AND (low_offset > %d OR partitions <> %d)"
_BELOW_MANY = b"partition_no IN (%b) AND low_offset > CASE partition_no %b END"
_BELOW_MANY_ROUTED = (
    b"partition_no IN (%b) AND (low_offset > CASE partition_no %b END OR partitions <> %d)"
)

#: The INSERT of the driver-escaped path (rows too large for hex literals), one row's
#: parameters: the columns of TOKENED_HEAD.
ESCAPED_INSERT = (
    "INSERT INTO message (topic_id, partition_no, offset_no, msg_key, headers, body, fence, "
    "write_token) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
_partition = itemgetter(1)  # of escaped_params' rows
#: Statements stay under this size (PyMySQL's executemany packs up to 1,024,000 bytes; the
#: server takes up to max_allowed_packet, 16 MiB by default).
_STATEMENT_BYTES = 900_000
#: Upper bound on the SQL text one row adds besides its values.
_ROW_OVERHEAD = 120
#: Rows whose values are larger than this go through PyMySQL's escaping, which does not
#: double their size as hex does: a row must fit the server's max_allowed_packet.
_HEX_ROW_BYTES = 256 * 1024


def escaped_params(
    placed: Placed, token: int | None, fences: Sequence[int]
) -> list[tuple[object, ...]]:
    """The write's rows as ESCAPED_INSERT's parameters, for rows too large for hex (the
    driver's escaping does not double their size): in partition order as insert_statements
    puts them (each partition's in their own order), each with its partition's fence, the
    write's first row with the write token."""
    params: list[tuple[object, ...]] = [
        (m.topic_id, m.partition, m.offset, m.key, m.headers, m.body, fences[m.partition], None)
        for m in placed_messages(placed)
    ]
    params[0] = (*params[0][:-1], token)
    params.sort(key=_partition)  # stable
    return params


def insert_statements(
    placed: Placed, token: int | None, fences: Sequence[int]
) -> list[bytes] | None:
    """Multi-row INSERTs of the write's rows, in partition order (in their own order within
    a partition), each under _STATEMENT_BYTES, each row carrying its partition's fence
    (fences[partition]: see ems.store.fences, which checks the write first) and the
    write's first row the write token; None if a row is too large to send as hex."""
    rows = placed.rows
    if len(rows) == 1:
        return _single(placed, token, fences)
    if not rows:
        return []
    by_partition = _rows(placed, fences)
    if by_partition is None:
        return None
    if token is not None:
        first = by_partition[rows[0][0]]
        first[0] = first[0][:-5] + b"%d)" % token
    # Each row's fence is checked (and held) as it is inserted, and a purge or a partition
    # change moves fences in partition order: rows in that order too, or the two could
    # each hold a fence the other waits for (a deadlock).
    ordered = [row for p in sorted(by_partition) for row in by_partition[p]]
    size = len(TOKENED_HEAD) + sum(map(len, ordered)) + len(ordered)
    if size <= _STATEMENT_BYTES:
        # One statement (the common case): the sizes need no row by row account.
        return [TOKENED_HEAD + b",".join(ordered)]
    return _split(ordered)


def _single(placed: Placed, token: int | None, fences: Sequence[int]) -> list[bytes] | None:
    """insert_statements of one message (a single send), in one format: the same bytes
    as the rows and statement of the general path give it."""
    ((partition, key, headers, body),) = placed.rows
    size = len(body)
    if key is None:
        key_sql = b"NULL"
    else:
        key_sql = _key_literals.get(key) or _key_literal(key)
        size += len(key)
    if headers is None:
        headers_sql = b"NULL"
    else:
        headers_sql = _headers_literals.get(headers) or _headers_literal(headers)
        size += len(headers)
    if size > _HEX_ROW_BYTES:
        return None
    return [
        TOKENED_HEAD
        + _TOKENED_ROW
        % (
            placed.topic_id,
            partition,
            placed.firsts[partition],
            key_sql,
            headers_sql,
            hexlify(body),
            fences[partition],
            b"NULL" if token is None else b"%d" % token,
        )
    ]


def _rows(placed: Placed, fences: Sequence[int]) -> dict[int, list[bytes]] | None:
    """The write's VALUES tuples without a token, by partition, each partition's in the
    rows' order at the next offset of its range; None if a row is too large to send as
    hex. One loop that calls out only for a literal not made before (this runs for every
    message published): the messages of a write mostly share their headers, and keys
    repeat across writes."""
    topic_id, cursor = placed.topic_id, dict(placed.firsts)
    by_partition: dict[int, list[bytes]] = {p: [] for p in cursor}
    adds = {p: tuples.append for p, tuples in by_partition.items()}
    keys, texts = _key_literals, _headers_literals
    last_text, last_sql, last_size = None, b"NULL", 0
    for partition, key, headers, body in placed.rows:
        if headers is not last_text:
            last_text = headers
            if headers is None:
                last_sql, last_size = b"NULL", 0
            else:
                last_sql = texts.get(headers) or _headers_literal(headers)
                last_size = len(headers)
        if key is None:
            key_sql = b"NULL"
            if len(body) + last_size > _HEX_ROW_BYTES:
                return None
        else:
            key_sql = keys.get(key) or _key_literal(key)
            if len(body) + len(key) + last_size > _HEX_ROW_BYTES:
                return None
        offset = cursor[partition]
        cursor[partition] = offset + 1
        adds[partition](
            _ROW_AT
            % (topic_id, partition, offset, key_sql, last_sql, hexlify(body), fences[partition])
        )
    return by_partition


def _split(rows: list[bytes]) -> list[bytes]:
    """The rows (the first with the token) in statements under _STATEMENT_BYTES."""
    statements: list[bytes] = []
    kept: list[bytes] = []
    size = len(TOKENED_HEAD)
    for row in rows:
        if kept and size + len(row) + 1 > _STATEMENT_BYTES:
            statements.append(TOKENED_HEAD + b",".join(kept))
            kept, size = [], len(TOKENED_HEAD)
        kept.append(row)
        size += len(row) + 1
    statements.append(TOKENED_HEAD + b",".join(kept))
    return statements


def _below(lowest: Mapping[int, int], routed: int | None) -> bytes:
    """The guard's condition on partition_low: a partition's lowest offset lies below its
    low watermark (or, given routed, its row says another count of partitions). Several
    partitions are one IN list with each one's offset picked by a CASE: the same point
    reads (and locks) as an OR of one condition per partition, for about a third less of
    the guard's server CPU on a batch over 16 partitions (benchmarks/guard_cost.py)."""
    if len(lowest) == 1:
        ((p, o),) = lowest.items()
        return _below_one(p, o, routed)
    found = sorted(lowest.items())
    cases = b" ".join([b"WHEN %d THEN %d" % po for po in found])
    listed = b",".join([b"%d" % p for p, _ in found])
    if routed is None:
        return _BELOW_MANY % (listed, cases)
    return _BELOW_MANY_ROUTED % (listed, cases, routed)


def _below_one(partition: int, offset: int, routed: int | None) -> bytes:
    """_below of a statement whose rows are all in one partition."""
    if routed is None:
        return _BELOW % (partition, offset)
    return _BELOW_ROUTED % (partition, offset, routed)


def zero_guard(topic_id: int, lowest: Mapping[int, int], routed: int | None) -> bytes:
    """The guard as a scalar subquery that yields 0, or fails as _GUARDED does when a
    partition's lowest offset (`lowest`, by partition) lies below its low watermark or
    (given routed) the partition's row says another count: what a relay's INSERT ...
    SELECT adds to every offset it writes (the same locking read of the same rows)."""
    return _GUARD_ZERO % (topic_id, _below(lowest, routed))


def values(m: NewMessage) -> bytes:
    """One message's VALUES tuple without the guard: INSERT_HEAD + b",".join(values(m)
    for m in rows) is the plain multi-row INSERT of the same rows in the same encoding
    (the producer benchmark's raw baseline writes exactly that)."""
    key, headers = key_headers(m.key, m.headers)
    return PLAIN_ROW % (m.topic_id, m.partition, m.offset, key, headers, hexlify(m.body))


def key_headers(key: bytes | None, text: str | None) -> tuple[bytes, bytes]:
    """The key and headers literals. Binary values travel as hex literals: one C call each
    instead of the driver's escaping, and valid whatever the session's sql_mode
    (backslashes mean nothing in them). Headers are JSON text, which MySQL 8 refuses from
    a binary string, so their literal carries a utf8mb4 introducer."""
    key_sql = b"NULL" if key is None else _KEY % hexlify(key)
    headers = b"NULL" if text is None else _HEADERS % hexlify(text.encode())
    return key_sql, headers


def _key_literal(key: bytes) -> bytes:
    """The key's literal, kept for the next rows and writes with that key (a bounded
    number of keys, each of at most MAX_KEY_BYTES). Readers only get() from the cache, so
    a clear() by another thread costs them a miss, never an error."""
    literal = _KEY % hexlify(key)
    if len(key) <= MAX_KEY_BYTES:
        if len(_key_literals) >= _KEY_LITERALS:
            _key_literals.clear()
        _key_literals[key] = literal
    return literal


def _headers_literal(text: str) -> bytes:
    """The headers' literal, kept for the next single sends with the same headers (a
    bounded number: encode_headers keeps the JSON of at most as many header sets)."""
    literal = _HEADERS % hexlify(text.encode())
    if len(_headers_literals) >= _HEADERS_LITERALS:
        _headers_literals.clear()
    _headers_literals[text] = literal
    return literal
