"""Alembic environment: migrations run under a named MySQL lock with short lock waits,
so two deployers never migrate at once and a migration never hangs behind live traffic."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection

from ems.config import Settings
from ems.models import metadata

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

MIGRATION_LOCK = "ems_migrations"


def _url() -> str:
    return str(config.attributes.get("database_url") or Settings.from_env().database_url)


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    connection.execute(text("SET SESSION lock_wait_timeout = 30"))
    connection.execute(text("SET SESSION innodb_lock_wait_timeout = 30"))
    got = connection.execute(text("SELECT GET_LOCK(:name, 60)"), {"name": MIGRATION_LOCK}).scalar()
    if got != 1:
        raise RuntimeError("another migration holds the ems migration lock")
    connection.commit()
    try:
        context.configure(connection=connection, target_metadata=metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    finally:
        connection.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": MIGRATION_LOCK})


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
