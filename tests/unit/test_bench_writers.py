"""The producer benchmark's raw baseline sends what ems sends for the same rows, in the
same literal encoding, without ems's layers (the low-watermark guard and the write token,
which a writer that never re-sends does not need): otherwise ems/raw is not a true ratio."""

from __future__ import annotations

from benchmarks.harness import HEADERS_JSON, Reading
from benchmarks.token_cost import without_token
from benchmarks.writers import raw_statement
from ems.store.inserts import INSERT_HEAD, insert_statements
from ems.types import NewMessage


def test_raw_inserts_ems_rows_in_ems_encoding_without_the_guard() -> None:
    rows = [
        (Reading(key="project-7", body=b"\x00'\\\"x\xff", partition=1), 40),
        (Reading(key="project-7", body=b"{}", partition=1), 41),
        (Reading(key="project-9", body=b"r", partition=3), 5),
    ]
    raw = raw_statement(12, rows)
    messages = [
        NewMessage(12, r.partition, o, r.key.encode(), HEADERS_JSON, r.body) for r, o in rows
    ]
    (ems,) = insert_statements(messages, 77) or [b""]
    # ems's statement is raw's with its first offset written as the guard over the lowest
    # offset of each partition in it, and a write token column: the token on the first
    # row, NULL on the others.
    guard = (
        b"(SELECT 40 UNION ALL SELECT 40 FROM partition_low WHERE topic_id = 12 AND "
        b"(partition_no IN (1,3) AND low_offset > CASE partition_no WHEN 1 THEN 40 "
        b"WHEN 3 THEN 5 END) LIMIT 2)"
    )
    assert guard in ems
    head = INSERT_HEAD.replace(b"body)", b"body, write_token)")
    assert ems.startswith(head)
    assert ems.count(b",77)") == 1 and ems.count(b",NULL)") == 2
    plain = ems.replace(guard, b"40").replace(b",77)", b")").replace(b",NULL)", b")")
    assert raw == plain.replace(head, INSERT_HEAD)
    # Hex literals throughout: nothing of the driver's escaping.
    assert b"X'00275c22" in raw and b"\\'" not in raw


def test_the_token_cost_compares_ems_statements_with_and_without_the_token() -> None:
    messages = [NewMessage(3, p, 10 + p, b"k", None, b"body") for p in range(3)] * 2
    (tokened,) = insert_statements(messages, 123456789) or [b""]
    plain = without_token(tokened, 123456789)
    assert b"write_token" not in plain and b"123456789" not in plain
    assert plain.startswith(INSERT_HEAD)
    # Only the token column went: the guard and every value stayed.
    assert plain.count(b"UNION ALL") == 1 and plain.count(b"X'626f6479'") == 6
    assert len(tokened) - len(plain) == len(b", write_token") + len(b",123456789") + 5 * 5
