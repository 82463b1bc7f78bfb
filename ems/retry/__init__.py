"""Retry policy: the backoff ladder and the retry-or-dead decision (pure). What a handler
asks for by raising is in ems.retry.requested, its bounded traceback in
ems.retry.tracebacks."""

from ems.retry.backoff import (
    DEFAULT_LADDER,
    Dead,
    Retry,
    format_ladder,
    next_step,
    parse_ladder,
)

__all__ = ["DEFAULT_LADDER", "Dead", "Retry", "format_ladder", "next_step", "parse_ladder"]
