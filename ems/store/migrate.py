"""Database creation and Alembic migrations, callable from the CLI, set-up and tests."""

from __future__ import annotations

import re
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from ems.config import Settings
from ems.exceptions import InvalidSetting
from ems.store.driver import create_engine
from ems.store.nodes import usable_node_url
from ems.store.translation import wrap_errors

ROOT = Path(__file__).resolve().parents[2]
_EXISTS = "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s"
#: {name} is checked against [A-Za-z0-9_] first.
_CREATE = "CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"


def alembic_config(settings: Settings) -> Config:
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "migrations"))
    config.attributes["database_url"] = node_url(settings)
    config.attributes["configure_logging"] = False
    return config


def node_url(settings: Settings) -> str:
    """The database URL, or for a cluster the URL of the node ems writes through now:
    schema changes go through one node, which replicates them to the others in order."""
    with wrap_errors():
        return usable_node_url(settings.database_nodes, settings.connect_timeout)


def create_database(settings: Settings) -> bool:
    """Create the configured database if it is missing. True if it was created."""
    url = node_url(settings)
    name = settings.database_name
    if not re.fullmatch(r"[A-Za-z0-9_]{1,64}", name):
        raise InvalidSetting(f"database name {name!r} must match [A-Za-z0-9_]{{1,64}}")
    server = create_engine(
        url.rsplit("/", 1)[0] + "/",
        connect_args={"connect_timeout": max(1, int(settings.connect_timeout))},
    )
    try:
        with wrap_errors(), server.connect() as conn:
            if conn.exec_driver_sql(_EXISTS, (name,)).first():
                return False
            conn.exec_driver_sql(_CREATE.format(name=name))
            return True
    finally:
        server.dispose()


def upgrade(settings: Settings, revision: str = "head") -> None:
    with wrap_errors():
        command.upgrade(alembic_config(settings), revision)


def downgrade(settings: Settings, revision: str = "base") -> None:
    with wrap_errors():
        command.downgrade(alembic_config(settings), revision)


def current_revision(settings: Settings) -> str | None:
    engine = create_engine(node_url(settings))
    try:
        with wrap_errors(), engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def head_revision(settings: Settings) -> str | None:
    return ScriptDirectory.from_config(alembic_config(settings)).get_current_head()
