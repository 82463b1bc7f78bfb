"""Signal handlers that must not take locks: the relay thread, and the pipe event."""

from __future__ import annotations

import os
import signal
import threading

from ems.signals import Wakeup, relayed


def test_a_relayed_signal_runs_its_call_on_another_thread_and_the_handler_goes_back() -> None:
    before = signal.getsignal(signal.SIGUSR1)
    called = threading.Event()
    threads: list[str] = []

    def call(signum: int) -> None:
        threads.append(threading.current_thread().name)
        called.set()

    with relayed((signal.SIGUSR1,), call):
        # The main thread holds the lock the call needs while the signal comes.
        with called._cond:  # type: ignore[attr-defined]
            os.kill(os.getpid(), signal.SIGUSR1)
            for _ in range(1000):
                pass
        assert called.wait(10)
    assert threads == ["ems-signals"]
    assert signal.getsignal(signal.SIGUSR1) == before


def test_a_wakeup_set_from_a_signal_handler_wakes_its_waiter() -> None:
    wake = Wakeup()
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: wake.set())
    try:
        assert not wake.wait(0)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert wake.wait(10)
        assert wake.wait(0)  # set until cleared
        wake.clear()
        assert not wake.wait(0)
    finally:
        signal.signal(signal.SIGUSR1, previous)
        wake.close()
