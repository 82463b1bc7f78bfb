"""`import ems` and the `ems` command group load their parts on first use: each CLI call
and each spawned worker starts without importing what it does not run."""

from __future__ import annotations

import subprocess
import sys

import ems

HEAVY = ("ems.consumer", "ems.producer", "sqlalchemy", "redis", "alembic", "apscheduler")


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys; {code}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_ems_and_the_cli_group_load_nothing_heavy() -> None:
    loaded = _loaded_after("import ems, ems.cli")
    assert not {m for m in HEAVY if m in loaded}


def test_a_command_loads_only_its_own_module() -> None:
    loaded = _loaded_after(
        "from ems.cli.app import cli; import click; cli.get_command(click.Context(cli), 'topic')"
    )
    assert "ems.cli.topics" in loaded
    assert not {"ems.cli.consume", "ems.cli.spark", "ems.consumer", "alembic"} & loaded


def test_a_command_groups_help_loads_nothing_heavy() -> None:
    """`ems topic --help` and `ems group --help` print before any server is reached: the
    SDK (SQLAlchemy, the store) is imported by the command that runs, not for its help."""
    for group in ("topic", "group"):
        loaded = _loaded_after(
            f"from ems.cli import main\ntry:\n    main(['{group}', '--help'])\n"
            "except SystemExit:\n    pass"
        )
        assert f"ems.cli.{group}s" in loaded
        assert not {m for m in HEAVY if m in loaded}, group


def test_help_imports_no_command_module() -> None:
    loaded = _loaded_after(
        "from ems.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    )
    ems_modules = {m for m in loaded if m == "ems" or m.startswith("ems.")}
    assert ems_modules == {
        "ems",
        "ems.cli",
        "ems.cli.app",
        "ems.cli.errors",
        "ems.exceptions",
        "ems.exit_codes",
    }
    assert not {m for m in HEAVY if m in loaded}


def test_the_entry_point_leaves_its_objects_out_of_the_exit_collection() -> None:
    # The interpreter's exit would walk them all once more (50 ms of `ems topic list`).
    probe = (
        "import gc\nfrom ems.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    print(gc.get_freeze_count())"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert int(out.stdout.split()[-1]) > 1000


def test_a_store_loads_the_statement_group_a_command_uses() -> None:
    # What `ems topic list` runs, up to the query: the topic statements, not the other
    # statement groups, the models (the store's statements are plain SQL) or the operations.
    loaded = _loaded_after(
        "from ems.config import Settings; from ems.store import Store; Store(Settings()).topics"
    )
    assert "ems.store.topics" in loaded
    others = {"ems.store.accounts", "ems.store.alarms", "ems.models", "ems.ops"}
    assert not others & loaded


def test_the_models_metadata_is_the_whole_schema() -> None:
    loaded = _loaded_after("from ems.models import metadata; assert len(metadata.tables) > 30")
    assert {"ems.models.accounts", "ems.models.topics", "ems.models.outbox"} <= loaded


def test_every_statement_group_resolves() -> None:
    from ems.config import Settings
    from ems.store import GROUPS, Store

    store = Store(Settings())
    try:
        for name, group in GROUPS.items():
            part = getattr(store, name)
            assert type(part).__name__ == group.cls
            assert getattr(store, name) is part  # made once
        assert store.resets.time_index is store.time_index
    finally:
        store.close()


def test_every_public_name_resolves() -> None:
    for name in ems.__all__:
        assert getattr(ems, name) is not None
    assert ems.Consumer.__module__ == "ems.consumer.consumer"
    assert set(dir(ems)) >= set(ems.__all__)
