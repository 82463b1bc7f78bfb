"""Statements on the audit trail: insert and search, nothing else (it is append-only).

An entry always fits its row: every text is cut to its column's size (VARCHAR columns
count characters, TEXT columns hold 65,535 bytes), text that is not valid Unicode has
the offending characters replaced, and parameters that cannot be JSON are written as
their text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy import String, insert, select
from sqlalchemy.engine import Row

from ems.models import AdminAudit
from ems.store.database import Database
from ems.values.accounts import AuditEntry, AuditFilter

#: Bytes a TEXT column holds.
TEXT_BYTES = 65_535
#: Characters of JSON the params keep; beyond it they are replaced by a cut copy of the
#: JSON text under "truncated".
PARAMS_CHARS = 16_000
MARK = "…"
_SURROGATE = re.compile("[\ud800-\udfff]")

_COLUMNS = (
    AdminAudit.id,
    AdminAudit.at,
    AdminAudit.actor,
    AdminAudit.address,
    AdminAudit.user_agent,
    AdminAudit.action,
    AdminAudit.target,
    AdminAudit.params,
    AdminAudit.before_state,
    AdminAudit.after_state,
    AdminAudit.outcome,
    AdminAudit.detail,
)


def _text(value: object) -> str:
    """Text the database takes: a lone surrogate (from bytes that were not UTF-8) becomes
    U+FFFD."""
    text = value if isinstance(value, str) else str(value)
    return _SURROGATE.sub("\ufffd", text)


def cut_chars(value: object, limit: int) -> str:
    """At most `limit` characters, the last one a … when cut."""
    text = _text(value)
    return text if len(text) <= limit else text[: limit - 1] + MARK


def cut_bytes(value: object | None, limit: int = TEXT_BYTES) -> str | None:
    """At most `limit` bytes of UTF-8, cut at a character boundary and ending in … when
    cut."""
    if value is None:
        return None
    text = _text(value)
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    room = limit - len(MARK.encode("utf-8"))
    return data[:room].decode("utf-8", "ignore") + MARK


def params_json(params: Mapping[str, object] | None) -> dict[str, Any]:
    """The params as plain JSON values (anything else as its text), kept within
    PARAMS_CHARS of JSON."""
    try:
        encoded = json.dumps(dict(params or {}), default=str, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):  # keys that are not text, circular references
        encoded = json.dumps({"unencodable": _text(params)}, ensure_ascii=False)
    encoded = _text(encoded)
    if len(encoded) > PARAMS_CHARS:
        return {"truncated": encoded[: PARAMS_CHARS - 100] + MARK}
    value: dict[str, Any] = json.loads(encoded)
    return value


def _limit(column: Any) -> int:
    kind = column.type
    assert isinstance(kind, String) and kind.length is not None
    return int(kind.length)


_SIZES = {
    name: _limit(getattr(AdminAudit, name))
    for name in ("actor", "address", "user_agent", "action", "target", "outcome")
}


def _entry(row: Row[Any]) -> AuditEntry:
    params = row.params if isinstance(row.params, dict) else {}
    return AuditEntry(
        actor=row.actor,
        address=row.address,
        user_agent=row.user_agent,
        action=row.action,
        target=row.target,
        params=params,
        outcome=row.outcome,
        before=row.before_state,
        after=row.after_state,
        detail=row.detail,
        at=row.at,
        id=int(row.id),
    )


_OLD = "DELETE FROM admin_audit WHERE at < NOW(6) - INTERVAL %s MICROSECOND LIMIT %s"


class AuditStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def prune(self, older_than: float, chunk: int) -> int:
        """Delete up to `chunk` entries older than older_than seconds (by the `at` index);
        the rows deleted."""
        with self.db.single() as cursor:
            return int(cursor.execute(_OLD, (int(older_than * 1_000_000), chunk)))

    def insert(self, entry: AuditEntry) -> int:
        """Append the entry, cut to fit; returns its id. Its `at` is the database clock
        unless the entry gives one; its `id` is ignored."""
        values: dict[str, object] = {
            name: cut_chars(getattr(entry, name), size) for name, size in _SIZES.items()
        }
        values.update(
            params=params_json(entry.params),
            before_state=cut_bytes(entry.before),
            after_state=cut_bytes(entry.after),
            detail=cut_bytes(entry.detail),
        )
        if entry.at is not None:
            values["at"] = entry.at
        with self.db.connect() as conn:
            result = conn.execute(insert(AdminAudit).values(**values))
            return int(result.lastrowid)

    def search(self, f: AuditFilter, limit: int) -> list[AuditEntry]:
        """Matching entries, newest (highest id) first, at most `limit`."""
        a = AdminAudit
        query = select(*_COLUMNS).order_by(a.id.desc()).limit(limit)
        if f.actor is not None:
            query = query.where(a.actor == f.actor)
        if f.action is not None:
            query = query.where(a.action == f.action)
        if f.target_prefix:
            query = query.where(a.target.startswith(f.target_prefix, autoescape=True))
        if f.since is not None:
            query = query.where(a.at >= f.since)
        if f.until is not None:
            query = query.where(a.at < f.until)
        if f.before_id is not None:
            query = query.where(a.id < f.before_id)
        with self.db.connect() as conn:
            return [_entry(r) for r in conn.execute(query)]
