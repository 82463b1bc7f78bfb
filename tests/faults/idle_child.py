"""A child that says it is ready and waits until SIGTERM, which it handles (as ems's
members do, to stop gracefully): what the fault suite's process handling is tested with."""

from __future__ import annotations

import signal
import sys
import threading

if __name__ == "__main__":
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("ready", flush=True)
    stop.wait()
    sys.exit(3)
