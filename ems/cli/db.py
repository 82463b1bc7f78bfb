"""`ems db`: create the database, migrate its schema, grant read-only access to its views.

ems.store.migrate is imported inside the commands: it pulls in Alembic, which the other
commands (and the demo's spawned producers) need not pay for at start-up.
"""

from __future__ import annotations

import click

from ems.cli.common import settings
from ems.exceptions import SchemaOutOfDate
from ems.store import Store
from ems.store.readonly import VIEW_NAMES, account, grant_statements


@click.group()
def db() -> None:
    """Create and migrate the ems database."""


@db.command()
@click.option("--quiet", "-q", is_flag=True, help="Print nothing on success.")
def create(quiet: bool) -> None:
    """Create the configured database if it is missing."""
    from ems.store import migrate

    config = settings()
    created = migrate.create_database(config)
    if not quiet:
        state = "created" if created else "already exists"
        click.echo(f"database {config.database_name} {state}")


@db.command()
@click.option("--quiet", "-q", is_flag=True, help="Print nothing on success.")
def upgrade(quiet: bool) -> None:
    """Migrate the schema to the newest revision (alembic upgrade head)."""
    from ems.store import migrate

    config = settings()
    before = migrate.current_revision(config)
    migrate.upgrade(config)
    after = migrate.current_revision(config)
    if quiet:
        return
    if before == after:
        click.echo(f"database {config.database_name} already at {after}")
    else:
        click.echo(f"database {config.database_name} upgraded from {before or 'empty'} to {after}")


@db.command()
def current() -> None:
    """Print the database's schema revision and the newest one available. Exits 2 when
    they differ (no schema yet, or an older one), so a script can tell."""
    from ems.store import migrate

    config = settings()
    found = migrate.current_revision(config)
    head = migrate.head_revision(config)
    click.echo(f"current: {found or '(none)'}")
    click.echo(f"head:    {head or '(none)'}")
    name = config.database_name
    if found is None:
        raise SchemaOutOfDate(
            f"database {name} has no ems schema: run `ems db upgrade` to create it"
        )
    if found != head:
        raise SchemaOutOfDate(
            f"database {name} is at revision {found}, not {head}: run `ems db upgrade` "
            "(or, if it is newer, use the ems release that migrated it)"
        )


@db.command("grant-readonly")
@click.argument("user")
@click.option("--host", default="%", show_default=True, help="The account's host part.")
@click.option(
    "--with-tables",
    is_flag=True,
    help="Also SELECT on the ems tables (all but the admin console's accounts), message "
    "bodies, keys and headers included.",
)
@click.option("--apply", is_flag=True, help="Run the GRANTs instead of printing them.")
def grant_readonly(user: str, host: str, with_tables: bool, apply: bool) -> None:
    """Print (or run) the GRANTs of a read-only account USER for ad-hoc SQL.

    The account gets SELECT on the ems_ views only (lag, dead letters, topic volume,
    in-flight messages, waiting retries, members and leases; see docs/sql.md): it reads
    no message body, key or header and can write nothing. --with-tables adds SELECT on the
    plain tables, for the queries of docs/sql.md that join them; grant it only to whoever
    may read every message. The admin console's account tables are never granted.

    Printed, the statements can be piped to `mysql` as an administrator. --apply runs them
    on EMS_DATABASE_URL (whose user needs GRANT OPTION); the account must exist already
    (CREATE USER), and nothing is granted when it does not.
    """
    config = settings()
    to = account(user, host)
    database = config.database_name
    if not apply:
        for statement in grant_statements(database, to, with_tables=with_tables):
            click.echo(f"{statement};")
        return
    store = Store(config)
    try:
        statements = store.readonly.grant(database, to, with_tables=with_tables)
    finally:
        store.close()
    for statement in statements:
        click.echo(f"{statement};")
    tables = len(statements) - len(VIEW_NAMES)
    objects = f"{len(VIEW_NAMES)} views" + (f" and {tables} tables" if tables else "")
    click.echo(f"granted SELECT on {objects} of database {database} to {to}")
