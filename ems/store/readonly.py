"""Read-only SQL access for analysts: the ems_ views, and the GRANTs of an account that may
read them and nothing else.

The views are created by migration 0005 (migrations/versions/20261125_0005_sql_views.py),
which keeps its own copy of their names: a migration stays as it was written, whatever
this module becomes. A test checks that the two lists agree.

The database, user and host are written into the GRANT statements, because a GRANT takes
no placeholders for them; each is checked against a strict pattern first, so no quote,
backtick, backslash or space ever reaches the statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ems.exceptions import InvalidAccount, InvalidSetting, StoreError, UnknownAccount
from ems.models import metadata
from ems.store.database import Database

#: The stable read-only views (docs/sql.md, docs/schema.md).
VIEW_NAMES: tuple[str, ...] = (
    "ems_group_lag",
    "ems_dead_letters",
    "ems_topic_volume",
    "ems_in_flight",
    "ems_retries_waiting",
    "ems_members",
)

#: MySQL takes user names of at most 32 characters (MariaDB 80): the stricter rule holds.
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}")
#: A host name, an IPv4 or IPv6 address, an address/netmask, or a pattern of % and _.
_HOST = re.compile(r"[A-Za-z0-9%_.:/-]{1,255}")
#: What `ems db create` accepts as a database name.
_DATABASE = re.compile(r"[A-Za-z0-9_]{1,64}")

_ACCOUNT_EXISTS = "SELECT 1 FROM mysql.user WHERE User = %s AND Host = %s"
_VIEWS = "SELECT table_name FROM information_schema.views WHERE table_schema = %s"


@dataclass(frozen=True, slots=True)
class Account:
    """A MySQL account, user@host, already checked."""

    user: str
    host: str

    def __str__(self) -> str:
        return f"'{self.user}'@'{self.host}'"


def account(user: str, host: str = "%") -> Account:
    """The account USER@HOST; InvalidAccount unless both match their patterns."""
    if _USER.fullmatch(user) is None:
        raise InvalidAccount(
            f"user {user!r} must match [A-Za-z0-9_][A-Za-z0-9_.-]{{0,31}}; nothing was granted"
        )
    if _HOST.fullmatch(host) is None:
        raise InvalidAccount(
            f"host {host!r} must match [A-Za-z0-9%_.:/-]{{1,255}}; nothing was granted"
        )
    return Account(user, host)


#: Tables no analyst is granted, even with the tables: the admin console's accounts
#: (password and token hashes), its sign-in counters, its audit trail and its previews.
ACCOUNT_TABLES: tuple[str, ...] = (
    "admin_audit",
    "admin_login_failure",
    "admin_plan",
    "admin_token",
    "admin_user",
)


def table_names() -> tuple[str, ...]:
    """Every ems table an analyst may be granted (all but ACCOUNT_TABLES), by name."""
    return tuple(sorted(set(metadata.tables) - set(ACCOUNT_TABLES)))


def grant_statements(database: str, to: Account, *, with_tables: bool = False) -> list[str]:
    """SELECT on each view (and with_tables, on each table) of the database, for `to`:
    one statement per object, without the closing semicolon."""
    if _DATABASE.fullmatch(database) is None:
        raise InvalidSetting(f"database name {database!r} must match [A-Za-z0-9_]{{1,64}}")
    objects = VIEW_NAMES + (table_names() if with_tables else ())
    return [f"GRANT SELECT ON `{database}`.`{name}` TO {to}" for name in objects]


class ReadonlyStore:
    """The checks and GRANTs of `ems db grant-readonly --apply`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def grant(self, database: str, to: Account, *, with_tables: bool = False) -> list[str]:
        """Run the GRANTs for an existing account and return them. Before any: StoreError
        when a view is missing (the schema is older than the views), UnknownAccount when
        the account does not exist (MariaDB without NO_AUTO_CREATE_USER in its sql_mode
        would create it, without a password)."""
        statements = grant_statements(database, to, with_tables=with_tables)
        with self.db.single() as cursor:
            cursor.execute(_VIEWS, (database,))
            found = {str(row[0]) for row in cursor.fetchall()}
            missing = [name for name in VIEW_NAMES if name not in found]
            if missing:
                raise StoreError(
                    f"database {database} has no view {', '.join(missing)}; "
                    "run `ems db upgrade` first. Nothing was granted"
                )
            cursor.execute(_ACCOUNT_EXISTS, (to.user, to.host))
            if cursor.fetchone() is None:
                raise UnknownAccount(
                    f"no MySQL account {to}; create it first (CREATE USER {to} IDENTIFIED BY "
                    "'...'). Nothing was granted"
                )
            for statement in statements:
                cursor.execute(statement)
        return statements
