"""The one place driver errors are translated: a MySQL or MariaDB error number (from
PyMySQL, SQLAlchemy or asyncmy) becomes the ems exception a caller can act on."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import asyncmy.errors
import pymysql
from sqlalchemy.exc import DBAPIError, PendingRollbackError, SQLAlchemyError

from ems.exceptions import (
    DatabaseAccessDenied,
    DatabaseReadOnly,
    DatabaseUnavailable,
    EmsError,
    LockConflict,
    StoreError,
    UnknownDatabase,
)
from ems.store.errors import DuplicateKey, ParentMissing

# MySQL / MariaDB error numbers, grouped by what the caller can do about them.
_UNREACHABLE = {1040, 1053, 1077, 2002, 2003, 2005, 2006, 2013, 2055}
#: The server ended the session: MariaDB's idle bounds (4031, ER_CLIENT_INTERACTION_TIMEOUT:
#: idle_transaction_timeout or wait_timeout passed, as a process stalled between the
#: statements of a transaction on a busy machine), or a KILL (1927). Its transaction went
#: with it: as a dropped connection, the caller tries again on a new one.
_SESSION_ENDED = {1927, 4031}
#: ER_ERROR_DURING_COMMIT: the commit failed and nothing of the transaction stayed (a
#: Galera node that left the primary component meanwhile): try again, on another node.
_COMMIT_FAILED = {1180}
#: ER_ACCESS_DENIED_ERROR, ER_DBACCESS_DENIED_ERROR: the server answered and refused the
#: user. It will not pass by itself, so it is bad input, never waited for.
_ACCESS_DENIED = {1044, 1045}
#: ER_BAD_DB_ERROR: the server answered, and has no database of the URL's name. Bad
#: input, not a lost server: retrying cannot help, `ems db create` does.
_NO_DATABASE = {1049}
#: A Galera node that left the primary component answers every statement with 1047
#: ("WSREP has not yet prepared node for application use"): its connections are as good
#: as lost, and the next ones go to another node (ems.store.nodes).
NODE_NOT_READY = {1047}
_DUPLICATE = {1062}
#: ER_NO_REFERENCED_ROW(_2): the parent row a foreign key names is gone (deleted meanwhile,
#: or a partition's fence moved on: ems.store.fences).
NO_PARENT = {1216, 1452}
_LOCK = {1205, 1213}
_NO_SCHEMA = {1146}
#: The server takes no writes: --read-only (1290), a read-only transaction (1792), MySQL 8's
#: read-only mode (1836).
_READ_ONLY = {1290, 1792, 1836}


#: The errors of the drivers ems runs statements through by their DB-API cursors: PyMySQL
#: (and aiomysql, which raises PyMySQL's), and asyncmy (a caller's asyncio connection,
#: whose cursor SQLAlchemy's greenlet bridge hands to synchronous code).
DRIVER_ERRORS = (pymysql.err.Error, asyncmy.errors.Error)


def error_number(exc: BaseException | None) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def connection_lost(error: EmsError) -> bool:
    """Whether the connection is gone (a read-only refusal leaves it usable)."""
    return isinstance(error, DatabaseUnavailable) and not isinstance(error, DatabaseReadOnly)


def translate(exc: SQLAlchemyError | pymysql.err.Error | asyncmy.errors.Error) -> EmsError:
    """Turn a driver error into the ems exception a caller can act on."""
    orig: BaseException | None
    if isinstance(exc, PendingRollbackError):
        # The connection was lost inside a transaction, and was used again before the
        # rollback: the server side of that transaction is gone with the connection.
        return DatabaseUnavailable(f"MySQL is unreachable: the connection was lost ({exc})")
    if isinstance(exc, asyncmy.errors.Error):
        lost = isinstance(exc, asyncmy.errors.InterfaceError)
        return translate_code(error_number(exc), str(exc), lost=lost)
    if isinstance(exc, pymysql.err.Error):
        orig, invalidated = exc, False
    elif isinstance(exc, DBAPIError):
        orig, invalidated = exc.orig, exc.connection_invalidated
    else:
        return StoreError(str(exc))
    lost = invalidated or isinstance(orig, pymysql.err.InterfaceError)
    return translate_code(error_number(orig), str(orig), lost=lost)


def translate_code(code: int | None, detail: str, *, lost: bool) -> EmsError:
    """The ems exception for a MySQL error number, whichever driver reported it; lost:
    the driver says the connection is gone."""
    if code in _DUPLICATE:
        return DuplicateKey(detail)
    if code in NO_PARENT:
        return ParentMissing(detail)
    if code in _LOCK:
        return LockConflict(detail)
    if code in _READ_ONLY:
        return DatabaseReadOnly(f"MySQL takes no writes: {detail}")
    if code in NODE_NOT_READY:
        return DatabaseUnavailable(f"the MySQL node takes no statements: {detail}")
    if code in _NO_DATABASE:
        return unknown_database(detail)
    if code in _ACCESS_DENIED:
        return access_denied(detail)
    if code in _UNREACHABLE or lost:
        return DatabaseUnavailable(f"MySQL is unreachable: {detail}")
    if code in _SESSION_ENDED:
        return DatabaseUnavailable(f"MySQL ended the session: {detail}")
    if code in _COMMIT_FAILED:
        return DatabaseUnavailable(f"MySQL could not commit: {detail}")
    if code in _NO_SCHEMA:
        return StoreError(f"{detail}; run `ems db upgrade` to create the schema")
    return StoreError(detail)


def unknown_database(detail: str) -> UnknownDatabase:
    found = re.search(r"Unknown database '([^']*)'", detail)
    name = repr(found.group(1)) if found else "named by EMS_DATABASE_URL"
    return UnknownDatabase(
        f"the database {name} does not exist on the server: run `ems db create` to create "
        "it, then `ems db upgrade`"
    )


def access_denied(detail: str) -> DatabaseAccessDenied:
    found = re.search(r"for user '([^']*)'", detail)
    user = repr(found.group(1)) if found else "of EMS_DATABASE_URL"
    return DatabaseAccessDenied(
        f"MySQL refused the user {user}: check the user and password of EMS_DATABASE_URL "
        f"and the user's grants ({detail})"
    )


@contextmanager
def wrap_errors() -> Iterator[None]:
    try:
        yield
    except (SQLAlchemyError, pymysql.err.Error) as exc:
        raise translate(exc) from exc
