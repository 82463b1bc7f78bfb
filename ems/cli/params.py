"""Number types of the command line's options: finite, bounded, refused by click (exit 2,
the option's name in the message) before anything runs."""

from __future__ import annotations

import math
from typing import Any

import click

from ems.config import MAX_SECONDS

#: Offsets are BIGINT in the schema.
MAX_OFFSET = 2**63 - 1
#: Counts and ids stored in INT columns, and whole seconds.
MAX_INT = 2**31 - 1


class Finite(click.FloatRange):
    """A float range that also refuses nan and the infinities, which compare false with
    every bound and would slip through it (a timeout of nan never ends a wait)."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def seconds(*, zero: bool = False) -> Finite:
    """A duration in seconds: positive (or from 0 when zero), finite, at most MAX_SECONDS."""
    return Finite(min=0, min_open=not zero, max=MAX_SECONDS)


def number() -> Finite:
    """Any finite number of sane size (a rate, a ratio, a percentage)."""
    return Finite(min=-1e12, max=1e12)


OFFSET = click.IntRange(0, MAX_OFFSET)
#: A move of offsets, either way.
SHIFT = click.IntRange(-MAX_OFFSET, MAX_OFFSET)
PARTITION = click.IntRange(0, MAX_INT)
COUNT = click.IntRange(0, MAX_INT)
#: A whole number of INT size whose meaning a policy checks itself (its message names it).
WHOLE = click.IntRange(-MAX_INT, MAX_INT)

#: Characters of a body a text line of `ems consume` or `ems tail` shows by default.
DEFAULT_BODY_CHARS = 1000
max_body_option = click.option(
    "--max-body",
    type=click.IntRange(0, MAX_OFFSET),
    default=DEFAULT_BODY_CHARS,
    show_default=True,
    help="Characters of a body shown on a text line; 0 shows all. --json and --raw are never cut.",
)
