"""Exit codes of ems's commands (the CLI, the Spark jobs): what a script can act on."""

from __future__ import annotations

from ems.exceptions import AlreadyExists, EmsError, InvalidInput, NotFound, ServerUnavailable

EXIT_OK = 0
EXIT_FAILURE = 1
#: The same code click uses for usage errors: the caller asked for something invalid.
EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3


def exit_code_for(error: EmsError) -> int:
    """Bad input and missing or duplicate objects → 2; unreachable server → 3; else 1."""
    if isinstance(error, InvalidInput | NotFound | AlreadyExists):
        return EXIT_BAD_INPUT
    if isinstance(error, ServerUnavailable):
        return EXIT_UNAVAILABLE
    return EXIT_FAILURE
