"""`ems offsets`: committed offsets of consumer groups."""

from __future__ import annotations

import click

from ems.cli.common import settings


@click.group()
def offsets() -> None:
    """Committed offsets of consumer groups."""


@offsets.command()
@click.option("--quiet", "-q", is_flag=True, help="Print nothing on success.")
def snapshot(quiet: bool) -> None:
    """Capture every committed offset and high watermark once (run it every 30-60 s; the
    lag report is evaluated over these snapshots)."""
    from ems.maintenance.snapshots import capture_offset_snapshots

    count = capture_offset_snapshots(settings())
    if not quiet:
        click.echo(f"captured {count} partition offsets")
