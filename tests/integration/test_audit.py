"""The audit trail on the real server: entries recorded and searched newest first, by
actor, action, target, time and id cursor, the limit bounded, and anything too long or
not quite text cut and cleaned to fit instead of failing."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from ems.config import Settings
from ems.exceptions import InvalidInput
from ems.ops.accounts import MAX_AUDIT_LIMIT, AuditLog
from ems.store import Store
from ems.store.audit import AuditStore
from ems.values.accounts import AuditEntry, AuditFilter
from tests import sql as db


@pytest.fixture
def log(settings: Settings, store: Store) -> Iterator[AuditLog]:
    with AuditLog(settings, store=store) as a:
        yield a


def entry(**changes: Any) -> AuditEntry:
    values: dict[str, Any] = {
        "actor": "alice",
        "address": "10.0.0.1",
        "user_agent": "Mozilla/5.0",
        "action": "user.add",
        "target": "user:bob",
        "params": {"role": "viewer"},
        "outcome": "ok",
    }
    return AuditEntry(**{**values, **changes})


def row(store: Store, column: str) -> Any:
    return db.row(store, f"SELECT {column} FROM admin_audit")[0]


def test_an_entry_reads_back_as_recorded(log: AuditLog) -> None:
    log.record(entry(before='{"role": "viewer"}', after='{"role": "admin"}', detail="promoted"))
    (found,) = log.search(AuditFilter())
    assert found.id is not None and found.at is not None
    assert found == entry(
        before='{"role": "viewer"}',
        after='{"role": "admin"}',
        detail="promoted",
        at=found.at,
        id=found.id,
    )


def test_newest_first_a_page_at_a_time(log: AuditLog) -> None:
    for i in range(7):
        log.record(entry(target=f"user:u{i}"))
    first = log.search(AuditFilter(limit=3))
    assert [e.target for e in first] == ["user:u6", "user:u5", "user:u4"]
    second = log.search(AuditFilter(limit=3, before_id=first[-1].id))
    assert [e.target for e in second] == ["user:u3", "user:u2", "user:u1"]
    last = log.search(AuditFilter(limit=3, before_id=second[-1].id))
    assert [e.target for e in last] == ["user:u0"]


def test_filters(log: AuditLog) -> None:
    at = dt.datetime(2026, 1, 1, 12, 0, 0)
    log.record(entry(actor="alice", action="user.add", target="user:bob", at=at))
    log.record(entry(actor="bob", action="dlq.resend", target="dlq:7", at=at + dt.timedelta(1)))
    log.record(entry(actor="token:ci", action="user.remove", target="user:b_b"))
    log.record(entry(actor="-", action="login", target="user:alice", outcome="denied"))

    def targets(**f: Any) -> list[str]:
        return [e.target for e in log.search(AuditFilter(**f))]

    assert targets(actor="bob") == ["dlq:7"]
    assert targets(action="user.add") == ["user:bob"]
    assert targets(target_prefix="user:") == ["user:alice", "user:b_b", "user:bob"]
    # LIKE's wildcards are taken literally.
    assert targets(target_prefix="user:b_") == ["user:b_b"]
    assert targets(target_prefix="user:%") == []
    assert targets(since=at + dt.timedelta(hours=1), until=at + dt.timedelta(days=2)) == ["dlq:7"]
    assert targets(until=at + dt.timedelta(hours=1)) == ["user:bob"]
    assert targets(actor="alice", action="user.remove") == []


def test_the_limit_is_bounded(log: AuditLog, store: Store) -> None:
    db.run_many(
        store,
        "INSERT INTO admin_audit (actor, address, user_agent, action, target, params, "
        "outcome) VALUES ('a', '-', '-', 'x', 't', '{}', 'ok')",
        [()] * (MAX_AUDIT_LIMIT + 5),
    )
    assert len(log.search(AuditFilter(limit=10_000))) == MAX_AUDIT_LIMIT
    assert len(log.search(AuditFilter(limit=2))) == 2
    for bad in (0, -1, True, 2.5):
        with pytest.raises(InvalidInput):
            log.search(AuditFilter(limit=bad))  # type: ignore[arg-type]


def test_long_texts_are_cut_to_their_columns(log: AuditLog, store: Store) -> None:
    huge = "é" * 70_000  # two bytes each: well past a TEXT column
    log.record(
        entry(
            actor="a" * 500,
            address="b" * 500,
            user_agent="c" * 5000,
            action="d" * 500,
            target="e" * 5000,
            outcome="f" * 100,
            before=huge,
            after=huge,
            detail=huge,
            params={"blob": "x" * 200_000},
        )
    )
    (found,) = log.search(AuditFilter())
    assert (len(found.actor), len(found.address), len(found.action)) == (64, 64, 64)
    assert (len(found.user_agent), len(found.target), len(found.outcome)) == (255, 255, 16)
    assert found.actor.endswith("…") and found.actor.startswith("a" * 63)
    for value in (found.before, found.after, found.detail):
        assert value is not None
        assert 60_000 < len(value.encode()) <= 65_535
        assert value.endswith("…")
    assert set(found.params) == {"truncated"}
    assert len(str(found.params["truncated"])) < 20_000


def test_values_that_are_not_json_or_not_text_still_record(log: AuditLog) -> None:
    when = dt.datetime(2026, 5, 1, 8, 30)
    log.record(
        entry(
            user_agent="bad \udcff agent",
            detail="lone \ud800 surrogate",
            params={"when": when, "ids": (1, 2), "raw": b"\x00\xff", "ok": True, "n": None},
        )
    )
    (found,) = log.search(AuditFilter())
    assert found.user_agent == "bad \ufffd agent"
    assert found.detail == "lone \ufffd surrogate"
    assert found.params == {
        "when": str(when),
        "ids": [1, 2],
        "raw": str(b"\x00\xff"),
        "ok": True,
        "n": None,
    }


def test_params_are_stored_as_json(log: AuditLog, store: Store) -> None:
    log.record(entry(params={"role": "admin", "count": 3}))
    assert row(store, "JSON_VALUE(params, '$.role')") == "admin"
    assert row(store, "JSON_VALUE(params, '$.count')") == "3"


def test_the_trail_is_append_only() -> None:
    """Its store inserts and searches, and deletes by age only (the retention, run by
    the purge-log job: tests/integration/test_cleanup_jobs.py); nothing updates an
    entry."""
    public = {name for name in dir(AuditStore) if not name.startswith("_")}
    assert public == {"insert", "search", "prune"}
