"""Signal handlers whose work runs on a thread of their own, and an event a handler may set.

A Python signal handler runs on the main thread between two bytecodes, also while that
thread holds a lock: inside Event.wait(), between taking the event's lock back and
leaving it. A handler that then sets that event, or takes any lock the main thread may
hold, waits for itself for ever (a process that never stops on SIGTERM). Here the
handler only writes the signal's number to a pipe, which needs no lock, and a relay
thread reads it and makes the call.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from types import FrameType

#: Seconds the block's end waits for the relay to finish the calls under way.
_RELAY_LEFT = 10.0


@contextlib.contextmanager
def relayed(signals: Iterable[int], call: Callable[[int], None]) -> Iterator[None]:
    """While the block runs, each of `signals` calls call(signum) on a relay thread (in
    the order they came); the handlers before are put back after it. Main thread only,
    as signal.signal is."""
    read, write = os.pipe()

    def handler(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):  # a full pipe: signals enough are queued
            os.write(write, bytes([signum]))

    def relay() -> None:
        while data := os.read(read, 64):  # b"": the write end closed, the block left
            for signum in data:
                call(signum)

    thread = threading.Thread(target=relay, name="ems-signals", daemon=True)
    thread.start()
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, before in previous.items():
            signal.signal(s, before)
        os.close(write)
        thread.join(_RELAY_LEFT)
        if not thread.is_alive():  # else a call still runs: its read end stays open
            os.close(read)


class Wakeup:
    """An event that a signal handler may set on the main thread: set() writes a byte to a
    pipe, which takes no lock, and wait() waits for the pipe to be readable. (An Event's
    set() from a handler can wait for ever on the lock of the event's own wait().)"""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)

    def set(self) -> None:
        with contextlib.suppress(OSError):  # a full pipe: the waiter wakes all the same
            os.write(self._write, b"x")

    def wait(self, timeout: float) -> bool:
        """Whether it was set within timeout seconds (it stays set until clear())."""
        readable, _, _ = select.select([self._read], [], [], max(0.0, timeout))
        return bool(readable)

    def clear(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read, 4096):
                pass

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)
