"""Alembic environment: migrations run under the migration lease (a row, which holds on
every node of a cluster, unlike a named lock) with short lock waits, so two deployers
never migrate at once and a migration never hangs behind live traffic."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ems.config import Settings
from ems.models import metadata
from ems.store.driver import create_engine
from ems.store.migration_lease import LEASE_TABLE, migration_lease

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _url() -> str:
    return str(config.attributes.get("database_url") or Settings.from_env().database_url)


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def _ours(name: str | None, kind: str, parents: object) -> bool:
    """Autogenerate compares the schema's tables only: the migration lease's table is the
    lease's own (ems.store.migration_lease), made before any migration runs."""
    return not (kind == "table" and name == LEASE_TABLE)


def _run(connection: Connection) -> None:
    connection.execute(text("SET SESSION lock_wait_timeout = 30"))
    connection.execute(text("SET SESSION innodb_lock_wait_timeout = 30"))
    connection.commit()
    with migration_lease(connection.engine, wait=60.0):
        context.configure(
            connection=connection,
            target_metadata=metadata,
            compare_type=True,
            include_name=_ours,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(_url(), pool_pre_ping=True)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
