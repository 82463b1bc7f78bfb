"""`ems db`: create the database and migrate its schema.

ems.store.migrate is imported inside the commands: it pulls in Alembic, which the other
commands (and the demo's spawned producers) need not pay for at start-up.
"""

from __future__ import annotations

import click

from ems.cli.common import settings


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
    """Print the database's schema revision and the newest one available."""
    from ems.store import migrate

    config = settings()
    found = migrate.current_revision(config)
    head = migrate.head_revision(config)
    click.echo(f"current: {found or '(none)'}")
    click.echo(f"head:    {head or '(none)'}")
    if found != head:
        click.echo("run `ems db upgrade` to migrate", err=True)
