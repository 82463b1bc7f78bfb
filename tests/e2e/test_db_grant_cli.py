"""`ems db grant-readonly` end to end: the GRANTs it prints, and with --apply an account on
the real server that can read the ems_ views and nothing else; bad accounts and unknown
ones are refused with exit code 2 and nothing granted."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pymysql
import pytest

from ems.config import Settings
from ems.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE
from ems.store import migrate
from ems.store.readonly import VIEW_NAMES, table_names
from tests.conftest import connect
from tests.e2e.test_cli import UNREACHABLE_DB, Cli, assert_clean_error

#: (user, host) -> password
MakeUser = Callable[..., tuple[str, str]]


@pytest.fixture
def cli(settings: Settings) -> Cli:
    return Cli(settings)


@pytest.fixture
def admin(settings: Settings) -> Iterator[pymysql.Connection]:
    conn = connect(settings)
    yield conn
    conn.close()


@pytest.fixture
def make_user(admin: pymysql.Connection) -> Iterator[MakeUser]:
    """Creates accounts with unique names; drops them (and any a test names) at teardown."""
    made: list[tuple[str, str]] = []

    def make(host: str = "%") -> tuple[str, str]:
        user, password = f"ems_ro_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex
        with admin.cursor() as cursor:
            cursor.execute(f"CREATE USER '{user}'@'{host}' IDENTIFIED BY '{password}'")
        made.append((user, host))
        return user, password

    yield make
    with admin.cursor() as cursor:
        for user, host in made:
            cursor.execute(f"DROP USER IF EXISTS '{user}'@'{host}'")


def grants(admin: pymysql.Connection, user: str, host: str = "%") -> list[str]:
    with admin.cursor() as cursor:
        cursor.execute(f"SHOW GRANTS FOR '{user}'@'{host}'")
        return [str(row[0]) for row in cursor.fetchall()]


def account_exists(admin: pymysql.Connection, user: str) -> bool:
    with admin.cursor() as cursor:
        cursor.execute("SELECT 1 FROM mysql.user WHERE User = %s", (user,))
        return cursor.fetchone() is not None


def login(settings: Settings, user: str, password: str) -> pymysql.Connection:
    return connect(settings, user, password)


def denied(conn: pymysql.Connection, sql: str) -> bool:
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql)
    except pymysql.err.OperationalError as exc:
        return bool(exc.args[0] == 1142)  # command denied to user for table
    return False


def test_prints_one_grant_per_view_without_a_server(cli: Cli) -> None:
    result = cli.run("db", "grant-readonly", "analyst", env={"EMS_DATABASE_URL": UNREACHABLE_DB})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"GRANT SELECT ON `ems`.`{view}` TO 'analyst'@'%';" for view in VIEW_NAMES
    ]


def test_prints_for_a_host_and_with_the_tables(cli: Cli, settings: Settings) -> None:
    out = cli.ok("db", "grant-readonly", "analyst", "--host", "10.0.0.%", "--with-tables")
    objects = [*VIEW_NAMES, *table_names()]
    assert "admin_user" not in objects and "message" in objects
    database = settings.database_name
    assert out.splitlines() == [
        f"GRANT SELECT ON `{database}`.`{name}` TO 'analyst'@'10.0.0.%';" for name in objects
    ]


def test_apply_lets_the_account_read_the_views_and_nothing_else(
    cli: Cli, settings: Settings, admin: pymysql.Connection, make_user: MakeUser
) -> None:
    user, password = make_user()
    assert len(grants(admin, user)) == 1  # USAGE only
    out = cli.ok("db", "grant-readonly", user, "--apply")
    database = settings.database_name
    assert out.splitlines()[-1] == (
        f"granted SELECT on {len(VIEW_NAMES)} views of database {database} to '{user}'@'%'"
    )
    assert len(grants(admin, user)) == 1 + len(VIEW_NAMES)
    conn = login(settings, user, password)
    try:
        with conn.cursor() as cursor:
            for view in VIEW_NAMES:
                cursor.execute(f"SELECT * FROM {view}")
                cursor.fetchall()
        assert denied(conn, "SELECT * FROM message")
        assert denied(conn, "SELECT * FROM consumer_group")
        assert denied(conn, "INSERT INTO topic (name, partitions) VALUES ('x', 1)")
        assert denied(conn, "DELETE FROM ems_group_lag")
    finally:
        conn.close()
    # Running it again changes nothing and still succeeds.
    cli.ok("db", "grant-readonly", user, "--apply")
    assert len(grants(admin, user)) == 1 + len(VIEW_NAMES)


def test_apply_with_tables_reads_tables_but_writes_nothing(
    cli: Cli, settings: Settings, make_user: MakeUser
) -> None:
    user, password = make_user()
    out = cli.ok("db", "grant-readonly", user, "--with-tables", "--apply")
    assert out.splitlines()[-1].startswith(
        f"granted SELECT on {len(VIEW_NAMES)} views and {len(table_names())} tables"
    )
    conn = login(settings, user, password)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM message")
        assert denied(conn, "INSERT INTO topic (name, partitions) VALUES ('x', 1)")
        assert denied(conn, "UPDATE group_offset SET committed_offset = 0")
        assert denied(conn, "SELECT password_hash FROM admin_user")
        assert denied(conn, "SELECT token_hash FROM admin_token")
    finally:
        conn.close()


def test_apply_to_an_account_of_another_host(
    cli: Cli, admin: pymysql.Connection, make_user: MakeUser
) -> None:
    user, _ = make_user(host="127.0.0.1")
    result = cli.run("db", "grant-readonly", user, "--apply")
    assert_clean_error(result, EXIT_BAD_INPUT)
    assert f"no MySQL account '{user}'@'%'" in result.stderr
    cli.ok("db", "grant-readonly", user, "--host", "127.0.0.1", "--apply")
    assert len(grants(admin, user, "127.0.0.1")) == 1 + len(VIEW_NAMES)


@pytest.fixture
def before_the_views(settings: Settings, admin: pymysql.Connection) -> Iterator[Settings]:
    """A database of its own at the revision before the views."""
    old = settings.with_(database_url=settings.database_url + "_0004")
    drop = f"DROP DATABASE IF EXISTS `{old.database_name}`"
    with admin.cursor() as cursor:
        cursor.execute(drop)
    migrate.create_database(old)
    migrate.upgrade(old, "0004")
    yield old
    with admin.cursor() as cursor:
        cursor.execute(drop)


def test_a_schema_without_the_views_is_refused_before_any_grant(
    cli: Cli, before_the_views: Settings, admin: pymysql.Connection, make_user: MakeUser
) -> None:
    user, _ = make_user()
    env = {"EMS_DATABASE_URL": before_the_views.database_url}
    result = cli.run("db", "grant-readonly", user, "--apply", "--with-tables", env=env)
    assert_clean_error(result, EXIT_FAILURE)
    assert "run `ems db upgrade` first" in result.stderr
    assert len(grants(admin, user)) == 1


def test_an_unknown_account_is_refused_and_not_created(cli: Cli, admin: pymysql.Connection) -> None:
    user = f"ems_ro_{uuid.uuid4().hex[:10]}"
    result = cli.run("db", "grant-readonly", user, "--apply")
    assert_clean_error(result, EXIT_BAD_INPUT)
    assert "create it first" in result.stderr
    assert result.stdout == ""
    assert not account_exists(admin, user)


@pytest.mark.parametrize(
    ("user", "host"),
    [
        ("{user}'@'%", "%"),  # a quote: the GRANT would name another account
        ("{user}", "%' IDENTIFIED BY 'x"),
        ("{user}`", "%"),
        ("{user} x", "%"),
        ("", "%"),
        ("-{user}", "%"),
        ("u" * 33, "%"),
    ],
)
def test_bad_accounts_are_refused_and_nothing_granted(
    cli: Cli, admin: pymysql.Connection, make_user: MakeUser, user: str, host: str
) -> None:
    real, _ = make_user()
    bad = user.format(user=real)
    result = cli.run("db", "grant-readonly", "--host", host, "--apply", "--", bad)
    assert_clean_error(result, EXIT_BAD_INPUT)
    assert "must match" in result.stderr and "nothing was granted" in result.stderr
    assert result.stdout == ""
    assert len(grants(admin, real)) == 1


def test_a_bad_account_prints_nothing(cli: Cli) -> None:
    result = cli.run("db", "grant-readonly", "analyst'@'%")
    assert_clean_error(result, EXIT_BAD_INPUT)
    assert result.stdout == ""
