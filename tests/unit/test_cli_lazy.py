"""`ems --help` (and `ems admin --help`) list their lazily loaded commands from a table of
names and one-line helps: the table says what each command says of itself, and the
listing is the one click would print with every command imported."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from ems.cli import admin as admin_module
from ems.cli.app import COMMANDS, Lazy, LazyGroup, cli

GROUPS = {"ems": cli, "ems admin": admin_module.admin}


def _lazy_group(name: str) -> LazyGroup:
    group = GROUPS[name]
    assert isinstance(group, LazyGroup)
    return group


def _loaded(group: LazyGroup) -> click.Group:
    """The same group with every command imported and added: what click lists itself."""
    ctx = click.Context(group)
    eager = click.Group(group.name, help=group.help, commands=dict(group.commands))
    for name in group.lazy:
        command = group.get_command(ctx, name)
        assert command is not None, name
        eager.add_command(command, name)
    return eager


@pytest.mark.parametrize("group_name", sorted(GROUPS))
def test_the_table_says_what_each_command_says_of_itself(group_name: str) -> None:
    group = _lazy_group(group_name)
    ctx = click.Context(group)
    for name, entry in group.lazy.items():
        command = group.get_command(ctx, name)
        assert command is not None, f"{entry.target} does not resolve"
        # In full: the listing shortens it to the terminal's width as click would.
        assert entry.help == command.get_short_help_str(limit=10**6), (
            f"COMMANDS[{name!r}].help differs from the command's short help; copy it over"
        )
        assert not command.hidden


@pytest.mark.parametrize("group_name", sorted(GROUPS))
@pytest.mark.parametrize("width", [40, 80, 132])
def test_the_listing_is_the_one_click_prints_with_every_command_loaded(
    group_name: str, width: int
) -> None:
    group = _lazy_group(group_name)
    runner = CliRunner()
    lazy = runner.invoke(group, ["--help"], terminal_width=width)
    eager = runner.invoke(_loaded(group), ["--help"], terminal_width=width)
    assert lazy.exit_code == eager.exit_code == 0
    assert lazy.output == eager.output
    assert all(f"  {name} " in lazy.output for name in group.lazy)


def test_a_table_entry_that_drifts_is_caught() -> None:
    group = LazyGroup(lazy={"db": Lazy("ems.cli.db:db", "Create the ems database.")})
    runner = CliRunner()
    assert (
        runner.invoke(group, ["--help"]).output != runner.invoke(_loaded(group), ["--help"]).output
    )


def test_every_top_level_command_is_in_the_table() -> None:
    assert set(cli.list_commands(click.Context(cli))) == set(COMMANDS)
    assert cli.commands == {}  # none is added eagerly: each would be imported by --help
