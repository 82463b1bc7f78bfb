"""`ems admin`: the admin console (`ems admin serve`, in ems.cli.admin_serve)."""

from __future__ import annotations

import click

from ems.cli.admin_serve import serve


@click.group()
def admin() -> None:
    """The admin console: its web server."""


admin.add_command(serve)
