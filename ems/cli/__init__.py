"""The `ems` command line: click commands; EmsError becomes a message and an exit code."""

from __future__ import annotations

from ems.cli.app import cli, main

__all__ = ["cli", "main"]
