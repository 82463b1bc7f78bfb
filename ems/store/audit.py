"""Statements on the audit trail: insert and search, nothing else (it is append-only).

An entry always fits its row: every text is cut to its column's size (VARCHAR columns
count characters, TEXT columns hold 65,535 bytes), text that is not valid Unicode has
the offending characters replaced, and parameters that cannot be JSON are written as
their text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

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

_SEARCH = (
    "SELECT id, at, actor, address, user_agent, action, target, params, before_state, "
    "after_state, outcome, detail FROM admin_audit{where} ORDER BY id DESC LIMIT %s"
)
#: A search's optional filters, by the AuditFilter field each tests.
_FILTERS = {
    "actor": "actor = %s",
    "action": "action = %s",
    "target_prefix": "target LIKE %s ESCAPE '/'",
    "since": "at >= %s",
    "until": "at < %s",
    "before_id": "id < %s",
}
_INSERT = "INSERT INTO admin_audit ({columns}) VALUES ({values})"


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
    length = getattr(column.type, "length", None)
    assert length is not None
    return int(length)


_SIZES = {
    name: _limit(getattr(AdminAudit, name))
    for name in ("actor", "address", "user_agent", "action", "target", "outcome")
}


def _entry(row: Sequence[Any]) -> AuditEntry:
    params = json.loads(row[7]) if row[7] is not None else None
    return AuditEntry(
        actor=row[2],
        address=row[3],
        user_agent=row[4],
        action=row[5],
        target=row[6],
        params=params if isinstance(params, dict) else {},
        outcome=row[10],
        before=row[8],
        after=row[9],
        detail=row[11],
        at=row[1],
        id=int(row[0]),
    )


def insert_statement(values: Mapping[str, object]) -> tuple[str, tuple[object, ...]]:
    """The INSERT of an entry's columns (`at` only when the entry gives one)."""
    sql = _INSERT.format(columns=", ".join(values), values=", ".join(["%s"] * len(values)))
    return sql, tuple(values.values())


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("/", "//").replace("%", "/%").replace("_", "/_")
    return escaped + "%"


def search_query(f: AuditFilter, limit: int) -> tuple[str, tuple[object, ...]]:
    """The search for the filter's set fields, newest first."""
    conditions, params = [], []
    for field, condition in _FILTERS.items():
        value = getattr(f, field)
        if value is None or (field == "target_prefix" and not value):
            continue
        conditions.append(condition)
        params.append(_like_prefix(value) if field == "target_prefix" else value)
    where = " WHERE " + " AND ".join(conditions) if conditions else ""
    return _SEARCH.format(where=where), (*params, limit)


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
            params=json.dumps(params_json(entry.params)),
            before_state=cut_bytes(entry.before),
            after_state=cut_bytes(entry.after),
            detail=cut_bytes(entry.detail),
        )
        if entry.at is not None:
            values["at"] = entry.at
        with self.db.single() as cursor:
            cursor.execute(*insert_statement(values))
            return int(cursor.lastrowid)

    def search(self, f: AuditFilter, limit: int) -> list[AuditEntry]:
        """Matching entries, newest (highest id) first, at most `limit`."""
        return [_entry(r) for r in self.db.select(*search_query(f, limit))]
