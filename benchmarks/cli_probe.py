"""`python -m benchmarks.cli_probe ARGS...`: run `ems ARGS...` and report how long it waited
on the server.

The time the command spends blocked on the database's socket (connecting, sending,
reading replies) is added up by wrapping PyMySQL's socket reads and writes and the TCP
connect; on exit the last line on stderr is `@@server-wait SECONDS CALLS`. What is left
of the command's wall time is the interpreter, its imports and the command's own Python.
PyMySQL is imported before the command runs, which a command that talks to the database
imports anyway; the other commands should not be measured through here.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable
from typing import Any

import pymysql.connections

MARKER = "@@server-wait"

_waited = [0.0, 0]


def _timed(call: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            _waited[0] += time.perf_counter() - started
            _waited[1] += 1

    return timed


def _instrument() -> None:
    conn = pymysql.connections.Connection
    conn._read_bytes = _timed(conn._read_bytes)
    conn._write_bytes = _timed(conn._write_bytes)
    socket.create_connection = _timed(socket.create_connection)


def main() -> None:
    _instrument()
    from ems.cli import main as ems_main

    try:
        ems_main(sys.argv[1:])
    finally:
        print(f"{MARKER} {_waited[0]:.6f} {_waited[1]}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
