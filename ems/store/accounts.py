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

from pymysql.cursors import Cursor

from ems.exceptions import PlanChanged
from ems.store.database import Database
from ems.store.errors import DuplicateKey
from ems.values.account_errors import LastAdmin, TokenExists, UnknownUser, UserExists
from ems.values.accounts import Role, Token, User, UserState
from ems.values.login_limits import Admission, Counter

_USER = "SELECT id, name, role, session_epoch, created_at, updated_at FROM admin_user"
_TOKEN = "SELECT id, name, role, created_by, created_at, last_used_at, revoked_at FROM admin_token"
#: A token's last use is written at most this often (a busy script does not write a row
#: per request).
TOUCH_EVERY_SECONDS = 60

_ADD_USER = "INSERT INTO admin_user (name, role, password_hash) VALUES (%s, %s, %s)"
_USERS = f"{_USER} ORDER BY name LIMIT %s"
_USERS_AFTER = f"{_USER} WHERE name > %s ORDER BY name LIMIT %s"
_ADMIN_COUNT = "SELECT COUNT(*) FROM admin_user WHERE role = 'admin'"
_USER_BY_ID = f"{_USER} WHERE id = %s"
_USER_NAMED = f"{_USER} WHERE name = %s"
_CREDENTIALS = (
    "SELECT id, name, role, session_epoch, created_at, updated_at, password_hash "
    "FROM admin_user WHERE name = %s"
)
_HAS_ADMIN = "SELECT EXISTS (SELECT * FROM admin_user WHERE role = 'admin')"
_SET_ROLE = (
    "UPDATE admin_user SET role = %s, session_epoch = session_epoch + 1, updated_at = NOW(6) "
    "WHERE id = %s"
)
_SET_PASSWORD = (
    "UPDATE admin_user SET password_hash = %s, session_epoch = session_epoch + 1, "
    "updated_at = NOW(6) WHERE name = %s"
)
_REHASH = "UPDATE admin_user SET password_hash = %s WHERE id = %s AND password_hash = %s"
_REMOVE_USER = "DELETE FROM admin_user WHERE id = %s"
_LOCK_ADMINS = "SELECT id FROM admin_user WHERE role = 'admin' ORDER BY id FOR UPDATE"
_LOCK_USER = f"{_USER} WHERE name = %s FOR UPDATE"

_ADD_TOKEN = "INSERT INTO admin_token (name, role, token_hash, created_by) VALUES (%s, %s, %s, %s)"
_TOKENS = f"{_TOKEN} ORDER BY name LIMIT %s"
_TOKENS_AFTER = f"{_TOKEN} WHERE name > %s ORDER BY name LIMIT %s"
_TOKEN_NAMED = f"{_TOKEN} WHERE name = %s"
_REVOKE_ID = "UPDATE admin_token SET revoked_at = NOW(6) WHERE id = %s AND revoked_at IS NULL"
_REVOKE = "UPDATE admin_token SET revoked_at = NOW(6) WHERE name = %s AND revoked_at IS NULL"
_LIVE_TOKEN = f"{_TOKEN} WHERE token_hash = %s AND revoked_at IS NULL"
_TOUCH_TOKEN = (
    "UPDATE admin_token SET last_used_at = NOW(6) WHERE id = %s AND revoked_at IS NULL "
    "AND (last_used_at IS NULL OR last_used_at <= "
    f"NOW(6) - INTERVAL {TOUCH_EVERY_SECONDS} SECOND)"
)
#: LIMIT takes no NULL: "all" is the largest row count MySQL documents.
_ALL_ROWS = 18446744073709551615

# A scope's counter row, made (with no failure) when it is new and locked either way: the
# sign-in's check and count then run on rows no other sign-in can touch meanwhile.
_TAKE_COUNTER = (
    "INSERT INTO admin_login_failure (scope, failures, first_at, last_at) "
    "VALUES (%s, 0, NOW(6), NOW(6)) ON DUPLICATE KEY UPDATE failures = failures"
)
_COUNTERS = (
    "SELECT scope, failures, first_at, last_at, NOW(6) FROM admin_login_failure "
    "WHERE scope IN ({scopes}) FOR UPDATE"
)
_SET_COUNTER = (
    "UPDATE admin_login_failure SET failures = %s, first_at = %s, last_at = %s WHERE scope = %s"
)
_FORGIVE = (
    "UPDATE admin_login_failure SET failures = GREATEST(failures - 1, 0) "
    "WHERE scope = %s AND failures > 0"
)
_CLEAR = "DELETE FROM admin_login_failure WHERE scope = %s"

_OLD_FAILURES = (
    "DELETE FROM admin_login_failure WHERE last_at < NOW(6) - INTERVAL %s MICROSECOND LIMIT %s"
)


def page_query(
    first: str, after_first: str, after: str | None, limit: int | None
) -> tuple[str, tuple[object, ...]]:
    """A page by name: `first` from the start, `after_first` past the name `after`."""
    rows = _ALL_ROWS if limit is None else limit
    return (first, (rows,)) if after is None else (after_first, (after, rows))


def counters_query(scopes: Sequence[str]) -> tuple[str, tuple[object, ...]]:
    return _COUNTERS.format(scopes=", ".join(["%s"] * len(scopes))), tuple(scopes)


def _user(row: Sequence[Any]) -> User:
    return User(
        id=int(row[0]),
        name=row[1],
        role=cast(Role, row[2]),
        session_epoch=int(row[3]),
        created_at=row[4],
        updated_at=row[5],
    )


def _token(row: Sequence[Any]) -> Token:
    return Token(
        id=int(row[0]),
        name=row[1],
        role=cast(Role, row[2]),
        created_by=row[3],
        created_at=row[4],
        last_used_at=row[5],
        revoked_at=row[6],
    )


class AccountStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- users ---------------------------------------------------------------------------

    def add_user(self, name: str, role: Role, password_hash: str) -> User:
        try:
            with self.db.transaction() as cursor:
                cursor.execute(_ADD_USER, (name, role, password_hash))
                return self._user_named(cursor, name)
        except DuplicateKey:
            raise UserExists(f"user {name!r} already exists") from None

    def users(self, after: str | None = None, limit: int | None = None) -> list[User]:
        """Users by name: those after `after`, at most `limit` (None: all)."""
        query = page_query(_USERS, _USERS_AFTER, after, limit)
        return [_user(r) for r in self.db.select(*query)]

    def admin_count(self) -> int:
        return int(self.db.select(_ADMIN_COUNT, ())[0][0])

    def user(self, user_id: int) -> User | None:
        rows = self.db.select(_USER_BY_ID, (user_id,))
        return _user(rows[0]) if rows else None

    def user_named(self, name: str) -> User | None:
        rows = self.db.select(_USER_NAMED, (name,))
        return _user(rows[0]) if rows else None

    def credentials(self, name: str) -> tuple[User, str] | None:
        """The user and the password hash, for a sign-in."""
        rows = self.db.select(_CREDENTIALS, (name,))
        return (_user(rows[0]), str(rows[0][6])) if rows else None

    def has_admin(self) -> bool:
        return bool(self.db.select(_HAS_ADMIN, ())[0][0])

    def set_role(self, name: str, role: Role, expect: UserState | None = None) -> User:
        """Give the user another role and a new session epoch (nothing changes when the
        role is the same); LastAdmin when that would leave no admin, PlanChanged when
        `expect` is given and the user is not (or no longer) in that state."""
        with self.db.transaction() as cursor:
            found = self._lock_for_change(cursor, name, leaves_admin=role != "admin", expect=expect)
            if found.role != role:
                cursor.execute(_SET_ROLE, (role, found.id))
            return self._user_named(cursor, name)

    def set_password(self, name: str, password_hash: str) -> User:
        """A new password hash and a new session epoch; UnknownUser when there is none."""
        with self.db.transaction() as cursor:
            if not cursor.execute(_SET_PASSWORD, (password_hash, name)):
                raise UnknownUser(f"no user {name!r}")
            return self._user_named(cursor, name)

    def rehash(self, user_id: int, old_hash: str, new_hash: str) -> bool:
        """Replace the hash with one of stronger parameters, unless the password changed
        meanwhile. Sessions stay: the password is the same."""
        with self.db.single() as cursor:
            return bool(cursor.execute(_REHASH, (new_hash, user_id, old_hash)))

    def remove_user(self, name: str, expect: UserState | None = None) -> User:
        """Delete the user and return it as it was; UnknownUser, LastAdmin when it is the
        last admin, PlanChanged when `expect` is given and does not hold."""
        with self.db.transaction() as cursor:
            found = self._lock_for_change(cursor, name, leaves_admin=True, expect=expect)
            cursor.execute(_REMOVE_USER, (found.id,))
            return found

    def _lock_for_change(
        self, cursor: Cursor, name: str, *, leaves_admin: bool, expect: UserState | None = None
    ) -> User:
        """Lock the admins' rows, then the user's; LastAdmin when the user is the only
        admin and the change would leave it without the role, PlanChanged when `expect`
        is given and the user is gone or not in that state (checked under the lock, so
        nothing slips in between the check and the change)."""
        admins = int(cursor.execute(_LOCK_ADMINS))  # the rows locked
        cursor.execute(_LOCK_USER, (name,))
        row = cursor.fetchone()
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
        if leaves_admin and user.role == "admin" and admins <= 1:
            raise LastAdmin(
                f"{name!r} is the last admin: make another user admin first, so someone can "
                "still manage the accounts"
            )
        return user

    @staticmethod
    def _user_named(cursor: Cursor, name: str) -> User:
        cursor.execute(_USER_NAMED, (name,))
        row = cursor.fetchone()
        if row is None:
            raise UnknownUser(f"no user {name!r}")
        return _user(row)

    # -- tokens --------------------------------------------------------------------------

    def add_token(self, name: str, role: Role, token_hash: str, created_by: str) -> Token:
        try:
            with self.db.transaction() as cursor:
                cursor.execute(_ADD_TOKEN, (name, role, token_hash, created_by))
                cursor.execute(_TOKEN_NAMED, (name,))
                (row,) = cursor.fetchall()
                return _token(row)
        except DuplicateKey:
            raise TokenExists(
                f"a token named {name!r} exists already (revoked tokens keep their names)"
            ) from None

    def tokens(self, after: str | None = None, limit: int | None = None) -> list[Token]:
        """Tokens by name, revoked ones too: those after `after`, at most `limit`."""
        query = page_query(_TOKENS, _TOKENS_AFTER, after, limit)
        return [_token(r) for r in self.db.select(*query)]

    def token_named(self, name: str) -> Token | None:
        rows = self.db.select(_TOKEN_NAMED, (name,))
        return _token(rows[0]) if rows else None

    def revoke_token_id(self, token_id: int) -> bool:
        """Revoke the token of this id if it is live; False when there is no such live
        token (gone, or revoked already)."""
        with self.db.single() as cursor:
            return int(cursor.execute(_REVOKE_ID, (token_id,))) == 1

    def revoke_token(self, name: str) -> Token | None:
        """Revoke the token (a revoked one stays as it was); None when there is none."""
        with self.db.transaction() as cursor:
            cursor.execute(_REVOKE, (name,))
            cursor.execute(_TOKEN_NAMED, (name,))
            row = cursor.fetchone()
        return None if row is None else _token(row)

    def use_token(self, token_hash: str) -> Token | None:
        """The live (unrevoked) token with this hash, its last use moved to now when the
        one written is a minute old or more; None when there is none."""
        with self.db.transaction() as cursor:
            cursor.execute(_LIVE_TOKEN, (token_hash,))
            row = cursor.fetchone()
            if row is None:
                return None
            if cursor.execute(_TOUCH_TOKEN, (row[0],)):
                cursor.execute(_LIVE_TOKEN, (token_hash,))
                row = cursor.fetchone()
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
            cursor.execute(*counters_query(ordered))
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
            cursor.execute(_CLEAR, (clear,))

    def prune_failures(self, older_than: float, chunk: int) -> int:
        """Delete up to `chunk` failure counters whose last failure is more than older_than
        seconds old (their window has ended: they throttle nobody); the rows deleted."""
        with self.db.single() as cursor:
            return int(cursor.execute(_OLD_FAILURES, (int(older_than * 1_000_000), chunk)))
