"""The supervisor of `ems worker --processes N`: starts N worker processes, restarts one
that ends without being asked (after RestartPolicy's pause), forwards SIGTERM and SIGINT so
each finishes its batch, commits and leaves, and gives up with an error when a process
keeps failing at its start or refuses its input."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import FrameType

from ems.config import WORKER_PREFIX
from ems.exceptions import WorkersFailing
from ems.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK
from ems.signals import Wakeup
from ems.worker.options import WorkerConfig
from ems.worker.process import STOP_SIGNALS, Say
from ems.worker.restarts import GiveUp, RestartPolicy, after_exit, describe_exit

log = logging.getLogger(__name__)

#: Longest sleep between looks at the processes (a child's exit or a signal wakes it).
TICK = 1.0
#: Linux's prctl(PR_SET_PDEATHSIG): the signal a child gets when its parent dies.
_PR_SET_PDEATHSIG = 1


@dataclass
class _Slot:
    """Process `index` of the N: the one running, or when the next starts."""

    index: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    failures: int = 0
    restart_at: float = 0.0


class Supervisor:
    def __init__(
        self,
        config: WorkerConfig,
        say: Say,
        *,
        policy: RestartPolicy | None = None,
        env: Mapping[str, str] | None = None,
        python: Sequence[str] = (sys.executable, "-m", "ems.cli", "worker"),
    ) -> None:
        self.config = config
        self.say = say
        self.policy = policy or RestartPolicy()
        # The children's command lines carry the whole configuration: no EMS_WORKER_*.
        environ = os.environ if env is None else env
        self.env = {k: v for k, v in environ.items() if not k.startswith(WORKER_PREFIX)}
        self.python = list(python)
        self.slots = [_Slot(i) for i in range(config.processes)]
        #: Set by the signal handlers, which run on this (the main) thread: a pipe, not
        #: an Event, whose set() there could wait on the lock of its own wait(). Opened
        #: for each run(), closed at its end.
        self.wake: Wakeup
        self.stopping: int | None = None

    def run(self) -> int:
        """Until a signal (each child is sent it and waited for: EXIT_OK when every one
        left cleanly) or a child that must not be restarted (the others are stopped, then
        EXIT_BAD_INPUT for one that refused its input, else WorkersFailing)."""
        self.wake = Wakeup()
        previous = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        previous_chld = signal.signal(signal.SIGCHLD, self._on_child)
        try:
            self.say(f"supervisor {os.getpid()}: {self.config.processes} processes")
            given_up = self._supervise()
            codes = self._stop_all(signal.SIGTERM if given_up else self.stopping)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            signal.signal(signal.SIGCHLD, previous_chld)
            self.wake.close()
        if given_up is not None:
            index, verdict = given_up
            message = f"worker process {index} {verdict.reason}; the supervisor gave up"
            if verdict.reason.startswith("it refused"):
                self.say(f"error: {message}")
                return EXIT_BAD_INPUT
            raise WorkersFailing(message)
        # A process the signal ended outright had not yet started its members (they catch
        # it from the start): it held nothing, and left nothing behind.
        clean = (EXIT_OK, -(self.stopping or 0))
        failed = {i: c for i, c in codes.items() if c not in clean}
        if failed:
            self.say("processes that did not leave cleanly: " + ", ".join(
                f"{i} ({describe_exit(c)})" for i, c in failed.items()
            ))  # fmt: skip
            return EXIT_FAILURE
        return EXIT_OK

    def _supervise(self) -> tuple[int, GiveUp] | None:
        while self.stopping is None:
            now = time.monotonic()
            for slot in self.slots:
                if slot.process is None:
                    if now >= slot.restart_at:
                        self._start(slot)
                    continue
                code = slot.process.poll()
                if code is None:
                    continue
                verdict = after_exit(self.policy, slot.failures, now - slot.started, code)
                if isinstance(verdict, GiveUp):
                    slot.process = None
                    return slot.index, verdict
                self.say(
                    f"worker process {slot.index} (pid {slot.process.pid}) ended "
                    f"({describe_exit(code)}) after {now - slot.started:.1f} s; restarting "
                    f"in {verdict.delay:g} s"
                )
                slot.process, slot.failures = None, verdict.failures
                slot.restart_at = now + verdict.delay
            self.wake.wait(self._sleep())
            self.wake.clear()
        return None

    def _sleep(self) -> float:
        waiting = [s.restart_at for s in self.slots if s.process is None]
        if not waiting:
            return TICK
        return max(0.0, min(TICK, min(waiting) - time.monotonic()))

    def _start(self, slot: _Slot) -> None:
        args = [*self.python, *self.config.child_args(slot.index)]
        slot.process = subprocess.Popen(args, env=self.env, preexec_fn=_die_with_parent)
        slot.started = time.monotonic()
        self.say(f"worker process {slot.index} started: pid {slot.process.pid}")

    def _stop_all(self, signum: int | None) -> dict[int, int]:
        """Send each running child `signum` (none: they were sent the signal as it came)
        and wait for every one; their exit codes by index."""
        codes: dict[int, int] = {}
        for slot in self.slots:
            if slot.process is not None and signum is not None:
                _send(slot.process, signum)
        for slot in self.slots:
            if slot.process is None:
                continue
            while (code := slot.process.poll()) is None:
                self.wake.wait(TICK)
                self.wake.clear()
            codes[slot.index] = code
        return codes

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: stopping the worker processes", signum)
        self.stopping = signum
        for slot in self.slots:
            if slot.process is not None:
                _send(slot.process, signum)
        self.wake.set()

    def _on_child(self, signum: int, frame: FrameType | None) -> None:
        self.wake.set()


def _send(process: subprocess.Popen[bytes], signum: int) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):  # ended meanwhile
            process.send_signal(signum)


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the supervisor dies (even by SIGKILL), so
    no worker outlives it holding partitions; each then leaves as on any SIGTERM."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the child lives on
        pass
