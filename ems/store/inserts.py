"""The producer's INSERT statements on the message table, formatted here with every
binary value as a hex literal (see key_headers), the first row of each partition in a
write carrying that partition's fence (ems.store.fences) and the first row of the write
its write token; and the same rows for the driver's escaping, for rows too large for hex
(escaped_params), each carrying its fence."""

from __future__ import annotations

from binascii import hexlify
from collections.abc import Callable, Sequence
from itertools import count
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
#: A row of the producer's INSERT: (topic id, partition, offset, key literal, headers
#: literal, body hex digits, its partition's fence, the write token or NULL).
_TOKENED_ROW = b"(%d,%d,%d,%b,%b,X'%b',%d,%b)"
#: A row without the fence and the token, filled in two steps: the topic id and partition
#: once per partition of a write (its template), then each row's offset, key literal,
#: headers literal and body hex digits. A partition's first row then takes its fence for
#: the first NULL (of _UNFENCED_TAIL), and the write's first row its token for the second.
_PARTITION_ROW = b"(%d,%d,%%d,%%b,%%b,X'%%b',NULL,NULL)"
_UNFENCED_TAIL = b"NULL,NULL)"
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
    a partition), each under _STATEMENT_BYTES, each partition's first row carrying its
    fence (fences[partition]: see ems.store.fences, which checks the write first) and the
    write's first row the write token; None if a row is too large to send as hex."""
    rows = placed.rows
    if len(rows) == 1:
        return _single(placed, token, fences)
    if not rows:
        return []
    by_partition = _rows(placed)
    if by_partition is None:
        return None
    # One row of each partition carries its fence: the foreign key's check of it holds a
    # shared lock on the fence until the write commits, and the write is atomic (one
    # statement, or _split's in one transaction, where a partition's first row comes
    # first), so it guards the partition's other rows as well as their own checks would,
    # for one index lookup a partition instead of one a row.
    for p, tuples in by_partition.items():
        tuples[0] = tuples[0][: -len(_UNFENCED_TAIL)] + b"%d,NULL)" % fences[p]
    if token is not None:
        first = by_partition[rows[0][0]]
        first[0] = first[0][:-5] + b"%d)" % token
    # A fence is checked (and held) as its row is inserted, and a purge or a partition
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


def _rows(placed: Placed) -> dict[int, list[bytes]] | None:
    """The write's VALUES tuples without fence and token, by partition, each partition's in
    the rows' order at the next offset of its range; None if a row is too large to send as
    hex. One loop that calls out only for a literal not made before (this runs for every
    message published): the messages of a write mostly share their headers, and keys
    repeat across writes. What a partition's rows share (the topic, the partition) is
    formatted once, into that partition's template (_PARTITION_ROW), and its offsets are
    counted by an iterator: a row formats four values, not six."""
    topic_id = placed.topic_id
    by_partition: dict[int, list[bytes]] = {}
    slots: dict[int, tuple[bytes, Callable[[], int], Callable[[bytes], None]]] = {}
    for p, first in placed.firsts.items():
        tuples = by_partition[p] = []
        template = _PARTITION_ROW % (topic_id, p)
        slots[p] = (template, count(first).__next__, tuples.append)
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
        template, offset, add = slots[partition]
        add(template % (offset(), key_sql, last_sql, hexlify(body)))
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
