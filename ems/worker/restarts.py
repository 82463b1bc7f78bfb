"""When a supervisor restarts a worker process that ended, and when it gives up (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from ems.exit_codes import EXIT_BAD_INPUT, EXIT_UNAVAILABLE


@dataclass(frozen=True, kw_only=True)
class RestartPolicy:
    #: A process that ran at least this long before failing is restarted at once, and its
    #: count of quick failures starts again.
    quick: float = 10.0
    #: The pause before the restart after the first quick failure, doubled after each
    #: further one, at most max_delay.
    first_delay: float = 0.25
    max_delay: float = 30.0
    #: Quick failures in a row after which the supervisor gives up (not counting a
    #: process that could not reach its servers: those may come back).
    give_up_after: int = 5


@dataclass(frozen=True)
class Restart:
    delay: float
    #: Quick failures in a row so far.
    failures: int


@dataclass(frozen=True)
class GiveUp:
    reason: str


Verdict = Restart | GiveUp


def after_exit(policy: RestartPolicy, failures: int, ran_for: float, code: int) -> Verdict:
    """What to do about a worker process that exited with `code` (negative: killed by
    that signal) after running `ran_for` seconds, `failures` quick failures in a row
    before it. Exit code 2 (bad input: the handler path, the options, the group's
    settings) comes back the same at every start: given up at once."""
    if code == EXIT_BAD_INPUT:
        return GiveUp("it refused its input (exit code 2)")
    if ran_for >= policy.quick:
        return Restart(0.0, 0)
    failures += 1
    delay = min(policy.first_delay * 2 ** (failures - 1), policy.max_delay)
    if code == EXIT_UNAVAILABLE:
        return Restart(delay, failures)  # the servers may come back: never given up on
    if failures >= policy.give_up_after:
        return GiveUp(
            f"it failed {failures} times in a row, each within {policy.quick:g} s of its "
            f"start (last {describe_exit(code)})"
        )
    return Restart(delay, failures)


def describe_exit(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"
