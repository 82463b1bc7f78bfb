"""Helpers shared by the commands: settings from the environment, tables, JSON."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence

import click

from ems.config import Settings
from ems.display import json_time

#: The --json flag of the commands that can print JSON.
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def settings() -> Settings:
    """The Settings for this invocation: read from EMS_* variables once, or given as the
    root context's obj (CliRunner(...).invoke(cli, obj=Settings(...)))."""
    root = click.get_current_context().find_root()
    if not isinstance(root.obj, Settings):
        root.obj = Settings.from_env()
    return root.obj


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces; None shows as '-'."""
    cells = [list(headers), *([_cell(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells)
    return "\n".join(line.rstrip() for line in lines)


def _json_default(value: object) -> str:
    if isinstance(value, dt.datetime):
        return json_time(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def echo_json(value: object) -> None:
    """The value as indented JSON; its datetimes as json_time writes them (every time in
    the CLI's JSON has that one form)."""
    click.echo(json.dumps(value, indent=2, default=_json_default))
