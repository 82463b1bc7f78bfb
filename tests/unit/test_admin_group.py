"""`ems admin` takes commands from other modules (the console's `serve`) the way the
top-level group does: named in ems.cli.admin.COMMANDS, loaded only when asked for."""

from __future__ import annotations

import click
import pytest

from ems.cli import admin as admin_module
from ems.cli.app import Lazy, cli
from ems.cli.db import db


def test_a_command_named_in_commands_joins_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    group = admin_module.admin
    ctx = click.Context(group)
    assert group.list_commands(ctx) == ["audit", "serve", "token", "user"]
    assert group.get_command(ctx, "probe") is None
    monkeypatch.setitem(admin_module.COMMANDS, "probe", Lazy("ems.cli.db:db", "Probe."))
    assert group.list_commands(ctx) == ["audit", "probe", "serve", "token", "user"]
    assert group.get_command(ctx, "probe") is db


def test_the_top_level_group_loads_admin() -> None:
    assert cli.get_command(click.Context(cli), "admin") is admin_module.admin
