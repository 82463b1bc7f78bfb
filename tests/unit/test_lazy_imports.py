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


def test_every_public_name_resolves() -> None:
    for name in ems.__all__:
        assert getattr(ems, name) is not None
    assert ems.Consumer.__module__ == "ems.consumer.consumer"
    assert set(dir(ems)) >= set(ems.__all__)
