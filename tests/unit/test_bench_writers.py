"""The producer benchmark's raw baseline sends what ems sends for the same rows, in the
same literal encoding, without ems's layers (the partitions' fences and the write token,
which a writer that never re-sends does not need): otherwise ems/raw is not a true ratio."""

from __future__ import annotations

from benchmarks.harness import HEADERS_JSON, Reading
from benchmarks.token_cost import without_token
from benchmarks.writers import raw_statement
from ems.store.inserts import INSERT_HEAD, insert_statements, values
from ems.types import NewMessage, placed_of


def test_raw_inserts_ems_rows_in_ems_encoding_without_the_guard() -> None:
    rows = [
        (Reading(key="project-7", body=b"\x00'\\\"x\xff", partition=1), 40),
        (Reading(key="project-7", body=b"{}", partition=1), 41),
        (Reading(key="project-9", body=b"r", partition=3), 5),
    ]
    keys: dict[str, bytes] = {}
    raw = raw_statement(12, rows, keys)
    messages = [
        NewMessage(12, r.partition, o, r.key.encode(), HEADERS_JSON, r.body) for r, o in rows
    ]
    # The same bytes as values() of each row, with its literals made once or kept.
    assert raw == INSERT_HEAD + b",".join(map(values, messages))
    assert sorted(keys) == ["project-7", "project-9"]
    assert raw_statement(12, rows, keys) == raw
    (ems,) = insert_statements(placed_of(messages), 77, (0, 8, 0, 9)) or [b""]
    # ems's statement is raw's with two more columns: the partition's fence on each
    # partition's first row, and the write token, on the write's first row (NULL on the
    # others).
    head = INSERT_HEAD.replace(b"body)", b"body, fence, write_token)")
    assert ems.startswith(head)
    assert ems.count(b",8,77)") == 1 and ems.count(b",NULL,NULL)") == 1
    assert ems.count(b",9,NULL)") == 1 and ems.count(b",8,NULL)") == 0
    plain = ems.replace(b",8,77)", b")").replace(b",NULL,NULL)", b")").replace(b",9,NULL)", b")")
    assert raw == plain.replace(head, INSERT_HEAD)
    # Hex literals throughout: nothing of the driver's escaping.
    assert b"X'00275c22" in raw and b"\\'" not in raw


def test_the_token_cost_compares_ems_statements_with_and_without_the_token() -> None:
    messages = [
        NewMessage(3, p, 10 + p + i, b"k", None, b"body") for i in range(2) for p in range(3)
    ]
    (tokened,) = insert_statements(placed_of(messages), 123456789, (4, 5, 6)) or [b""]
    plain = without_token(tokened, 123456789)
    assert b"write_token" not in plain and b"123456789" not in plain
    assert plain.startswith(INSERT_HEAD.replace(b"body)", b"body, fence)"))
    # Only the token column went: the fences (each partition's first row's) and every
    # value stayed.
    assert plain.count(b"X'626f6479',4)") == 1 and plain.count(b"X'626f6479',NULL)") == 3
    assert plain.count(b"X'626f6479'") == 6
    assert len(tokened) - len(plain) == len(b", write_token") + len(b",123456789") + 5 * 5
