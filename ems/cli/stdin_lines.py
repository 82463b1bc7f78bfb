"""Lines of stdin in batches as they arrive, for `ems produce`.

A batch goes once BATCH_LINES lines wait or the oldest waiting line has waited LINGER
seconds (kafka-console-producer's linger): `tail -F app.log | ems produce T` publishes
each line within about LINGER, and a file or a fast pipe still goes in batches of
BATCH_LINES. SIGINT and SIGTERM stop the reading instead of the process: what was read,
and what already waits in the pipe, is sent before the command ends.
"""

from __future__ import annotations

import os
import selectors
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import BinaryIO

#: Lines per send_batch: one allocation and one multi-row INSERT each.
BATCH_LINES = 500
#: Seconds the oldest line read may wait for more before its batch goes.
LINGER = 0.05
READ_SIZE = 1 << 16
#: After a signal, at most this much of what already waits in the pipe is still read, so
#: a writer that never pauses (`yes | ems produce T`) cannot keep the command alive.
DRAIN_BYTES = 1 << 20

Send = Callable[[list[bytes]], None]


class LineSplitter:
    """Bytes in, whole lines out (without their newline); an unfinished line is kept."""

    def __init__(self) -> None:
        self._tail: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        if b"\n" not in chunk:
            self._tail.append(chunk)  # joined once its newline comes: no quadratic copy
            return []
        *lines, rest = b"".join([*self._tail, chunk]).split(b"\n")
        self._tail = [rest] if rest else []
        return lines

    def rest(self) -> bytes:
        """The unfinished line (no newline yet), and forget it."""
        rest, self._tail = b"".join(self._tail), []
        return rest


class Linger:
    """Lines waiting to be sent, and when their batch is due (pure: times are given)."""

    def __init__(self, size: int = BATCH_LINES, linger: float = LINGER) -> None:
        self.size = size
        self.linger = linger
        self.lines: list[bytes] = []
        self._oldest = 0.0

    def add(self, lines: list[bytes], now: float) -> None:
        if lines and not self.lines:
            self._oldest = now
        self.lines += lines

    def wait(self, now: float) -> float | None:
        """Seconds until a batch is due; None when nothing waits."""
        if not self.lines:
            return None
        return max(0.0, self._oldest + self.linger - now)

    def due(self, now: float) -> bool:
        wait = self.wait(now)
        return len(self.lines) >= self.size or wait == 0.0

    def take(self) -> list[bytes]:
        """The next batch. Lines left behind keep the oldest time, so they go next."""
        batch, self.lines = self.lines[: self.size], self.lines[self.size :]
        return batch


class Stop:
    """Which signal asked the command to stop (None: none yet). A second one ends it at
    once (KeyboardInterrupt), as a second Ctrl-C does elsewhere."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self.wakeup: int | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name


@contextmanager
def stop_signals() -> Iterator[Stop]:
    """SIGINT and SIGTERM set Stop.signal instead of ending the process, and write to a
    wake-up pipe so that a wait for stdin returns at once. Outside the main thread (where
    signals cannot be handled) nothing is installed."""
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    before_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    before = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    stop.wakeup = read_end
    try:
        yield stop
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(before_fd)
        os.close(read_end)
        os.close(write_end)


class Source:
    """Reads stdin without blocking past a deadline: a poll on its descriptor and on the
    signals' wake-up pipe. A stream without a descriptor (an in-memory one) is read as is."""

    def __init__(self, stream: BinaryIO, wakeup: int | None) -> None:
        self.stream = stream
        self.wakeup = wakeup
        try:
            self.fd: int | None = stream.fileno()
        except (OSError, ValueError):  # io.UnsupportedOperation is both
            self.fd = None
        self._selector: selectors.BaseSelector | None = None
        if self.fd is not None:
            # poll, not epoll: epoll refuses regular files (`ems produce T < file`).
            kind = getattr(selectors, "PollSelector", selectors.SelectSelector)
            self._selector = kind()
            self._selector.register(self.fd, selectors.EVENT_READ)
            if wakeup is not None:
                self._selector.register(wakeup, selectors.EVENT_READ)

    def read(self, timeout: float | None) -> bytes | None:
        """Bytes read; b"" at the end of input; None when nothing came within timeout or
        a signal came first."""
        if self._selector is None or self.fd is None:
            return self.stream.read(READ_SIZE)
        ready = {key.fd for key, _ in self._selector.select(timeout)}
        if self.wakeup in ready:
            _empty(self.wakeup)
        if self.fd in ready:
            return os.read(self.fd, READ_SIZE)
        return None

    def close(self) -> None:
        if self._selector is not None:
            self._selector.close()


def _empty(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


@dataclass(frozen=True, kw_only=True)
class Ended:
    """How the reading ended: at the end of input, or by a signal (its name), leaving an
    unfinished line of this many bytes unsent."""

    signal: str | None
    unfinished: int = 0


def pump(source: Source, send: Send, stop: Stop, waiting: Linger | None = None) -> Ended:
    """Read lines from source and send them in batches until the end of input or a
    signal; then send what was read."""
    waiting = waiting or Linger()
    lines = LineSplitter()
    while stop.signal is None:
        chunk = source.read(waiting.wait(time.monotonic()))
        if chunk == b"":
            waiting.add([rest] if (rest := lines.rest()) else [], time.monotonic())
            break
        if chunk:
            waiting.add(lines.feed(chunk), time.monotonic())
        while waiting.due(time.monotonic()):
            send(waiting.take())
    unfinished = 0
    if stop.signal is not None:
        ended = _drain(source, lines, waiting)
        rest = lines.rest()
        if ended and rest:
            waiting.add([rest], time.monotonic())  # the input's last line, whole
        elif not ended:
            unfinished = len(rest)
    while waiting.lines:
        send(waiting.take())
    return Ended(signal=stop.signal, unfinished=unfinished)


def _drain(source: Source, lines: LineSplitter, waiting: Linger) -> bool:
    """Read what already waits in the pipe when the signal came (it was written before);
    True when that reached the end of input."""
    drained = 0
    while drained < DRAIN_BYTES:
        chunk = source.read(0)
        if chunk is None:
            return False
        if chunk == b"":
            return True
        drained += len(chunk)
        waiting.add(lines.feed(chunk), time.monotonic())
    return False
