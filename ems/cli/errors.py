"""The one place where ems errors become messages and exit codes.

Commands raise ems.exceptions freely; EmsGroup turns them into `error: <message>` on
stderr (no traceback) and an exit code a script can act on.
"""

from __future__ import annotations

from typing import Any

import click

from ems.exceptions import EmsError
from ems.exit_codes import exit_code_for


class EmsGroup(click.Group):
    """A click group that reports its subcommands' EmsErrors as `error: <message>` on
    stderr, without a traceback, and exits with exit_code_for(error)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # An argument that is not UTF-8 reaches Python as lone surrogates ($'\xff' becomes
        # '\udcff'), which no name, key, header or filter can be: refused here for every
        # command, before anything runs.
        for arg in args:
            try:
                arg.encode("utf-8")
            except UnicodeEncodeError:
                raise click.UsageError(
                    f"the argument {arg!r} is not valid Unicode text (UTF-8)", ctx
                ) from None
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EmsError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exit_code_for(exc))
