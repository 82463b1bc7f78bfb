"""Statements on the admin console's accounts: users and their password hashes, API
tokens by the hash of their secret, and the failed sign-ins the throttle counts.

Role changes and removals take the admins' rows with locking reads before they check that
an admin remains, so two operators demoting the last two admins at once cannot both pass
the check: the second waits for the first and then counts one admin. Every time comes from
the database clock.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, cast

from sqlalchemy import Connection, delete, exists, func, insert, literal_column, select, update
from sqlalchemy.engine import Row
from sqlalchemy.sql.expression import ColumnClause

from ems.exceptions import PlanChanged
from ems.models import AdminToken, AdminUser
from ems.store.database import Database
from ems.store.errors import DuplicateKey
from ems.values.account_errors import LastAdmin, TokenExists, UnknownUser, UserExists
from ems.values.accounts import Role, Token, User, UserState
from ems.values.login_limits import Admission, Counter

_USER_COLUMNS = (
    AdminUser.id,
    AdminUser.name,
    AdminUser.role,
    AdminUser.session_epoch,
    AdminUser.created_at,
    AdminUser.updated_at,
)
_TOKEN_COLUMNS = (
    AdminToken.id,
    AdminToken.name,
    AdminToken.role,
    AdminToken.created_by,
    AdminToken.created_at,
    AdminToken.last_used_at,
    AdminToken.revoked_at,
)
#: A token's last use is written at most this often (a busy script does not write a row
#: per request).
TOUCH_EVERY_SECONDS = 60
_NOW: ColumnClause[Any] = literal_column("NOW(6)")
_TOUCHED_BEFORE: ColumnClause[Any] = literal_column(
    f"NOW(6) - INTERVAL {TOUCH_EVERY_SECONDS} SECOND"
)

# A scope's counter row, made (with no failure) when it is new and locked either way: the
# sign-in's check and count then run on rows no other sign-in can touch meanwhile.
_TAKE_COUNTER = (
    "INSERT INTO admin_login_failure (scope, failures, first_at, last_at) "
    "VALUES (%s, 0, NOW(6), NOW(6)) ON DUPLICATE KEY UPDATE failures = failures"
)
_SET_COUNTER = (
    "UPDATE admin_login_failure SET failures = %s, first_at = %s, last_at = %s WHERE scope = %s"
)
_FORGIVE = (
    "UPDATE admin_login_failure SET failures = GREATEST(failures - 1, 0) "
    "WHERE scope = %s AND failures > 0"
)

_OLD_FAILURES = (
    "DELETE FROM admin_login_failure WHERE last_at < NOW(6) - INTERVAL %s MICROSECOND LIMIT %s"
)


def _user(row: Row[Any]) -> User:
    return User(
        id=int(row.id),
        name=row.name,
        role=cast(Role, row.role),
        session_epoch=int(row.session_epoch),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _token(row: Row[Any]) -> Token:
    return Token(
        id=int(row.id),
        name=row.name,
        role=cast(Role, row.role),
        created_by=row.created_by,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
    )


class AccountStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- users ---------------------------------------------------------------------------

    def add_user(self, name: str, role: Role, password_hash: str) -> User:
        values = {"name": name, "role": role, "password_hash": password_hash}
        try:
            with self.db.connect() as conn:
                conn.execute(insert(AdminUser).values(**values))
                return self._user_named(conn, name)
        except DuplicateKey:
            raise UserExists(f"user {name!r} already exists") from None

    def users(self, after: str | None = None, limit: int | None = None) -> list[User]:
        """Users by name: those after `after`, at most `limit` (None: all)."""
        query = select(*_USER_COLUMNS).order_by(AdminUser.name).limit(limit)
        if after is not None:
            query = query.where(AdminUser.name > after)
        with self.db.connect() as conn:
            return [_user(r) for r in conn.execute(query)]

    def admin_count(self) -> int:
        query = select(func.count()).select_from(AdminUser).where(AdminUser.role == "admin")
        with self.db.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def user(self, user_id: int) -> User | None:
        with self.db.connect() as conn:
            row = conn.execute(select(*_USER_COLUMNS).where(AdminUser.id == user_id)).first()
        return None if row is None else _user(row)

    def user_named(self, name: str) -> User | None:
        with self.db.connect() as conn:
            row = conn.execute(select(*_USER_COLUMNS).where(AdminUser.name == name)).first()
        return None if row is None else _user(row)

    def credentials(self, name: str) -> tuple[User, str] | None:
        """The user and the password hash, for a sign-in."""
        query = select(*_USER_COLUMNS, AdminUser.password_hash).where(AdminUser.name == name)
        with self.db.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else (_user(row), str(row.password_hash))

    def has_admin(self) -> bool:
        query = select(exists().where(AdminUser.role == "admin"))
        with self.db.connect() as conn:
            return bool(conn.execute(query).scalar())

    def set_role(self, name: str, role: Role, expect: UserState | None = None) -> User:
        """Give the user another role and a new session epoch (nothing changes when the
        role is the same); LastAdmin when that would leave no admin, PlanChanged when
        `expect` is given and the user is not (or no longer) in that state."""
        with self.db.connect() as conn:
            found = self._lock_for_change(conn, name, leaves_admin=role != "admin", expect=expect)
            if found.role != role:
                conn.execute(
                    update(AdminUser)
                    .where(AdminUser.id == found.id)
                    .values(role=role, session_epoch=AdminUser.session_epoch + 1, updated_at=_NOW)
                )
            return self._user_named(conn, name)

    def set_password(self, name: str, password_hash: str) -> User:
        """A new password hash and a new session epoch; UnknownUser when there is none."""
        with self.db.connect() as conn:
            changed = conn.execute(
                update(AdminUser)
                .where(AdminUser.name == name)
                .values(
                    password_hash=password_hash,
                    session_epoch=AdminUser.session_epoch + 1,
                    updated_at=_NOW,
                )
            ).rowcount
            if not changed:
                raise UnknownUser(f"no user {name!r}")
            return self._user_named(conn, name)

    def rehash(self, user_id: int, old_hash: str, new_hash: str) -> bool:
        """Replace the hash with one of stronger parameters, unless the password changed
        meanwhile. Sessions stay: the password is the same."""
        with self.db.connect() as conn:
            result = conn.execute(
                update(AdminUser)
                .where(AdminUser.id == user_id, AdminUser.password_hash == old_hash)
                .values(password_hash=new_hash)
            )
            return bool(result.rowcount)

    def remove_user(self, name: str, expect: UserState | None = None) -> User:
        """Delete the user and return it as it was; UnknownUser, LastAdmin when it is the
        last admin, PlanChanged when `expect` is given and does not hold."""
        with self.db.connect() as conn:
            found = self._lock_for_change(conn, name, leaves_admin=True, expect=expect)
            conn.execute(delete(AdminUser).where(AdminUser.id == found.id))
            return found

    def _lock_for_change(
        self, conn: Connection, name: str, *, leaves_admin: bool, expect: UserState | None = None
    ) -> User:
        """Lock the admins' rows, then the user's; LastAdmin when the user is the only
        admin and the change would leave it without the role, PlanChanged when `expect`
        is given and the user is gone or not in that state (checked under the lock, so
        nothing slips in between the check and the change)."""
        admins = conn.execute(
            select(AdminUser.id)
            .where(AdminUser.role == "admin")
            .order_by(AdminUser.id)
            .with_for_update()
        ).all()
        row = conn.execute(
            select(*_USER_COLUMNS).where(AdminUser.name == name).with_for_update()
        ).first()
        if row is None and expect is not None:
            raise PlanChanged(f"user {name!r} was removed since the preview")
        if row is None:
            raise UnknownUser(f"no user {name!r}")
        user = _user(row)
        if expect is not None and UserState.of(user) != expect:
            raise PlanChanged(
                f"user {name!r} changed since the preview (role {user.role} now, session "
                f"epoch {user.session_epoch})"
            )
        if leaves_admin and user.role == "admin" and len(admins) <= 1:
            raise LastAdmin(
                f"{name!r} is the last admin: make another user admin first, so someone can "
                "still manage the accounts"
            )
        return user

    @staticmethod
    def _user_named(conn: Connection, name: str) -> User:
        row = conn.execute(select(*_USER_COLUMNS).where(AdminUser.name == name)).first()
        if row is None:
            raise UnknownUser(f"no user {name!r}")
        return _user(row)

    # -- tokens --------------------------------------------------------------------------

    def add_token(self, name: str, role: Role, token_hash: str, created_by: str) -> Token:
        values = {"name": name, "role": role, "token_hash": token_hash, "created_by": created_by}
        try:
            with self.db.connect() as conn:
                conn.execute(insert(AdminToken).values(**values))
                row = conn.execute(select(*_TOKEN_COLUMNS).where(AdminToken.name == name)).one()
                return _token(row)
        except DuplicateKey:
            raise TokenExists(
                f"a token named {name!r} exists already (revoked tokens keep their names)"
            ) from None

    def tokens(self, after: str | None = None, limit: int | None = None) -> list[Token]:
        """Tokens by name, revoked ones too: those after `after`, at most `limit`."""
        query = select(*_TOKEN_COLUMNS).order_by(AdminToken.name).limit(limit)
        if after is not None:
            query = query.where(AdminToken.name > after)
        with self.db.connect() as conn:
            return [_token(r) for r in conn.execute(query)]

    def token_named(self, name: str) -> Token | None:
        with self.db.connect() as conn:
            row = conn.execute(select(*_TOKEN_COLUMNS).where(AdminToken.name == name)).first()
        return None if row is None else _token(row)

    def revoke_token_id(self, token_id: int) -> bool:
        """Revoke the token of this id if it is live; False when there is no such live
        token (gone, or revoked already)."""
        statement = (
            update(AdminToken)
            .where(AdminToken.id == token_id, AdminToken.revoked_at.is_(None))
            .values(revoked_at=_NOW)
        )
        with self.db.connect() as conn:
            return int(conn.execute(statement).rowcount) == 1

    def revoke_token(self, name: str) -> Token | None:
        """Revoke the token (a revoked one stays as it was); None when there is none."""
        with self.db.connect() as conn:
            conn.execute(
                update(AdminToken)
                .where(AdminToken.name == name, AdminToken.revoked_at.is_(None))
                .values(revoked_at=_NOW)
            )
            row = conn.execute(select(*_TOKEN_COLUMNS).where(AdminToken.name == name)).first()
        return None if row is None else _token(row)

    def use_token(self, token_hash: str) -> Token | None:
        """The live (unrevoked) token with this hash, its last use moved to now when the
        one written is a minute old or more; None when there is none."""
        t = AdminToken
        live = select(*_TOKEN_COLUMNS).where(t.token_hash == token_hash, t.revoked_at.is_(None))
        with self.db.connect() as conn:
            row = conn.execute(live).first()
            if row is None:
                return None
            stale = t.last_used_at.is_(None) | (t.last_used_at <= _TOUCHED_BEFORE)
            touched = conn.execute(
                update(t)
                .where(t.id == row.id, t.revoked_at.is_(None), stale)
                .values(last_used_at=_NOW)
            ).rowcount
            if touched:
                row = conn.execute(live).first()
        return None if row is None else _token(row)

    # -- failed sign-ins ---------------------------------------------------------------

    def admit(
        self,
        scopes: Sequence[str],
        decide: Callable[[dict[str, Counter], dt.datetime], Admission],
    ) -> float:
        """One sign-in attempt's check and count, as one step: the scopes' counters are
        locked (made when new), `decide` sees them with the database clock, and when it
        admits the attempt its counters are written before the locks go. The wait it
        gave (0: admitted and counted)."""
        ordered = sorted(set(scopes))  # one lock order for concurrent sign-ins
        with self.db.transaction() as cursor:
            for scope in ordered:
                cursor.execute(_TAKE_COUNTER, (scope,))
            marks = ", ".join(["%s"] * len(ordered))
            cursor.execute(
                "SELECT scope, failures, first_at, last_at, NOW(6) FROM admin_login_failure "
                f"WHERE scope IN ({marks}) FOR UPDATE",
                tuple(ordered),
            )
            rows = cursor.fetchall()
            now = rows[0][4]
            counters = {
                r[0]: Counter(failures=int(r[1]), first_at=r[2], last_at=r[3]) for r in rows
            }
            admission = decide(counters, now)
            for scope, c in sorted(admission.counted.items()):
                cursor.execute(_SET_COUNTER, (c.failures, c.first_at, c.last_at, scope))
        return admission.wait

    def forgive(self, clear: str, take_back: str) -> None:
        """A sign-in proved right: the `clear` scope's counter goes, and the failure the
        attempt was counted as in `take_back` is taken back."""
        with self.db.transaction() as cursor:
            cursor.execute(_FORGIVE, (take_back,))
            cursor.execute("DELETE FROM admin_login_failure WHERE scope = %s", (clear,))

    def prune_failures(self, older_than: float, chunk: int) -> int:
        """Delete up to `chunk` failure counters whose last failure is more than older_than
        seconds old (their window has ended: they throttle nobody); the rows deleted."""
        with self.db.single() as cursor:
            return int(cursor.execute(_OLD_FAILURES, (int(older_than * 1_000_000), chunk)))
