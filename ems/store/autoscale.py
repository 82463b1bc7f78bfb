"""Statements on autoscaling: policies, the members' reports, and the leader's decisions
(written in a transaction fenced by the leader's epoch)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ems.store.browse import like_prefix
from ems.store.database import Database
from ems.store.leases import fence, hold
from ems.values.autoscale import (
    DecisionRecord,
    MemberReport,
    PolicyRow,
    Recommendation,
    ScaleDecision,
    ScalePolicy,
)

_US = 1_000_000
_ERROR_CHARS = 2000
_POLICY_FIELDS = (
    "enabled",
    "backend",
    "namespace",
    "deployment",
    "min_replicas",
    "max_replicas",
    "target_load",
    "tolerance",
    "cpu_threshold",
    "lag_threshold",
    "scale_down_window_seconds",
    "cooldown_seconds",
)
_POLICY_COLUMNS = ", ".join(_POLICY_FIELDS)
_POLICY = f"SELECT {_POLICY_COLUMNS} FROM autoscale_policy WHERE group_id = %s"
_POLICY_GROUPS = (
    "SELECT g.name, t.name FROM autoscale_policy p JOIN consumer_group g ON g.id = p.group_id "
    "JOIN topic t ON t.id = g.topic_id ORDER BY g.name, t.name"
)
# A keyset page of them by (group, topic) name, with the group's id, the topic's partitions
# and the policy; `{where}` adds the prefix and the cursor.
_POLICY_PAGE = (
    "SELECT g.id, g.name, t.name, t.partitions, "
    + ", ".join(f"p.{f}" for f in _POLICY_FIELDS)
    + " FROM autoscale_policy p JOIN consumer_group g ON g.id = p.group_id "
    "JOIN topic t ON t.id = g.topic_id WHERE {where} ORDER BY g.name, t.name LIMIT %s"
)
_UPSERT = (
    f"INSERT INTO autoscale_policy (group_id, {_POLICY_COLUMNS}, updated_at) "
    f"VALUES (%s, {', '.join(['%s'] * len(_POLICY_FIELDS))}, NOW(6)) ON DUPLICATE KEY UPDATE "
    + ", ".join(f"{f} = VALUES({f})" for f in _POLICY_FIELDS)
    + ", updated_at = NOW(6)"
)
_REPORTS = (
    "SELECT client_id, host, pid, cpu_percent, load_rate, reported_at, "
    "TIMESTAMPDIFF(MICROSECOND, NOW(6), lease_expires_at) "
    "FROM consumer_client WHERE group_id = %s ORDER BY client_id"
)
_REPORTS_OF = (
    "SELECT group_id, client_id, host, pid, cpu_percent, load_rate, reported_at, "
    "TIMESTAMPDIFF(MICROSECOND, NOW(6), lease_expires_at) "
    "FROM consumer_client WHERE group_id IN ({ids}) ORDER BY group_id, client_id"
)
# Walks the (group_id, decided_at) index backwards to the newest applied change.
_SINCE_CHANGE = (
    "SELECT TIMESTAMPDIFF(MICROSECOND, decided_at, NOW(6)) FROM autoscale_decision "
    "WHERE group_id = %s AND applied = 1 ORDER BY decided_at DESC LIMIT 1"
)
_RECENT = (
    "SELECT desired_replicas, TIMESTAMPDIFF(MICROSECOND, decided_at, NOW(6)) "
    "FROM autoscale_decision "
    "WHERE group_id = %s AND decided_at > NOW(6) - INTERVAL %s MICROSECOND"
)
_DECISION_COLUMNS = (
    "id, group_id, leader_epoch, decided_at, current_replicas, desired_replicas, applied, "
    "backend, reason, error"
)
_DECISIONS = (
    f"SELECT {_DECISION_COLUMNS} FROM autoscale_decision WHERE group_id = %s "
    "ORDER BY decided_at DESC, id DESC LIMIT %s"
)
# The latest decisions of each group of a page: one backward walk of the (group_id,
# decided_at) index per group, however many decisions a group has kept.
_LATEST_OF = (
    f"(SELECT {_DECISION_COLUMNS} FROM autoscale_decision WHERE group_id = {{id}} "
    "ORDER BY decided_at DESC, id DESC LIMIT {limit})"
)
_RECORD = (
    "INSERT INTO autoscale_decision (group_id, leader_epoch, current_replicas, "
    "desired_replicas, applied, backend, reason, error) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)

_ANY = "1 = 1"
_GROUP_LIKE = "g.name LIKE %s ESCAPE '!'"
_AFTER = "(g.name > %s OR (g.name = %s AND t.name > %s))"


def policy_page_query(
    prefix: str, after: tuple[str, str] | None, limit: int
) -> tuple[str, tuple[object, ...]]:
    """A keyset page of the groups with a policy (see AutoscaleStore.policy_page)."""
    where, params = [_ANY], []
    if prefix:
        where.append(_GROUP_LIKE)
        params.append(like_prefix(prefix))
    if after is not None:
        where.append(_AFTER)
        params += [after[0], after[0], after[1]]
    return _POLICY_PAGE.format(where=" AND ".join(where)), (*params, limit)


def reports_of_query(group_ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    """The client rows of these groups (their ids written in, as integers)."""
    return _REPORTS_OF.format(ids=", ".join(str(int(g)) for g in group_ids)), ()


def latest_decisions_query(group_ids: Sequence[int], limit: int) -> tuple[str, tuple[object, ...]]:
    """The `limit` latest decisions of each of these groups, in one statement."""
    parts = (_LATEST_OF.format(id=int(g), limit=int(limit)) for g in group_ids)
    return " UNION ALL ".join(parts), ()


def _record_params(
    group_id: int,
    leader: tuple[str, int],
    decision: ScaleDecision,
    applied: bool,
    backend: str,
    error: str | None,
) -> tuple[object, ...]:
    return (
        group_id,
        leader[1],
        decision.current,
        decision.desired,
        applied,
        backend,
        decision.reason,
        None if error is None else error[:_ERROR_CHARS],
    )


def _policy(row: tuple[Any, ...]) -> ScalePolicy:
    values = dict(zip(_POLICY_FIELDS, row, strict=True))
    values["enabled"] = bool(values["enabled"])
    values["target_load"] = float(values["target_load"])
    values["tolerance"] = float(values["tolerance"])
    values["cpu_threshold"] = float(values["cpu_threshold"])
    if values["lag_threshold"] is not None:
        values["lag_threshold"] = int(values["lag_threshold"])
    return ScalePolicy(**values)


def _report(r: tuple[Any, ...]) -> MemberReport:
    return MemberReport(
        client_id=r[0],
        host=r[1],
        pid=int(r[2]),
        cpu_percent=None if r[3] is None else float(r[3]),
        load_rate=None if r[4] is None else float(r[4]),
        reported_at=r[5],
        seconds_left=int(r[6]) / _US,
    )


def _decision(r: tuple[Any, ...]) -> DecisionRecord:
    return DecisionRecord(
        id=int(r[0]),
        group_id=int(r[1]),
        leader_epoch=int(r[2]),
        decided_at=r[3],
        current_replicas=int(r[4]),
        desired_replicas=int(r[5]),
        applied=bool(r[6]),
        backend=r[7],
        reason=r[8],
        error=r[9],
    )


class AutoscaleStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def policy(self, group_id: int) -> ScalePolicy | None:
        rows = self.db.select(_POLICY, (group_id,))
        return _policy(rows[0]) if rows else None

    def policy_groups(self) -> list[tuple[str, str]]:
        """(group name, topic name) of every group with a policy."""
        return [(r[0], r[1]) for r in self.db.select(_POLICY_GROUPS, ())]

    def policy_page(
        self, prefix: str, after: tuple[str, str] | None, limit: int
    ) -> list[PolicyRow]:
        """The groups with a policy whose name starts with `prefix` (literally), after
        the (group, topic) pair `after`, in name order, at most `limit`."""
        return [
            PolicyRow(
                group_id=int(r[0]),
                group=r[1],
                topic=r[2],
                partitions=int(r[3]),
                policy=_policy(r[4:]),
            )
            for r in self.db.select(*policy_page_query(prefix, after, limit))
        ]

    def reports_of(self, group_ids: Sequence[int]) -> dict[int, list[MemberReport]]:
        """Per group, every client row, live or expired, with its last report."""
        out: dict[int, list[MemberReport]] = {g: [] for g in group_ids}
        if group_ids:
            for r in self.db.select(*reports_of_query(group_ids)):
                out[int(r[0])].append(_report(r[1:]))
        return out

    def latest_decisions(
        self, group_ids: Sequence[int], limit: int
    ) -> dict[int, list[DecisionRecord]]:
        """Per group, its `limit` latest decisions, newest first (one statement)."""
        out: dict[int, list[DecisionRecord]] = {g: [] for g in group_ids}
        if group_ids:
            for r in self.db.select(*latest_decisions_query(group_ids, limit)):
                out[int(r[1])].append(_decision(r))
        return out

    def set_policy(self, group_id: int, policy: ScalePolicy) -> None:
        """Insert or replace the group's policy (validated by the caller)."""
        values = tuple(getattr(policy, f) for f in _POLICY_FIELDS)
        with self.db.single() as cursor:
            cursor.execute(_UPSERT, (group_id, *values))

    def reports(self, group_id: int) -> list[MemberReport]:
        """Every client row of the group, live or expired, with its last report."""
        return [_report(r) for r in self.db.select(_REPORTS, (group_id,))]

    def since_last_change(self, group_id: int) -> float | None:
        """Seconds since the group's last applied change (database clock), or None."""
        rows = self.db.select(_SINCE_CHANGE, (group_id,))
        return int(rows[0][0]) / _US if rows else None

    def recent(self, group_id: int, seconds: float) -> list[Recommendation]:
        """The desired replicas of the decisions of the last `seconds`, with their age."""
        rows = self.db.select(_RECENT, (group_id, int(seconds * _US)))
        return [Recommendation(replicas=int(r[0]), age_seconds=int(r[1]) / _US) for r in rows]

    def decisions(self, group_id: int, limit: int = 10) -> list[DecisionRecord]:
        """The group's latest decisions, newest first."""
        return [_decision(r) for r in self.db.select(_DECISIONS, (group_id, limit))]

    def apply_as_leader(
        self,
        group_id: int,
        leader: tuple[str, int],
        decision: ScaleDecision,
        *,
        backend: str,
        change: Callable[[], tuple[bool, str | None]],
    ) -> int:
        """Make a change outside the database (change() -> (applied, error)) while holding
        the leader row at this epoch, and record the decision with its outcome in the
        same transaction: a deposed leader changes nothing (NotLeader before the change),
        and none can be deposed while its change is on the wire (takeovers wait for the
        row; the change is bounded by its own timeout). Returns the row id."""
        with self.db.transaction() as cursor:
            hold(cursor, group_id, *leader)
            applied, error = change()
            cursor.execute(
                _RECORD, _record_params(group_id, leader, decision, applied, backend, error)
            )
            return int(cursor.lastrowid)

    def record(
        self,
        group_id: int,
        leader: tuple[str, int],
        decision: ScaleDecision,
        *,
        applied: bool,
        backend: str,
        error: str | None = None,
    ) -> int:
        """As leader (client id, epoch): record a decision, fenced by the epoch (a deposed
        leader records nothing and gets NotLeader). Returns the row id."""
        params = _record_params(group_id, leader, decision, applied, backend, error)
        with self.db.transaction() as cursor:
            fence(cursor, group_id, *leader)
            cursor.execute(_RECORD, params)
            return int(cursor.lastrowid)
